// The kinds of guard, each a small struct: its payload, its fast check and its two
// texts, declared side by side here and defined together, one family per file.
//
// Design (after the leaf guards of PyTorch's Dynamo): every kind answers three
// questions.
//   check(in, b)  does it hold for this call? noexcept, allocates nothing, no
//                 pybind; may bind symbols into `b` (the call's symbol values) and
//                 record path tensors in `in` for the plan
//   failure(in)   after check() said no: what differed, in words, for the
//                 recompile reason ("tensor 'x' size mismatch at dim 1: ...")
//   text()        what it checks, one line, for explain() and FRAMEJIT_LOG=guards
// Guard is a std::variant over the kinds, so adding a kind is one struct plus one
// line in the variant, and the compiler finds every place that must know it.
// Python references are PyRefs; the names (`name`) are how sources read to a person.
//
// Families: tensor_guards.cpp (tensors and their memory), value_guards.cpp
// (arguments and closure cells by value, symbols, expressions), object_guards.cpp
// (globals, attribute paths, functions, module dicts), torch_guards.cpp (torch's
// global state: grad mode, function modes, default dtype, Tensor's methods).
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "guards/guards.h"
#include "guards/py_ref.h"
#include "guards/py_text.h"

namespace fj::guards {

// ---- shared pieces ---------------------------------------------------------

// An attribute path below a root (see PathRoot): each step an attribute name, the
// index of an item of an exact list or tuple (a step "#i"), the value of a str key
// of an exact dict (a step "[key", as in **kwargs), or an attribute read the way
// object.__getattribute__ reads it, past the class's own __getattribute__ (a step
// "!name", see object_attr).
struct Path {
  struct Step {
    PyRef name;          // interned; null for an index or key step
    Py_ssize_t index = -1;
    PyRef key;           // a key step
    bool generic = false;  // a name step read as object.__getattribute__ reads it; a key step
                           // into a dict subclass's own storage ("{key", as dict.get reads it)
  };
  int arg = -1;          // root: argument slot, or -1 for a global
  PyRef global_name;     // root: interned name of the global
  PyRef globals;         // root: the globals dict, or null for the call's own
  PyRef object;          // root: this object (kept), instead of an argument or a global
  std::vector<Step> steps;

  Path(const PathRoot& root, const std::vector<std::string>& attrs);
  // The object at the end of the path now (borrowed), or nullptr when it is broken.
  PyObject* walk(const CallInputs& in) const noexcept;
};

// What a tensor must look like: dtype, device, requires_grad, rank, sizes (each
// static, or a symbol: any size >= 2), strides when check_strides.
struct TensorSpec {
  TensorMeta meta;
  std::array<int, kMaxRank> dim_symbols{};
  bool check_strides = true;
  // The tensor's strides are the standard contiguous strides of its sizes (the trace
  // answered .stride() or .is_contiguous() from them).
  bool contiguous = false;

  bool matches(const TensorMeta& m, jit::Bindings& b) const noexcept;
  // After matches() said no: the first difference, said of `who`.
  std::string mismatch(const TensorMeta& m, const std::string& who) const;
  std::string text(const std::string& who) const;
};

// Exact int, float or str equal by value (floats bit for bit, so NaN equals NaN and
// 0.0 differs from -0.0); any other object by identity.
bool scalar_equal(PyObject* a, PyObject* b) noexcept;
// scalar_equal, and exact tuples whose items are scalar_equal (one level): what an
// attribute path below a module may hold so that instances built alike share an entry.
bool path_value_equal(PyObject* a, PyObject* b) noexcept;

// ---- tensor_guards.cpp -------------------------------------------------------

// Argument `arg` is a torch.Tensor matching `spec`.
struct ArgTensor {
  int arg;
  std::string name;
  TensorSpec spec;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// The tensor at the end of `path` matches `spec`; check() records it and its
// metadata in the call's path-tensor slot `slot`, for the plan.
struct PathTensor {
  std::string name;
  Path path;
  int slot;
  TensorSpec spec;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// The tensors (argument slot k as k, path-tensor slot k as -k - 1) share no memory
// where one of the first `num_updated` (updated in place) is involved, and those
// have no elements that share memory.
struct NoOverlap {
  std::vector<int> tensors;
  size_t num_updated;
  std::vector<std::string> names;  // one per tensor
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// Argument `arg` is exactly a `type` (list or tuple) of `length` items, or exactly a
// dict with the str keys `keys` in this order (a **kwargs parameter).
struct SequenceIs {
  int arg;
  std::string name;
  PyRef type;
  Py_ssize_t length;
  PyRef keys;  // dict: a tuple of its keys
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// ---- value_guards.cpp ----------------------------------------------------------

// Argument `arg` is an int/float/bool/str/None of this exact type and value.
struct ScalarEquals {
  int arg;
  std::string name;
  PyRef value;
  int item = -1;  // >= 0: item `item` of the argument (an exact list or tuple, SequenceIs before)
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// Argument `arg` is an exact int (in int64, not 0 or 1) / float / bool, or a scalar of
// exactly the NumPy type `numpy_type` (any value in int64); binds `symbol`.
struct SymbolArg {
  int arg;
  std::string name;
  int symbol;
  jit::SymType type;
  int item = -1;  // >= 0: item `item` of the argument (an exact list or tuple, SequenceIs before)
  PyRef numpy_type;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
  std::string kind_text() const;
};

// `expr` is true for the call's bound symbols; `readable` is how it reads.
struct ExprTrue {
  jit::SymExpr expr;
  std::string readable;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// The content of the call's closure cell `cell` is `value` (numbers, str: equal to it).
struct ClosureIs {
  int cell;
  std::string name;
  PyRef value;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// The content of `cell` (an inlined function's closure cell) is `value`.
struct CellIs {
  PyRef cell;
  std::string name;
  PyRef value;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// ---- object_guards.cpp ---------------------------------------------------------

// globals()[name] (or builtins) is `object`; `globals` / `builtins` are an inlined
// callee's dicts, or null for the call's own.
struct GlobalIs {
  std::string name;
  PyRef key;  // interned name
  bool from_builtins;
  PyRef globals;
  PyRef builtins;
  PyRef object;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// globals()[name].a.b is `object`, each step read from a module's dict.
struct ModuleAttrIs {
  std::string name;
  std::vector<std::string> attrs;
  PyRef key;                  // interned name
  std::vector<PyRef> steps;   // interned attrs
  PyRef globals;              // an inlined callee's, or null for the call's own
  PyRef object;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// root.a.b (plain attribute reads) is `object` (numbers, str, tuples of them: equal to it).
struct PathIs {
  std::string name;
  Path path;
  PyRef object;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// The objects at two paths are one object (same) or two: `a is b` of objects guarded
// by class (PathModule), whichever instances a call brings.
struct PathsSame {
  std::string name;
  Path a, b;
  bool same;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// The exact dict at root.a.b has the str key `key` (contains) or has not (`in` on a
// dict the trace read by path, such as a class's attribute_map).
struct PathDictHas {
  std::string name;
  Path path;
  PyRef key;  // an exact str: hashing and comparing it runs no code
  bool contains;
  bool subclass;  // the dict may be a subclass of dict: its own storage is read
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// type(root.a.b).<method> is `fn`, not shadowed by the instance dict. With `after`:
// super(after, obj).<method> is `fn` (the MRO of the object's type after that class).
// With fn null: the plain lookup of <method> finds nothing (guards::attr_missing).
struct PathMethodIs {
  std::string name;
  Path path;
  PyRef method;  // interned
  PyRef fn;
  PyRef after;
  bool past_getattribute = false;  // fn null: object.__getattribute__ finds nothing
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// An inlined function keeps its __code__, __defaults__, __kwdefaults__, __name__ and
// __qualname__.
struct FunctionUnchanged {
  std::string name;  // qualname
  PyRef fn;
  PyRef code, defaults, kwdefaults;
  PyRef fname, qualname, doc, module;  // __name__, __qualname__, __doc__, __module__ (a trace may read them)
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// The object at the end of `path` is an nn.Module of exactly class `type`; check()
// records it in the call's path-object slot `slot` (CallInputs::path_tensors), where
// the plan finds it (slot -1: any object, only its class checked). What the trace
// read below it has guards of its own (by path), so every instance of the class with
// the same structure shares the entry.
struct PathModule {
  std::string name;
  Path path;
  int slot;
  PyRef type;
  Py_ssize_t length = -1;  // >= 0: a list of this many items (add_path_sequence)
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// The nn.Module at the end of `path` has empty hook dicts `keys` (entries of its
// instance dict: _forward_hooks, ...), whichever instance it is.
struct PathHooksEmpty {
  std::string name;
  Path path;
  std::vector<PyRef> keys;  // interned
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// These dicts (the global module hooks) are empty.
struct DictsEmpty {
  std::string name;
  std::vector<PyRef> dicts;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// The `_modules` dict of the container module at the end of `path` (or, when `dict`
// is set, that dict object itself) has exactly `keys` (a list), in order.
struct DictKeysAre {
  std::string name;
  Path path;
  PyRef keys;
  PyRef dict;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// ---- torch_guards.cpp ----------------------------------------------------------

// torch.is_grad_enabled() is `enabled`: the trace read tensors that require grad.
struct GradModeIs {
  bool enabled;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// No torch function mode is on: torch.overrides checks answer as the trace saw.
struct NoFunctionMode {
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// torch.get_default_dtype() is `dtype`: what creation ops and int->float promotion make.
struct DefaultDTypeIs {
  PyRef dtype;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// A torch flag read with a builtin that takes no argument (torch._C.
// _get_deterministic_algorithms()) still gives `value` (True or False).
struct TorchFlagIs {
  std::string name;
  PyRef fn;
  bool value;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// A contextvars.ContextVar's value in the calling context is `value` (None, or a
// constant that runs no user code when compared: is_foldable), or it has none (null).
struct ContextVarIs {
  std::string name;
  PyRef var;
  PyRef value;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// torch.Tensor.<name> (a method or operator the trace recorded) is torch's own.
struct TensorAttrIs {
  std::string name;
  PyRef key;  // interned name
  PyRef object;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// The class `cls` (held) and every class of its MRO are unchanged since the trace:
// its version tag, which CPython clears whenever the class or a base is modified, is
// still `tag`. One guard stands for every lookup on the class the trace made (its
// __init__, methods, properties, class attributes) for an object made in the frame.
struct ClassUnchanged {
  std::string name;  // the class's qualname
  PyRef cls;
  unsigned int tag = 0;
  bool check(const CallInputs& in, jit::Bindings& b) const noexcept;
  std::string failure(const CallInputs& in) const;
  std::string text() const;
};

// ---- the guard ---------------------------------------------------------------

struct Guard {
  std::variant<ArgTensor, PathTensor, NoOverlap, SequenceIs,             // tensors
               ScalarEquals, SymbolArg, ExprTrue, ClosureIs, CellIs,     // values
               GlobalIs, ModuleAttrIs, PathIs, PathsSame, PathDictHas, PathMethodIs, FunctionUnchanged, DictsEmpty,
               ClassUnchanged,
               DictKeysAre, PathModule, PathHooksEmpty,                  // objects
               GradModeIs, NoFunctionMode, DefaultDTypeIs, TorchFlagIs, TensorAttrIs,  // torch state
               ContextVarIs>
      kind;
};

}  // namespace fj::guards

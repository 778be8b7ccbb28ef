// Guards: the assumptions a trace made about the frame it saw, written against
// sources (argument `x`, global `torch`, attribute `torch.relu`).
//
// Design: a call first gathers its inputs once (CallInputs: the frame's argument
// slots, its globals, and a TensorMeta for every tensor argument, read through the
// Python API); each cache entry's GuardSet then checks those inputs with check(),
// which is noexcept, allocates nothing and never touches pybind. When every entry
// fails, check_verbose() of the first entry says what differed; that sentence is
// the recompile reason.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "guards/py_errors.h"
#include "jit/sym/symexpr.h"

namespace fj::guards {

constexpr int kMaxRank = 8;

// What the runtime needs to know about a tensor argument.
struct TensorMeta {
  PyObject* dtype = nullptr;  // borrowed: torch dtypes are immortal singletons
  bool is_cpu = false;
  bool requires_grad = false;
  int rank = 0;
  std::array<int64_t, kMaxRank> sizes{};
  std::array<int64_t, kMaxRank> strides{};
};

// The torch objects the guards and the runtime compare against; filled once by
// framejit's Python side at import.
struct TorchRefs {
  PyObject* tensor_type = nullptr;
  // torch.nn.Parameter (exactly): read like a tensor where it does not require grad.
  // Set by the tracer when it first reads a module attribute (before any guard on one).
  PyObject* parameter_type = nullptr;
  PyObject* float32 = nullptr;
  PyObject* bool_ = nullptr;
  PyObject* float64 = nullptr;
  PyObject* int32 = nullptr;
  PyObject* int64 = nullptr;
  PyObject* uint8 = nullptr;
  PyObject* empty = nullptr;  // torch.empty
  PyObject* size_type = nullptr;  // torch.Size
};
TorchRefs& torch_refs();
// torch.is_grad_enabled() now (false when it cannot be read).
bool grad_enabled();
// torch.get_default_dtype() now (borrowed: dtypes are immortal singletons), or
// nullptr when it cannot be read.
PyObject* default_dtype() noexcept;
// torch.Tensor.<name> as it was when framejit was imported (borrowed), or nullptr.
PyObject* original_tensor_attr(const std::string& name);
// torch.Tensor.<name> now (borrowed; a type lookup, no allocation), or nullptr.
PyObject* current_tensor_attr(PyObject* interned_name);
// Records torch.Tensor's methods and operators as they are now (called at import).
void snapshot_tensor_attrs(const std::vector<std::string>& names);

// Reads a tensor's metadata. Returns false with a reason when it cannot be
// described (rank above kMaxRank); a Python error is cleared into the reason.
bool read_tensor_meta(PyObject* tensor, TensorMeta* out, std::string* why);

struct CallInputs {
  PyObject* const* args = nullptr;  // the frame's first num_args local slots
  int num_args = 0;
  PyObject* globals = nullptr;
  PyObject* builtins = nullptr;
  PyObject* closure = nullptr;      // the function's tuple of cells, or NULL
  std::vector<std::optional<TensorMeta>> metas;  // one per argument
  // Tensors reached through attribute paths (`self.weight`), found by the entry's
  // guards during check() for the plan to use: one per path tensor of the entry.
  mutable std::vector<PyObject*> path_tensors;  // borrowed
  mutable std::vector<TensorMeta> path_metas;
};

// Where an attribute path starts: an argument slot, or a global (in `globals`, or
// the call's own globals when null).
struct PathRoot {
  int arg = -1;
  PyObject* global_name = nullptr;  // interned, strong
  PyObject* globals = nullptr;      // strong or null
};

// obj.name read the plain way, running no user code: the instance dict, a plain class
// attribute (not a data descriptor), or nn.Module's parameters, buffers and
// submodules. Borrowed, or nullptr (no error set) when that cannot be done.
PyObject* plain_attr(PyObject* obj, PyObject* name) noexcept;
// Attribute reads of objects of this type go through object.__getattribute__'s logic.
bool generic_getattribute(PyTypeObject* tp) noexcept;
// Registers nn.Module.__getattr__ (whose dicts plain_attr may read), at import.
void set_module_getattr(PyObject* fn);

// nn.Module's __call__ and the global module hook dicts, registered at import, so
// that a call of a module without hooks can be traced as a call of its forward.
struct ModuleCallRefs {
  PyObject* call = nullptr;              // nn.Module.__call__
  std::vector<PyObject*> containers;     // nn.Sequential, nn.ModuleList: iterate their _modules values
  std::vector<PyObject*> global_hooks;   // torch.nn.modules.module._global_*_hooks
};
ModuleCallRefs& module_call_refs();

enum class GuardKind : uint8_t {
  TensorMatch,  // arg is a torch.Tensor with this dtype, device, rank, sizes, strides, requires_grad
  ScalarEquals, // arg is an int/float/bool/str/None of this exact type and value
  GlobalIs,     // globals()[name] (or builtins) is this object
  ModuleAttrIs, // globals()[name].a.b is this object (each step reads a module's dict)
  ClosureIs,    // the content of closure cell `arg` is this object (numbers: equal to it)
  CellIs,       // the content of `cell` (an inlined function's closure cell) is this object
  FunctionUnchanged,  // an inlined function keeps its __code__, __defaults__, __kwdefaults__
  TensorAttrIs, // torch.Tensor.<name> (a method or operator the trace recorded) is torch's own
  PathIs,       // root.a.b (plain attribute reads) is this object (numbers, str: equal to it)
  PathMethodIs, // type(root.a.b).<name> is this function, not shadowed by the instance dict
  DictsEmpty,   // these dicts (an nn.Module's hooks, the global module hooks) are empty
  DictKeysAre,  // this dict (a container module's _modules) has exactly these keys, in order
  SequenceIs,   // arg is exactly this type (list or tuple) with `symbol` items
  SymbolArg,    // arg is an exact int (in int64, not 0 or 1) / float / bool: binds `symbol`
  ExprTrue,     // `expr` is true for the call's bound symbols
  GradModeIs,   // torch.is_grad_enabled() is `arg` (1 / 0): the trace read tensors that require grad
  NoOverlap,    // the tensor inputs the frame updates in place share no memory with each other,
                // with the other tensor inputs, or within themselves
  DefaultDTypeIs,  // torch.get_default_dtype() is `object`: what creation ops and int->float promotion make
};

struct Guard {
  GuardKind kind;
  int arg = -1;               // TensorMatch, ScalarEquals
  std::string name;           // argument, global, or module global name
  std::vector<std::string> attrs;  // ModuleAttrIs: the attribute path below the global
  bool from_builtins = false; // GlobalIs: found in builtins, not globals
  TensorMeta meta;            // TensorMatch
  std::array<int, kMaxRank> dim_symbols{};  // TensorMatch: symbol of each size, -1 if static
  bool check_strides = true;                // TensorMatch
  PyObject* object = nullptr; // strong: ScalarEquals value, GlobalIs/ModuleAttrIs object
  PyObject* name_obj = nullptr;  // strong: interned name (and attr) for lookups
  std::vector<PyObject*> attr_objs;  // strong, interned (FunctionUnchanged: code, defaults, kwdefaults)
  PyObject* globals = nullptr;       // strong or null: GlobalIs / ModuleAttrIs of an inlined callee
  PyObject* builtins = nullptr;      // strong or null
  PyObject* cell = nullptr;          // strong: CellIs
  int symbol = -1;                   // SymbolArg
  jit::SymType sym_type = jit::SymType::Int;
  jit::SymExpr expr;                 // ExprTrue
  PathRoot root;                     // PathIs, TensorMatch of a path tensor (attr_objs: the path)
  int path_index = -1;               // TensorMatch of a path tensor: its slot in CallInputs
  // NoOverlap: the tensors (an argument slot k as k, a path tensor slot k as -k - 1),
  // the first `num_updated` of them updated in place; their names are in `attrs`.
  std::vector<int> tensors;
  size_t num_updated = 0;
};

class GuardSet {
 public:
  GuardSet() = default;
  GuardSet(const GuardSet&) = delete;
  GuardSet& operator=(const GuardSet&) = delete;
  GuardSet(GuardSet&&) noexcept;
  ~GuardSet();

  // dim_symbols[d] >= 0 makes size d a symbol (any size >= 2, bound for the call);
  // -1 keeps it static. Strides are guarded only when `strides` is set: the kernels
  // take strides at run time, so dynamic entries leave them free.
  void add_tensor(int arg, std::string name, const TensorMeta& meta,
                  const std::array<int, kMaxRank>& dim_symbols, bool strides);
  void add_scalar(int arg, std::string name, PyObject* value);
  // `globals` / `builtins`: the dicts of an inlined callee; nullptr for the call's own.
  void add_global(std::string name, PyObject* object, bool from_builtins, PyObject* globals = nullptr,
                  PyObject* builtins = nullptr);
  // torch.Tensor's attribute `name` still resolves to `object` (not monkeypatched).
  void add_tensor_attr(const std::string& name, PyObject* object);
  // root.attrs... is `object`; `name` is its readable source ("L['self'].scale").
  void add_path(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                PyObject* object);
  // Calling root.attrs....<method> reaches the function `fn` of the object's class.
  void add_path_method(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                       const std::string& method, PyObject* fn);
  // Argument `arg` is a list or tuple of exactly this type and length (its items are
  // path tensors with the steps "#0", "#1", ...).
  void add_sequence(int arg, std::string name, PyObject* seq);
  // `dict` keeps exactly the keys it has now, in this order.
  void add_dict_keys(std::string name, PyObject* dict);
  // Each of `dicts` stays empty (strong references are kept).
  void add_dicts_empty(std::string name, const std::vector<PyObject*>& dicts);
  // The tensor at root.attrs... matches `meta` (as add_tensor); returns its slot in
  // CallInputs::path_tensors.
  int add_path_tensor(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                      const TensorMeta& meta, const std::array<int, kMaxRank>& dim_symbols, bool strides);
  // An inlined function still has the code and defaults the trace used.
  void add_function(PyObject* fn);
  // A cell of an inlined function's closure still holds this object.
  void add_cell(PyObject* cell, std::string name, PyObject* object);
  void add_closure(int cell, std::string name, PyObject* object);
  void add_symbol_arg(int arg, std::string name, int symbol, jit::SymType type);
  // `text` is how the guard reads to a person ("L['y'] == 2"), for explain and logs.
  void add_expr(jit::SymExpr expr, std::string text);
  void add_grad_mode(bool enabled);
  // The tensors (as Guard::tensors) share no memory where one of the first
  // `num_updated` is involved, and those have no internally overlapping elements.
  void add_no_overlap(std::vector<int> tensors, size_t num_updated, std::vector<std::string> names);
  void add_default_dtype(PyObject* dtype);
  void add_module_attr(std::string module_global, std::vector<std::string> attrs, PyObject* object,
                       PyObject* globals = nullptr);

  // Fast path: true when every guard holds; binds the entry's symbols into `b` (whose
  // storage the caller keeps between calls). Never raises.
  bool check(const CallInputs& in, jit::Bindings* b) const noexcept;
  // Slow path: the first failing guard, in words ("tensor 'x' size mismatch at
  // dim 1: expected 8, actual 16"), or nullopt when all hold.
  std::optional<std::string> check_verbose(const CallInputs& in) const;
  // One line per guard, for explain() and FRAMEJIT_LOG=guards.
  std::vector<std::string> describe() const;
  size_t size() const { return guards_.size(); }

 private:
  bool holds(const Guard& g, const CallInputs& in, jit::Bindings& b) const noexcept;
  // NoOverlap: true when it holds; else false, with the reason in *why when given.
  bool overlap_free(const Guard& g, const CallInputs& in, std::string* why) const noexcept;
  void add_object(GuardKind kind, int arg, std::string name, PyObject* object);
  std::vector<Guard> guards_;
  int num_symbols_ = 0;
  int num_path_tensors_ = 0;
};

// The object a path guard reads now (borrowed), or nullptr when the path is broken.
PyObject* walk_path(const Guard& g, const CallInputs& in) noexcept;

}  // namespace fj::guards

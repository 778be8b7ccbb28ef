// Symbolic values of the interpreter and the frame state that holds them.
//
// Design: a Value is a small copyable variant: a tensor (a node of the graph being
// recorded), a constant Python object (strong reference), a symbolic Python int,
// float or bool (a SymExpr over the frame's symbols), a tuple or list of values, an
// iterator over such a sequence (a for loop is unrolled), the __exit__ of a
// `with torch.no_grad()` block, an object of a plain Python class made in the frame
// (interp/trace/ops_objects.cpp), the NULL that CPython pushes before a call, or a tensor (or dict) method waiting
// for its CALL. Each value carries its source when it came from the frame (an
// argument slot, a global, a module attribute path) so that guards can be written
// against it. FrameState is a plain value (locals, stack, pc): branching and
// inlining copy it.
#pragma once

#include "interp/compat.h"

#include <memory>
#include <string>
#include <optional>
#include <utility>
#include <vector>

#include "jit/ir/graph.h"
#include "jit/sym/symexpr.h"

namespace fj::interp {

// An owning PyObject reference with value semantics.
class PyRef {
 public:
  PyRef() = default;
  static PyRef borrow(PyObject* o) { Py_XINCREF(o); return PyRef(o); }
  static PyRef steal(PyObject* o) { return PyRef(o); }
  PyRef(const PyRef& o) : p_(o.p_) { Py_XINCREF(p_); }
  PyRef(PyRef&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  PyRef& operator=(PyRef o) noexcept { std::swap(p_, o.p_); return *this; }
  ~PyRef() { Py_XDECREF(p_); }
  PyObject* get() const { return p_; }
  PyObject* release() { return std::exchange(p_, nullptr); }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  explicit PyRef(PyObject* o) : p_(o) {}
  PyObject* p_ = nullptr;
};

// Array: a NumPy array made in the frame, whose elements and memory are those of the
// tensor `node` (interp/trace/ops_arrays.cpp).
enum class ValueKind : uint8_t { Null, Tensor, Const, Sym, Tuple, List, TensorMethod, Iterator, GradModeExit, Slice, Dict, Object, Array };

// Where a value came from in the frame, for guards and messages.
struct Source {
  // Object: a closure's content, guarded by identity (the path starts at `object`)
  enum class Kind : uint8_t { None, Arg, Global, Object } kind = Kind::None;
  int arg = -1;                    // Arg: slot
  std::string name;                // Arg: parameter name; Global: global name; Object: the free variable
  PyObject* object = nullptr;      // Object: the root object (borrowed: its guard keeps it)
  std::vector<std::string> attrs;  // attribute path below a global module
  bool from_builtins = false;
  PyObject* globals = nullptr;     // Global: the globals dict of an inlined callee (borrowed)
};

// The source of a closure's content `v` (guarded by identity): attribute paths below
// an object (an nn.Module the closure holds) start at it.
inline Source closure_source(const std::string& name, PyObject* v) {
  Source s;
  s.kind = Source::Kind::Object;
  s.name = name;
  s.object = v;
  return s;
}

struct Value {
  ValueKind kind = ValueKind::Null;
  jit::NodeId node = -1;       // Tensor (a Python number when the node is an Item node:
                               // int(t), float(t), t.item())
  PyRef obj;                   // Const; Tuple: a torch.return_types type it is built as;
                               // Iterator: a set the frame changes, or the exception its end raises;
                               // Dict: its class when not dict (OrderedDict, defaultdict);
                               // Sym: a NumPy scalar type (np.float64...) the number is of
  // Slice: items are start, stop, step (a slice with a symbolic bound; constant
  // slices are Const slice objects)
  jit::SymExpr expr;           // Sym
  std::vector<Value> items;    // Tuple, List, Iterator (the items still to come, from `next`),
                               // Dict (key, value, key, value, ...; keys are constants),
                               // Object (its class, then name, value, name, value, ...)
  size_t next = 0;             // Iterator: position of the next item
  int writes = -1;             // Iterator run ahead (a generator, map, filter): the tracer's
                               // write_log_ position then (a later write it may read makes its
                               // items stale, Tracer::run_ahead_stale)
  std::shared_ptr<const std::vector<int>> reads;  // ... the identities it may read (null: anything)
  bool dict_view = false;      // ... of a dict view: stale at its end too (CPython raises when the size changed)
  std::string method;          // TensorMethod: name (self is the next stack item); obj: dict's
                               // method descriptor when self is a Dict; Iterator: "keys",
                               // "values" or "items" for a dict's view; Tuple: "*args" for the
                               // positional arguments a table op's varargs parameter collected
  bool opaque = false;         // Const: an unguarded argument; any use ends the trace
  bool pinned = false;         // ... but its identity is fixed (a default of an inlined function,
                               // FunctionUnchanged): `is` may compare it
  bool torch_size = false;     // Tuple: a torch.Size (x.shape, x.size())
  int identity = -1;           // Tuple, List built by the frame: which object (copies share it)
  bool fresh = false;          // Const: an object made while tracing (a nested function):
                               // calls of it are traced, but it must not escape the frame
  int reg = -1;                // Const: an opaque call's result (or a list given to one), in this register
  bool item = false;           // Const with reg: the Python number of the 0-d tensor in that register
  int path_slot = -1;          // Const: an nn.Module guarded by class, not identity: the plan
                               // uses the call's own instance, found in this path-object slot;
                               // List: a list attribute guarded by length (obj: the list now)
  int ctx = -1;                // Const (opaque): the ctx of a custom autograd.Function being traced
                               // (the tracer's table); with `method`: that ctx method, to be called
  Source source;
  // Dict of a collections.defaultdict (obj: the class): its default_factory, or null
  // for None (interp/trace/ops_collections.cpp)
  std::shared_ptr<const Value> factory;

  static Value null() { return Value{}; }
  static Value tensor(jit::NodeId n, Source s = {}) {
    Value v; v.kind = ValueKind::Tensor; v.node = n; v.source = std::move(s); return v;
  }
  static Value constant(PyRef o, Source s = {}) {
    Value v; v.kind = ValueKind::Const; v.obj = std::move(o); v.source = std::move(s); return v;
  }
  static Value sym(jit::SymExpr e, Source s = {}) {
    Value v; v.kind = ValueKind::Sym; v.expr = std::move(e); v.source = std::move(s); return v;
  }
  static Value sequence(ValueKind k, std::vector<Value> items) {
    Value v; v.kind = k; v.items = std::move(items); return v;
  }
  static Value tensor_method(std::string name) {
    Value v; v.kind = ValueKind::TensorMethod; v.method = std::move(name); return v;
  }
};

// A symbolic number whose Python type is a NumPy scalar type (an np.float64 argument):
// torch takes it as it takes a Python number; Python operators on it follow NumPy.
inline bool is_numpy_scalar(const Value& v) { return v.kind == ValueKind::Sym && v.obj; }
// The Python type of a symbolic number (borrowed): int, float, bool or its NumPy type.
inline PyObject* sym_python_type(const Value& v) {
  if (v.obj) return v.obj.get();
  const jit::SymType t = v.expr.type();
  return reinterpret_cast<PyObject*>(t == jit::SymType::Int ? &PyLong_Type : t == jit::SymType::Float ? &PyFloat_Type : &PyBool_Type);
}

struct FrameState {
  std::vector<Value> locals;
  std::vector<Value> stack;
  size_t pc = 0;           // index into the decoded instructions
  PyRef kw_names;          // set by KW_NAMES for the next CALL
  std::optional<Value> ret;  // set by RETURN_VALUE
  std::optional<std::vector<Value>> yields;  // a generator expression run to its end: what it yielded
  std::vector<Value> handling;  // the exceptions whose handlers run (PUSH_EXC_INFO), innermost last
};

}  // namespace fj::interp

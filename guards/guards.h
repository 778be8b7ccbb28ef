// Guards: the assumptions a trace made about the frame it saw, written against
// sources (argument `x`, global `torch`, attribute `torch.relu`).
//
// Design: a call first gathers its inputs once (CallInputs: the frame's argument
// slots, its globals, and a TensorMeta for every tensor argument, read through the
// Python API); each cache entry's GuardSet then checks those inputs with check(),
// which is noexcept, allocates nothing and never touches pybind. When every entry
// fails, check_verbose() of the first entry says what differed; that sentence is
// the recompile reason.
//
// Each kind of guard is a small struct with its own payload, its fast check and its
// texts side by side (guards/guard_kinds.h, one family per .cpp file); a GuardSet
// is a list of them. Python references that guards hold are PyRefs
// (guards/py_ref.h). This header is what interp/ and py/ use: building a set
// (add_*), checking it, and the Python reads that guards and the runtime share.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "guards/py_errors.h"
#include "guards/py_ref.h"
#include "jit/common.h"
#include "jit/sym/symexpr.h"

namespace fj::guards {

constexpr int kMaxRank = 8;

// What the runtime needs to know about a tensor argument.
struct TensorMeta {
  PyObject* dtype = nullptr;  // borrowed: torch dtypes are immortal singletons
  bool is_cpu = false;
  bool requires_grad = false;
  bool is_inference = false;  // made under torch.inference_mode(): eager refuses writes to it outside
  bool is_ndarray = false;    // a NumPy array (exactly numpy.ndarray): its memory read as a tensor's
  int rank = 0;
  std::array<int64_t, kMaxRank> sizes{};
  std::array<int64_t, kMaxRank> strides{};
};

// The torch objects the guards and the runtime compare against; filled once by
// framejit's Python side at import and kept for the process (plain pointers: a
// static destructor would release them after Python has finalized).
struct TorchRefs {
  PyObject* tensor_type = nullptr;
  // torch.nn.Parameter (exactly): read like a tensor where it does not require grad.
  // Set by the tracer when it first reads a module attribute (before any guard on one).
  PyObject* parameter_type = nullptr;
  // torch.nn.Module: an instance read below an argument or a global is guarded by its
  // class (PathModule). Set by the tracer with parameter_type.
  PyObject* module_type = nullptr;
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
// torch._C._is_torch_function_mode_enabled() now (true when it cannot be read).
bool torch_function_mode_enabled() noexcept;
// torch.get_default_dtype() now (borrowed: dtypes are immortal singletons), or
// nullptr when it cannot be read.
PyObject* default_dtype() noexcept;
// The kind of symbol a NumPy scalar of type `type` binds to (np.float16/32/64: Float;
// np.int8..int64, np.uint8..uint32: Int; np.bool_: Bool), or nullopt for any other type.
// Reads numpy only when something imported it.
std::optional<jit::SymType> numpy_scalar_kind(PyTypeObject* type) noexcept;
// The value of a NumPy scalar as a symbol of `kind` (false when it does not fit).
bool read_numpy_scalar(PyObject* v, jit::SymType kind, jit::SymValue* out) noexcept;
// An argument that is exactly a writable, native-order numpy.ndarray of a dtype the
// graph knows: its metadata as a tensor's (torch's dtype, strides in elements), and
// where its memory starts (*data, when given). False for anything else.
bool read_ndarray_meta(PyObject* a, TensorMeta* out, void** data = nullptr) noexcept;
// torch.Tensor.<name> as it was when framejit was imported (borrowed), or nullptr.
PyObject* original_tensor_attr(const std::string& name);
// torch.Tensor.<name> now (borrowed; a type lookup, no allocation), or nullptr.
PyObject* current_tensor_attr(PyObject* interned_name);
// Records torch.Tensor's methods and operators as they are now (called at import).
void snapshot_tensor_attrs(const std::vector<std::string>& names);

// A tensor's metadata, or why it cannot be described (rank above kMaxRank, a lazily
// negated view); a Python error is cleared into the reason.
Expected<TensorMeta> tensor_meta(PyObject* tensor);
// tensor_meta() in the shape interp/ calls it: false with the reason in *why (when
// given). Kept so that interp/'s call sites need not change at once.
inline bool read_tensor_meta(PyObject* tensor, TensorMeta* out, std::string* why) {
  Expected<TensorMeta> m = tensor_meta(tensor);
  if (m.failed()) {
    if (why != nullptr) *why = m.error();
    return false;
  }
  *out = *m;
  return true;
}

// The strides are those torch gives a new contiguous tensor of these sizes.
bool is_standard_contiguous(const TensorMeta& m) noexcept;

struct CallInputs {
  PyObject* const* args = nullptr;  // the frame's first num_args local slots
  int num_args = 0;
  PyObject* globals = nullptr;
  PyObject* builtins = nullptr;
  PyObject* closure = nullptr;      // the function's tuple of cells, or NULL
  std::vector<std::optional<TensorMeta>> metas;  // one per argument
  // Tensors reached through attribute paths (`self.weight`), found by the entry's
  // guards during check() for the plan to use: one per path tensor of the entry. Also
  // the nn.Modules guarded by class (PathModule), whose path_metas stay unused.
  // Owned: a large graph runs without the GIL, and another thread may rebind the
  // attribute meanwhile, which would free the tensor the kernel reads.
  mutable std::vector<PyRef> path_tensors;
  mutable std::vector<TensorMeta> path_metas;
};

// Where an attribute path starts: an argument slot, or a global (in `globals`, or
// the call's own globals when null). Borrowed: a guard keeps its own references.
struct PathRoot {
  int arg = -1;
  PyObject* global_name = nullptr;  // interned
  PyObject* globals = nullptr;      // or null
  PyObject* object = nullptr;       // or this object itself (a closure's content, guarded by identity)
};

// obj.name read the plain way, running no user code: the instance dict, a plain class
// attribute (not a data descriptor), or nn.Module's parameters, buffers and
// submodules. Borrowed, or nullptr (no error set) when that cannot be done.
PyObject* plain_attr(PyObject* obj, PyObject* name) noexcept;
// What object.__getattribute__(obj, name) returns where that runs no code, whatever
// obj's class does in its own __getattribute__ (an instance-dict entry, a class
// attribute that is no descriptor, __dict__, __class__), or a heap type's __name__,
// __qualname__ and plain class attributes; nullptr otherwise. Borrowed.
PyObject* object_attr(PyObject* obj, PyObject* name) noexcept;
// The plain lookup of obj.name finds nothing, known without running user code:
// object's own __getattribute__, nothing of that name on the type, not in the instance
// dict (nor, under nn.Module's __getattr__, in its parameters, buffers or submodules).
// A __getattr__ of the type is the caller's to check.
bool attr_missing(PyObject* obj, PyObject* name) noexcept;
// nn.Module.__getattr__ as registered (borrowed), or nullptr.
PyObject* module_getattr() noexcept;
// What super(after, <instance of tp>).name finds in tp's MRO after the class `after`
// (borrowed), or nullptr.
PyObject* super_lookup(PyTypeObject* tp, PyObject* after, PyObject* name) noexcept;
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

struct Guard;  // one guard: its kind and payload (guards/guard_kinds.h)

class GuardSet {
 public:
  GuardSet();
  GuardSet(const GuardSet&) = delete;
  GuardSet& operator=(const GuardSet&) = delete;
  GuardSet(GuardSet&&) noexcept;
  ~GuardSet();

  // dim_symbols[d] >= 0 makes size d a symbol (any size >= 2, bound for the call);
  // -1 keeps it static. Strides are guarded only when `strides` is set: the kernels
  // take strides at run time, so dynamic entries leave them free.
  void add_tensor(int arg, std::string name, const TensorMeta& meta,
                  const std::array<int, kMaxRank>& dim_symbols, bool strides);
  // The tensor guard of argument `ref` (ref >= 0), or of path tensor slot -ref - 1,
  // also requires the standard contiguous strides of its sizes.
  void require_contiguous(int ref);
  void add_scalar(int arg, std::string name, PyObject* value, int item = -1);
  // `globals` / `builtins`: the dicts of an inlined callee; nullptr for the call's own.
  void add_global(std::string name, PyObject* object, bool from_builtins, PyObject* globals = nullptr,
                  PyObject* builtins = nullptr);
  // torch.Tensor's attribute `name` still resolves to `object` (not monkeypatched).
  void add_tensor_attr(const std::string& name, PyObject* object);
  // root.attrs... is `object`; `name` is its readable source ("L['self'].scale").
  void add_path(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                PyObject* object);
  // The dict at root.attrs... (exact, or with `subclass` any dict read by its own
  // storage) has (contains) or has not the str key `key`.
  void add_path_dict_has(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                         PyObject* key, bool contains, bool subclass = false);
  // Calling root.attrs....<method> reaches the function `fn` of the object's class.
  void add_path_method(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                       const std::string& method, PyObject* fn);
  // super(after, root.attrs...).<method> reaches `fn`, found in the MRO of the object's
  // type after the class `after`.
  void add_path_super_method(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                             PyObject* after, const std::string& method, PyObject* fn);
  // root.attrs... has no attribute `attr` (attr_missing holds).
  // past_getattribute: object.__getattribute__ finds no `attr` (nothing of that name on
  // the type, none in the instance dict), whatever the class's own __getattribute__.
  void add_path_missing(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                        const std::string& attr, bool past_getattribute = false);
  // Argument `arg` is a list or tuple of exactly this type and length (its items are
  // path tensors with the steps "#0", "#1", ...), or an exact dict with exactly these
  // keys in this order (its values are found with the steps "[key").
  void add_sequence(int arg, std::string name, PyObject* seq);
  // The `_modules` dict of the container module at root.attrs... keeps exactly the
  // keys `modules` has now, in this order.
  void add_dict_keys(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                     PyObject* modules);
  // `dict` itself (held) keeps exactly the keys it has now, in this order.
  void add_dict_keys(std::string name, PyObject* dict);
  // Each of `dicts` stays empty (strong references are kept).
  void add_dicts_empty(std::string name, const std::vector<PyObject*>& dicts);
  // The nn.Module at root.attrs... has empty instance-dict entries `keys` (its hook
  // dicts), whichever instance is there at the call.
  void add_path_hooks_empty(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                            const std::vector<std::string>& keys);
  // `a is b` of the objects at two paths is `same`.
  void add_paths_same(std::string name, const PathRoot& root_a, const std::vector<std::string>& attrs_a,
                      const PathRoot& root_b, const std::vector<std::string>& attrs_b, bool same);
  // The object at the end of the path is of exactly class `type` (a PathModule that
  // fills no slot): an opaque argument whose class the trace asked (isinstance, `is None`).
  void add_path_type(std::string name, const PathRoot& root, const std::vector<std::string>& attrs, PyObject* type);
  // The object at root.attrs... is an nn.Module of exactly the class of `module` (not
  // that object): returns its slot in CallInputs::path_tensors, where check() leaves
  // the instance of this call. Reads below it must be guarded by path.
  int add_path_module(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                      PyObject* module);
  // The object at root.attrs... is exactly a list of as many items as `list` has
  // (its items are found with the steps "#0", "#1", ...): returns its slot, as
  // add_path_module does.
  int add_path_sequence(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                        PyObject* list);
  // The tensor at root.attrs... matches `meta` (as add_tensor); returns its slot in
  // CallInputs::path_tensors.
  int add_path_tensor(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                      const TensorMeta& meta, const std::array<int, kMaxRank>& dim_symbols, bool strides);
  // The class `cls` is not modified (ClassUnchanged). False: it has no version tag
  // (CPython ran out of them), so nothing read from it can be guarded.
  bool add_class_unchanged(PyObject* cls);
  // An inlined function still has the code and defaults the trace used.
  void add_function(PyObject* fn);
  // A cell of an inlined function's closure still holds this object.
  void add_cell(PyObject* cell, std::string name, PyObject* object);
  void add_closure(int cell, std::string name, PyObject* object);
  // `numpy_type`: the argument is a scalar of exactly that NumPy type, its value the symbol's.
  void add_symbol_arg(int arg, std::string name, int symbol, jit::SymType type, int item = -1,
                      PyObject* numpy_type = nullptr);
  // `text` is how the guard reads to a person ("L['y'] == 2"), for explain and logs.
  void add_expr(jit::SymExpr expr, std::string text);
  void add_grad_mode(bool enabled);
  // No torch function mode is on (the trace answered torch.overrides checks False).
  void add_no_function_mode();
  // The tensors (an argument slot k as k, a path tensor slot k as -k - 1; `names`
  // says how each reads) share no memory where one of the first `num_updated` is
  // involved, and those have no internally overlapping elements.
  void add_no_overlap(std::vector<int> tensors, size_t num_updated, std::vector<std::string> names);
  void add_default_dtype(PyObject* dtype);
  void add_torch_flag(const std::string& name, PyObject* fn, bool value);
  // ContextVar `var` has `value` (null: none) in the calling context (ContextVarIs).
  void add_context_var(std::string name, PyObject* var, PyObject* value);
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
  size_t size() const;
  // Path slots: this set's come after `first` (those of sets checked before it in one
  // plan), so that what each found stays in its own slot of CallInputs.
  void continue_path_slots(int first) { num_path_tensors_ = std::max(num_path_tensors_, first); }
  int num_path_slots() const { return num_path_tensors_; }

 private:
  // Sizes the call's binding and path-tensor slots for this set.
  void prepare(const CallInputs& in, jit::Bindings* b) const;
  template <class Kind, class Same>
  bool has(Same same) const;
  std::vector<Guard> guards_;
  int num_symbols_ = 0;
  int num_path_tensors_ = 0;
};

}  // namespace fj::guards

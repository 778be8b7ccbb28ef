// Handlers for loads and stores: locals, cells, constants, globals, attributes of
// modules and tensors, methods, nested functions.
#include "interp/trace/tracer.h"

#include "jit/log.h"

namespace fj::interp {
namespace {

// The position of field `name` of a structseq type (torch.return_types.sort: values,
// indices), read from its __match_args__.
std::optional<size_t> structseq_field(PyObject* type, const std::string& name) {
  PyRef fields = PyRef::steal(PyObject_GetAttrString(type, "__match_args__"));
  if (!fields || !PyTuple_Check(fields.get())) {
    guards::clear_error();
    return std::nullopt;
  }
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(fields.get()); ++k) {
    PyObject* f = PyTuple_GET_ITEM(fields.get(), k);
    if (PyUnicode_Check(f) && PyUnicode_CompareWithASCIIString(f, name.c_str()) == 0) return static_cast<size_t>(k);
  }
  return std::nullopt;
}

// *slot = module.name, imported on first use and kept for the process (null if absent).
void imported_once(PyObject** slot, const char* module, const char* name) {
  if (*slot != nullptr) return;
  PyObject* mod = PyImport_ImportModule(module);
  *slot = mod ? PyObject_GetAttrString(mod, name) : nullptr;
  Py_XDECREF(mod);
  guards::clear_error();
}

}  // namespace

// ---- loads and stores ----

// ( -- )
Status Tracer::op_nop(const Instruction&) { return ok(); }

// ( -- value)
Status Tracer::op_load_fast(const Instruction& ins) {
  const Value& v = cur_.fs->locals[static_cast<size_t>(ins.arg)];
  if (v.kind == ValueKind::Null) return unsupported("read of an unbound local variable");
  push(v);
  return ok();
}

// The stand-in cell (op_load_closure) that free variable `arg` of the current frame,
// an inlined function made in the trace, reads: a local of a traced frame. nullptr: a
// real cell, or not a free variable.
PyObject* Tracer::traced_cell(int arg) const {
  const int first_free = cur_.co->co_nlocalsplus - cur_.co->co_nfreevars;
  if (arg < first_free || cur_.closure == nullptr || arg - first_free >= PyTuple_GET_SIZE(cur_.closure)) return nullptr;
  PyObject* cell = PyTuple_GET_ITEM(cur_.closure, arg - first_free);
  return traced_cells_.count(cell) ? cell : nullptr;
}

// ( -- value): a cell or free variable, kept as a plain local while tracing; a free
// variable over a traced frame's local reads that local (`nonlocal` writes it).
Status Tracer::op_load_deref(const Instruction& ins) {
  if (PyObject* cell = traced_cell(ins.arg)) {
    const auto& [fs, slot] = traced_cells_.at(cell);
    const Value& v = fs->locals[static_cast<size_t>(slot)];
    if (v.kind == ValueKind::Null) return unsupported("read of an unbound variable of an enclosing function");
    push(v);
    return ok();
  }
  return op_load_fast(ins);
}

// ( -- cell): the cell of local `arg`, for the closure of a function defined here.
// A new, empty cell object stands for it (traced_cells_); a call of the function
// reads the local itself.
Status Tracer::op_load_closure(const Instruction& ins) {
  // A closure the frame makes over its cells cannot be handed to CPython (Tracer::
  // can_resume): deopt_after_last_call covers a later failure only while no segment
  // ran since the last break, so after one CPython runs the frame from here.
  if (cur_.depth == 0 && committed_ && segment_since_call_) {
    return unsupported("a closure over the frame's variables after a graph break and a branch");
  }
  if (PyObject* outer = traced_cell(ins.arg)) {  // passed on: one cell, one local
    Value v = Value::constant(PyRef::borrow(outer));
    v.fresh = true;
    push(std::move(v));
    return ok();
  }
  PyObject* cell = PyCell_New(nullptr);
  if (cell == nullptr) {
    guards::clear_error();
    return unsupported("cannot make a closure cell");
  }
  cell_objects_.push_back(PyRef::steal(cell));
  traced_cells_[cell] = {cur_.fs, ins.arg};
  Value v = Value::constant(PyRef::borrow(cell));
  v.fresh = true;
  push(std::move(v));
  return ok();
}

bool Tracer::has_traced_cells(PyObject* obj) const {
  if (PyCell_Check(obj)) {
    return std::any_of(cell_objects_.begin(), cell_objects_.end(), [&](const PyRef& c) { return c.get() == obj; });
  }
  if (!PyFunction_Check(obj)) return false;
  if (made_defaults_.count(obj)) return true;
  PyObject* closure = reinterpret_cast<PyFunctionObject*>(obj)->func_closure;
  for (Py_ssize_t k = 0; closure != nullptr && k < PyTuple_GET_SIZE(closure); ++k) {
    if (has_traced_cells(PyTuple_GET_ITEM(closure, k))) return true;
  }
  return false;
}

// (value -- ). A variable that closures read counts as a change (write_log_): a
// generator run ahead of its consumer (inline_call) read the value before this one.
Status Tracer::op_store_deref(const Instruction& ins) {
  PyCodeObject* code = cur_.co;
  if (PyObject* cell = traced_cell(ins.arg)) {  // `nonlocal n; n += 1` in a function made in the trace
    const auto& [fs, slot] = traced_cells_.at(cell);
    fs->locals[static_cast<size_t>(slot)] = pop();
    ++writes_;
    note_write(-1);
    return ok();
  }
  if (ins.arg >= code->co_nlocalsplus - code->co_nfreevars) {
    return unsupported("assignment to a variable of an enclosing function");
  }
  note_write(-1);  // the frame's own variable: not a write outside it (writes_)
  return op_store_fast(ins);
}

// (value -- )
Status Tracer::op_store_fast(const Instruction& ins) {
  cur_.fs->locals[static_cast<size_t>(ins.arg)] = pop();
  return ok();
}

// ( -- value)
Status Tracer::op_load_const(const Instruction& ins) {
  push(Value::constant(PyRef::borrow(PyTuple_GET_ITEM(cur_.co->co_consts, ins.arg))));
  return ok();
}

// ( -- [NULL], value)
Status Tracer::op_load_global(const Instruction& ins) {
  PyObject* name = PyTuple_GET_ITEM(cur_.co->co_names, ins.arg >> 1);
  if (Value* written = global_written(cur_.globals, name)) {  // assigned by the frame earlier
    if (ins.arg & 1) push(Value::null());
    push(*written);
    return ok();
  }
  bool from_builtins = false;
  PyObject* v = PyDict_GetItemWithError(cur_.globals, name);
  if (v == nullptr && !PyErr_Occurred() && PyDict_Check(cur_.builtins)) {
    v = PyDict_GetItemWithError(cur_.builtins, name);
    from_builtins = true;
  }
  if (v == nullptr) return unsupported("global name '" + guards::utf8_lossy(name) + "' is not defined");
  const std::string n = FJ_TRY(guards::utf8_of(name));
  guards().add_global(n, v, from_builtins, cur_.guard_globals, cur_.guard_builtins);
  if (ins.arg & 1) push(Value::null());
  Source src;
  src.kind = Source::Kind::Global;
  src.name = n;
  src.from_builtins = from_builtins;
  src.globals = cur_.guard_globals;
  Value value = Value::constant(PyRef::borrow(v), src);
  if (!from_builtins && PyObject_TypeCheck(v, reinterpret_cast<PyTypeObject*>(guards::torch_refs().tensor_type))) {
    // A global tensor: a graph input read from the globals at every call.
    guards::PathRoot root;
    PyRef holder;
    if (path_root(value, &root, &holder)) {
      if (std::optional<Status> s = path_tensor(v, root, src, &value); s && s->failed()) return std::move(*s);
    }
  }
  push(std::move(value));
  return ok();
}

// The value the frame assigned to global `name` of `globals`, or nullptr.
Value* Tracer::global_written(PyObject* globals, PyObject* name) {
  for (size_t i = 0; i < global_names_.size(); ++i) {
    const auto& [g, n] = global_names_[i];
    if (g == globals && PyUnicode_Compare(n.get(), name) == 0) return &global_writes_.locals[i];
  }
  return nullptr;
}

// (value -- ): `global n; n = value`. Stored when the plan returns (global_writes_).
Status Tracer::op_store_global(const Instruction& ins) {
  PyObject* name = PyTuple_GET_ITEM(cur_.co->co_names, ins.arg);
  if (!PyDict_CheckExact(cur_.globals)) return unsupported("an assignment to a global of a frame whose globals are not a dict");
  Value* slot = global_written(cur_.globals, name);
  if (slot == nullptr) {
    global_names_.emplace_back(cur_.globals, PyRef::borrow(name));
    global_writes_.locals.emplace_back();
    slot = &global_writes_.locals.back();
  }
  *slot = pop();
  ++writes_;  // a generator run ahead may have read the old value
  note_write(-1);
  return ok();
}

// module.name for a module read from a global: not one the frame assigned (its store
// waits for the return).
Status Tracer::module_attr_of(const Value& base, const std::string& name, Value* out) {
  if (base.kind == ValueKind::Const && PyModule_Check(base.obj.get()) && !global_names_.empty()) {
    PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
    if (!key) {
      guards::clear_error();
      return unsupported("attribute '" + name + "' of a module");
    }
    if (global_written(PyModule_GetDict(base.obj.get()), key.get()) != nullptr) {
      return unsupported("global '" + name + "' read through its module after the frame assigned it (not supported yet)");
    }
  }
  return module_attr(base, name, out, guards());
}

// Reads `name` of a module value read from a global (guarded by its attribute path).
Status module_attr(const Value& base, const std::string& name, Value* out, guards::GuardSet& guards) {
  if (base.kind != ValueKind::Const || !PyModule_Check(base.obj.get()) ||
      base.source.kind != Source::Kind::Global || base.source.from_builtins) {
    return unsupported("attribute '" + name + "' of a value other than a global module");
  }
  PyObject* v = PyDict_GetItemString(PyModule_GetDict(base.obj.get()), name.c_str());
  bool opaque = false;
  if (v == nullptr && (v = torch_module_fallback_attr(base.obj.get(), name, &opaque)) != nullptr) {
    *out = Value::constant(PyRef::steal(v));  // no source: not found in the dict again
    out->opaque = opaque;
    return ok();
  }
  if (v == nullptr) return unsupported("module attribute '" + name + "' not in the module's dict");
  Source src = base.source;
  src.attrs.push_back(name);
  guards.add_module_attr(src.name, src.attrs, v, base.source.globals);
  *out = Value::constant(PyRef::borrow(v), src);
  return ok();
}

// A module read from a global: its attributes are guarded as module attributes.
static bool is_global_module(const Value& v) {
  return v.kind == ValueKind::Const && PyModule_Check(v.obj.get()) && v.source.kind == Source::Kind::Global &&
         !v.source.from_builtins;
}

std::string source_text(const Source& s) {
  std::string out = s.kind == Source::Kind::Arg      ? "L['" + s.name + "']"
                    : s.kind == Source::Kind::Object ? "closure '" + s.name + "'"
                                                     : "G['" + s.name + "']";
  for (const std::string& a : s.attrs) {
    out += a[0] == '#'   ? "[" + a.substr(1) + "]"
           : a[0] == '[' || a[0] == '{' ? "['" + a.substr(1) + "']"
           : a[0] == '!' ? "." + a.substr(1)  // past the class's __getattribute__: reads the same
                         : "." + a;
  }
  return out;
}

// Where `base` is found again at each call; `holder` keeps the global's name alive.
bool Tracer::path_root(const Value& base, guards::PathRoot* root, PyRef* holder) const {
  if (base.kind != ValueKind::Const || base.fresh) return false;
  if (base.source.kind == Source::Kind::Arg && base.source.arg >= 0) {
    root->arg = base.source.arg;
    return true;
  }
  if (base.source.kind == Source::Kind::Global && !base.source.from_builtins) {
    *holder = PyRef::steal(PyUnicode_InternFromString(base.source.name.c_str()));
    root->global_name = holder->get();
    root->globals = base.source.globals;
    return true;
  }
  if (base.source.kind == Source::Kind::Object && base.source.object != nullptr) {
    *holder = PyRef::borrow(base.source.object);
    root->object = holder->get();
    return true;
  }
  return false;
}

Status Tracer::attr_of(const Value& base, const std::string& name, Value* out, bool past_getattribute) {
  guards::PathRoot root;
  PyRef holder;
  if (!path_root(base, &root, &holder)) return unsupported("attribute '" + name + "' of " + describe(base) + " (not supported yet)");
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name.c_str()));
  PyObject* v = past_getattribute ? guards::object_attr(base.obj.get(), key.get())
                                  : guards::plain_attr(base.obj.get(), key.get());
  if (v == nullptr) {
    return unsupported("attribute '" + name + "' of " + std::string(Py_TYPE(base.obj.get())->tp_name) +
                       " is not a plain attribute (a property, __getattr__, or missing)");
  }
  return found_at_path(base, past_getattribute ? "!" + name : name, v, out);
}

// v, found below `base` (which path_root accepts) by the path step `step` (an
// attribute, "!name", "[key", "#i"): a path tensor, an nn.Module guarded by class, or
// any other object guarded as attribute paths are (PathIs).
Status Tracer::found_at_path(const Value& base, const std::string& step, PyObject* v, Value* out) {
  const PyRef keep = PyRef::borrow(v);  // reading a tensor's metadata may release the GIL
  guards::PathRoot root;
  PyRef holder;
  if (!path_root(base, &root, &holder)) return unsupported("a value below " + describe(base) + " (not supported yet)");
  Source child = base.source;
  child.attrs.push_back(step);
  const std::string text = source_text(child);
  FJ_TRY(not_a_caller_list(v, root, child.attrs, text));
  if (std::optional<Status> s = path_tensor(v, root, child, out, is_module_instance(base.obj.get()))) return std::move(*s);
  if (is_module_instance(v) && !committed_) {
    // By class, not identity: every layer of a stack shares one entry. The plan takes
    // this call's instance from the guard's slot; what is read below it is guarded by
    // path. (After a break, reads are checked mid-plan: by identity, as before.)
    *out = module_by_class(v, root, child);
    return ok();
  }
  if (std::optional<Status> s = path_list(v, root, child, out)) return std::move(*s);
  guards().add_path(text, root, child.attrs, v);
  *out = Value::constant(PyRef::borrow(v), child);
  return ok();
}

// The content `v` of a closure cell, guarded by identity. A tensor there is a graph
// input read from that object at each call (its values and sizes may change in
// place); one that cannot be (it requires grad, after a graph break) stays a constant.
Value Tracer::closure_value(const std::string& name, PyObject* v) {
  Value out = Value::constant(PyRef::borrow(v), closure_source(name, v));
  guards::PathRoot root;
  root.object = v;
  Value t;
  if (std::optional<Status> s = path_tensor(v, root, out.source, &t); s && !s->failed()) return t;
  return out;
}

Value Tracer::pin_path_list(const Value& list) {
  guards::PathRoot root;
  PyRef holder;
  Value o = Value::constant(list.obj, list.source);
  if (path_root(o, &root, &holder)) guards().add_path(source_text(list.source), root, list.source.attrs, list.obj.get());
  return o;
}

// The nn.Module `v` at `source` (below `root`), guarded by class: the plan takes each
// call's own instance from the guard's slot.
Value Tracer::module_by_class(PyObject* v, const guards::PathRoot& root, const Source& source) {
  const int slot = guards().add_path_module(source_text(source), root, source.attrs, v);
  found_in_path(slot, v, guards::TensorMeta{});
  Value out = Value::constant(PyRef::borrow(v), source);
  out.path_slot = slot;
  return out;
}

// What the entry's guard in path slot `k` finds at each call, found now: a plan that
// runs while it is traced (steps before a branch) reads this call's slots before any
// check of the entry's guards has filled the new one.
void Tracer::found_in_path(int k, PyObject* v, const guards::TensorMeta& meta) {
  const auto slot = static_cast<size_t>(k);
  if (in_.path_tensors.size() <= slot) {
    in_.path_tensors.resize(slot + 1);
    in_.path_metas.resize(slot + 1);
  }
  in_.path_tensors[slot] = guards::PyRef::borrow(v);
  in_.path_metas[slot] = meta;
}

// Whether `v` is an nn.Module (torch.nn.Module looked up once).
bool Tracer::is_module_instance(PyObject* v) {
  auto& refs = guards::torch_refs();
  imported_once(&refs.module_type, "torch.nn.modules.module", "Module");
  return refs.module_type != nullptr && PyType_Check(refs.module_type) &&
         PyType_IsSubtype(Py_TYPE(v), reinterpret_cast<PyTypeObject*>(refs.module_type));
}

// A tensor reached by a guarded path (an attribute, a global): a graph input read
// from that path at every call. nullopt when v is no tensor.
// A parameter, or a tensor attribute of an nn.Module (a buffer), has constant sizes
// (guarded), as torch.compile's: symbolic weight sizes made every head split and
// view(-1, vocab) a floor division, which kernels then evaluate per element, for
// sizes that do not change. Modules of one class with equal sizes still share code.
std::optional<Status> Tracer::path_tensor(PyObject* v, const guards::PathRoot& root, const Source& child, Value* out,
                                          bool module_attr) {
  const std::string text = source_text(child);
  auto& refs = guards::torch_refs();
  imported_once(&refs.parameter_type, "torch.nn.parameter", "Parameter");

  // An nn.Parameter is read as a tensor (tensor_input refuses one that requires grad).
  if (Py_TYPE(v) == reinterpret_cast<PyTypeObject*>(refs.tensor_type) ||
      (refs.parameter_type != nullptr && Py_TYPE(v) == reinterpret_cast<PyTypeObject*>(refs.parameter_type))) {
    guards::TensorMeta meta;
    std::string why;
    if (!guards::read_tensor_meta(v, &meta, &why)) return unsupported("tensor " + text + ": " + why);
    const bool parameter = Py_TYPE(v) == reinterpret_cast<PyTypeObject*>(refs.parameter_type);
    // After an opaque call the plan's checks bind no new symbols: only a tensor of
    // constant sizes (a parameter, a module's buffer) is read there, found by its own
    // slot at that point of the plan.
    if (committed_ && !parameter && !module_attr) {
      return unsupported("tensor " + text + " read after a graph break (not supported yet)");
    }
    if (auto seen = path_inputs_.find(text); seen != path_inputs_.end()) {
      // Read before (the guards of that read hold): the same tensor, as it is now.
      auto now = storage_now_.find(seen->second);
      *out = Value::tensor(now == storage_now_.end() ? seen->second : now->second, child);
      return ok();
    }
    std::array<int, guards::kMaxRank> dims;
    jit::NodeId n;
    if (Status s = tensor_input(meta, text, &n, &dims, parameter || module_attr); s.failed()) return s;
    const int k = guards().add_path_tensor(text, root, child.attrs, meta, dims, !st_.dynamic);
    found_in_path(k, v, meta);
    placeholder_slot_.push_back(InputRef{InputRef::Kind::Path, k});
    path_inputs_[text] = n;
    *out = Value::tensor(n, child);
    return ok();
  }
  if (PyObject_TypeCheck(v, reinterpret_cast<PyTypeObject*>(refs.tensor_type))) {
    return unsupported("tensor " + text + " is a tensor subclass (" + Py_TYPE(v)->tp_name + "), not supported yet");
  }
  return std::nullopt;
}

// A tensor method that CALL traces (call_tensor_method).
bool Tracer::is_traced_tensor_method(const std::string& name) {
  return tensor_method_op(name) || is_shape_method(name) || is_inplace_method(name) || is_meta_method(name) ||
         extern_method(name);
}

// (owner -- value)
Status Tracer::op_load_attr(const Instruction& ins) {
  const std::string name = FJ_TRY(guards::utf8_of(PyTuple_GET_ITEM(cur_.co->co_names, ins.arg)));
  return load_attr(pop(), name);
}

// torch.Tensor.name of a method the tracer records (torch.Tensor.add(x, 1)): called, it
// is x.name(...) with its first argument as self (call_tensor_method checks that the
// method is torch's own). False: not such a read; nothing pushed.
bool Tracer::unbound_tensor_method(const Value& owner, const std::string& name, bool method) {
  if (owner.kind != ValueKind::Const || is_opaque(owner) || owner.reg >= 0 ||
      owner.obj.get() != guards::torch_refs().tensor_type) {
    return false;
  }
  if (!is_traced_tensor_method(name)) return false;  // in-place methods included
  if (method) push(Value::null());
  push(Value::tensor_method(name));
  return true;
}

// (owner -- owner.name), for LOAD_ATTR and for handlers (attrgetter).
Status Tracer::load_attr(Value owner, const std::string& name) {
  if (owner.kind == ValueKind::Object) return object_attr(owner, name, /*method=*/false);
  if (owner.kind == ValueKind::Array) return array_attr(owner, name, /*method=*/false);
  if (name == "__class__" && ((owner.kind == ValueKind::Const && !is_opaque(owner) && owner.reg < 0 &&
                               owner.source.kind == Source::Kind::None && owner.path_slot < 0) ||
                              owner.kind == ValueKind::Sym)) {
    // The class of a constant (fixed by its guard) or of a Python number; below a path,
    // the plain read keeps the path for what is read from the class.
    PyObject* type = owner.kind == ValueKind::Const ? reinterpret_cast<PyObject*>(Py_TYPE(owner.obj.get())) : sym_python_type(owner);
    push(Value::constant(PyRef::borrow(type)));
    return ok();
  }
  if (is_super(owner)) return super_attr(owner, name, /*method=*/false);
  if (unbound_tensor_method(owner, name, /*method=*/false)) return ok();
  if (std::optional<Status> s = autograd_attr(owner, name, /*method=*/false)) return std::move(*s);
  if (std::optional<Status> s = opaque_attr(owner, name, /*method=*/false)) return std::move(*s);
  if (is_number(owner)) return unsupported("attribute '." + name + "' of a Python number");
  if (owner.kind == ValueKind::Tuple && owner.obj) {  // torch.return_types.max, named tuples: a field by name
    if (std::optional<size_t> k = structseq_field(owner.obj.get(), name); k && *k < owner.items.size()) {
      push(owner.items[*k]);
      return ok();
    }
    if (is_namedtuple_class(owner.obj.get())) return object_attr(owner, name, /*method=*/false);
  }
  if (owner.kind == ValueKind::Tensor) {
    if (name == "T" || name == "mT") {
      FJ_TRY(require_tensor_attr(name));
      const size_t r = graph_.node(owner.node).rank();
      if (name == "mT" && r < 2) return unsupported("tensor.mT of a tensor with fewer than 2 dims (eager raises)");
      if (r < 2) {
        push(std::move(owner));
        return ok();
      }
      std::vector<int64_t> order;
      for (size_t d = 0; d < r; ++d) order.push_back(static_cast<int64_t>(d));
      if (name == "mT" || r == 2) std::swap(order[r - 1], order[r - 2]);
      else return unsupported("tensor.T of a tensor with more than 2 dims (deprecated)");
      auto p = graph_.permute(owner.node, order);
      if (!p) return unsupported("tensor." + name + ": " + p.error());
      mark_noncontig(*p);
      mark_view(*p, owner.node);
      push(Value::tensor(*p));
      return ok();
    }
    if (name == "shape") {
      push(shape_tuple(owner.node));
      return ok();
    }
    if (name == "ndim") {
      push(Value::constant(PyRef::steal(PyLong_FromSize_t(graph_.node(owner.node).rank()))));
      return ok();
    }
    if (std::optional<Status> s = tensor_meta_attr(owner, name)) return std::move(*s);
    if (is_traced_tensor_method(name)) {  // `f = x.sub`, x.reshape(*sizes): bound to x until called
      Value bound = Value::tensor_method(name);
      bound.items.push_back(std::move(owner));
      push(std::move(bound));
      return ok();
    }
    return unsupported("tensor attribute '." + name + "' (not supported yet)");
  }
  if ((owner.kind == ValueKind::List && owner.path_slot < 0) || owner.kind == ValueKind::Dict) {
    // `push = out.append`, `key=d.get`: bound to the list or dict until called
    std::optional<Status> s = owner.kind == ValueKind::Dict ? dict_method(owner, name) : list_method(owner, name);
    if (s) {
      FJ_TRY(std::move(*s));
      Value self = pop();
      Value bound = pop();
      bound.items.push_back(std::move(self));  // a copy of the list: its changes reach it (set_list_items)
      push(std::move(bound));
      return ok();
    }
  }
  if (std::optional<Status> s = metadata_object_attr(owner, name)) return std::move(*s);
  if (std::optional<Status> s = known_attr(owner, name, /*method=*/false)) return std::move(*s);
  if (std::optional<Status> s = function_attr(owner, name)) return std::move(*s);
  if (std::optional<Status> s = class_attr(owner, name, /*method=*/false)) return std::move(*s);
  Value out;
  if (is_global_module(owner)) {
    FJ_TRY(module_attr_of(owner, name, &out));
  } else if (Status plain = attr_of(owner, name, &out); plain.failed()) {
    // Not a plain attribute: a property, a method read as a value, __getattr__.
    if (std::optional<Status> s = computed_attr(owner, name)) return std::move(*s);
    return plain;
  }
  push(std::move(out));
  return ok();
}

// obj.name of an object the trace does not follow (an opaque call's result: no path
// to guard what is read below it): read at run time by a graph break,
// getattr(obj, name), whose result the plan checks as any call's. LOAD_METHOD pushes
// NULL and the bound method, as CPython may. nullopt: not such an object, or no break here.
std::optional<Status> Tracer::opaque_attr(const Value& owner, const std::string& name, bool method) {
  if (!is_opaque(owner) || owner.reg < 0 || owner.item || can_cut(*last_ins_).failed()) return std::nullopt;
  static PyObject* s_getattr = PyObject_GetAttrString(PyImport_AddModule("builtins"), "getattr");
  if (s_getattr == nullptr) {
    guards::clear_error();
    return std::nullopt;
  }
  if (method) push(Value::null());
  Value attr = Value::constant(PyRef::steal(PyUnicode_FromString(name.c_str())));
  return break_call(Value::constant(PyRef::borrow(s_getattr)), {owner, std::move(attr)}, nullptr, /*pure=*/false,
                    "an attribute of an object the trace does not follow");
}

// lst.name of a list value, for CALL: methods that read it (call_list_method), methods
// that change a list the frame built (call_list_method, on its items) and, on a list
// attribute, list's own method called on this call's list (a graph break), whichever
// list of that length it is. nullopt: not a list, or not such a method.
std::optional<Status> Tracer::list_method(const Value& owner, const std::string& name) {
  if (owner.kind == ValueKind::Tuple && (name == "index" || name == "count" || (owner.torch_size && name == "numel"))) {
    // tuple's own readers, and torch.Size's numel()
    Value method = Value::tensor_method(name);
    push(std::move(method));
    push(owner);
    return ok();
  }
  if (owner.kind != ValueKind::List) return std::nullopt;
  const bool reads = name == "index" || name == "count" || name == "copy";
  const bool changes = name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "clear" ||
                       name == "reverse" || name == "sort";
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name.c_str()));
  PyObject* descr = key ? _PyType_Lookup(&PyList_Type, key.get()) : nullptr;
  if (owner.path_slot >= 0 && !reads) {
    if (descr == nullptr) return unsupported("list has no method '" + name + "' (CPython raises)");
    push(Value::constant(PyRef::borrow(descr)));
  } else if (reads || (changes && is_traced_list(owner))) {
    Value method = Value::tensor_method(name);
    method.obj = PyRef::borrow(descr);
    push(std::move(method));
  } else {
    return std::nullopt;
  }
  push(owner);
  return ok();
}

// (owner -- method_or_NULL, self_or_value)
Status Tracer::op_load_method(const Instruction& ins) {
  const std::string name = FJ_TRY(guards::utf8_of(PyTuple_GET_ITEM(cur_.co->co_names, ins.arg)));
  return load_method(pop(), name);
}

// (owner -- method_or_NULL, self_or_value), for LOAD_METHOD and for handlers (methodcaller).
Status Tracer::load_method(Value owner, const std::string& name) {
  if (owner.kind == ValueKind::Object || (owner.kind == ValueKind::Tuple && owner.obj && is_namedtuple_class(owner.obj.get()))) {
    return object_attr(owner, name, /*method=*/true);
  }
  if (is_super(owner)) return super_attr(owner, name, /*method=*/true);
  if (owner.kind == ValueKind::Array) return array_attr(owner, name, /*method=*/true);
  if (unbound_tensor_method(owner, name, /*method=*/true)) return ok();
  if (std::optional<Status> s = autograd_attr(owner, name, /*method=*/true)) return std::move(*s);
  if (std::optional<Status> s = opaque_attr(owner, name, /*method=*/true)) return std::move(*s);
  if (std::optional<Status> s = known_attr(owner, name, /*method=*/true)) return std::move(*s);
  if (is_number(owner)) return unsupported("method '." + name + "()' of a Python number");
  if (owner.kind == ValueKind::Tensor) {
    if (!is_traced_tensor_method(name)) return unsupported("tensor method '." + name + "()' (not supported yet)");
    push(Value::tensor_method(name));
    push(std::move(owner));
    return ok();
  }
  if (std::optional<Status> s = list_method(owner, name)) return std::move(*s);
  if (std::optional<Status> s = dict_method(owner, name)) return std::move(*s);
  Value out;
  if (is_global_module(owner)) {
    FJ_TRY(module_attr_of(owner, name, &out));
    push(Value::null());
    push(std::move(out));
    return ok();
  }
  if (owner.kind == ValueKind::Const && (name == "get" || name == "keys" || name == "values" || name == "items") &&
      is_path_dict(owner)) {
    Value method = Value::tensor_method(name);  // call_dict_method answers it by path
    PyRef key = PyRef::steal(PyUnicode_InternFromString(name.c_str()));
    method.obj = PyRef::borrow(_PyType_Lookup(&PyDict_Type, key.get()));
    push(std::move(method));
    push(std::move(owner));
    return ok();
  }
  if (std::optional<Status> s = class_attr(owner, name, /*method=*/true)) return std::move(*s);
  if (owner.kind == ValueKind::Const && Py_IS_TYPE(owner.obj.get(), &PyProperty_Type)) {  // prop.fget(obj)
    if (std::optional<Status> s = function_attr(owner, name); s && s->ok()) {
      Value got = pop();
      push(Value::null());
      push(std::move(got));
      return ok();
    }
  }
  // A method of the object's class: (function, self), traced by inlining the function.
  if (owner.kind == ValueKind::Const && !owner.fresh) {
    PyObject* obj = owner.obj.get();
    PyRef key = PyRef::steal(PyUnicode_InternFromString(name.c_str()));
    PyObject* fn = _PyType_Lookup(Py_TYPE(obj), key.get());
    PyObject** dictptr = _PyObject_GetDictPtr(obj);
    const bool shadowed = dictptr && *dictptr && PyDict_GetItemWithError(*dictptr, key.get()) != nullptr;
    guards::clear_error();
    guards::PathRoot root;
    PyRef holder;
    if (fn != nullptr && PyFunction_Check(fn) && !shadowed && guards::generic_getattribute(Py_TYPE(obj)) &&
        path_root(owner, &root, &holder)) {
      guards().add_path_method(source_text(owner.source), root, owner.source.attrs, name, fn);
      push(Value::constant(PyRef::borrow(fn)));
      push(std::move(owner));
      return ok();
    }
  }
  // A method of a builtin type (log.append): (method descriptor, self), for a call
  // that becomes a graph break (inside an inlined call, a break of the call at the
  // frame's top). The type's method is guarded.
  if (owner.kind == ValueKind::Const && !owner.fresh && !st_.fullgraph) {
    PyObject* obj = owner.obj.get();
    PyRef key = PyRef::steal(PyUnicode_InternFromString(name.c_str()));
    PyObject* fn = _PyType_Lookup(Py_TYPE(obj), key.get());
    guards::PathRoot root;
    PyRef holder;
    if (fn != nullptr && Py_IS_TYPE(fn, &PyMethodDescr_Type) && !(Py_TYPE(obj)->tp_flags & Py_TPFLAGS_HEAPTYPE) &&
        _PyObject_GetDictPtr(obj) == nullptr && path_root(owner, &root, &holder)) {
      guards().add_path_method(source_text(owner.source), root, owner.source.attrs, name, fn);
      push(Value::constant(PyRef::borrow(fn)));
      push(std::move(owner));
      return ok();
    }
  }
  FJ_TRY(attr_of(owner, name, &out));
  push(Value::null());
  push(std::move(out));
  return ok();
}

namespace {

// The Python object a value built only of constants stands for (a tuple or dict whose
// items are constants): null when any part is traced (a tensor, a symbolic number),
// opaque or made in the frame.
PyRef constant_object(const Value& v) {
  if (v.kind == ValueKind::Const) return v.opaque || v.fresh ? PyRef() : v.obj;
  if (v.kind != ValueKind::Tuple && v.kind != ValueKind::Dict) return PyRef();
  std::vector<PyRef> items;
  for (const Value& item : v.items) {
    items.push_back(constant_object(item));
    if (!items.back()) return PyRef();
  }
  if (v.kind == ValueKind::Tuple) {
    PyRef t = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(items.size())));
    for (size_t k = 0; t && k < items.size(); ++k) PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(k), items[k].release());
    return t;
  }
  PyRef d = PyRef::steal(PyDict_New());
  for (size_t k = 0; d && k + 1 < items.size(); k += 2) {
    if (PyDict_SetItem(d.get(), items[k].get(), items[k + 1].get()) < 0) d = PyRef();
  }
  return d;
}

}  // namespace

// (defaults? kwdefaults? annotations? cells? code -- function): a nested function.
// Its calls are inlined; it must not escape, since eager makes a new one on every
// call. Constant defaults are set on the function object; traced ones (a symbolic
// number, a tensor) are kept for its calls to bind (made_defaults_). Annotations must
// be constants.
Status Tracer::op_make_function(const Instruction& ins) {
  Value code = pop();
  if (code.kind != ValueKind::Const || !PyCode_Check(code.obj.get())) return unsupported("MAKE_FUNCTION of a non-code value");
  PyRef closure;
  if (ins.arg & 0x08) {  // a tuple of cells from LOAD_CLOSURE
    Value cells = pop();
    if (cells.kind != ValueKind::Tuple) return unsupported("a closure that is not a tuple of cells");
    closure = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(cells.items.size())));
    for (size_t k = 0; k < cells.items.size(); ++k) {
      const Value& c = cells.items[k];
      if (c.kind != ValueKind::Const || !traced_cells_.count(c.obj.get())) return unsupported("a closure over cells of another frame");
      PyTuple_SET_ITEM(closure.get(), static_cast<Py_ssize_t>(k), Py_NewRef(c.obj.get()));
    }
  }
  PyRef annotations;
  if ((ins.arg & 0x04) && !(annotations = constant_object(pop()))) {
    return unsupported("a nested function whose annotations are not constants");
  }
  Value traced[2];  // keyword defaults, defaults: in the order they are popped
  PyRef parts[2];
  for (int k = 0; k < 2; ++k) {
    if (!(ins.arg & (0x02 >> k))) continue;
    traced[k] = pop();
    parts[k] = constant_object(traced[k]);
    if (parts[k]) {
      traced[k] = Value();
    } else if (traced[k].kind != (k == 0 ? ValueKind::Dict : ValueKind::Tuple)) {
      return unsupported("a nested function whose defaults are neither a tuple nor a dict");
    }
    bool shared = false;  // a list or dict inside a default is shared by every call
    std::vector<Value*> roots{&traced[k]};
    walk_values(roots, [&](Value& d) { shared |= &d != &traced[k] && (d.kind == ValueKind::List || d.kind == ValueKind::Dict); });
    if (shared) return unsupported("a nested function with a mutable default");
  }
  PyRef fn = PyRef::steal(PyFunction_New(code.obj.get(), cur_.globals));
  if (!fn || (closure && PyFunction_SetClosure(fn.get(), closure.get()) < 0) ||
      (parts[0] && PyFunction_SetKwDefaults(fn.get(), parts[0].get()) < 0) ||
      (parts[1] && PyFunction_SetDefaults(fn.get(), parts[1].get()) < 0)) {
    guards::clear_error();
    return unsupported("cannot create the nested function");
  }
  if (annotations) {  // CPython stores the (name, value, ...) tuple; __annotations__ makes the dict
    Py_XSETREF(reinterpret_cast<PyFunctionObject*>(fn.get())->func_annotations, annotations.release());
  }
  if (traced[0].kind != ValueKind::Null || traced[1].kind != ValueKind::Null) {
    made_defaults_[fn.get()] = MadeDefaults{fn, std::move(traced[1]), std::move(traced[0])};
  }
  Value v = Value::constant(std::move(fn));
  v.fresh = true;
  push(std::move(v));
  return ok();
}

// ( -- NULL)
Status Tracer::op_push_null(const Instruction&) {
  push(Value::null());
  return ok();
}

// ( -- )
Status Tracer::op_kw_names(const Instruction& ins) {
  cur_.fs->kw_names = PyRef::borrow(PyTuple_GET_ITEM(cur_.co->co_consts, ins.arg));
  return ok();
}

// (method_or_NULL, callable_or_self, args[argc] -- result)

}  // namespace fj::interp

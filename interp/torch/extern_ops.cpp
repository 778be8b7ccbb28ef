// Extern calls: a torch function that the tracer does not lower becomes one ExternCall
// node (jit/ir/extern_fn.h) that calls the function itself at run time, while the ops
// around it stay in the graph. Its dtype and sizes come from a run on meta tensors
// (py/framejit/extern.py); its operands reach torch through DLPack, without a copy.
#include "interp/trace/tracer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "guards/py_errors.h"
#include "guards/py_text.h"
#include "interp/runtime/plan.h"

namespace fj::interp {
namespace {

using jit::SymExpr;

// Registered by framejit's Python side at import (set_extern_helpers).
struct ExternHelpers {
  PyObject* reason = nullptr;       // framejit.extern.extern_reason
  PyObject* meta_call = nullptr;    // framejit.extern.meta_call
  PyObject* vjp = nullptr;          // framejit.extern.vjp
  PyObject* from_dlpack = nullptr;  // torch.from_dlpack
};
ExternHelpers g_helpers;

// ---- DLPack (the stable C ABI that torch.from_dlpack reads) ----
struct DLDevice {
  int32_t device_type;  // 1: CPU
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};

// The memory behind one DLManagedTensor: its sizes and strides.
struct Wrapped {
  DLManagedTensor m;
  std::vector<int64_t> sizes, strides;
};

DLDataType dl_dtype(jit::DType d) {
  const auto bits = static_cast<uint8_t>(jit::dtype_size(d) * 8);
  switch (d) {
    case jit::DType::Bool: return {6, 8, 1};
    case jit::DType::UInt8: return {1, bits, 1};
    case jit::DType::Int32:
    case jit::DType::Int64: return {0, bits, 1};
    case jit::DType::Float32:
    case jit::DType::Float64: return {2, bits, 1};
  }
  return {0, 0, 0};
}

void delete_wrapped(DLManagedTensor* m) { delete static_cast<Wrapped*>(m->manager_ctx); }

void capsule_gone(PyObject* capsule) {
  // Never consumed (torch renames a capsule it took to "used_dltensor").
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    m->deleter(m);
  }
}

// A torch tensor over the memory of `a` (no copy; it must not outlive the call).
PyRef wrap(const jit::ExternArg& a) {
  auto* w = new Wrapped{};
  w->sizes.assign(a.sizes, a.sizes + a.rank);
  w->strides.assign(a.strides, a.strides + a.rank);
  w->m.dl_tensor = DLTensor{a.data, {1, 0}, a.rank, dl_dtype(a.dtype), w->sizes.data(), w->strides.data(), 0};
  w->m.manager_ctx = w;
  w->m.deleter = delete_wrapped;
  PyRef capsule = PyRef::steal(PyCapsule_New(&w->m, "dltensor", capsule_gone));
  if (!capsule) {
    delete w;
    return {};
  }
  return PyRef::steal(PyObject_CallOneArg(g_helpers.from_dlpack, capsule.get()));
}

// A tuple or list like `seq` with item k replaced by `v` (a new object).
PyRef replaced(PyObject* seq, Py_ssize_t k, PyObject* v) {
  const bool list = PyList_Check(seq);
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyRef out = PyRef::steal(list ? PyList_New(n) : PyTuple_New(n));
  if (!out) return {};
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = Py_NewRef(i == k ? v : PySequence_Fast_GET_ITEM(seq, i));
    if (list) PyList_SET_ITEM(out.get(), i, item);
    else PyTuple_SET_ITEM(out.get(), i, item);
  }
  return out;
}

// The call's arguments: the templates with tensors[k] at slots[k].
bool fill_call(PyObject* args_t, PyObject* kwargs_t, const std::vector<ExternSlot>& slots, const std::vector<PyRef>& tensors,
          PyRef* args, PyRef* kwargs) {
  *args = replaced(args_t, -1, nullptr);
  *kwargs = kwargs_t ? PyRef::steal(PyDict_Copy(kwargs_t)) : PyRef();
  if (!*args || (kwargs_t && !*kwargs)) return false;
  for (size_t k = 0; k < slots.size(); ++k) {
    const ExternSlot& s = slots[k];
    PyObject* t = tensors[k].get();
    PyObject* old = s.key ? PyDict_GetItem(kwargs->get(), s.key.get()) : PyTuple_GET_ITEM(args->get(), s.pos);
    PyRef v = s.item < 0 ? PyRef::borrow(t) : replaced(old, s.item, t);
    if (!v) return false;
    if (s.key) {
      if (PyDict_SetItem(kwargs->get(), s.key.get(), v.get()) < 0) return false;
    } else {
      PyObject* prev = PyTuple_GET_ITEM(args->get(), s.pos);
      PyTuple_SET_ITEM(args->get(), s.pos, v.release());
      Py_DECREF(prev);
    }
  }
  return true;
}

// One torch function with its constant arguments: what an extern call and its
// gradients call. The Python objects go with the GIL held (a compiled graph may be
// dropped on a thread that does not hold it).
struct CallTemplate {
  PyRef fn, args, kwargs;
  std::vector<ExternSlot> slots;
  ~CallTemplate() {
    if (!Py_IsInitialized()) {  // the process is ending: leak rather than touch Python
      (void)fn.release(), (void)args.release(), (void)kwargs.release();
      for (ExternSlot& s : slots) (void)s.key.release();
      return;
    }
    PyGILState_STATE g = PyGILState_Ensure();
    fn = PyRef(), args = PyRef(), kwargs = PyRef();
    slots.clear();
    PyGILState_Release(g);
  }
};

// Tensors over the first `count` operands' memory.
bool wrap_all(const std::vector<jit::ExternArg>& operands, size_t count, std::vector<PyRef>* out) {
  out->reserve(count);
  for (size_t k = 0; k < count; ++k) {
    out->push_back(wrap(operands[k]));
    if (!out->back()) return false;
  }
  return true;
}

// Writes tensor `r` into `result` when it has the result's dtype and sizes (as the
// trace saw them); false otherwise or when the copy raised.
bool store(PyObject* r, const jit::ExternArg& result) {
  Expected<guards::TensorMeta> m = guards::tensor_meta(r);
  if (m.failed() || m->rank != result.rank || m->dtype != torch_dtype(result.dtype) ||
      !std::equal(result.sizes, result.sizes + result.rank, m->sizes.begin())) {
    return false;
  }
  PyRef out = wrap(result);
  static PyObject* s_copy = PyUnicode_InternFromString("copy_");
  return out && PyRef::steal(PyObject_CallMethodOneArg(out.get(), s_copy, r));
}

// Runs `body` with the GIL; a Python error it leaves is cleared (the frame then runs
// in CPython, where eager raises it again).
template <typename F>
bool with_gil(F&& body) noexcept {
  PyGILState_STATE g = PyGILState_Ensure();
  const bool done = body();
  if (!done) guards::clear_error();
  PyGILState_Release(g);
  return done;
}

// The gradients of operands ks of a call (see jit::ExternFn::vjp): torch's backward
// of the op (framejit.extern.vjp), which writes them into the result.
class TorchVjp final : public jit::ExternFn {
 public:
  TorchVjp(std::shared_ptr<const CallTemplate> call, std::vector<size_t> ks, int output, std::string name, std::string key)
      : call_(std::move(call)), ks_(std::move(ks)), output_(output), name_(std::move(name)), key_(std::move(key)) {}
  const std::string& name() const override { return name_; }
  const std::string& key() const override { return key_; }
  std::shared_ptr<const jit::ExternFn> vjp(const std::vector<size_t>&) const override { return nullptr; }

  bool run(const std::vector<jit::ExternArg>& operands, const jit::ExternArg& result) const noexcept override {
    return with_gil([&] {
      std::vector<PyRef> tensors;
      const size_t n = operands.size() - 1;  // the last is the result's gradient
      if (!wrap_all(operands, n, &tensors)) return false;
      PyRef gy = wrap(operands[n]);
      PyRef out = wrap(result);
      PyRef xs = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(ks_.size())));
      PyRef args, kwargs;
      if (!gy || !out || !xs || !fill_call(call_->args.get(), call_->kwargs.get(), call_->slots, tensors, &args, &kwargs)) {
        return false;
      }
      for (size_t i = 0; i < ks_.size(); ++i) {
        PyTuple_SET_ITEM(xs.get(), static_cast<Py_ssize_t>(i), Py_NewRef(tensors[ks_[i]].get()));
      }
      PyRef output = PyRef::steal(PyLong_FromLong(output_));
      PyRef done = output ? PyRef::steal(PyObject_CallFunctionObjArgs(g_helpers.vjp, call_->fn.get(), args.get(),
                                                                      kwargs ? kwargs.get() : Py_None, output.get(),
                                                                      xs.get(), gy.get(), out.get(), nullptr))
                          : PyRef();
      return done && done.get() == Py_True;
    });
  }

 private:
  std::shared_ptr<const CallTemplate> call_;
  std::vector<size_t> ks_;
  int output_;  // as TorchExtern's
  std::string name_, key_;
};

// A call of a torch function on the graph's buffers. Of a function with several
// results, each result used is a node of its own that calls it and keeps its own
// (no random function has several).
class TorchExtern final : public jit::ExternFn {
 public:
  TorchExtern(std::shared_ptr<const CallTemplate> call, bool random, int output, std::string name, std::string key)
      : call_(std::move(call)), random_(random), output_(output), name_(std::move(name)), key_(std::move(key)) {}
  const std::string& name() const override { return name_; }
  const std::string& key() const override { return key_; }
  // A random op has none: its backward would draw again.
  std::shared_ptr<const jit::ExternFn> vjp(const std::vector<size_t>& ks) const override {
    if (random_) return nullptr;
    std::string tag = ".vjp";
    for (size_t k : ks) tag += (tag.size() > 4 ? "," : "") + std::to_string(k);
    return std::make_shared<TorchVjp>(call_, ks, output_, name_ + tag, key_ + tag);
  }
  bool random() const override { return random_; }

  bool run(const std::vector<jit::ExternArg>& operands, const jit::ExternArg& result) const noexcept override {
    return with_gil([&] {
      std::vector<PyRef> tensors;
      if (!wrap_all(operands, operands.size(), &tensors)) return false;
      PyRef args, kwargs;
      if (!fill_call(call_->args.get(), call_->kwargs.get(), call_->slots, tensors, &args, &kwargs)) return false;
      PyRef r = PyRef::steal(PyObject_Call(call_->fn.get(), args.get(), kwargs.get()));
      if (r && output_ >= 0) {
        if (!PyTuple_Check(r.get()) || PyTuple_GET_SIZE(r.get()) <= output_) return false;
        r = PyRef::borrow(PyTuple_GET_ITEM(r.get(), output_));
      }
      return r && store(r.get(), result);
    });
  }

 private:
  std::shared_ptr<const CallTemplate> call_;
  bool random_;
  int output_;  // -1: the function returns one tensor; else which item of its tuple
  std::string name_, key_;
};

// Dropout's noise as ATen's _dropout_impl draws it in training: a fresh tensor of the
// input's dtype (of its sizes, or [N, C, 1, ...] for feature dropout), bernoulli_(1 - p),
// then div_(1 - p). The node's result buffer is that tensor: contiguous, as eager's
// empty_like / new_empty of a contiguous input (the draw order follows the memory
// order, so the tracer takes only inputs whose eager layout is contiguous).
class DropoutNoise final : public jit::ExternFn {
 public:
  explicit DropoutNoise(double p) : p_(p) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "dropout_noise(p=%a)", p);
    key_ = buf;
  }
  const std::string& name() const override { return name_; }
  const std::string& key() const override { return key_; }
  std::shared_ptr<const jit::ExternFn> vjp(const std::vector<size_t>&) const override { return nullptr; }
  bool random() const override { return true; }

  bool run(const std::vector<jit::ExternArg>&, const jit::ExternArg& result) const noexcept override {
    return with_gil([&] {
      static PyObject* s_bernoulli = PyUnicode_InternFromString("bernoulli_");
      static PyObject* s_div = PyUnicode_InternFromString("div_");
      PyRef noise = wrap(result);
      PyRef keep = PyRef::steal(PyFloat_FromDouble(1 - p_));
      return noise && keep && PyRef::steal(PyObject_CallMethodOneArg(noise.get(), s_bernoulli, keep.get())) &&
             PyRef::steal(PyObject_CallMethodOneArg(noise.get(), s_div, keep.get()));
    });
  }

 private:
  double p_;
  std::string name_ = "dropout_noise", key_;
};

// A constant an extern call may keep: what runs no user code when torch reads it.
bool extern_constant(PyObject* o) {
  // is_foldable takes dtypes, devices and layouts too; memory formats are singletons alike.
  if (is_foldable(o) || !std::strcmp(Py_TYPE(o)->tp_name, "torch.memory_format")) return true;
  if (!PyList_CheckExact(o) && !PyTuple_CheckExact(o) && !PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(guards::torch_refs().size_type))) {
    return false;
  }
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) {
    if (!extern_constant(PySequence_Fast_GET_ITEM(o, i))) return false;
  }
  return true;
}

}  // namespace

void set_extern_helpers(PyObject* reason, PyObject* meta_call, PyObject* vjp, PyObject* from_dlpack) {
  g_helpers = ExternHelpers{Py_NewRef(reason), Py_NewRef(meta_call), Py_NewRef(vjp), Py_NewRef(from_dlpack)};
}

// Dropout's noise of the given sizes and dtype (see DropoutNoise), recorded without a
// gradient: nothing flows into it, and the product with the input differentiates as
// any product.
Expected<jit::NodeId> Tracer::dropout_noise(const jit::SymShape& sizes, jit::DType dtype, double p) {
  Expected<jit::NodeId> n = graph_.extern_call(std::make_shared<DropoutNoise>(p), {}, dtype, sizes);
  if (n) record_without_grad(*n);
  return n;
}

// One argument of an extern call as a Python object of the call's template: tensors
// become operands (None in the template, their slot recorded), int symbols their value.
Status Tracer::extern_arg(const Value& v, ExternSlot where, ExternCallArgs& call, PyRef* out) {
  if (is_tensor(v)) {
    call.operands.push_back(v.node);
    call.slots.push_back(std::move(where));
    *out = PyRef::borrow(Py_None);
    return ok();
  }
  if (v.kind == ValueKind::Const && !is_opaque(v) && !v.fresh && extern_constant(v.obj.get())) {
    *out = v.obj;
    return ok();
  }
  if (v.kind == ValueKind::Sym && v.expr.type() == jit::SymType::Int) {
    int64_t n = 0;
    FJ_TRY(specialize(v.expr, "an int argument", &n));
    *out = PyRef::steal(PyLong_FromLongLong(n));
    return *out ? ok() : Status(unsupported("out of memory"));
  }
  if ((v.kind == ValueKind::Tuple || v.kind == ValueKind::List) && where.item < 0) {
    PyRef seq = PyRef::steal(v.kind == ValueKind::List ? PyList_New(static_cast<Py_ssize_t>(v.items.size()))
                                                        : PyTuple_New(static_cast<Py_ssize_t>(v.items.size())));
    if (!seq) return unsupported("out of memory");
    for (size_t i = 0; i < v.items.size(); ++i) {
      ExternSlot inner{where.pos, where.key, static_cast<int>(i)};
      PyRef item;
      FJ_TRY(extern_arg(v.items[i], std::move(inner), call, &item));
      if (v.kind == ValueKind::List) PyList_SET_ITEM(seq.get(), static_cast<Py_ssize_t>(i), item.release());
      else PyTuple_SET_ITEM(seq.get(), static_cast<Py_ssize_t>(i), item.release());
    }
    *out = std::move(seq);
    return ok();
  }
  return unsupported("an argument " + describe(v) + " that an extern call cannot take");
}

// The dtype, sizes and layout of the call's result when its operands have the sizes
// their shapes take under `b`: a run on meta tensors (extern_sizes.cpp reads it).
Status Tracer::extern_meta(PyObject* fn, const ExternCallArgs& call, const jit::Bindings& b, ExternResult* out,
                           const std::vector<bool>& grad) {
  std::vector<std::vector<int64_t>> sizes;
  for (jit::NodeId n : call.operands) {
    const jit::Node& node = graph_.node(n);
    std::vector<int64_t>& shape = sizes.emplace_back();
    for (size_t d = 0; d < node.rank(); ++d) {
      const auto v = node.sym[d].eval(b);
      if (!v || v->index() != 0) return unsupported("a size without a value");
      shape.push_back(std::get<int64_t>(*v));
    }
  }
  return extern_meta_sized(fn, call, sizes, out, grad);
}

// What identifies a call apart from its operands: the function (by identity) and
// every constant argument, with where the operands go. The constants are what
// extern_constant takes (numbers, strings, dtypes and the like): their repr runs no
// user code. nullopt when a repr fails.
namespace {

std::optional<std::string> call_key(PyObject* fn, PyObject* args, PyObject* kwargs, const std::vector<ExternSlot>& slots) {
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(fn));
  for (PyObject* part : {args, kwargs}) {
    if (part == nullptr) continue;
    PyRef text = PyRef::steal(PyObject_Repr(part));
    if (!text) {
      guards::clear_error();
      return std::nullopt;
    }
    key += "|" + guards::utf8_lossy(text.get(), 1 << 20);
  }
  for (const ExternSlot& sl : slots) {
    key += "|" + std::to_string(sl.pos) + ":" + (sl.key ? guards::utf8_lossy(sl.key.get()) : "") + ":" +
           std::to_string(sl.item);
  }
  return key;
}

}  // namespace

// The same with each operand's sizes given.
Status Tracer::extern_meta_sized(PyObject* fn, const ExternCallArgs& call, const std::vector<std::vector<int64_t>>& sizes,
                                 ExternResult* out, const std::vector<bool>& grad) {
  std::optional<std::string> base = call_key(fn, call.args.get(), call.kwargs.get(), call.slots);
  if (!base) return extern_meta_run(fn, call, sizes, out, grad);
  std::string key = std::move(*base);
  for (size_t i = 0; i < call.operands.size(); ++i) {
    key += "|" + std::to_string(static_cast<int>(graph_.node(call.operands[i]).dtype)) +
           (i < grad.size() && grad[i] ? "g" : "");
    for (int64_t v : sizes[i]) key += "," + std::to_string(v);
  }
  if (auto found = meta_runs_.find(key); found != meta_runs_.end()) {
    if (found->second.error) return unsupported(*found->second.error);
    *out = found->second.result;
    return ok();
  }
  Status s = extern_meta_run(fn, call, sizes, out, grad);
  MetaRun& run = meta_runs_[key];
  run.fn = PyRef::borrow(fn);
  if (s.failed()) run.error = s.error();
  else run.result = *out;
  return s;
}

Status Tracer::extern_meta_run(PyObject* fn, const ExternCallArgs& call, const std::vector<std::vector<int64_t>>& sizes,
                               ExternResult* out, const std::vector<bool>& grad) {
  std::vector<PyRef> metas;
  static PyObject* s_meta = PyUnicode_InternFromString("meta");
  static PyObject* s_requires = PyUnicode_InternFromString("requires_grad_");
  bool any_grad = false;
  for (size_t i = 0; i < call.operands.size(); ++i) {
    const jit::Node& node = graph_.node(call.operands[i]);
    PyRef shape = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(sizes[i].size())));
    if (!shape) return unsupported("out of memory");
    for (size_t d = 0; d < sizes[i].size(); ++d) {
      PyTuple_SET_ITEM(shape.get(), static_cast<Py_ssize_t>(d), PyLong_FromLongLong(sizes[i][d]));
    }
    PyRef kw = PyRef::steal(Py_BuildValue("{sOsO}", "dtype", torch_dtype(node.dtype), "device", s_meta));
    PyRef args = PyRef::steal(PyTuple_Pack(1, shape.get()));
    PyRef t = kw && args ? PyRef::steal(PyObject_Call(guards::torch_refs().empty, args.get(), kw.get())) : PyRef();
    if (t && metas.size() < grad.size() && grad[metas.size()]) {
      any_grad = true;
      if (!PyRef::steal(PyObject_CallMethodNoArgs(t.get(), s_requires))) t = PyRef();
    }
    if (!t) {
      guards::clear_error();
      return unsupported("a meta tensor could not be made");
    }
    metas.push_back(std::move(t));
  }
  PyRef args, kwargs;
  if (!fill_call(call.args.get(), call.kwargs.get(), call.slots, metas, &args, &kwargs)) {
    guards::clear_error();
    return unsupported("out of memory");
  }
  PyRef r = PyRef::steal(PyObject_CallFunctionObjArgs(g_helpers.meta_call, fn, args.get(),
                                                      kwargs ? kwargs.get() : Py_None,
                                                      any_grad ? Py_True : Py_False, nullptr));
  if (!r) {
    guards::clear_error();
    return unsupported("its meta run failed");
  }
  if (PyUnicode_Check(r.get())) return unsupported(guards::utf8_lossy(r.get()));
  PyObject* results = nullptr;
  PyObject* kind = nullptr;
  int random = 0, needs_grad = 0;
  if (!PyArg_ParseTuple(r.get(), "O!pOp", &PyTuple_Type, &results, &random, &kind, &needs_grad)) {
    guards::clear_error();
    return unsupported("its meta run gave no shape");
  }
  out->tensors.clear();
  out->random = random != 0;
  out->needs_grad = needs_grad != 0;
  out->kind = kind == Py_None ? PyRef() : PyRef::borrow(kind);
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(results); ++k) {
    PyObject* sizes = nullptr;
    PyObject* dtype = nullptr;
    int contiguous = 0;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(results, k), "OO!p", &dtype, &PyTuple_Type, &sizes, &contiguous)) {
      guards::clear_error();
      return unsupported("its meta run gave no shape");
    }
    const std::optional<jit::DType> d = dtype_from_torch(dtype);
    if (!d) return unsupported("its result's dtype " + guards::describe_object(dtype) + " (not supported yet)");
    ExternResult::Tensor t{*d, {}, contiguous != 0};
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(sizes); ++i) t.sizes.push_back(PyLong_AsLongLong(PyTuple_GET_ITEM(sizes, i)));
    out->tensors.push_back(std::move(t));
  }
  return ok();
}

// A call of a torch function that jit/ does not lower, as one ExternCall node.
Status Tracer::extern_call(const CallSite& c) {
  PyObject* fn = c.callable.obj.get();
  PyRef fn_name = PyRef::steal(PyObject_GetAttrString(fn, "__name__"));
  if (!fn_name) guards::clear_error();
  const std::string name = "torch." + (fn_name ? guards::utf8_lossy(fn_name.get()) : std::string("?"));
  const size_t nkw = c.kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(c.kw_names.get())) : 0;
  const size_t npos = c.args.size() - nkw;
  ExternCallArgs call;
  call.args = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(npos)));
  if (!call.args) return unsupported("out of memory");
  for (size_t i = 0; i < npos; ++i) {
    PyRef item;
    FJ_TRY(extern_arg(c.args[i], ExternSlot{static_cast<int>(i), {}, -1}, call, &item));
    PyTuple_SET_ITEM(call.args.get(), static_cast<Py_ssize_t>(i), item.release());
  }
  if (nkw > 0) {
    call.kwargs = PyRef::steal(PyDict_New());
    if (!call.kwargs) return unsupported("out of memory");
    for (size_t k = 0; k < nkw; ++k) {
      PyObject* key = PyTuple_GET_ITEM(c.kw_names.get(), static_cast<Py_ssize_t>(k));
      PyRef item;
      FJ_TRY(extern_arg(c.args[npos + k], ExternSlot{-1, PyRef::borrow(key), -1}, call, &item));
      if (PyDict_SetItem(call.kwargs.get(), key, item.get()) < 0) {
        guards::clear_error();
        return unsupported("out of memory");
      }
    }
  }
  if (call.operands.empty()) return unsupported(name + "() without a tensor argument");
  ExternResult r;
  if (Status s = extern_meta(fn, call, hints_, &r); s.failed()) return unsupported(name + "(): " + s.error());
  if (r.random) FJ_TRY(extern_random_ok(fn, name, call));
  std::vector<jit::SymShape> sym;
  FJ_TRY(extern_sizes(fn, call, r, &sym));
  // The node's key: the function's name, then call_key.
  std::optional<std::string> called = call_key(fn, call.args.get(), call.kwargs.get(), call.slots);
  if (!called) return unsupported(name + "(): an argument has no repr");
  const std::string key = name + "@" + *called;
  auto tmpl = std::make_shared<CallTemplate>();
  tmpl->fn = PyRef::borrow(fn), tmpl->args = call.args, tmpl->kwargs = call.kwargs, tmpl->slots = call.slots;
  std::vector<Value> results;
  for (size_t k = 0; k < r.tensors.size(); ++k) {
    const int output = r.kind ? static_cast<int>(k) : -1;
    const std::string tag = output < 0 ? "" : "[" + std::to_string(k) + "]";
    auto fn_obj = std::make_shared<TorchExtern>(tmpl, r.random, output, name + tag, key + tag);
    auto node = graph_.extern_call(std::move(fn_obj), call.operands, r.tensors[k].dtype, std::move(sym[k]));
    if (!node) return unsupported(name + "(): " + node.error());
    if (!r.tensors[k].contiguous) mark_noncontig(*node);
    if (r.random) record_without_grad(*node);
    results.push_back(Value::tensor(*node));
  }
  sync_scalar_inputs();
  if (!r.kind) {
    push(std::move(results[0]));
    return ok();
  }
  Value t = Value::sequence(ValueKind::Tuple, std::move(results));
  if (r.kind.get() != reinterpret_cast<PyObject*>(&PyTuple_Type)) t.obj = r.kind;  // a torch.return_types type
  t.identity = next_identity_++;
  push(std::move(t));
  return ok();
}

// A random op is an extern call where its draws come out as eager's: its operands'
// eager layout is contiguous (the draws follow the memory order of a tensor made
// like an operand: empty_like(x).bernoulli_(...)), and its result needs no gradient
// (eager's does not: rand_like of a tensor that requires grad; else its backward would
// have to draw again). The result is then recorded without a gradient.
Status Tracer::extern_random_ok(PyObject* fn, const std::string& name, const ExternCallArgs& call) {
  std::vector<bool> grad;
  bool any = false;
  for (jit::NodeId n : call.operands) {
    if (may_be_noncontig(n) || !guard_inputs_contiguous(n)) {
      return unsupported(name + "() draws random numbers in the memory order of an operand that may be non-contiguous (not supported yet)");
    }
    grad.push_back(grad_enabled_ && node_needs_grad(n));
    any = any || grad.back();
  }
  if (!any) return ok();
  ExternResult g;
  if (Status s = extern_meta(fn, call, hints_, &g, grad); s.failed()) return unsupported(name + "(): " + s.error());
  if (g.needs_grad) {
    return unsupported(name + "() draws random numbers and its result needs a gradient (its backward would draw again; not supported)");
  }
  return ok();
}

namespace {

// torch.<name>, else the method torch.Tensor.<name> (x.repeat(2) has no function
// torch.repeat); a new reference, or null.
PyRef torch_function(const std::string& name) {
  PyObject* torch = PyImport_AddModule("torch");  // borrowed; imported long before
  PyRef fn = torch ? PyRef::steal(PyObject_GetAttrString(torch, name.c_str())) : PyRef();
  if (!fn) {
    guards::clear_error();
    fn = PyRef::steal(PyObject_GetAttrString(guards::torch_refs().tensor_type, name.c_str()));
    if (!fn || Py_TYPE(fn.get()) != &PyMethodDescr_Type) fn = PyRef();
  }
  if (!fn) guards::clear_error();
  return fn;
}

bool extern_candidate(PyObject* fn) {
  if (!(PyCFunction_Check(fn) || Py_TYPE(fn) == &PyMethodDescr_Type) || g_helpers.reason == nullptr) return false;
  PyRef why = PyRef::steal(PyObject_CallOneArg(g_helpers.reason, fn));
  if (!why) guards::clear_error();
  return why && why.get() == Py_None;
}

}  // namespace

bool extern_method(const std::string& name) {
  PyRef fn = torch_function(name);
  return fn && extern_candidate(fn.get());
}

std::optional<Status> Tracer::call_extern_method(const CallSite& c) {
  PyRef fn = torch_function(c.callable.method);
  if (!fn) return std::nullopt;
  CallSite as_function = c;
  as_function.callable = Value::constant(std::move(fn));
  const bool candidate = extern_candidate(as_function.callable.obj.get());
  Error why{"." + c.callable.method + "() of a tensor (no graph op)"};
  if (candidate) {
    Status s = extern_call(as_function);
    if (s.ok() || call_raised_) return s;
    why = s.take_error();
  }
  // Not an op a graph can call (x.tolist(), x.numpy()): torch.Tensor's own method
  // runs on the tensor as a graph break.
  PyRef method = PyRef::steal(PyObject_GetAttrString(guards::torch_refs().tensor_type, c.callable.method.c_str()));
  if (!method || Py_TYPE(method.get()) != &PyMethodDescr_Type) {
    guards::clear_error();
    return candidate ? std::optional<Status>(Status(std::move(why))) : std::nullopt;
  }
  as_function.callable = Value::constant(std::move(method));
  as_function.can_break = can_cut(*c.ins).ok();
  return opaque_call(as_function, std::move(why), c.args);
}

std::optional<Status> Tracer::call_extern(const CallSite& c) {
  if (c.callable.kind != ValueKind::Const || is_opaque(c.callable) || !extern_candidate(c.callable.obj.get())) {
    return std::nullopt;
  }
  Status s = extern_call(c);
  return s.failed() ? opaque_call(c, s.take_error(), c.args) : s;
}

}  // namespace fj::interp

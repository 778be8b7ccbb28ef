// Running a plan on a cache hit: fetch argument buffers, allocate outputs with
// torch, run the compiled graph, rebuild the frame's return value.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include <sys/mman.h>

#include "guards/py_text.h"
#include "interp/code_state.h"
#include "interp/runtime/plan.h"
#include "jit/log.h"

namespace fj::interp {
namespace {

// Output elements from which a graph runs with the GIL released: the size from which
// the CPU backend splits a loop across threads, where a run takes tens of microseconds.
constexpr int64_t kReleaseGilElements = 64 * 1024;

PyObject* dtype_kwargs(jit::DType d) {
  static PyObject* kw[6] = {};
  const auto i = static_cast<size_t>(d);
  if (kw[i] == nullptr) {
    kw[i] = PyDict_New();
    PyDict_SetItemString(kw[i], "dtype", torch_dtype(d));
  }
  return kw[i];
}

}  // namespace

void* data_ptr(PyObject* tensor) {
  static PyObject* name = PyUnicode_InternFromString("data_ptr");
  if (Py_TYPE(tensor) != reinterpret_cast<PyTypeObject*>(guards::torch_refs().tensor_type)) {
    guards::TensorMeta m;  // a NumPy array argument: where its buffer starts
    void* data = nullptr;
    if (guards::read_ndarray_meta(tensor, &m, &data)) return data;
  }
  PyObject* p = PyObject_CallMethodNoArgs(tensor, name);
  if (p == nullptr) return nullptr;
  void* out = PyLong_AsVoidPtr(p);
  Py_DECREF(p);
  return out;
}

std::vector<int64_t> contiguous_strides(const jit::Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * std::max<int64_t>(shape[d], 1);
  return strides;
}

// A large output is fresh memory that the kernel touches first: faulting it in
// 2 MiB pages instead of 4 KiB ones saves most of that first touch (the memory stays
// torch's; only the aligned interior of the buffer is advised).
void advise_huge_pages(void* p, int64_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{1} << 21;
  if (bytes < static_cast<int64_t>(4 * kHuge)) return;
  const auto lo = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const auto hi = (reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes)) & ~(kHuge - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

PyRef empty_args_for(const jit::Shape& shape) {
  PyObject* sizes = PyTuple_New(static_cast<Py_ssize_t>(shape.size()));
  for (size_t d = 0; d < shape.size(); ++d) PyTuple_SET_ITEM(sizes, d, PyLong_FromLongLong(shape[d]));
  PyRef args = PyRef::steal(PyTuple_Pack(1, sizes));
  Py_DECREF(sizes);
  return args;
}

OutputSpec output_spec(const jit::Node& n) {
  OutputSpec spec;
  spec.dtype = n.dtype;
  spec.sym = n.sym;
  spec.is_static = std::all_of(n.sym.begin(), n.sym.end(), [](const jit::SymExpr& e) { return e.is_constant(); });
  if (spec.is_static) {
    spec.shape = *jit::concrete(n.sym);
    spec.strides = contiguous_strides(spec.shape);
    spec.empty_args = empty_args_for(spec.shape);
  }
  return spec;
}

PyObject* torch_dtype(jit::DType d) {
  const auto& r = guards::torch_refs();
  switch (d) {
    case jit::DType::Bool: return r.bool_;
    case jit::DType::UInt8: return r.uint8;
    case jit::DType::Int32: return r.int32;
    case jit::DType::Int64: return r.int64;
    case jit::DType::Float32: return r.float32;
    case jit::DType::Float64: return r.float64;
  }
  return nullptr;
}

std::optional<jit::DType> dtype_from_torch(PyObject* dtype) {
  for (jit::DType d : {jit::DType::Bool, jit::DType::UInt8, jit::DType::Int32, jit::DType::Int64,
                       jit::DType::Float32, jit::DType::Float64}) {
    if (dtype != nullptr && dtype == torch_dtype(d)) return d;
  }
  return std::nullopt;
}

double scalar_slot(const jit::SymValue& v) {
  int64_t bits;
  switch (v.index()) {
    case 0: bits = std::get<int64_t>(v); break;
    case 1: return std::get<double>(v);
    default: bits = std::get<bool>(v) ? 1 : 0; break;
  }
  double out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

jit::ScalarKind scalar_kind_of(const jit::SymValue& v) {
  switch (v.index()) {
    case 0: return jit::ScalarKind::Int;
    case 1: return jit::ScalarKind::Float;
    default: return jit::ScalarKind::Bool;
  }
}

double sym_value_to_double(const jit::SymValue& v) {
  switch (v.index()) {
    case 0: return static_cast<double>(std::get<int64_t>(v));
    case 1: return std::get<double>(v);
    default: return std::get<bool>(v) ? 1.0 : 0.0;
  }
}

PyObject* sym_value_to_python(const jit::SymValue& v) {
  switch (v.index()) {
    case 0: return PyLong_FromLongLong(std::get<int64_t>(v));
    case 1: return PyFloat_FromDouble(std::get<double>(v));
    default: return PyBool_FromLong(std::get<bool>(v));
  }
}

bool eval_scalars(const Plan& plan, const jit::Bindings& b, std::vector<double>* out) {
  out->clear();
  for (const jit::SymExpr& e : plan.scalar_inputs) {
    const auto v = e.eval(b);
    if (!v) return false;
    out->push_back(scalar_slot(*v));
  }
  for (const jit::SymExpr& e : plan.must_evaluate) {
    if (!e.eval(b)) return false;
  }
  return true;
}

// An object of a plain class made in the frame (object.__new__, then its attributes
// in order), or tensor.name read as a value (a bound method).
// A function the frame made (PlanValue::Kind::Function), made as MAKE_FUNCTION makes it;
// remembered before its closure is built, which may hold it.
static PyObject* build_function(const PlanValue& v, PlanRun& run, const std::vector<PyRef>& outs,
                                std::vector<PyObject*>& memo) {
  auto* traced = reinterpret_cast<PyFunctionObject*>(v.obj.get());
  PyRef f = PyRef::steal(PyFunction_New(traced->func_code, traced->func_globals));
  if (!f) return nullptr;
  if (v.memo >= 0) memo[static_cast<size_t>(v.memo)] = f.get();
  PyObject* own[2] = {traced->func_defaults, traced->func_kwdefaults};
  for (size_t k = 0; k < 2; ++k) {
    PyRef d = v.items[k].kind == PlanValue::Kind::Null ? PyRef::borrow(own[k]) : PyRef::steal(build_value(v.items[k], run, outs, memo));
    if (v.items[k].kind != PlanValue::Kind::Null && !d) return nullptr;
    if (d && (k == 0 ? PyFunction_SetDefaults(f.get(), d.get()) : PyFunction_SetKwDefaults(f.get(), d.get())) < 0) return nullptr;
  }
  if (v.items.size() > 2) {
    PyRef closure = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(v.items.size() - 2)));
    for (size_t k = 2; closure && k < v.items.size(); ++k) {
      PyObject* cell = build_value(v.items[k], run, outs, memo);
      if (cell == nullptr) return nullptr;
      PyTuple_SET_ITEM(closure.get(), static_cast<Py_ssize_t>(k - 2), cell);
    }
    if (!closure || PyFunction_SetClosure(f.get(), closure.get()) < 0) return nullptr;
  }
  if (traced->func_annotations != nullptr) {
    Py_XSETREF(reinterpret_cast<PyFunctionObject*>(f.get())->func_annotations, Py_NewRef(traced->func_annotations));
  }
  return f.release();
}

// A new cell (PlanValue::Kind::Cell), remembered before its content is built.
static PyObject* build_cell(const PlanValue& v, PlanRun& run, const std::vector<PyRef>& outs, std::vector<PyObject*>& memo) {
  PyRef cell = PyRef::steal(PyCell_New(nullptr));
  if (!cell) return nullptr;
  if (v.memo >= 0) memo[static_cast<size_t>(v.memo)] = cell.get();
  if (v.items[0].kind != PlanValue::Kind::Null) {
    PyRef x = PyRef::steal(build_value(v.items[0], run, outs, memo));
    if (!x || PyCell_Set(cell.get(), x.get()) < 0) return nullptr;
  }
  return cell.release();
}

static PyObject* build_object(const PlanValue& v, PlanRun& run, const std::vector<PyRef>& outs,
                              std::vector<PyObject*>& memo) {
  if (v.kind == PlanValue::Kind::Method) {
    PyObject* self = build_value(v.items[0], run, outs, memo);
    PyObject* m = self ? PyObject_GetAttr(self, v.obj.get()) : nullptr;
    Py_XDECREF(self);
    return m;
  }
  static PyObject* no_args = PyTuple_New(0);
  auto* type = reinterpret_cast<PyTypeObject*>(v.obj.get());
  PyObject* o = PyBaseObject_Type.tp_new(type, no_args, nullptr);
  if (o == nullptr) return nullptr;
  if (v.memo >= 0) memo[static_cast<size_t>(v.memo)] = o;
  for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
    PyObject* x = build_value(v.items[i + 1], run, outs, memo);
    const int rc = x ? PyObject_GenericSetAttr(o, v.items[i].obj.get(), x) : -1;
    Py_XDECREF(x);
    if (rc < 0) {
      Py_DECREF(o);
      return nullptr;
    }
  }
  if (v.reg >= 0) set_reg(run, v.reg, PyRef::borrow(o));
  return o;
}

// A result with stores after it (target[key] = value, in order: a global, an argument
// list's items). The result first: the stored values may repeat its parts.
PyObject* build_stores(const PlanValue& v, PlanRun& run, const std::vector<PyRef>& outs, std::vector<PyObject*>& memo) {
  PyRef result = PyRef::steal(build_value(v.items[0], run, outs, memo));
  for (size_t i = 1; result && i + 2 < v.items.size(); i += 3) {
    PyRef target = PyRef::steal(build_value(v.items[i], run, outs, memo));
    PyRef x = target ? PyRef::steal(build_value(v.items[i + 2], run, outs, memo)) : PyRef();
    if (!x || PyObject_SetItem(target.get(), v.items[i + 1].obj.get(), x.get()) < 0) return nullptr;
  }
  return result.release();
}

PyObject* build_value(const PlanValue& v, PlanRun& run, const std::vector<PyRef>& outs,
                      std::vector<PyObject*>& memo) {
  const guards::CallInputs& in = run.in;
  switch (v.kind) {
    case PlanValue::Kind::Repeat:
      return Py_NewRef(memo[static_cast<size_t>(v.index)]);
    case PlanValue::Kind::Sym: {
      const auto value = v.expr.eval(run.b);
      if (!value) {
        PyErr_SetString(PyExc_RuntimeError, "framejit: a guarded scalar expression has no value");
        return nullptr;
      }
      PyObject* number = sym_value_to_python(*value);
      if (number == nullptr || !v.obj) return number;
      PyObject* typed = PyObject_CallOneArg(v.obj.get(), number);  // a NumPy scalar: np.float64(x)
      Py_DECREF(number);
      return typed;
    }
    case PlanValue::Kind::GraphOutput:
      return Py_NewRef(outs[static_cast<size_t>(v.index)].get());
    case PlanValue::Kind::Item: {  // a Python number read from a 0-d tensor
      static PyObject* item = PyUnicode_InternFromString("item");
      const bool in_reg = v.reg >= 0;
      if (in_reg && (static_cast<size_t>(v.reg) >= run.regs.size() || !run.regs[static_cast<size_t>(v.reg)])) {
        PyErr_SetString(PyExc_RuntimeError, "framejit: a plan register is empty (internal error)");
        return nullptr;
      }
      PyObject* t = in_reg ? run.regs[static_cast<size_t>(v.reg)].get() : outs[static_cast<size_t>(v.index)].get();
      return PyObject_CallMethodNoArgs(t, item);
    }
    case PlanValue::Kind::Arg:
      return Py_NewRef(in.args[v.index]);
    case PlanValue::Kind::PathTensor:
      return Py_NewRef(in.path_tensors[static_cast<size_t>(v.index)].get());
    case PlanValue::Kind::Reg: {
      const auto r = static_cast<size_t>(v.index);
      if (r >= run.regs.size() || !run.regs[r]) {
        PyErr_SetString(PyExc_RuntimeError, "framejit: a plan register is empty (internal error)");
        return nullptr;
      }
      return Py_NewRef(run.regs[r].get());
    }
    case PlanValue::Kind::Null:
      PyErr_SetString(PyExc_RuntimeError, "framejit: NULL outside a frame's stack (internal error)");
      return nullptr;
    case PlanValue::Kind::View:
      return build_view(v, run, outs, memo);
    case PlanValue::Kind::Stores:
      return build_stores(v, run, outs, memo);
    case PlanValue::Kind::Const:
      return Py_NewRef(v.obj.get());
    case PlanValue::Kind::Size: {
      PlanValue as_tuple = v;
      as_tuple.kind = PlanValue::Kind::Tuple;
      PyObject* t = build_value(as_tuple, run, outs, memo);
      if (t == nullptr) return nullptr;
      PyObject* size = PyObject_CallOneArg(guards::torch_refs().size_type, t);
      Py_DECREF(t);
      return size;
    }
    case PlanValue::Kind::Iter: {
      if (v.index >= 0) {  // an iterator of the list items[0], advanced `index` items
        PyObject* l = build_value(v.items[0], run, outs, memo);
        PyObject* it = l ? PyObject_GetIter(l) : nullptr;
        Py_XDECREF(l);
        for (int k = 0; it != nullptr && k < v.index; ++k) {
          PyObject* skipped = PyIter_Next(it);
          if (skipped == nullptr) break;  // shorter now: exhausted, as CPython's would be
          Py_DECREF(skipped);
        }
        if (it != nullptr && PyErr_Occurred()) Py_CLEAR(it);
        return it;
      }
      PlanValue as_list = v;
      as_list.kind = PlanValue::Kind::List;
      PyObject* l = build_value(as_list, run, outs, memo);
      if (l == nullptr) return nullptr;
      PyObject* it = PyObject_GetIter(l);
      Py_DECREF(l);
      return it;
    }
    case PlanValue::Kind::Dict: {  // obj: what makes an empty one of its class (OrderedDict...)
      PyObject* d = v.obj ? PyObject_CallNoArgs(v.obj.get()) : PyDict_New();
      if (d == nullptr) return nullptr;
      for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
        PyObject* k = build_value(v.items[i], run, outs, memo);
        PyObject* x = k ? build_value(v.items[i + 1], run, outs, memo) : nullptr;
        const int rc = x ? (v.obj ? PyObject_SetItem(d, k, x) : PyDict_SetItem(d, k, x)) : -1;
        Py_XDECREF(k);
        Py_XDECREF(x);
        if (rc < 0) {
          Py_DECREF(d);
          return nullptr;
        }
      }
      if (v.memo >= 0) memo[static_cast<size_t>(v.memo)] = d;
      if (v.reg >= 0) set_reg(run, v.reg, PyRef::borrow(d));
      return d;
    }
    case PlanValue::Kind::Method:
    case PlanValue::Kind::Object:
      return build_object(v, run, outs, memo);
    case PlanValue::Kind::Function:
      return build_function(v, run, outs, memo);
    case PlanValue::Kind::Cell:
      return build_cell(v, run, outs, memo);
    case PlanValue::Kind::Tuple:
    case PlanValue::Kind::List: {
      const auto n = static_cast<Py_ssize_t>(v.items.size());
      const bool tuple = v.kind == PlanValue::Kind::Tuple;
      PyObject* seq = tuple ? PyTuple_New(n) : PyList_New(n);
      if (seq == nullptr) return nullptr;
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* item = build_value(v.items[static_cast<size_t>(i)], run, outs, memo);
        if (item == nullptr) {
          Py_DECREF(seq);
          return nullptr;
        }
        if (tuple) PyTuple_SET_ITEM(seq, i, item); else PyList_SET_ITEM(seq, i, item);
      }
      if (tuple && v.obj) {  // a torch.return_types structseq or a named tuple, built from the tuple
        static PyObject* fields = PyUnicode_InternFromString("_fields");
        auto* type = reinterpret_cast<PyTypeObject*>(v.obj.get());
        PyObject* typed = nullptr;
        if (_PyType_Lookup(type, fields) != nullptr) {  // tuple.__new__(cls, seq), as its _make does
          PyObject* args = PyTuple_Pack(1, seq);
          typed = args != nullptr ? PyTuple_Type.tp_new(type, args, nullptr) : nullptr;
          Py_XDECREF(args);
        } else {
          typed = PyObject_CallOneArg(v.obj.get(), seq);
        }
        Py_DECREF(seq);
        seq = typed;
        if (seq == nullptr) return nullptr;
      }
      if (v.memo >= 0) memo[static_cast<size_t>(v.memo)] = seq;  // borrowed: the result holds it
      if (v.reg >= 0) set_reg(run, v.reg, PyRef::borrow(seq));
      return seq;
    }
  }
  return nullptr;
}

GraphRun run_graph(const jit::CompiledGraph& g, const std::vector<InputRef>& graph_args,
                   const std::vector<OutputSpec>& outputs, const std::vector<double>& scalars, PlanRun& run,
                   std::vector<PyRef>* outs) {
  // Sizes past int64 (jit/ir/size_check.h) are checked before anything is allocated:
  // eager raises its own error (Storage size / Stride calculation overflowed, numel).
  if (!g.sizes_fit(run.b)) return GraphRun::RunInCPython;
  const guards::CallInputs& in = run.in;
  std::vector<jit::TensorArg> args;
  args.reserve(graph_args.size());
  std::vector<guards::TensorMeta> reg_metas;  // registers' metadata, read now
  reg_metas.reserve(graph_args.size());
  for (const InputRef& ref : graph_args) {
    const auto k = static_cast<size_t>(ref.index);
    PyObject* t = nullptr;
    const guards::TensorMeta* m = nullptr;
    switch (ref.kind) {
      case InputRef::Kind::Arg: t = in.args[ref.index]; m = &*in.metas[k]; break;
      case InputRef::Kind::Path: t = in.path_tensors[k].get(); m = &in.path_metas[k]; break;
      case InputRef::Kind::Reg: {
        t = k < run.regs.size() ? run.regs[k].get() : nullptr;
        std::string why;
        reg_metas.emplace_back();
        if (t == nullptr || !guards::read_tensor_meta(t, &reg_metas.back(), &why)) {
          PyErr_Format(PyExc_RuntimeError, "framejit: a plan register holds no readable tensor (%s)", why.c_str());
          return GraphRun::PythonError;
        }
        m = &reg_metas.back();
        break;
      }
    }
    void* p = data_ptr(t);
    if (p == nullptr && PyErr_Occurred()) return GraphRun::PythonError;
    args.push_back(jit::TensorArg{p, m->sizes.data(), m->strides.data(), m->rank});
  }
  std::vector<jit::TensorArg> results;
  outs->reserve(outputs.size());
  // Sizes of outputs with symbolic shapes, for this call (kept alive until run).
  std::vector<std::pair<jit::Shape, std::vector<int64_t>>> dynamic(outputs.size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    const OutputSpec& o = outputs[k];
    const jit::Shape* shape = &o.shape;
    const std::vector<int64_t>* strides = &o.strides;
    PyRef eargs = o.empty_args;
    if (!o.is_static) {
      auto& [sizes, st] = dynamic[k];
      for (const jit::SymExpr& e : o.sym) {
        const auto v = e.eval(run.b);
        if (!v || v->index() != 0) {
          PyErr_SetString(PyExc_RuntimeError, "framejit: an output size has no value");
          return GraphRun::PythonError;
        }
        sizes.push_back(std::get<int64_t>(*v));
      }
      st = contiguous_strides(sizes);
      eargs = empty_args_for(sizes);
      shape = &sizes;
      strides = &st;
    }
    PyObject* t = PyObject_Call(guards::torch_refs().empty, eargs.get(), dtype_kwargs(o.dtype));
    if (t == nullptr) return GraphRun::PythonError;
    outs->push_back(PyRef::steal(t));
    void* p = data_ptr(t);
    if (p == nullptr && PyErr_Occurred()) return GraphRun::PythonError;
    results.push_back(jit::TensorArg{p, shape->data(), strides->data(), static_cast<int>(shape->size())});
    int64_t bytes = static_cast<int64_t>(jit::dtype_size(o.dtype));
    for (int64_t v : *shape) bytes *= v;
    advise_huge_pages(p, bytes);
  }
  // A large graph runs without the GIL so that other Python threads progress (as
  // torch's own kernels let them); a small one keeps it, since releasing and
  // retaking the GIL would cost more than its loop. The frame, the registers and
  // CallInputs::path_tensors keep the inputs alive (another thread may rebind
  // `self.weight` meanwhile) and `outs` the outputs; the kernels touch no Python object.
  int64_t work = 0;
  for (const jit::TensorArg& r : results) {
    int64_t n = 1;
    for (int d = 0; d < r.rank; ++d) n *= r.sizes[d];
    work += n;
  }
  PyThreadState* released = work >= kReleaseGilElements ? PyEval_SaveThread() : nullptr;
  const int64_t status = g.run(args, results, scalars.data(), &run.b);
  if (released != nullptr) PyEval_RestoreThread(released);
  if (interrupted(status)) return GraphRun::PythonError;  // KeyboardInterrupt & co, from a signal handler
  run.extern_failed = extern_failed(status);
  // An index out of range or an int() without a value: eager raises its own error.
  return status != 0 ? GraphRun::RunInCPython : GraphRun::Ok;
}

// The write is a copy_ into the input through detach(): it shares the input's memory
// and version counter, and autograd records nothing (grad mode at the call may be on
// while the frame wrote under no_grad, as an optimizer step does).
bool write_back(const std::vector<WriteBack>& writes, const std::vector<PyRef>& outs, PlanRun& run) {
  static PyObject* s_detach = PyUnicode_InternFromString("detach");
  static PyObject* s_copy = PyUnicode_InternFromString("copy_");
  for (const WriteBack& w : writes) {
    const auto k = static_cast<size_t>(w.target.index);
    PyObject* t = nullptr;
    switch (w.target.kind) {
      case InputRef::Kind::Arg: t = run.in.args[w.target.index]; break;
      case InputRef::Kind::Path: t = k < run.in.path_tensors.size() ? run.in.path_tensors[k].get() : nullptr; break;
      case InputRef::Kind::Reg: t = k < run.regs.size() ? run.regs[k].get() : nullptr; break;
    }
    if (t == nullptr || w.output < 0 || static_cast<size_t>(w.output) >= outs.size()) {
      PyErr_SetString(PyExc_RuntimeError, "framejit: an in-place update has no target (internal error)");
      return false;
    }
    PyRef torch_view = as_torch_tensor(t);  // a NumPy array argument: the tensor of its memory
    if (!torch_view) return false;
    PyRef plain = PyRef::steal(PyObject_CallMethodNoArgs(torch_view.get(), s_detach));
    if (!plain) return false;
    PyRef done = PyRef::steal(PyObject_CallMethodOneArg(plain.get(), s_copy, outs[static_cast<size_t>(w.output)].get()));
    if (!done) return false;
  }
  return true;
}

PyRef as_torch_tensor(PyObject* t) {
  static PyObject* const from_numpy = [] {
    PyObject* torch = PyImport_AddModule("torch");  // borrowed; imported with framejit
    return torch ? PyObject_GetAttrString(torch, "from_numpy") : nullptr;  // kept for the process
  }();
  if (Py_TYPE(t) == reinterpret_cast<PyTypeObject*>(guards::torch_refs().tensor_type) || from_numpy == nullptr ||
      std::strcmp(Py_TYPE(t)->tp_name, "numpy.ndarray") != 0) {
    return PyRef::borrow(t);
  }
  return PyRef::steal(PyObject_CallOneArg(from_numpy, t));
}

PyObject* build_view(const PlanValue& v, PlanRun& run, const std::vector<PyRef>& outs, std::vector<PyObject*>& memo) {
  PyRef t = PyRef::steal(build_value(v.items[0], run, outs, memo));
  if (t) t = as_torch_tensor(t.get());  // a view of a NumPy array argument: of its tensor
  for (size_t k = 1; t && k < v.items.size(); ++k) {
    PyRef step = PyRef::steal(build_value(v.items[k], run, outs, memo));
    if (!step) return nullptr;
    PyObject* s = step.get();
    const std::string name = guards::utf8_lossy(PyTuple_GET_ITEM(s, 0));  // a step name of framejit's own
    const Py_ssize_t n = PyTuple_GET_SIZE(s);
    if (name == "permute") {
      t = PyRef::steal(PyObject_CallMethod(t.get(), "permute", "(O)", PyTuple_GET_ITEM(s, 1)));
    } else if (name == "reshape" || name == "expand") {
      PyRef sizes = PyRef::steal(PyTuple_GetSlice(s, 1, n));
      t = PyRef::steal(PyObject_CallMethod(t.get(), name.c_str(), "(O)", sizes.get()));
    } else if (name == "detach" || name == "numpy") {
      t = PyRef::steal(PyObject_CallMethod(t.get(), name.c_str(), nullptr));
    } else if (name == "select") {
      t = PyRef::steal(PyObject_CallMethod(t.get(), "select", "(OO)", PyTuple_GET_ITEM(s, 1), PyTuple_GET_ITEM(s, 2)));
    } else {  // slice: t[:, ..., start:start + length * step:step]
      const long dim = PyLong_AsLong(PyTuple_GET_ITEM(s, 1));
      const long long start = PyLong_AsLongLong(PyTuple_GET_ITEM(s, 2));
      const long long length = PyLong_AsLongLong(PyTuple_GET_ITEM(s, 3));
      const long long stride = PyLong_AsLongLong(PyTuple_GET_ITEM(s, 4));
      PyRef index = PyRef::steal(PyTuple_New(dim + 1));
      for (long d = 0; d < dim; ++d) PyTuple_SET_ITEM(index.get(), d, PySlice_New(nullptr, nullptr, nullptr));
      PyRef a = PyRef::steal(PyLong_FromLongLong(start));
      PyRef b = PyRef::steal(PyLong_FromLongLong(start + length * stride));
      PyRef c = PyRef::steal(PyLong_FromLongLong(stride));
      PyTuple_SET_ITEM(index.get(), dim, PySlice_New(a.get(), b.get(), c.get()));
      t = PyRef::steal(PyObject_GetItem(t.get(), index.get()));
    }
  }
  return t.release();
}

PyObject* run_plan(const Plan& plan, const guards::CallInputs& in, const jit::Bindings& b,
                   const std::vector<double>& scalars, CodeState* st, compat::Frame* frame) {
  PlanRun run{in, b, {}, st, frame};
  if (!plan.steps.empty()) return run_steps(plan, run);
  if (plan.joint) return run_joint_plan(plan, run, scalars);
  std::vector<PyRef> outs;
  // A kernel that found an index out of range (RunInCPython) returns nothing without an
  // error: the frame then runs in CPython, which raises eager's error.
  if (plan.graph && run_graph(*plan.graph, plan.graph_args, plan.outputs, scalars, run, &outs) != GraphRun::Ok) {
    // An extern call that raised (eager raises too) or whose result has other sizes
    // than traced (a size rule that did not hold): a deopt, counted and logged.
    if (run.extern_failed && st != nullptr) {
      st->counters.deopts++;
      if (log::enabled(log::Channel::GraphBreaks) || log::enabled(log::Channel::Recompiles)) {
        log::interp().info("deopt: {} runs in CPython: an extern call raised or its result differs from the traced one",
                           guards::utf8_lossy(st->code->co_qualname));
      }
    }
    return nullptr;
  }
  if (!plan.writes.empty() && !write_back(plan.writes, outs, run)) return nullptr;
  std::vector<PyObject*> memo(static_cast<size_t>(plan.num_memos), nullptr);
  return build_value(plan.ret, run, outs, memo);
}

}  // namespace fj::interp

// Running a plan with a JointPlan (plan.h): the forward graph runs inside a
// torch.autograd.Function (py/framejit/autograd.py) so that its outputs join eager
// autograd; that Function's backward runs the compiled backward graph.
//
// Design: each call makes a JointCall, a small Python object that the Function keeps
// on its ctx. It holds what the backward needs besides the saved tensors: the
// compiled graphs and output specs (shared with the plan, so a backward after
// framejit.reset() still works), and this call's scalar inputs and symbol values,
// which the backward graph reads (its sizes and ctx-saved scalars stay symbolic).
#include "interp/runtime/autograd.h"
#include "interp/runtime/plan.h"

namespace fj::interp {
namespace {

// Output elements from which a graph runs with the GIL released (as runtime.cpp).
constexpr int64_t kReleaseGilElements = 64 * 1024;

PyObject* g_apply = nullptr;  // framejit.autograd.apply(call, enable_grad, inputs)

struct JointCall {
  PyObject_HEAD
  std::shared_ptr<const JointPlan> plan;
  std::vector<double> scalars;
  jit::Bindings bindings;
  std::vector<jit::TensorArg> forward_args;  // the frame's inputs, read before apply
  bool index_error;                          // the forward's kernel found an index out of range
};

PyTypeObject* joint_call_type();

// Buffers of one graph run: the outputs allocated with torch, their sizes kept alive.
struct Outputs {
  std::vector<PyRef> tensors;
  std::vector<jit::Shape> sizes;
  std::vector<std::vector<int64_t>> strides;
  std::vector<jit::TensorArg> args;
};

bool allocate(const std::vector<OutputSpec>& specs, const jit::Bindings& b, Outputs* out) {
  out->sizes.resize(specs.size());
  out->strides.resize(specs.size());
  for (size_t k = 0; k < specs.size(); ++k) {
    const OutputSpec& o = specs[k];
    jit::Shape& sizes = out->sizes[k];
    if (o.is_static) {
      sizes = o.shape;
    } else {
      for (const jit::SymExpr& e : o.sym) {
        const auto v = e.eval(b);
        if (!v || v->index() != 0) {
          PyErr_SetString(PyExc_RuntimeError, "framejit: an output size has no value");
          return false;
        }
        sizes.push_back(std::get<int64_t>(*v));
      }
    }
    out->strides[k] = contiguous_strides(sizes);
    static PyObject* kwargs[6] = {};  // {"dtype": torch.<dtype>} per DType, made once
    const auto di = static_cast<size_t>(o.dtype);
    if (kwargs[di] == nullptr) {
      kwargs[di] = PyDict_New();
      if (kwargs[di] == nullptr || PyDict_SetItemString(kwargs[di], "dtype", torch_dtype(o.dtype)) < 0) return false;
    }
    PyRef args = o.is_static ? o.empty_args : empty_args_for(sizes);
    PyObject* t = PyObject_Call(guards::torch_refs().empty, args.get(), kwargs[di]);
    if (t == nullptr) return false;
    out->tensors.push_back(PyRef::steal(t));
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    void* p = data_ptr(out->tensors[k].get());
    if (p == nullptr && PyErr_Occurred()) return false;
    out->args.push_back(jit::TensorArg{p, out->sizes[k].data(), out->strides[k].data(),
                                       static_cast<int>(out->sizes[k].size())});
  }
  return true;
}

// Reads a tensor argument of a graph; `metas` keeps its sizes and strides alive.
bool tensor_arg(PyObject* t, std::vector<guards::TensorMeta>& metas, jit::TensorArg* out) {
  std::string why;
  metas.emplace_back();
  if (!guards::read_tensor_meta(t, &metas.back(), &why)) {
    PyErr_Format(PyExc_RuntimeError, "framejit: a tensor of the backward cannot be read (%s)", why.c_str());
    return false;
  }
  void* p = data_ptr(t);
  if (p == nullptr && PyErr_Occurred()) return false;
  *out = jit::TensorArg{p, metas.back().sizes.data(), metas.back().strides.data(), metas.back().rank};
  return true;
}

int64_t run_graph_args(const jit::CompiledGraph& g, const std::vector<jit::TensorArg>& in,
                       const Outputs& out, const JointCall& call) {
  int64_t work = 0;
  for (const jit::TensorArg& r : out.args) {
    int64_t n = 1;
    for (int d = 0; d < r.rank; ++d) n *= r.sizes[d];
    work += n;
  }
  PyThreadState* released = work >= kReleaseGilElements ? PyEval_SaveThread() : nullptr;
  const int64_t status = g.run(in, out.args, call.scalars.data(), &call.bindings);
  if (released != nullptr) PyEval_RestoreThread(released);
  return status;
}

// call.forward(inputs) -> (outputs, saved, non_differentiable): runs the forward graph
// (inside the autograd Function's forward, where grad mode is off).
PyObject* joint_forward(PyObject* self, PyObject* inputs) {
  auto* call = reinterpret_cast<JointCall*>(self);
  const JointPlan& j = *call->plan;
  if (!PyTuple_Check(inputs) || call->forward_args.size() != static_cast<size_t>(PyTuple_GET_SIZE(inputs))) {
    PyErr_SetString(PyExc_RuntimeError, "framejit: a compiled forward called twice or with other inputs");
    return nullptr;
  }
  Outputs out;
  if (!allocate(j.forward_outputs, call->bindings, &out)) return nullptr;
  const int64_t status = run_graph_args(*j.forward, call->forward_args, out, *call);
  call->forward_args.clear();
  if (interrupted(status)) return nullptr;  // a signal handler raised (KeyboardInterrupt)
  if (status != 0) {  // eager raises its own error: the frame then runs in CPython
    call->index_error = true;
    PyErr_SetString(PyExc_IndexError, "framejit: index out of range in a compiled forward");
    return nullptr;
  }
  PyRef outputs = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(j.num_outputs)));
  PyRef nondiff = PyRef::steal(PyList_New(0));
  for (size_t k = 0; k < j.num_outputs; ++k) {
    PyTuple_SET_ITEM(outputs.get(), static_cast<Py_ssize_t>(k), Py_NewRef(out.tensors[k].get()));
    if (!j.differentiable[k] && PyList_Append(nondiff.get(), out.tensors[k].get()) < 0) return nullptr;
  }
  PyRef saved = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(j.saved.size())));
  for (size_t k = 0; k < j.saved.size(); ++k) {
    const JointPlan::Saved& s = j.saved[k];
    PyObject* t = s.input ? PyTuple_GET_ITEM(inputs, s.index) : out.tensors[static_cast<size_t>(s.index)].get();
    PyTuple_SET_ITEM(saved.get(), static_cast<Py_ssize_t>(k), Py_NewRef(t));
  }
  return PyTuple_Pack(3, outputs.get(), saved.get(), nondiff.get());
}

// call.backward(saved, grads) -> one gradient (or None) per forward input.
PyObject* joint_backward(PyObject* self, PyObject* args) {
  auto* call = reinterpret_cast<JointCall*>(self);
  const JointPlan& j = *call->plan;
  PyObject* saved = nullptr;
  PyObject* grads = nullptr;
  if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &saved, &PyTuple_Type, &grads)) return nullptr;
  if (static_cast<size_t>(PyTuple_GET_SIZE(saved)) != j.saved.size() ||
      static_cast<size_t>(PyTuple_GET_SIZE(grads)) != j.num_outputs) {
    PyErr_SetString(PyExc_RuntimeError, "framejit: a compiled backward got the wrong number of tensors");
    return nullptr;
  }
  std::vector<guards::TensorMeta> metas;
  metas.reserve(j.saved.size() + j.num_outputs);
  std::vector<jit::TensorArg> in(j.saved.size() + j.num_outputs);
  std::vector<PyRef> zeros;  // gradients autograd left out (never read: their outputs are not differentiable)
  for (size_t k = 0; k < in.size(); ++k) {
    PyObject* t = k < j.saved.size() ? PyTuple_GET_ITEM(saved, k) : PyTuple_GET_ITEM(grads, k - j.saved.size());
    if (t == Py_None) {
      const size_t o = k - j.saved.size();
      Outputs z;
      if (k < j.saved.size() || !allocate({j.forward_outputs[o]}, call->bindings, &z)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "framejit: a saved tensor of the backward is None");
        return nullptr;
      }
      zeros.push_back(z.tensors[0]);
      t = zeros.back().get();
    }
    if (!tensor_arg(t, metas, &in[k])) return nullptr;
  }
  Outputs out;
  if (!allocate(j.grads, call->bindings, &out)) return nullptr;
  const int64_t status = run_graph_args(*j.backward, in, out, *call);
  if (interrupted(status)) return nullptr;  // a signal handler raised (KeyboardInterrupt)
  if (status != 0) {
    PyErr_SetString(PyExc_RuntimeError, "framejit: the compiled backward failed");
    return nullptr;
  }
  PyObject* result = PyTuple_New(static_cast<Py_ssize_t>(j.num_inputs));
  if (result == nullptr) return nullptr;
  for (size_t i = 0; i < j.num_inputs; ++i) PyTuple_SET_ITEM(result, static_cast<Py_ssize_t>(i), Py_NewRef(Py_None));
  for (size_t k = 0; k < j.grad_inputs.size(); ++k) {
    if (!j.grad_defined[k]) continue;
    const auto i = static_cast<Py_ssize_t>(j.grad_inputs[k]);
    Py_SETREF(PyTuple_GET_ITEM(result, i), Py_NewRef(out.tensors[k].get()));
  }
  return result;
}

void joint_call_dealloc(PyObject* self) {
  auto* call = reinterpret_cast<JointCall*>(self);
  call->plan.~shared_ptr();
  call->scalars.~vector();
  call->bindings.~Bindings();
  call->forward_args.~vector();
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyMethodDef joint_call_methods[] = {
    {"forward", joint_forward, METH_O, "Runs the compiled forward on the inputs: (outputs, saved, non_differentiable)."},
    {"backward", joint_backward, METH_VARARGS, "Runs the compiled backward: a gradient or None per input."},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot joint_call_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(joint_call_dealloc)},
    {Py_tp_methods, joint_call_methods},
    {0, nullptr},
};

PyType_Spec joint_call_spec = {
    "framejit._C.JointCall", sizeof(JointCall), 0, Py_TPFLAGS_DEFAULT, joint_call_slots,
};

PyTypeObject* joint_call_type() {
  static PyTypeObject* type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&joint_call_spec));
  return type;
}

}  // namespace

void set_autograd_apply(PyObject* fn) {
  Py_XSETREF(g_apply, Py_NewRef(fn));
}

PyObject* run_joint_plan(const Plan& plan, PlanRun& run, const std::vector<double>& scalars) {
  PyTypeObject* type = joint_call_type();
  if (type == nullptr) return nullptr;
  if (g_apply == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "framejit: the autograd glue is not registered (framejit.autograd)");
    return nullptr;
  }
  // Sizes past int64 (both halves, before anything is allocated): eager raises, in CPython.
  if (!plan.joint->forward->sizes_fit(run.b) || !plan.joint->backward->sizes_fit(run.b)) return nullptr;
  const guards::CallInputs& in = run.in;
  PyRef inputs = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(plan.graph_args.size())));
  if (!inputs) return nullptr;
  std::vector<jit::TensorArg> args;
  for (size_t k = 0; k < plan.graph_args.size(); ++k) {
    const InputRef& ref = plan.graph_args[k];
    const auto i = static_cast<size_t>(ref.index);
    PyObject* t = nullptr;
    const guards::TensorMeta* m = nullptr;
    switch (ref.kind) {
      case InputRef::Kind::Arg: t = in.args[ref.index]; m = &*in.metas[i]; break;
      case InputRef::Kind::Path: t = in.path_tensors[i].get(); m = &in.path_metas[i]; break;
      case InputRef::Kind::Reg:
        PyErr_SetString(PyExc_RuntimeError, "framejit: a joint graph reads a register (internal error)");
        return nullptr;
    }
    void* p = data_ptr(t);
    if (p == nullptr && PyErr_Occurred()) return nullptr;
    args.push_back(jit::TensorArg{p, m->sizes.data(), m->strides.data(), m->rank});
    PyTuple_SET_ITEM(inputs.get(), static_cast<Py_ssize_t>(k), Py_NewRef(t));
  }
  auto* call = PyObject_New(JointCall, type);
  if (call == nullptr) return nullptr;
  new (&call->plan) std::shared_ptr<const JointPlan>(plan.joint);
  new (&call->scalars) std::vector<double>(scalars);
  new (&call->bindings) jit::Bindings(run.b);
  new (&call->forward_args) std::vector<jit::TensorArg>(std::move(args));
  call->index_error = false;
  PyRef holder = PyRef::steal(reinterpret_cast<PyObject*>(call));
  PyRef outs = PyRef::steal(PyObject_CallFunctionObjArgs(g_apply, holder.get(),
                                                         plan.joint->enable_grad ? Py_True : Py_False,
                                                         inputs.get(), nullptr));
  if (!outs) {
    // A kernel's index error: nothing without an error, and the frame runs in CPython.
    if (call->index_error) PyErr_Clear();
    return nullptr;
  }
  if (!PyTuple_Check(outs.get()) || static_cast<size_t>(PyTuple_GET_SIZE(outs.get())) != plan.joint->num_outputs) {
    PyErr_SetString(PyExc_RuntimeError, "framejit: the autograd Function returned unexpected outputs");
    return nullptr;
  }
  std::vector<PyRef> out_refs;
  for (size_t k = 0; k < plan.joint->num_outputs; ++k) {
    out_refs.push_back(PyRef::borrow(PyTuple_GET_ITEM(outs.get(), static_cast<Py_ssize_t>(k))));
  }
  // Inputs the frame updated in place, from their new values (not differentiable:
  // check_joint_writes), as the plan without autograd writes them.
  if (!plan.writes.empty() && !write_back(plan.writes, out_refs, run)) return nullptr;
  std::vector<PyObject*> memo(static_cast<size_t>(plan.num_memos), nullptr);
  return build_value(plan.ret, run, out_refs, memo);
}

}  // namespace fj::interp

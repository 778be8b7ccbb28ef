// framejit._C: the pybind11 module that binds interp/, guards/ and jit/ for py/framejit.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "guards/guards.h"
#include "interp/runtime/autograd.h"
#include "interp/trace/bytecode.h"
#include "interp/code_state.h"
#include "interp/hook.h"
#include "interp/torch/torch_ops.h"
#include "interp/runtime/resources.h"
#include "jit/log.h"
#include "jit/cuda/nvptx_backend.h"

namespace py = pybind11;
using namespace fj;

namespace {

py::dict counters_dict(const interp::Counters& c) {
  py::dict d;
  d["calls"] = c.calls;
  d["compiles"] = c.compiles;
  d["recompiles"] = c.recompiles;
  d["cache_hits"] = c.cache_hits;
  d["graph_breaks"] = c.graph_breaks;
  d["fallbacks"] = c.fallbacks;
  d["graphs"] = c.graphs;
  d["deopts"] = c.deopts;
  d["stopped_compiling"] = c.stopped_compiling;
  d["skipped"] = c.skipped;
  return d;
}

PyCodeObject* code_of(py::handle fn) {
  py::object f = py::reinterpret_borrow<py::object>(fn);
  while (py::hasattr(f, "__wrapped__")) f = f.attr("__wrapped__");
  if (py::hasattr(f, "__func__")) f = f.attr("__func__");
  if (!PyFunction_Check(f.ptr())) {
    throw py::type_error(std::string("expected a function, got ") + Py_TYPE(f.ptr())->tp_name);
  }
  return reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(f.ptr()));
}

// A new reference from the C API, or the pending Python exception thrown.
py::object steal_or_throw(PyObject* result) {
  if (!result) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(result);
}

py::list fallback_list(const std::vector<interp::Fallback>& fbs) {
  py::list out;
  for (const auto& f : fbs) out.append(py::make_tuple(f.reason, f.location));
  return out;
}

// The PTX of each graph, one module after another, or the first one's error.
Expected<std::string> ptx_of(const std::vector<std::shared_ptr<const jit::Graph>>& graphs, const std::string& arch) {
  std::string text;
  for (size_t i = 0; i < graphs.size(); ++i) {
    const jit::PtxProgram p = FJ_TRY(jit::emit_ptx(*graphs[i], jit::NvptxOptions{arch}));
    text += (i ? "\n" : "") + p.ptx;
  }
  return text;
}

// What framejit's Python side registers at import: torch's objects and functions
// that the guards, the tracer and the runtime compare against or call.
void bind_registration(py::module_& m) {
  m.def("_init", [](py::handle tensor_type, py::handle float32, py::handle bool_, py::handle empty,
                    py::handle size_type, py::handle float64, py::handle int32, py::handle int64,
                    py::handle uint8) {
    auto& r = guards::torch_refs();
    r.float64 = Py_NewRef(float64.ptr());
    r.int32 = Py_NewRef(int32.ptr());
    r.int64 = Py_NewRef(int64.ptr());
    r.uint8 = Py_NewRef(uint8.ptr());
    r.size_type = Py_NewRef(size_type.ptr());
    r.tensor_type = Py_NewRef(tensor_type.ptr());
    r.float32 = Py_NewRef(float32.ptr());
    r.bool_ = Py_NewRef(bool_.ptr());
    r.empty = Py_NewRef(empty.ptr());
  });
  m.def("_set_module_getattr", [](py::handle fn) { guards::set_module_getattr(fn.ptr()); });
  m.def("_set_module_call", [](py::handle call, const std::vector<py::handle>& global_hooks,
                               const std::vector<py::handle>& containers) {
    auto& refs = guards::module_call_refs();
    refs.call = Py_NewRef(call.ptr());
    for (py::handle c : containers) refs.containers.push_back(Py_NewRef(c.ptr()));
    for (py::handle d : global_hooks) refs.global_hooks.push_back(Py_NewRef(d.ptr()));
  });
  m.def("_set_autograd", [](py::handle apply, py::handle function_type, py::handle function_apply,
                            py::handle setup_context) {
    interp::set_autograd_apply(apply.ptr());
    interp::set_autograd_function(function_type.ptr(), function_apply.ptr(), setup_context.ptr());
  });
  m.def("_set_once_differentiable_code", [](py::handle code) { interp::set_once_differentiable_code(code.ptr()); });
  m.def("_register_grad_mode_class", [](py::handle cls) { interp::register_grad_mode_class(cls.ptr()); });
  m.def("_snapshot_tensor_attrs", [](const std::vector<std::string>& names) {
    guards::snapshot_tensor_attrs(names);
  });
  m.def("_unary_pointwise_names", [] { return interp::unary_pointwise_names(); });
  m.def("_set_extern", [](py::handle reason, py::handle meta_call, py::handle vjp, py::handle from_dlpack) {
    interp::set_extern_helpers(reason.ptr(), meta_call.ptr(), vjp.ptr(), from_dlpack.ptr());
  });
  m.def("_register_op", [](py::handle fn, const std::string& name, bool tensor_first) {
    const interp::PyOp* op = interp::op_by_name(name);
    if (!op) throw py::value_error("unknown framejit op name: " + name);
    interp::register_torch_function(fn.ptr(), op, tensor_first);
  });
}

// Compiling functions, their caches and counters.
void bind_caches(py::module_& m) {
  m.def("compile", [](py::handle fn, bool dynamic, bool fullgraph) {
    PyObject* r = interp::make_compiled_function(fn.ptr(), dynamic, fullgraph);
    if (r == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(r);
  }, py::arg("fn"), py::arg("dynamic") = true, py::arg("fullgraph") = false);
  m.def("stats", [](py::handle fn) {
    if (fn.is_none()) return counters_dict(interp::global_counters());
    interp::CodeState* st = interp::code_state(code_of(fn), false);
    return counters_dict(st ? st->counters : interp::Counters{});
  }, py::arg("fn") = py::none());
  m.def("fallbacks", [](py::handle fn) {
    interp::CodeState* st = interp::code_state(code_of(fn), false);
    return st ? fallback_list(st->fallbacks) : py::list();
  });
  m.def("entry_guards", [](py::handle fn) {
    py::list out;
    interp::CodeState* st = interp::code_state(code_of(fn), false);
    if (st) for (const auto& e : st->entries) out.append(e->guards.describe());
    return out;
  });
  m.def("reset", [] { interp::reset_all(); });
  m.def("live_resources", [] {
    const interp::LiveResources r = interp::live_resources();
    py::dict d;
    d["graphs"] = r.graphs;
    d["entries"] = r.entries;
    return d;
  }, "JIT resources alive now: compiled graphs (each owns one LLVM ResourceTracker and its "
     "machine code) and cache entries (guards + plan), cached or running.");
  m.def("graphs_reused", [] { return interp::live_resources().graphs_reused; },
        "Compiles since the process started that shared the machine code of an equal live graph.");
  m.def("watch", [](py::handle code, bool on) {
    if (!PyCode_Check(code.ptr())) throw py::type_error("framejit._C.watch expects a code object");
    if (!interp::watch_code(reinterpret_cast<PyCodeObject*>(code.ptr()), on)) throw py::error_already_set();
  }, py::arg("code"), py::arg("on") = true);
  m.def("watched", [] {
    py::list out;
    for (interp::CodeState* st : interp::watched_states()) {
      py::dict d = counters_dict(st->counters);
      // The code's own str objects: a lone surrogate in them reaches Python unchanged.
      d["qualname"] = py::reinterpret_borrow<py::object>(st->code->co_qualname);
      d["filename"] = py::reinterpret_borrow<py::object>(st->code->co_filename);
      d["line"] = st->code->co_firstlineno;
      d["direct"] = st->direct;
      d["entries"] = st->entries.size();
      d["compile_seconds"] = st->compile_seconds;
      d["recompile_reasons"] = st->recompile_reasons;
      d["fallback_reasons"] = fallback_list(st->fallbacks);
      out.append(d);
    }
    return out;
  });
}

// Looking inside: explain, PTX, decoded bytecode.
void bind_inspection(py::module_& m) {
  m.def("explain", [](py::handle fn, py::tuple args, py::dict kwargs) {
    interp::Recorder rec;
    PyObject* r = interp::call_recorded(fn.ptr(), args.ptr(), kwargs.ptr(), &rec);
    if (r == nullptr) throw py::error_already_set();
    py::dict d;
    d["graphs"] = rec.graphs;
    d["ops"] = rec.ops;
    d["guards"] = rec.guards;
    d["breaks"] = fallback_list(rec.breaks);
    return py::make_tuple(py::reinterpret_steal<py::object>(r), d);
  });
  m.def("ptx", [](py::handle fn, py::tuple args, py::dict kwargs, const std::string& arch) {
    // Trace fn on these (CPU) arguments as explain() does, then emit each graph's PTX.
    interp::Recorder rec;
    PyObject* r = interp::call_recorded(fn.ptr(), args.ptr(), kwargs.ptr(), &rec);
    if (r == nullptr) throw py::error_already_set();
    Py_DECREF(r);
    if (rec.jit_graphs.empty()) {
      std::string why = "framejit.ptx: tracing produced no graph to compile";
      for (const interp::Fallback& b : rec.breaks) why += "; " + b.reason + " (" + b.location + ")";
      throw py::value_error(why);
    }
    Expected<std::string> text = [&] {
      py::gil_scoped_release release;
      return ptx_of(rec.jit_graphs, arch);
    }();
    if (text.failed()) throw py::value_error("framejit.ptx: " + text.error());
    return text.take();
  });
  m.def(
      "decode",
      [](py::handle code, bool positions) {
        return steal_or_throw(fj::decode_to_python(code.ptr(), positions));
      },
      py::arg("code"), py::arg("positions") = false,
      "Decoded instructions of a code object: a list of (offset, opname, opcode, arg, "
      "line, target) tuples; positions=True appends (end_line, col, end_col).");
  m.def(
      "exception_table",
      [](py::handle code) { return steal_or_throw(fj::exception_table_to_python(code.ptr())); },
      py::arg("code"),
      "Exception table of a code object: a list of (start, end, target, depth, lasti).");
}

// Settings: config, logging, the frame hook.
void bind_settings(py::module_& m) {
  m.def("get_config", [] {
    py::dict d;
    d["cache_limit"] = interp::config().cache_limit;
    d["fallback_limit"] = interp::config().fallback_limit;
    return d;
  });
  m.def("set_config", [](const std::string& key, int value) {
    if (value < 1) throw py::value_error("framejit.config." + key + " must be at least 1");
    if (key == "cache_limit") interp::config().cache_limit = value;
    else if (key == "fallback_limit") interp::config().fallback_limit = value;
    else throw py::attribute_error("framejit.config has no setting '" + key + "'");
  });
  m.def("set_log", [](const std::string& spec) { return log::configure(spec); });
  m.def("set_hook", [](bool on) { interp::set_hook_installed(on); });
  m.def("hook_installed", [] { return interp::hook_installed(); });
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "framejit native core";
  if (!interp::init_hook(m.ptr())) throw py::error_already_set();
  log::configure_from_env();
  bind_registration(m);
  bind_caches(m);
  bind_inspection(m);
  bind_settings(m);
}

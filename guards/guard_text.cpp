// The text of guards: why a guard set missed a call (check_verbose, for
// recompile logs and explain) and the list of what a set checks (describe).
#include "guards/guards.h"

#include <string>

namespace fj::guards {
namespace {

// str(o) or repr(o) through `to_text`; "<?>" when that raises.
std::string text_of(PyObject* o, PyObject* (*to_text)(PyObject*)) {
  PyObject* s = to_text(o);
  if (!s) {
    clear_error();
    return "<?>";
  }
  std::string out = PyUnicode_AsUTF8(s);
  Py_DECREF(s);
  return out;
}
std::string str_of(PyObject* o) { return text_of(o, PyObject_Str); }
std::string repr_of(PyObject* o) { return text_of(o, PyObject_Repr); }

std::string dims_str(const std::array<int64_t, kMaxRank>& d, int rank) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(d[static_cast<size_t>(i)]);
  return s + "]";
}


const char* symbol_kind(jit::SymType t) {
  switch (t) {
    case jit::SymType::Int: return "an int other than 0 and 1";
    case jit::SymType::Float: return "a float";
    case jit::SymType::Bool: return "a bool";
  }
  return "?";
}

// "tensor 'x'" for an argument, "tensor L['self'].bias" for an attribute path.
std::string tensor_label(const Guard& g) {
  return g.path_index >= 0 ? "tensor " + g.name : "tensor '" + g.name + "'";
}

std::string path_of(const Guard& g) {
  std::string s = g.name;
  for (const std::string& a : g.attrs) s += "." + a;
  return s;
}


}  // namespace

std::optional<std::string> GuardSet::check_verbose(const CallInputs& in) const {
  jit::Bindings b;
  b.values.resize(static_cast<size_t>(num_symbols_));
  in.path_tensors.resize(std::max(in.path_tensors.size(), static_cast<size_t>(num_path_tensors_)));
  in.path_metas.resize(std::max(in.path_metas.size(), static_cast<size_t>(num_path_tensors_)));
  for (const Guard& g : guards_) {
    if (holds(g, in, b)) continue;
    switch (g.kind) {
      case GuardKind::TensorMatch: {
        const std::string who = tensor_label(g);
        if (g.path_index >= 0) {
          PyObject* t = walk_path(g, in);
          if (t == nullptr) return who + " can no longer be read";
          if (Py_TYPE(t) != reinterpret_cast<PyTypeObject*>(torch_refs().tensor_type) &&
              Py_TYPE(t) != reinterpret_cast<PyTypeObject*>(torch_refs().parameter_type)) {
            return who + " is no longer a torch.Tensor: got " + Py_TYPE(t)->tp_name;
          }
        }
        const std::optional<TensorMeta> m =
            g.path_index >= 0 ? std::optional<TensorMeta>(in.path_metas[static_cast<size_t>(g.path_index)])
                              : in.metas[static_cast<size_t>(g.arg)];
        if (!m) return who + " is no longer a torch.Tensor: got " + Py_TYPE(in.args[g.arg])->tp_name;
        const TensorMeta& e = g.meta;
        if (m->dtype != e.dtype) return who + " dtype mismatch: expected " + str_of(e.dtype) + ", actual " + str_of(m->dtype);
        if (m->is_cpu != e.is_cpu) return who + " device mismatch: expected " + (e.is_cpu ? "cpu" : "non-cpu");
        if (m->requires_grad != e.requires_grad) {
          return who + " requires_grad mismatch: expected " + (e.requires_grad ? "True" : "False");
        }
        if (m->rank != e.rank) {
          return who + " rank mismatch: expected " + std::to_string(e.rank) + ", actual " + std::to_string(m->rank);
        }
        for (int i = 0; i < e.rank; ++i) {
          const auto k = static_cast<size_t>(i);
          if (g.dim_symbols[k] >= 0) {
            if (m->sizes[k] < 2) {
              return who + " size at dim " + std::to_string(i) + " is " + std::to_string(m->sizes[k]) +
                     ", which is specialized (the entry has a symbolic size >= 2)";
            }
            continue;
          }
          if (m->sizes[k] != e.sizes[k]) {
            return who + " size mismatch at dim " + std::to_string(i) + ": expected " +
                   std::to_string(e.sizes[k]) + ", actual " + std::to_string(m->sizes[k]);
          }
        }
        for (int i = 0; i < e.rank && g.check_strides; ++i) {
          const auto k = static_cast<size_t>(i);
          if (m->strides[k] != e.strides[k]) {
            return who + " stride mismatch at dim " + std::to_string(i) + ": expected " +
                   std::to_string(e.strides[k]) + ", actual " + std::to_string(m->strides[k]);
          }
        }
        return who + " changed";
      }
      case GuardKind::ScalarEquals:
        return "L['" + g.name + "'] == " + repr_of(g.object) + " failed: actual " + repr_of(in.args[g.arg]);
      case GuardKind::ClosureIs:
        return "closure variable '" + g.name + "' is no longer " + repr_of(g.object);
      case GuardKind::SymbolArg:
        return "L['" + g.name + "'] is not " + symbol_kind(g.sym_type) + ": actual " + repr_of(in.args[g.arg]);
      case GuardKind::ExprTrue:
        return g.name + " is no longer true";
      case GuardKind::GradModeIs:
        return std::string("torch.is_grad_enabled() is no longer ") + (g.arg ? "True" : "False");
      case GuardKind::NoOverlap: {
        std::string why;
        overlap_free(g, in, &why);
        return why;
      }
      case GuardKind::DefaultDTypeIs: {
        PyObject* now = default_dtype();
        return "torch.get_default_dtype() is no longer " + str_of(g.object) + ": actual " +
               (now ? str_of(now) : std::string("<unreadable>"));
      }
      case GuardKind::TensorAttrIs:
        return "torch.Tensor." + g.name + " was replaced";
      case GuardKind::PathIs:
        return g.name + " is no longer " + repr_of(g.object);
      case GuardKind::PathMethodIs:
        return g.name + " no longer calls " + repr_of(g.object);
      case GuardKind::DictsEmpty:
        return g.name + " now has hooks";
      case GuardKind::DictKeysAre:
        return g.name + " has other submodules now";
      case GuardKind::SequenceIs:
        return g.name + " is no longer a " + reinterpret_cast<PyTypeObject*>(g.object)->tp_name + " of " +
               std::to_string(g.symbol) + " items";
      case GuardKind::FunctionUnchanged:
        return "the __code__, __defaults__ or __kwdefaults__ of inlined function " + g.name + " changed";
      case GuardKind::CellIs:
        return "closure variable '" + g.name + "' of an inlined function is no longer " + repr_of(g.object);
      case GuardKind::GlobalIs:
        return std::string(g.from_builtins ? "builtin '" : "global '") + g.name + "' is no longer the object the trace read";
      case GuardKind::ModuleAttrIs:
        return "'" + path_of(g) + "' is no longer the object the trace read";
    }
  }
  return std::nullopt;
}

std::vector<std::string> GuardSet::describe() const {
  std::vector<std::string> out;
  for (const Guard& g : guards_) {
    switch (g.kind) {
      case GuardKind::TensorMatch: {
        std::string sizes = "[";
        for (int i = 0; i < g.meta.rank; ++i) {
          const auto k = static_cast<size_t>(i);
          sizes += (i ? ", " : "") + (g.dim_symbols[k] >= 0 ? "s" + std::to_string(g.dim_symbols[k])
                                                            : std::to_string(g.meta.sizes[k]));
        }
        sizes += "]";
        out.push_back(tensor_label(g) + ": torch.Tensor " + str_of(g.meta.dtype) +
                      (g.meta.is_cpu ? " cpu" : " non-cpu") + " size=" + sizes +
                      (g.check_strides ? " stride=" + dims_str(g.meta.strides, g.meta.rank) : "") +
                      (g.meta.requires_grad ? " requires_grad" : ""));
        break;
      }
      case GuardKind::ScalarEquals:
        out.push_back("L['" + g.name + "'] == " + repr_of(g.object));
        break;
      case GuardKind::ClosureIs:
        out.push_back("closure variable '" + g.name + "' is " + repr_of(g.object));
        break;
      case GuardKind::SymbolArg:
        out.push_back("L['" + g.name + "'] is " + symbol_kind(g.sym_type) + " (" + jit::SymExpr::symbol(g.symbol, g.sym_type).str() + ")");
        break;
      case GuardKind::ExprTrue:
        out.push_back(g.name);
        break;
      case GuardKind::GradModeIs:
        out.push_back(std::string("torch.is_grad_enabled() == ") + (g.arg ? "True" : "False"));
        break;
      case GuardKind::NoOverlap: {
        std::string s = "no shared memory between";
        for (size_t k = 0; k < g.attrs.size(); ++k) {
          s += (k ? ", " : " ") + g.attrs[k] + (k < g.num_updated ? " (updated in place)" : "");
        }
        out.push_back(s);
        break;
      }
      case GuardKind::DefaultDTypeIs:
        out.push_back("torch.get_default_dtype() is " + str_of(g.object));
        break;
      case GuardKind::PathIs:
        out.push_back(g.name + " is " + repr_of(g.object));
        break;
      case GuardKind::PathMethodIs:
        out.push_back(g.name + " calls " + repr_of(g.object));
        break;
      case GuardKind::DictsEmpty:
        out.push_back(g.name + " has no hooks");
        break;
      case GuardKind::DictKeysAre:
        out.push_back(g.name + " keeps its submodules " + repr_of(g.object));
        break;
      case GuardKind::SequenceIs:
        out.push_back(g.name + " is a " + reinterpret_cast<PyTypeObject*>(g.object)->tp_name + " of " +
                      std::to_string(g.symbol) + " items");
        break;
      case GuardKind::TensorAttrIs:
        out.push_back("torch.Tensor." + g.name + " is torch's own");
        break;
      case GuardKind::FunctionUnchanged:
        out.push_back("inlined function " + g.name + " keeps its __code__, __defaults__ and __kwdefaults__");
        break;
      case GuardKind::CellIs:
        out.push_back("closure variable '" + g.name + "' (inlined) is " + repr_of(g.object));
        break;
      case GuardKind::GlobalIs:
        out.push_back(std::string(g.from_builtins ? "builtin '" : "global '") + g.name + "' is " + repr_of(g.object));
        break;
      case GuardKind::ModuleAttrIs:
        out.push_back("'" + path_of(g) + "' is " + repr_of(g.object));
        break;
    }
  }
  return out;
}


}  // namespace fj::guards

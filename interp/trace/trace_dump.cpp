// Writing FRAMEJIT_TRACE_DIR dumps (see trace_dump.h).
#include "interp/trace/trace_dump.h"

#include <atomic>
#include <filesystem>
#include <fstream>

#include "jit/log.h"

namespace fj::interp {
namespace {

std::atomic<int> g_dump_counter{0};

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

std::string describe_value(const PlanValue& v) {
  switch (v.kind) {
    case PlanValue::Kind::GraphOutput: return "graph_output[" + std::to_string(v.index) + "]";
    case PlanValue::Kind::Item: return "graph_output[" + std::to_string(v.index) + "].item()";
    case PlanValue::Kind::Arg: return "argument[" + std::to_string(v.index) + "]";
    case PlanValue::Kind::PathTensor: return "attribute_tensor[" + std::to_string(v.index) + "]";
    case PlanValue::Kind::Repeat: return "same_object_as[" + std::to_string(v.index) + "]";
    case PlanValue::Kind::Sym: return "scalar(" + v.expr.str() + ")";
    case PlanValue::Kind::Reg: return "r" + std::to_string(v.index);
    case PlanValue::Kind::Null: return "NULL";
    case PlanValue::Kind::View: {
      std::string s = "view_of(";
      for (size_t i = 0; i < v.items.size(); ++i) s += (i ? ", " : "") + describe_value(v.items[i]);
      return s + ")";
    }
    case PlanValue::Kind::Dict:
    case PlanValue::Kind::Iter: {
      std::string s = v.kind == PlanValue::Kind::Dict ? "{" : "iter(";
      for (size_t i = 0; i < v.items.size(); ++i) s += (i ? ", " : "") + describe_value(v.items[i]);
      return s + (v.kind == PlanValue::Kind::Dict ? "}" : ")");
    }
    case PlanValue::Kind::Const: {
      PyObject* r = PyObject_Repr(v.obj.get());
      std::string s = r ? PyUnicode_AsUTF8(r) : "<?>";
      Py_XDECREF(r);
      guards::clear_error();
      return "constant " + s;
    }
    case PlanValue::Kind::Tuple:
    case PlanValue::Kind::List:
    case PlanValue::Kind::Size: {
      std::string s = v.kind == PlanValue::Kind::List ? "[" : v.kind == PlanValue::Kind::Size ? "torch.Size(" : "(";
      for (size_t i = 0; i < v.items.size(); ++i) s += (i ? ", " : "") + describe_value(v.items[i]);
      return s + (v.kind == PlanValue::Kind::List ? "]" : ")");
    }
  }
  return "?";
}

}  // namespace

std::string input_ref(const InputRef& r) {
  switch (r.kind) {
    case InputRef::Kind::Arg: return std::to_string(r.index);
    case InputRef::Kind::Path: return "path " + std::to_string(r.index);
    case InputRef::Kind::Reg: return "r" + std::to_string(r.index);
  }
  return "?";
}

std::string describe_plan(const Plan& plan) {
  std::string s;
  for (const PlanStep& st : plan.steps) {
    switch (st.kind) {
      case PlanStep::Kind::RunGraph: s += "run a graph segment into " + std::to_string(st.seg.out_regs.size()) + " registers\n"; break;
      case PlanStep::Kind::Call: s += "call " + describe_value(st.callable) + " -> r" + std::to_string(st.result_reg) + "\n"; break;
      case PlanStep::Kind::CheckGuards: s += "check " + std::to_string(st.guards->size()) + " guards read after a call\n"; break;
      case PlanStep::Kind::Branch: s += "branch on " + describe_value(st.cond) + " (outcomes traced as they occur)\n"; break;
      case PlanStep::Kind::Deopt: s += "resume in CPython at offset " + std::to_string(st.deopt->offset) + "\n"; break;
    }
  }
  if (plan.graph) {
    s += "run graph 0 on arguments [";
    for (size_t i = 0; i < plan.graph_args.size(); ++i) s += (i ? ", " : "") + input_ref(plan.graph_args[i]);
    s += "]";
    if (!plan.scalar_inputs.empty()) {
      s += " with scalars [";
      for (size_t i = 0; i < plan.scalar_inputs.size(); ++i) s += (i ? ", " : "") + plan.scalar_inputs[i].str();
      s += "]";
    }
    s += "\n";
  }
  return s + "return " + describe_value(plan.ret) + "\n";
}

void write_trace_dump(PyCodeObject* code, const std::string& bytecode, const CacheEntry* entry,
                      const Fallback& why) {
  namespace fs = std::filesystem;
  std::string name = PyUnicode_AsUTF8(code->co_qualname);
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.') ch = '_';
  }
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%04d-", g_dump_counter.fetch_add(1));
  const fs::path dir = fs::path(log::trace_dir()) / (prefix + name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    log::interp().error("FRAMEJIT_TRACE_DIR: cannot create {}: {}", dir.string(), ec.message());
    return;
  }
  const std::string where = std::string(PyUnicode_AsUTF8(code->co_filename)) + ":" +
                            std::to_string(code->co_firstlineno);
  write_file(dir / "bytecode.txt", bytecode);
  if (entry == nullptr) {
    write_file(dir / "outcome.txt", "fallback " + std::string(PyUnicode_AsUTF8(code->co_qualname)) + " (" + where +
                                        ")\n" + why.reason + " (" + why.location + ")\n");
    return;
  }
  write_file(dir / "outcome.txt", "compiled " + std::string(PyUnicode_AsUTF8(code->co_qualname)) + " (" + where + ")\n");
  write_file(dir / "graph.txt", entry->graph_text);
  write_file(dir / "plan.txt", describe_plan(entry->plan));
  std::string guards;
  for (const std::string& g : entry->guards.describe()) guards += g + "\n";
  write_file(dir / "guards.txt", guards);
  if (entry->plan.graph) {
    write_file(dir / "ir.ll", entry->plan.graph->ir());
    write_file(dir / "ir_optimized.ll", entry->plan.graph->optimized_ir());
  }
}

}  // namespace fj::interp

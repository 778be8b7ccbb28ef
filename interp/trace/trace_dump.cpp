// Writing FRAMEJIT_TRACE_DIR dumps (see trace_dump.h).
#include "interp/trace/trace_dump.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "jit/log.h"

namespace fj::interp {
namespace {

std::atomic<unsigned> g_dump_counter{0};

// One dump's folder, created new inside FRAMEJIT_TRACE_DIR and held open: every file
// is created through its descriptor, never by a path that a symlink could redirect.
class DumpFolder {
 public:
  DumpFolder(const DumpFolder&) = delete;
  DumpFolder& operator=(const DumpFolder&) = delete;
  ~DumpFolder() {
    if (fd_ >= 0) ::close(fd_);
  }

  // A new folder "<pid>-<counter>-<name>" in `root` (created if missing; the root is
  // the user's choice and may itself be a link). mkdirat fails on any existing entry,
  // a planted symlink included, so a name in use is skipped for the next counter.
  static std::unique_ptr<DumpFolder> create(const std::string& root, const std::string& name) {
    std::error_code ec;
    std::filesystem::create_directories(root, ec);
    const int root_fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) return fail("cannot open " + root);
    for (int attempt = 0; attempt < 1000; ++attempt) {
      char prefix[48];
      std::snprintf(prefix, sizeof prefix, "%ld-%04u-", static_cast<long>(::getpid()), g_dump_counter.fetch_add(1));
      const std::string folder = prefix + name;
      if (::mkdirat(root_fd, folder.c_str(), 0777) != 0) {
        if (errno == EEXIST) continue;
        break;
      }
      const int fd = ::openat(root_fd, folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      ::close(root_fd);
      if (fd < 0) return fail("cannot open the new folder " + folder + " in " + root);
      return std::unique_ptr<DumpFolder>(new DumpFolder(fd));
    }
    const int err = errno;
    ::close(root_fd);
    errno = err;
    return fail("cannot create a folder in " + root);
  }

  // Writes a new file `file` in the folder (O_EXCL | O_NOFOLLOW: an entry already
  // there, a symlink included, is left alone and the file is skipped).
  void write(const char* file, const std::string& text) const {
    const int fd = ::openat(fd_, file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
      fail(std::string("cannot create ") + file);
      return;
    }
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fail(std::string("cannot write ") + file);
        break;
      }
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }

 private:
  explicit DumpFolder(int fd) : fd_(fd) {}
  static std::unique_ptr<DumpFolder> fail(const std::string& what) {
    log::interp().error("FRAMEJIT_TRACE_DIR: {}: {}", what, std::strerror(errno));
    return nullptr;
  }
  int fd_;
};

// The function's name as a folder name: letters, digits, '_' and '.' kept, anything
// else (a '/', a NUL, a surrogate, any non-ASCII letter) written '_', at most 100 bytes.
std::string folder_name(PyObject* qualname) {
  std::string name = guards::utf8_lossy(qualname, 100);
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.') ch = '_';
  }
  return name.substr(0, 100);
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
    case PlanValue::Kind::Const: return "constant " + guards::describe_object(v.obj.get());
    case PlanValue::Kind::Method: return describe_value(v.items[0]) + "." + guards::utf8_lossy(v.obj.get());
    case PlanValue::Kind::Object: {
      std::string s = std::string(reinterpret_cast<PyTypeObject*>(v.obj.get())->tp_name) + "(";
      for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
        s += (i ? ", " : "") + guards::utf8_lossy(v.items[i].obj.get()) + "=" + describe_value(v.items[i + 1]);
      }
      return s + ")";
    }
    case PlanValue::Kind::Function: {
      std::string s = "new function " + guards::utf8_lossy(reinterpret_cast<PyFunctionObject*>(v.obj.get())->func_qualname) + "(";
      for (size_t i = 0; i < v.items.size(); ++i) s += (i ? ", " : "") + describe_value(v.items[i]);
      return s + ")";
    }
    case PlanValue::Kind::Cell: return "cell(" + describe_value(v.items[0]) + ")";
    case PlanValue::Kind::Stores: {
      std::string s = describe_value(v.items[0]) + " after storing";
      for (size_t i = 1; i + 2 < v.items.size(); i += 3) {
        const std::string target = v.items[i].kind == PlanValue::Kind::Const ? guards::utf8_lossy(v.items[i + 1].obj.get())
                                                                        : describe_value(v.items[i]) + "[:]";
        s += (i > 1 ? ", " : " ") + target + "=" + describe_value(v.items[i + 2]);
      }
      return s;
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
      case PlanStep::Kind::Deopt:
        s += (st.deopt->raise_exit ? "raise in CPython at offset " : "resume in CPython at offset ") +
             std::to_string(st.deopt->offset) + "\n";
        break;
      case PlanStep::Kind::View: s += "r" + std::to_string(st.result_reg) + " = " + describe_value(st.view) + "\n"; break;
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
  const std::unique_ptr<DumpFolder> dir = DumpFolder::create(log::trace_dir(), folder_name(code->co_qualname));
  if (!dir) return;
  const std::string qualname = guards::utf8_lossy(code->co_qualname);
  const std::string where = guards::utf8_lossy(code->co_filename) + ":" + std::to_string(code->co_firstlineno);
  dir->write("bytecode.txt", bytecode);
  if (entry == nullptr) {
    dir->write("outcome.txt", "fallback " + qualname + " (" + where + ")\n" + why.reason + " (" + why.location + ")\n");
    return;
  }
  dir->write("outcome.txt", "compiled " + qualname + " (" + where + ")\n");
  dir->write("graph.txt", entry->graph_text);
  dir->write("plan.txt", describe_plan(entry->plan));
  std::string guards;
  for (const std::string& g : entry->guards.describe()) guards += g + "\n";
  dir->write("guards.txt", guards);
  if (entry->plan.graph) {
    dir->write("ir.ll", entry->plan.graph->ir());
    dir->write("ir_optimized.ll", entry->plan.graph->optimized_ir());
  }
}

}  // namespace fj::interp

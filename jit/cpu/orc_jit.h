// The CPU's JIT on ORC LLJIT, in the spirit of LLVM's KaleidoscopeJIT: create (for
// the host), add object code, look up symbols. Also the target machines that the
// backend's compile tasks generate code with. Internal to jit/cpu (LLVM types in
// its interface); jit/cpu/cpu_backend.h stays LLVM-free.
#pragma once

#include <llvm/ADT/SmallVector.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Target/TargetMachine.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jit/common.h"
#include "jit/fork.h"

namespace fj::jit {

// The LLJIT and the lock held around every use of its session (add, look up,
// remove), so that a fork never copies the session while another thread changes it.
struct JitSession {
  std::shared_ptr<llvm::orc::LLJIT> jit;
  std::shared_ptr<ForkSafeMutex> mu;
};

// Object code added to the JIT together: freed when the last reference goes.
class JitCode {
 public:
  JitCode(JitSession session, llvm::orc::ResourceTrackerSP tracker)
      : session_(std::move(session)), tracker_(std::move(tracker)) {}
  ~JitCode();
  JitCode(const JitCode&) = delete;
  JitCode& operator=(const JitCode&) = delete;

 private:
  JitSession session_;  // first member: outlives the tracker
  llvm::orc::ResourceTrackerSP tracker_;
};

// One object file: its name (for error messages) and bytes.
struct ObjectFile {
  std::string name;
  llvm::SmallVector<char, 0> bytes;
};

class OrcJit {
 public:
  // The JIT for the host CPU: no FP contraction (x*y+1 stays two roundings, as in
  // eager), and the process's symbols (libm, BLAS) visible to the code.
  static Expected<std::unique_ptr<OrcJit>> create();

  // Adds object files under one resource tracker; their symbols resolve from now on.
  Expected<std::shared_ptr<JitCode>> add(std::vector<ObjectFile> objects);
  // The address of a symbol that add() made available.
  Expected<void*> lookup(const std::string& symbol);

  const llvm::DataLayout& data_layout() const { return session_.jit->getDataLayout(); }
  const llvm::Triple& triple() const { return session_.jit->getTargetTriple(); }
  bool host_has_fma() const { return has_fma_; }

  // A target machine for one compile task (an idle one, or a new one); give it
  // back when the task is done.
  Expected<std::unique_ptr<llvm::TargetMachine>> take_target_machine();
  void give_back(std::unique_ptr<llvm::TargetMachine> tm);

 private:
  OrcJit(JitSession session, llvm::orc::JITTargetMachineBuilder jtmb, bool has_fma)
      : session_(std::move(session)), jtmb_(std::move(jtmb)), has_fma_(has_fma) {}

  JitSession session_;
  llvm::orc::JITTargetMachineBuilder jtmb_;
  const bool has_fma_;
  ForkSafeMutex tm_mu_;  // guards tms_
  std::vector<std::unique_ptr<llvm::TargetMachine>> tms_;  // idle ones
  // FRAMEJIT_PERF_MAP=1: the size of each function that add() made available, for
  // the line lookup() writes to /tmp/perf-<pid>.map (so that perf names kernels).
  std::map<std::string, uint64_t> perf_sizes_;  // guarded by session_.mu
};

}  // namespace fj::jit

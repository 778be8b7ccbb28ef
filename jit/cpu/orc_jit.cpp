// OrcJit: ORC LLJIT for the host (jit/cpu/orc_jit.h).
#include "jit/cpu/orc_jit.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/SmallVectorMemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "jit/log.h"

namespace fj::jit {
namespace {

Error llvm_error(const std::string& what, llvm::Error err) {
  return Error{"CPU backend: " + what + ": " + llvm::toString(std::move(err))};
}

void initialize_llvm() {
  static std::once_flag init;
  std::call_once(init, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    // Two code-size options, measured on chains, softmax, layer_norm, cumsum and
    // column sums. Loop strength reduction took a third of code generation and made
    // no kernel faster (their unit-stride address arithmetic is cheap as it is). A
    // vectorized epilogue emits each loop body a third time, for a remainder of at
    // most 63 elements: without it a 30-op chain compiles 20 % faster, and runs
    // within noise of it (also at 1000 elements).
    const char* argv[] = {"framejit", "-disable-lsr", "-enable-epilogue-vectorization=false"};
    llvm::cl::ParseCommandLineOptions(3, argv, "", &llvm::nulls());
  });
}

// FRAMEJIT_PERF_MAP=1: kernels are named in /tmp/perf-<pid>.map, the file `perf report`
// reads for JIT code.
bool perf_map_on() {
  static const bool on = [] {
    const char* v = std::getenv("FRAMEJIT_PERF_MAP");
    return v != nullptr && v[0] == '1';
  }();
  return on;
}

void record_sizes(const llvm::MemoryBuffer& buffer, std::map<std::string, uint64_t>* sizes) {
  auto obj = llvm::object::ObjectFile::createObjectFile(buffer.getMemBufferRef());
  if (!obj) {
    llvm::consumeError(obj.takeError());
    return;
  }
  const auto* elf = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(obj->get());
  if (elf == nullptr) return;
  for (const llvm::object::ELFSymbolRef sym : elf->symbols()) {
    auto name = sym.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (sym.getELFType() == llvm::ELF::STT_FUNC) (*sizes)[name->str()] = sym.getSize();
  }
}

void write_perf_line(void* addr, uint64_t size, const std::string& name) {
  const std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
  if (FILE* f = std::fopen(path.c_str(), "a")) {
    std::fprintf(f, "%lx %lx %s\n", reinterpret_cast<unsigned long>(addr), static_cast<unsigned long>(size), name.c_str());
    std::fclose(f);
  }
}

}  // namespace

JitCode::~JitCode() {
  if (!tracker_) return;
  std::lock_guard<ForkSafeMutex> lock(*session_.mu);
  if (llvm::Error err = tracker_->remove()) {
    log::jit().error("freeing JIT code failed: {}", llvm::toString(std::move(err)));
  }
}

Expected<std::unique_ptr<OrcJit>> OrcJit::create() {
  initialize_llvm();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return llvm_error("detecting the host CPU", jtmb.takeError());
  jtmb->getOptions().AllowFPOpFusion = llvm::FPOpFusion::Strict;
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
  bool has_fma = false;
  for (const std::string& feature : jtmb->getFeatures().getFeatures()) {
    if (feature == "+fma") has_fma = true;
  }
  auto tm = jtmb->createTargetMachine();
  if (!tm) return llvm_error("creating the target machine", tm.takeError());

  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb).create();
  if (!jit) return llvm_error("creating LLJIT", jit.takeError());
  auto libs = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!libs) return llvm_error("opening the process's symbols", libs.takeError());
  (*jit)->getMainJITDylib().addGenerator(std::move(*libs));
  JitSession session{std::shared_ptr<llvm::orc::LLJIT>(std::move(*jit)), std::make_shared<ForkSafeMutex>()};
  std::unique_ptr<OrcJit> out(new OrcJit(std::move(session), *jtmb, has_fma));
  out->give_back(std::move(*tm));
  return out;
}

Expected<std::shared_ptr<JitCode>> OrcJit::add(std::vector<ObjectFile> objects) {
  std::shared_ptr<JitCode> code;  // on failure: frees what was added (after the lock is released)
  std::lock_guard<ForkSafeMutex> lock(*session_.mu);
  llvm::orc::ResourceTrackerSP tracker = session_.jit->getMainJITDylib().createResourceTracker();
  code = std::make_shared<JitCode>(session_, tracker);
  for (ObjectFile& object : objects) {
    auto buffer = std::make_unique<llvm::SmallVectorMemoryBuffer>(std::move(object.bytes), object.name, false);
    if (perf_map_on()) record_sizes(*buffer, &perf_sizes_);
    if (llvm::Error err = session_.jit->addObjectFile(tracker, std::move(buffer))) {
      return llvm_error("adding the code of " + object.name, std::move(err));
    }
  }
  return code;
}

Expected<void*> OrcJit::lookup(const std::string& symbol) {
  std::lock_guard<ForkSafeMutex> lock(*session_.mu);
  auto addr = session_.jit->lookup(symbol);
  if (!addr) return llvm_error("compiling " + symbol, addr.takeError());
  if (auto size = perf_sizes_.find(symbol); size != perf_sizes_.end()) write_perf_line(addr->toPtr<void*>(), size->second, symbol);
  return addr->toPtr<void*>();
}

Expected<std::unique_ptr<llvm::TargetMachine>> OrcJit::take_target_machine() {
  {
    std::lock_guard<ForkSafeMutex> lock(tm_mu_);
    if (!tms_.empty()) {
      std::unique_ptr<llvm::TargetMachine> tm = std::move(tms_.back());
      tms_.pop_back();
      return tm;
    }
  }
  auto tm = jtmb_.createTargetMachine();
  if (!tm) return llvm_error("creating a target machine", tm.takeError());
  return std::move(*tm);
}

void OrcJit::give_back(std::unique_ptr<llvm::TargetMachine> tm) {
  std::lock_guard<ForkSafeMutex> lock(tm_mu_);
  tms_.push_back(std::move(tm));
}

}  // namespace fj::jit

// FRAMEJIT_LOG parsing and the per-subsystem spdlog loggers (all to stderr).
#include "jit/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdio>

#include <atomic>
#include <cstdlib>
#include <sstream>

namespace fj::log {
namespace {

std::atomic<unsigned> g_mask{0};

struct Name {
  const char* name;
  Channel channel;
};
constexpr Name kNames[] = {
    {"bytecode", Channel::Bytecode},       {"graph", Channel::Graph},
    {"guards", Channel::Guards},           {"recompiles", Channel::Recompiles},
    {"graph_breaks", Channel::GraphBreaks}, {"ir", Channel::Ir},
    {"ptx", Channel::Ptx}, {"perf", Channel::Perf},
};

// stderr, or FRAMEJIT_LOG_FILE (appended) when set.
spdlog::sink_ptr shared_sink() {
  const char* path = std::getenv("FRAMEJIT_LOG_FILE");
  if (path != nullptr && *path != '\0') {
    try {
      return std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false);
    } catch (const spdlog::spdlog_ex& e) {
      std::fprintf(stderr, "framejit: cannot open FRAMEJIT_LOG_FILE=%s (%s); logging to stderr\n", path, e.what());
    }
  }
  return std::make_shared<spdlog::sinks::stderr_sink_mt>();
}

spdlog::logger& make(const char* name) {
  static spdlog::sink_ptr sink = shared_sink();
  auto* logger = new spdlog::logger(name, sink);  // lives for the process
  logger->set_pattern("[framejit:%n] %v");
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  return *logger;
}

}  // namespace

std::string configure(const std::string& spec) {
  unsigned mask = 0;
  std::string unknown;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    if (item == "all") {
      mask = ~0u;
      continue;
    }
    bool found = false;
    for (const Name& n : kNames) {
      if (item == n.name) {
        mask |= static_cast<unsigned>(n.channel);
        found = true;
      }
    }
    if (!found) unknown += (unknown.empty() ? "" : ",") + item;
  }
  g_mask.store(mask, std::memory_order_relaxed);
  return unknown;
}

std::string& trace_dir_storage() {
  static std::string dir;
  return dir;
}

void configure_from_env() {
  const char* spec = std::getenv("FRAMEJIT_LOG");
  configure(spec ? spec : "");
  const char* dir = std::getenv("FRAMEJIT_TRACE_DIR");
  set_trace_dir(dir ? dir : "");
}

const std::string& trace_dir() { return trace_dir_storage(); }
void set_trace_dir(std::string dir) { trace_dir_storage() = std::move(dir); }

bool enabled(Channel c) {
  return (g_mask.load(std::memory_order_relaxed) & static_cast<unsigned>(c)) != 0;
}

spdlog::logger& interp() { static spdlog::logger& l = make("interp"); return l; }
spdlog::logger& guards() { static spdlog::logger& l = make("guards"); return l; }
spdlog::logger& jit() { static spdlog::logger& l = make("jit"); return l; }
spdlog::logger& runtime() { static spdlog::logger& l = make("runtime"); return l; }

}  // namespace fj::log

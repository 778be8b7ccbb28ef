// Logging channels switched on by FRAMEJIT_LOG (comma-separated), one spdlog logger
// per subsystem. Channels: bytecode, graph, guards, recompiles, graph_breaks, ir, ptx,
// perf (where compile time goes, per compile).
#pragma once

#include <spdlog/spdlog.h>

namespace fj::log {

enum class Channel : unsigned {
  Bytecode = 1u << 0,
  Graph = 1u << 1,
  Guards = 1u << 2,
  Recompiles = 1u << 3,
  GraphBreaks = 1u << 4,
  Ir = 1u << 5,
  Ptx = 1u << 6,
  Perf = 1u << 7,
};

// Parses a FRAMEJIT_LOG-style spec ("graph,ir", "all"); unknown names are ignored
// and returned so that the caller can warn about them.
std::string configure(const std::string& spec);
// Reads FRAMEJIT_LOG from the environment.
void configure_from_env();
bool enabled(Channel c);
// FRAMEJIT_TRACE_DIR: where per-compile dumps go; empty when off.
const std::string& trace_dir();
void set_trace_dir(std::string dir);

// Loggers by subsystem: "interp", "guards", "jit", "runtime".
spdlog::logger& interp();
spdlog::logger& guards();
spdlog::logger& jit();
spdlog::logger& runtime();

}  // namespace fj::log

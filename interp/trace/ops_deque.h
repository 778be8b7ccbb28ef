// collections.deque made in the frame (ops_deque.cpp): the calls and operators that
// the tracer's handlers hand to it.
#pragma once

#include <optional>
#include <string>

#include "interp/trace/trace_state.h"
#include "interp/trace/trace_support.h"

namespace fj::interp {

class Tracer;

struct DequeCalls {
  static bool is_deque(const Value& v);
  // collections.deque(iterable=(), maxlen=None); nullopt: another callable.
  static std::optional<Status> construct(Tracer& t, const CallSite& c);
  // q.maxlen, and q.append & co for a call.
  static Status attr(Tracer& t, const Value& q, const std::string& name, bool method);
  static Status method(Tracer& t, const CallSite& c);
  static size_t size(const Value& q);
  static Status subscript(Tracer& t, const Value& q, const Value& index);
  static Status store_subscript(Tracer& t, const Value& q, const Value& index, const Value& value);
  static Status iterate(Tracer& t, const Value& q);
  static Status position(Tracer& t, const Value& q, const Value& index, size_t* out);
};

}  // namespace fj::interp

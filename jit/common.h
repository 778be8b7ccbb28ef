// Shared basics for every layer: the two error channels (FJ_CHECK for broken
// invariants, Expected<T> for failures that user input can cause).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace fj {

// A failure that user code or input can cause: an unsupported construct, a shape
// that does not broadcast, an LLVM error. Carries a readable message.
struct Error {
  std::string message;
};

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Error error) : v_(std::move(error)) {}
  explicit operator bool() const { return v_.index() == 0; }
  T& operator*() { return std::get<0>(v_); }
  const T& operator*() const { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  const std::string& error() const { return std::get<1>(v_).message; }
  Error take_error() { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

[[noreturn]] inline void check_failed(const char* cond, const char* file, int line,
                                      const std::string& msg) {
  std::fprintf(stderr, "framejit: internal error at %s:%d: %s (%s)\n", file, line,
               msg.c_str(), cond);
  std::abort();
}

}  // namespace fj

// A broken invariant of framejit itself: report and abort. Never for user input.
#define FJ_CHECK(cond, msg)                                              \
  do {                                                                   \
    if (!(cond)) ::fj::check_failed(#cond, __FILE__, __LINE__, (msg));   \
  } while (0)

// FJ_CHECK in debug builds only, for checks whose release-build answer is a fallback.
#ifdef NDEBUG
#define FJ_DEBUG_CHECK(cond, msg) ((void)0)
#else
#define FJ_DEBUG_CHECK(cond, msg) FJ_CHECK(cond, msg)
#endif

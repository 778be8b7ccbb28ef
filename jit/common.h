// Shared basics for every layer: the two error channels. FJ_CHECK for broken
// invariants (abort); for failures that user code or input can cause, one
// vocabulary everywhere:
//   Error          what went wrong, readable
//   Expected<T>    a T or an Error (operator bool: has a value)
//   Status         Expected<void>: success or an Error. It has no operator bool on
//                  purpose (both "true means failed" and "true means ok" would read
//                  naturally): ask ok() or failed()
//   FJ_TRY(expr)   returns expr's Error from the enclosing function, else yields its
//                  value: `NodeId x = FJ_TRY(b.reduce(...));`, `FJ_TRY(check());`
// interp/ adds where a failure happened (Fallback: reason plus location), because
// only it knows the Python source line; py/ turns errors into Python exceptions.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
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
  bool failed() const { return v_.index() != 0; }
  const std::string& error() const { return std::get<1>(v_).message; }
  Error take_error() { return std::get<1>(std::move(v_)); }
  T take() { return std::get<0>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : error_(std::move(error)) {}
  bool ok() const { return !error_.has_value(); }
  bool failed() const { return error_.has_value(); }
  const std::string& error() const { return error_->message; }
  Error take_error() { return std::move(*error_); }
  void take() {}

 private:
  std::optional<Error> error_;
};

using Status = Expected<void>;
inline Status ok() { return {}; }

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

// The value of an Expected<T> (nothing for a Status); on failure, returns its Error
// from the enclosing function (whose result is an Expected<U> or a Status). A GNU
// statement expression, as GCC and Clang accept.
#define FJ_TRY(expr)                                          \
  ({                                                          \
    auto&& fj_try_ = (expr);                                  \
    if (fj_try_.failed()) return fj_try_.take_error();        \
    fj_try_.take();                                           \
  })

// FJ_CHECK in debug builds only, for checks whose release-build answer is a fallback.
#ifdef NDEBUG
#define FJ_DEBUG_CHECK(cond, msg) ((void)0)
#else
#define FJ_DEBUG_CHECK(cond, msg) FJ_CHECK(cond, msg)
#endif

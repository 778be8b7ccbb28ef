// PyRef: the one owning PyObject* handle of guards/ (a strong reference, released
// when the handle goes; copying takes another reference).
//
// Same shape as interp's PyRef (borrow / steal / get / release), so the two can
// become one. Not for objects kept for the whole process (TorchRefs): a static
// destructor would release them after Python has finalized.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <utility>

namespace fj::guards {

class PyRef {
 public:
  PyRef() = default;
  // A new reference to `o` (which may be null).
  static PyRef borrow(PyObject* o) noexcept { return PyRef(Py_XNewRef(o)); }
  // Takes over a reference the caller owns (a new reference from the C API).
  static PyRef steal(PyObject* o) noexcept { return PyRef(o); }
  PyRef(const PyRef& o) noexcept : p_(Py_XNewRef(o.p_)) {}
  PyRef(PyRef&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  PyRef& operator=(PyRef o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~PyRef() { Py_XDECREF(p_); }

  PyObject* get() const noexcept { return p_; }
  PyObject* release() noexcept { return std::exchange(p_, nullptr); }
  explicit operator bool() const noexcept { return p_ != nullptr; }

 private:
  explicit PyRef(PyObject* o) noexcept : p_(o) {}
  PyObject* p_ = nullptr;
};

// An interned str for `s` (a new reference; null only when out of memory).
inline PyRef interned(const char* s) noexcept { return PyRef::steal(PyUnicode_InternFromString(s)); }

}  // namespace fj::guards

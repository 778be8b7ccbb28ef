// framejit._C: the pybind11 module that binds interp/, guards/ and jit/ for py/framejit.
#include <pybind11/pybind11.h>

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "framejit native core";
}

// framejit._C: the pybind11 module that binds interp/, guards/ and jit/ for py/framejit.
#include <pybind11/pybind11.h>

#include "interp/bytecode.h"

namespace py = pybind11;

namespace {

// A new reference from the C API, or the pending Python exception thrown.
py::object steal_or_throw(PyObject* result) {
  if (!result) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(result);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "framejit native core";

  m.def(
      "decode",
      [](py::handle code, bool positions) {
        return steal_or_throw(fj::decode_to_python(code.ptr(), positions));
      },
      py::arg("code"), py::arg("positions") = false,
      "Decoded instructions of a code object: a list of (offset, opname, opcode, arg, "
      "line, target) tuples; positions=True appends (end_line, col, end_col).");
  m.def(
      "exception_table",
      [](py::handle code) { return steal_or_throw(fj::exception_table_to_python(code.ptr())); },
      py::arg("code"),
      "Exception table of a code object: a list of (start, end, target, depth, lasti).");
}

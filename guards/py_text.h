// Text from Python objects, for framejit's C++ side. Three verbs, one per use:
//
//   utf8_of(o)          a str's UTF-8 when framejit acts on it (an argument string, a
//                       name it looks up): an Error, the Python error cleared, when the
//                       str cannot be encoded (a lone surrogate) or holds a NUL, so the
//                       caller falls back and CPython gives eager's own behaviour
//   utf8_lossy(o)       a str for display only (qualnames, file names in logs, dumps,
//                       messages): never fails, writes lone surrogates as \udXXX and
//                       always returns valid UTF-8
//   describe_object(o)  repr-like text of any object that runs no Python code: the
//                       value of plain numbers, strings, None, bools and torch's own
//                       dtypes and devices, a tensor's metadata, a function's or a
//                       class's name, and "<module.Type object>" for everything else
//                       (a user's __repr__ is never called)
//
// Nothing in framejit may build a std::string from PyUnicode_AsUTF8's result
// directly: that pointer is null exactly when the text is hostile.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <string>

#include "jit/common.h"

namespace fj::guards {

// The UTF-8 of the str `o`; an Error (no Python error left set) when `o` is not a
// str, cannot be encoded to UTF-8 or contains a NUL character.
Expected<std::string> utf8_of(PyObject* o);

// `o`'s text for display: valid UTF-8, lone surrogates as \udXXX, at most
// `max_chars` code points (longer text ends in "..."); "<?>" when `o` is not a str.
std::string utf8_lossy(PyObject* o, size_t max_chars = 4096);

// Whether `o` is a str equal to the ASCII text `ascii` (compared by code point: never
// fails, and a str holding a NUL or a surrogate is simply not equal).
bool str_is(PyObject* o, const char* ascii);

// A short readable description of `o` that runs no user code (see above), at most
// about `max_chars` code points.
std::string describe_object(PyObject* o, size_t max_chars = 60);

}  // namespace fj::guards

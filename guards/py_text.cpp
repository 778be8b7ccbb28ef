// Text from Python objects: checked UTF-8, display UTF-8 and object descriptions
// that run no user code (see py_text.h).
#include "guards/py_text.h"

#include <cstdio>
#include <cstring>
#include <string_view>

#include "guards/guards.h"
#include "guards/py_ref.h"

namespace fj::guards {
namespace {

bool is_surrogate(Py_UCS4 c) { return c >= 0xD800 && c <= 0xDFFF; }
bool is_control(Py_UCS4 c) { return c < 0x20 || c == 0x7F; }

void append_escaped(std::string& out, const char* format, Py_UCS4 c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, format, static_cast<unsigned>(c));
  out += buf;
}

// One code point as UTF-8; surrogates and control characters escaped, so that the
// text is valid UTF-8 and stays on one line.
void append_code_point(std::string& out, Py_UCS4 c) {
  if (is_surrogate(c)) return append_escaped(out, "\\u%04x", c);
  if (is_control(c)) return append_escaped(out, "\\x%02x", c);
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool has_control_byte(std::string_view s) {
  for (char ch : s) {
    if (is_control(static_cast<unsigned char>(ch))) return true;
  }
  return false;
}

// `s` (valid UTF-8) cut to at most `max_chars` code points, ending in "..." when cut.
std::string truncated(std::string s, size_t max_chars) {
  if (max_chars < 4) max_chars = 4;
  size_t chars = 0;
  size_t cut = std::string::npos;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;  // a continuation byte
    if (chars == max_chars - 3) cut = i;
    if (++chars > max_chars) return s.substr(0, cut) + "...";
  }
  return s;
}

// repr() of an object whose type is one of the builtin or torch C types listed by
// describe_object (their repr runs no Python code); "<type>" when it raises.
std::string builtin_repr(PyObject* o, size_t max_chars) {
  const PyRef r = PyRef::steal(PyObject_Repr(o));
  if (!r) {
    clear_error();
    return std::string("<") + Py_TYPE(o)->tp_name + ">";
  }
  return utf8_lossy(r.get(), max_chars);
}

// A class's dotted name as its repr shows it ("mod.Outer.Inner"), read from the type
// itself: __module__ from its dict, the qualified name from its slots.
std::string type_name(PyTypeObject* tp) {
  if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE)) return tp->tp_name;
  auto* ht = reinterpret_cast<PyHeapTypeObject*>(tp);
  static PyObject* s_module = PyUnicode_InternFromString("__module__");  // kept for the process
  PyObject* mod = tp->tp_dict ? PyDict_GetItemWithError(tp->tp_dict, s_module) : nullptr;
  if (mod == nullptr) clear_error();
  std::string name = utf8_lossy(ht->ht_qualname, 200);
  if (mod != nullptr && PyUnicode_CheckExact(mod) && PyUnicode_CompareWithASCIIString(mod, "builtins") != 0) {
    name = utf8_lossy(mod, 200) + "." + name;
  }
  return name;
}

// torch's own C types whose repr is plain data (torch.float32, device(type='cpu')).
bool is_torch_data_type(PyTypeObject* tp) {
  if (tp->tp_flags & Py_TPFLAGS_HEAPTYPE) return false;
  static constexpr const char* kNames[] = {"torch.dtype", "torch.device", "torch.layout", "torch.memory_format",
                                           "torch.qscheme"};
  for (const char* n : kNames) {
    if (std::strcmp(tp->tp_name, n) == 0) return true;
  }
  return false;
}

std::string describe(PyObject* o, size_t max_chars, int depth);

// The items of a tuple, list or torch.Size, each described; at most 8 shown.
std::string describe_items(PyObject* seq, size_t max_chars, int depth) {
  const bool list = PyList_Check(seq);
  const bool size = Py_TYPE(seq) == reinterpret_cast<PyTypeObject*>(torch_refs().size_type);
  const Py_ssize_t n = list ? PyList_GET_SIZE(seq) : PyTuple_GET_SIZE(seq);
  if (depth > 3) return list ? "[...]" : "(...)";
  std::string s = size ? "torch.Size([" : list ? "[" : "(";
  for (Py_ssize_t i = 0; i < n && i < 8; ++i) {
    PyObject* item = list ? PyList_GET_ITEM(seq, i) : PyTuple_GET_ITEM(seq, i);
    s += (i ? ", " : "") + describe(item, max_chars, depth + 1);
  }
  if (n > 8) s += ", ...";
  if (n == 1 && !list && !size) s += ",";
  return s + (size ? "])" : list ? "]" : ")");
}

// A plain tensor's metadata: "tensor(shape=[2, 3], dtype=torch.float32)".
std::string describe_tensor(PyObject* t) {
  const Expected<TensorMeta> m = tensor_meta(t);
  if (!m) return "<torch.Tensor object>";
  std::string shape;
  for (int d = 0; d < m->rank; ++d) shape += (d ? ", " : "") + std::to_string(m->sizes[static_cast<size_t>(d)]);
  return "tensor(shape=[" + shape + "], dtype=" + describe(m->dtype, 40, 1) + (m->is_cpu ? "" : ", not on the cpu") +
         (m->requires_grad ? ", requires_grad=True" : "") + ")";
}

std::string describe(PyObject* o, size_t max_chars, int depth) {
  if (o == nullptr) return "NULL";
  if (o == Py_None) return "None";
  if (o == Py_True) return "True";
  if (o == Py_False) return "False";
  if (o == Py_Ellipsis) return "Ellipsis";
  PyTypeObject* tp = Py_TYPE(o);
  if (PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyComplex_CheckExact(o) || is_torch_data_type(tp)) {
    return builtin_repr(o, max_chars);
  }
  if (PyUnicode_CheckExact(o)) {
    const PyRef head = PyRef::steal(PyUnicode_Substring(o, 0, static_cast<Py_ssize_t>(max_chars)));
    return head ? builtin_repr(head.get(), max_chars) : (clear_error(), std::string("<str>"));
  }
  if (PyTuple_CheckExact(o) || PyList_CheckExact(o) || tp == reinterpret_cast<PyTypeObject*>(torch_refs().size_type)) {
    return describe_items(o, max_chars, depth);
  }
  if (PyType_Check(o)) return "<class '" + type_name(reinterpret_cast<PyTypeObject*>(o)) + "'>";
  if (PyFunction_Check(o)) {
    return "<function " + utf8_lossy(reinterpret_cast<PyFunctionObject*>(o)->func_qualname, 200) + ">";
  }
  if (PyCFunction_Check(o)) {
    auto* fn = reinterpret_cast<PyCFunctionObject*>(o);
    const std::string name = fn->m_ml->ml_name;
    PyObject* self = fn->m_self;
    if (self == nullptr || PyModule_Check(self)) return "<built-in function " + name + ">";
    return "<built-in method " + name + " of " + type_name(Py_TYPE(self)) + " object>";
  }
  if (tp == &PyMethodDescr_Type) {
    auto* d = reinterpret_cast<PyDescrObject*>(o);
    return "<method '" + utf8_lossy(d->d_name, 100) + "' of '" + d->d_type->tp_name + "' objects>";
  }
  if (PyModule_CheckExact(o)) {
    const PyRef name = PyRef::steal(PyModule_GetNameObject(o));
    if (!name) clear_error();
    return "<module '" + utf8_lossy(name.get(), 200) + "'>";
  }
  const auto& refs = torch_refs();
  if (tp == reinterpret_cast<PyTypeObject*>(refs.tensor_type) ||
      (refs.parameter_type && tp == reinterpret_cast<PyTypeObject*>(refs.parameter_type))) {
    return describe_tensor(o);
  }
  // No address: a reason that names the object must read the same for every object of
  // the type, so that the same fallback again and again is seen as the same (hook.cpp).
  std::string s = "<";  // (appended, not "<" + string&&: GCC 12 warns a false -Wrestrict)
  s += type_name(tp);
  return s + " object>";
}

}  // namespace

Expected<std::string> utf8_of(PyObject* o) {
  if (o == nullptr || !PyUnicode_Check(o)) return Error{"a name or string argument that is not a str"};
  Py_ssize_t size = 0;
  const char* p = PyUnicode_AsUTF8AndSize(o, &size);
  if (p == nullptr) {
    clear_error();
    return Error{"the string " + utf8_lossy(o, 60) + " cannot be encoded to UTF-8 (a lone surrogate)"};
  }
  if (std::strlen(p) != static_cast<size_t>(size)) return Error{"the string " + utf8_lossy(o, 60) + " holds a NUL"};
  return std::string(p, static_cast<size_t>(size));
}

std::string utf8_lossy(PyObject* o, size_t max_chars) {
  if (o == nullptr || !PyUnicode_Check(o)) return "<?>";
  if (PyUnicode_READY(o) < 0) {
    clear_error();
    return "<?>";
  }
  const size_t n = static_cast<size_t>(PyUnicode_GET_LENGTH(o));
  if (max_chars < 4) max_chars = 4;
  const bool cut = n > max_chars;
  if (!cut) {
    Py_ssize_t size = 0;
    const char* p = PyUnicode_AsUTF8AndSize(o, &size);
    if (p != nullptr && !has_control_byte({p, static_cast<size_t>(size)})) return std::string(p, static_cast<size_t>(size));
    clear_error();
  }
  const int kind = PyUnicode_KIND(o);
  const void* data = PyUnicode_DATA(o);
  const size_t keep = cut ? max_chars - 3 : n;
  std::string out;
  for (size_t i = 0; i < keep; ++i) append_code_point(out, PyUnicode_READ(kind, data, static_cast<Py_ssize_t>(i)));
  return cut ? out + "..." : out;
}

bool str_is(PyObject* o, const char* ascii) {
  return o != nullptr && PyUnicode_Check(o) && PyUnicode_GET_LENGTH(o) == static_cast<Py_ssize_t>(std::strlen(ascii)) &&
         PyUnicode_CompareWithASCIIString(o, ascii) == 0;
}

std::string describe_object(PyObject* o, size_t max_chars) { return truncated(describe(o, max_chars, 0), max_chars); }

}  // namespace fj::guards

// Decoding of CPython 3.11 bytecode (instructions, location table, exception table)
// and its Python-facing form for framejit.dis.
#include "interp/trace/bytecode.h"

#include <array>
#include <string>

namespace fj {
namespace {

struct OpcodeInfo {
  const char* name = nullptr;  // nullptr: not a 3.11 opcode
  uint8_t caches = 0;
  uint32_t flags = 0;
};

constexpr std::array<OpcodeInfo, 256> make_opcode_table() {
  std::array<OpcodeInfo, 256> t{};
#define FJ_OPCODE(name, number, caches, flags, handler) t[number] = OpcodeInfo{#name, caches, flags};
#include "interp/trace/opcodes.def"
  return t;
}

constexpr std::array<OpcodeInfo, 256> kOpcodes = make_opcode_table();

// ---- location table (CPython 3.11 Objects/locations.md) ----------------------------
//
// A sequence of entries, each covering 1..8 code units. The first byte of an entry
// has bit 7 set, bits 3-6 hold the kind, bits 0-2 the unit count minus one:
//   15      no location
//   14      long form: svarint line delta, varint end line delta, varint col+1,
//           varint end col+1
//   13      no columns: svarint line delta
//   10..12  one line: line delta = kind - 10, then a byte col and a byte end col
//   0..9    short form: same line, one byte b: col = kind*8 + (b>>4), end = col + (b&15)
// Varints are little-endian 6-bit chunks, 0x40 meaning "more follows".
enum LocationKind : int {
  kLocNone = 15,
  kLocLong = 14,
  kLocNoColumns = 13,
  kLocOneLine0 = 10,
  kLocOneLine2 = 12,
};

struct Position {
  int line = -1, end_line = -1, col = -1, end_col = -1;
};

// Walks the table forwards; positions past its end are unknown (-1), as in dis.
class LineTableReader {
 public:
  LineTableReader(std::span<const uint8_t> table, int firstlineno)
      : table_(table), computed_line_(firstlineno) {}

  // Position of code unit `unit`; units must be asked for in increasing order.
  Position at(int unit) {
    while (unit >= range_end_) {
      if (!next_entry()) return Position{};
    }
    return current_;
  }

 private:
  int read_byte() { return pos_ < table_.size() ? table_[pos_++] : 0; }
  int read_varint() {
    int b = read_byte();
    unsigned val = b & 63;
    unsigned shift = 0;
    while (b & 64) {
      b = read_byte();
      shift += 6;
      val |= unsigned(b & 63) << shift;
    }
    return int(val);
  }
  int read_signed_varint() {
    unsigned u = unsigned(read_varint());
    return (u & 1) ? -int(u >> 1) : int(u >> 1);
  }

  bool next_entry() {
    if (pos_ >= table_.size()) return false;
    int first = read_byte();
    int kind = (first >> 3) & 15;
    range_end_ += (first & 7) + 1;
    Position p;
    if (kind == kLocNone) {
      // line stays unknown; the computed line does not move
    } else if (kind == kLocLong) {
      computed_line_ += read_signed_varint();
      p.line = computed_line_;
      p.end_line = p.line + read_varint();
      p.col = read_varint() - 1;
      p.end_col = read_varint() - 1;
    } else if (kind == kLocNoColumns) {
      computed_line_ += read_signed_varint();
      p.line = p.end_line = computed_line_;
    } else if (kind >= kLocOneLine0 && kind <= kLocOneLine2) {
      computed_line_ += kind - kLocOneLine0;
      p.line = p.end_line = computed_line_;
      p.col = read_byte();
      p.end_col = read_byte();
    } else {
      int second = read_byte();
      p.line = p.end_line = computed_line_;
      p.col = (kind << 3) | (second >> 4);
      p.end_col = p.col + (second & 15);
    }
    current_ = p;
    // Skip whatever this entry holds that the kinds above did not read.
    while (pos_ < table_.size() && !(table_[pos_] & 128)) ++pos_;
    return true;
  }

  std::span<const uint8_t> table_;
  size_t pos_ = 0;
  int computed_line_;
  int range_end_ = 0;  // first code unit after the current entry
  Position current_;
};

// ---- exception table (CPython 3.11 Objects/exception_handling_notes.txt) ----------
//
// Entries of four varints: start, length, target (in code units) and
// depth<<1 | lasti. These varints are big-endian 6-bit chunks with 0x40 meaning
// "more follows"; bit 7 marks the first byte of an entry.
class ExceptionTableReader {
 public:
  explicit ExceptionTableReader(std::span<const uint8_t> table) : table_(table) {}

  // The next entry, false at the end (a truncated last entry is dropped, like dis).
  bool next(ExceptionEntry& e) {
    int start, length, target, depth_lasti;
    if (!read_varint(start) || !read_varint(length) || !read_varint(target) ||
        !read_varint(depth_lasti))
      return false;
    e.start = start * 2;
    e.end = e.start + length * 2;
    e.target = target * 2;
    e.depth = depth_lasti >> 1;
    e.lasti = (depth_lasti & 1) != 0;
    return true;
  }

 private:
  bool read_varint(int& out) {
    if (pos_ >= table_.size()) return false;
    int b = table_[pos_++];
    int val = b & 63;
    while (b & 64) {
      if (pos_ >= table_.size()) return false;
      b = table_[pos_++];
      val = (val << 6) | (b & 63);
    }
    out = val;
    return true;
  }

  std::span<const uint8_t> table_;
  size_t pos_ = 0;
};

std::span<const uint8_t> bytes_span(PyObject* bytes) {
  return {reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(bytes)),
          size_t(PyBytes_GET_SIZE(bytes))};
}

}  // namespace

std::string_view opcode_name(uint8_t opcode) {
  const char* n = kOpcodes[opcode].name;
  return n ? std::string_view(n) : std::string_view();
}
bool opcode_known(uint8_t opcode) { return kOpcodes[opcode].name != nullptr; }
int opcode_caches(uint8_t opcode) { return kOpcodes[opcode].caches; }
uint32_t opcode_flags(uint8_t opcode) { return kOpcodes[opcode].flags; }

Expected<DecodedCode> decode_raw(const RawCode& raw) {
  if (raw.code.size() % 2 != 0)
    return Error{"bytecode has an odd length (" + std::to_string(raw.code.size()) + ")"};
  const int n_units = int(raw.code.size() / 2);
  DecodedCode out;
  out.index_at_unit_.assign(n_units, -1);
  out.instructions.reserve(n_units);
  LineTableReader lines(raw.linetable, raw.firstlineno);

  // The oparg is accumulated like dis._unpack_opargs: EXTENDED_ARG shifts what it
  // has gathered left by 8, any other opcode consumes it, an argument-less one
  // resets it. CPython stores it as a signed 32-bit int.
  uint32_t extended = 0;
  for (int unit = 0; unit < n_units;) {
    const uint8_t op = raw.code[2 * unit];
    const OpcodeInfo& info = kOpcodes[op];
    const int offset = 2 * unit;
    if (!info.name)
      return Error{"unknown opcode " + std::to_string(op) + " at offset " +
                   std::to_string(offset)};
    if (unit + 1 + info.caches > n_units)
      return Error{std::string("bytecode ends inside the inline caches of ") + info.name +
                   " at offset " + std::to_string(offset)};
    Instruction ins;
    ins.offset = offset;
    ins.opcode = op;
    if (op >= kHaveArgument) {
      const uint32_t arg = raw.code[2 * unit + 1] | extended;
      ins.arg = int32_t(arg);
      extended = op == kExtendedArg ? arg << 8 : 0;
    } else {
      extended = 0;
    }
    const Position p = lines.at(unit);
    ins.line = p.line;
    ins.end_line = p.end_line;
    ins.col = p.col;
    ins.end_col = p.end_col;
    if (info.flags & FJ_HASJREL) {
      const int64_t delta = (info.flags & FJ_JUMP_BACKWARD) ? -int64_t(ins.arg) : ins.arg;
      ins.target = int(offset + 2 + 2 * info.caches + 2 * delta);
    } else if (info.flags & FJ_HASJABS) {
      ins.target = 2 * ins.arg;
    }
    out.index_at_unit_[unit] = int(out.instructions.size());
    out.instructions.push_back(ins);
    unit += 1 + info.caches;
  }

  for (const Instruction& ins : out.instructions) {
    if (ins.target >= 0 && out.index_at(ins.target) < 0)
      return Error{std::string(ins.name()) + " at offset " + std::to_string(ins.offset) +
                   " jumps to " + std::to_string(ins.target) + ", not an instruction"};
  }

  ExceptionTableReader exc(raw.exceptiontable);
  ExceptionEntry e;
  while (exc.next(e)) {
    if (e.start > e.end || out.index_at(e.target) < 0)
      return Error{"exception table entry [" + std::to_string(e.start) + ", " +
                   std::to_string(e.end) + ") -> " + std::to_string(e.target) +
                   " does not fit the bytecode"};
    out.exception_table.push_back(e);
  }
  return out;
}

Expected<DecodedCode> decode(PyCodeObject* code) {
  PyObject* bytes = PyCode_GetCode(code);
  if (!bytes) {
    PyErr_Clear();
    return Error{"PyCode_GetCode failed"};
  }
  RawCode raw{bytes_span(bytes), bytes_span(code->co_linetable),
              bytes_span(code->co_exceptiontable), code->co_firstlineno};
  Expected<DecodedCode> result = decode_raw(raw);
  Py_DECREF(bytes);
  return result;
}

namespace {

// Checks the argument and decodes it; NULL-equivalent (false) with an exception set.
bool decode_for_python(PyObject* obj, DecodedCode& out) {
  if (!PyCode_Check(obj)) {
    PyErr_Format(PyExc_TypeError,
                 "framejit.dis() expects a function or a code object, got %s",
                 Py_TYPE(obj)->tp_name);
    return false;
  }
  Expected<DecodedCode> d = decode(reinterpret_cast<PyCodeObject*>(obj));
  if (!d) {
    PyErr_Format(PyExc_ValueError, "framejit: cannot decode %R: %s", obj, d.error().c_str());
    return false;
  }
  out = std::move(*d);
  return true;
}

// -1 (absent) -> None, else an int. New reference.
PyObject* int_or_none(int v) {
  if (v < 0) Py_RETURN_NONE;
  return PyLong_FromLong(v);
}

// Interned opcode names, made on first use (under the GIL) and kept for good.
PyObject* opname_object(uint8_t op) {
  static std::array<PyObject*, 256> names{};
  if (!names[op]) names[op] = PyUnicode_InternFromString(kOpcodes[op].name);
  Py_XINCREF(names[op]);
  return names[op];
}

}  // namespace

PyObject* decode_to_python(PyObject* obj, bool with_positions) {
  DecodedCode d;
  if (!decode_for_python(obj, d)) return nullptr;
  PyObject* list = PyList_New(Py_ssize_t(d.instructions.size()));
  if (!list) return nullptr;
  for (size_t i = 0; i < d.instructions.size(); ++i) {
    const Instruction& ins = d.instructions[i];
    PyObject* arg = ins.has_arg() ? PyLong_FromLong(ins.arg) : Py_NewRef(Py_None);
    PyObject* tuple;
    if (with_positions) {
      tuple = Py_BuildValue("(iNiNNNNNN)", ins.offset, opname_object(ins.opcode),
                            int(ins.opcode), arg, int_or_none(ins.line),
                            int_or_none(ins.target), int_or_none(ins.end_line),
                            int_or_none(ins.col), int_or_none(ins.end_col));
    } else {
      tuple = Py_BuildValue("(iNiNNN)", ins.offset, opname_object(ins.opcode), int(ins.opcode),
                            arg, int_or_none(ins.line), int_or_none(ins.target));
    }
    if (!tuple) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, Py_ssize_t(i), tuple);
  }
  return list;
}

PyObject* exception_table_to_python(PyObject* obj) {
  DecodedCode d;
  if (!decode_for_python(obj, d)) return nullptr;
  PyObject* list = PyList_New(Py_ssize_t(d.exception_table.size()));
  if (!list) return nullptr;
  for (size_t i = 0; i < d.exception_table.size(); ++i) {
    const ExceptionEntry& e = d.exception_table[i];
    PyObject* tuple = Py_BuildValue("(iiiiO)", e.start, e.end, e.target, e.depth,
                                    e.lasti ? Py_True : Py_False);
    if (!tuple) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, Py_ssize_t(i), tuple);
  }
  return list;
}

}  // namespace fj

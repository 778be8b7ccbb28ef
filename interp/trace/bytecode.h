// Decoding of CPython 3.11 bytecode: instructions, locations, exception table.
//
// Design note. The interpreter never reads a code object's live bytes (they hold
// specialized opcodes and cache data); it reads the de-specialized form that
// `PyCode_GetCode` returns and `dis` shows, decoded once into a DecodedCode:
//   - one Instruction per opcode, inline CACHE units skipped, EXTENDED_ARG kept as
//     an instruction of its own (like dis), with its argument, source position
//     and resolved jump target;
//   - the exception table as ExceptionEntry ranges;
//   - a dense offset -> instruction index map for jumps and handlers.
// The decoding itself (decode_raw) is plain C++ over byte spans, so it does not
// depend on a live interpreter; decode() only pulls the bytes out of a code object.
// The opcode table is data generated from CPython's `opcode` module (opcodes.def).
#pragma once

#include <Python.h>

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "jit/common.h"

#if PY_MAJOR_VERSION != 3 || PY_MINOR_VERSION != 11
#error "interp/trace/bytecode.h: the bytecode, location table and exception table formats are CPython 3.11's"
#endif

namespace fj {

// Opcode flags, as listed in opcodes.def.
enum OpcodeFlags : uint32_t {
  FJ_HASARG = 1u << 0,         // opcode >= HAVE_ARGUMENT: has an oparg
  FJ_HASJREL = 1u << 1,        // relative jump (3.11: all jumps)
  FJ_HASJABS = 1u << 2,        // absolute jump (none in 3.11)
  FJ_HASCONST = 1u << 3,       // oparg indexes co_consts
  FJ_HASNAME = 1u << 4,        // oparg indexes co_names (LOAD_GLOBAL: shifted by 1)
  FJ_HASLOCAL = 1u << 5,       // oparg indexes fast locals
  FJ_HASFREE = 1u << 6,        // oparg indexes cells / free variables
  FJ_HASCOMPARE = 1u << 7,     // oparg is a comparison operator
  FJ_JUMP_BACKWARD = 1u << 8,  // relative jump that counts backwards
};

// Every opcode that de-specialized 3.11 bytecode can contain, by its CPython name.
enum class Opcode : uint8_t {
#define FJ_OPCODE(name, number, caches, flags, handler) name = number,
#include "interp/trace/opcodes.def"
};

constexpr int kHaveArgument = 90;
constexpr int kExtendedArg = 144;

// Name of an opcode ("LOAD_FAST"), or "" when 3.11 defines no such opcode.
std::string_view opcode_name(uint8_t opcode);
// Whether 3.11 defines this opcode.
bool opcode_known(uint8_t opcode);
// Number of inline CACHE code units that follow the opcode.
int opcode_caches(uint8_t opcode);
// OpcodeFlags bits of the opcode.
uint32_t opcode_flags(uint8_t opcode);

struct Instruction {
  int offset = 0;      // in bytes, like dis
  uint8_t opcode = 0;  // de-specialized opcode
  int arg = 0;         // oparg with EXTENDED_ARG prefixes folded in; 0 if !has_arg()
  int line = -1;       // positions.lineno, -1 when the instruction has no location
  int end_line = -1;   // positions.end_lineno, -1 when unknown
  int col = -1;        // positions.col_offset, -1 when unknown
  int end_col = -1;    // positions.end_col_offset, -1 when unknown
  int target = -1;     // jump target offset in bytes (argval of dis), -1 if no jump

  bool has_arg() const { return opcode >= kHaveArgument; }
  bool is_jump() const { return (opcode_flags(opcode) & (FJ_HASJREL | FJ_HASJABS)) != 0; }
  // Offset of the next instruction, after this one's inline caches.
  int next_offset() const { return offset + 2 + 2 * opcode_caches(opcode); }
  std::string_view name() const { return opcode_name(opcode); }
};

// One row of the 3.11 exception table: instructions in [start, end) (byte offsets)
// jump to `target` with the value stack popped to `depth`; `lasti` pushes the
// offset of the raising instruction first.
struct ExceptionEntry {
  int start = 0;
  int end = 0;
  int target = 0;
  int depth = 0;
  bool lasti = false;
};

struct DecodedCode {
  std::vector<Instruction> instructions;
  std::vector<ExceptionEntry> exception_table;
  // index_at_unit_[offset / 2]: index into `instructions`, -1 inside caches.
  std::vector<int> index_at_unit_;

  // Index of the instruction that starts at byte `offset`, -1 if none does.
  int index_at(int offset) const {
    if (offset < 0 || (offset & 1) || offset / 2 >= (int)index_at_unit_.size()) return -1;
    return index_at_unit_[offset / 2];
  }
};

// The raw inputs of decoding, as a 3.11 code object holds them.
struct RawCode {
  std::span<const uint8_t> code;            // de-specialized co_code
  std::span<const uint8_t> linetable;       // co_linetable (locations.md format)
  std::span<const uint8_t> exceptiontable;  // co_exceptiontable
  int firstlineno = 0;                      // co_firstlineno
};

// Decodes bytes. Fails on malformed input (odd length, unknown opcode, caches past
// the end, a jump or handler that does not land on an instruction).
Expected<DecodedCode> decode_raw(const RawCode& raw);

// Decodes a code object's de-specialized bytecode. Needs the GIL.
Expected<DecodedCode> decode(PyCodeObject* code);

// For framejit.dis: a new list of (offset, opname, opcode, arg, line, target)
// tuples, arg None below HAVE_ARGUMENT, line and target None when absent;
// with_positions appends (end_line, col, end_col), None when absent.
// NULL with a Python exception set on failure (TypeError for a non-code object,
// ValueError for bytecode that does not decode).
PyObject* decode_to_python(PyObject* code, bool with_positions = false);

// A new list of (start, end, target, depth, lasti) tuples, as
// dis._parse_exception_table gives them. NULL with an exception set on failure.
PyObject* exception_table_to_python(PyObject* code);

}  // namespace fj

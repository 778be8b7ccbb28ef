// The symbolic bytecode interpreter for CPython 3.11: one handler per opcode family,
// dispatched through a table indexed by opcode; anything without a handler ends the
// trace with a reason (the frame then runs in CPython).
#include "interp/interpreter.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "interp/bytecode.h"
#include "interp/hook.h"
#include "interp/trace_dump.h"
#include "interp/ops.h"
#include "jit/cpu_backend.h"
#include "jit/log.h"

namespace fj::interp {
namespace {

constexpr int kMaxSteps = 100000;  // a trace longer than this gives up
constexpr int kNbInplaceAdd = 13;  // BINARY_OP arguments from here on are in-place

constexpr int op(Opcode o) { return static_cast<int>(o); }

// A reason to stop tracing; the frame runs in CPython.
struct Unsupported {
  std::string reason;
};

using Status = std::optional<Unsupported>;
Status ok() { return std::nullopt; }
Status unsupported(std::string why) { return Unsupported{std::move(why)}; }

std::string repr_short(PyObject* o) {
  PyObject* r = PyObject_Repr(o);
  if (r == nullptr) {
    PyErr_Clear();
    return "<?>";
  }
  std::string s = PyUnicode_AsUTF8(r);
  Py_DECREF(r);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

bool is_plain_scalar(PyObject* o) {
  return PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyBool_Check(o);
}

// Constants whose operations run no user code: numbers, None, strings, tuples of these.
bool is_foldable(PyObject* o) {
  if (is_plain_scalar(o) || o == Py_None || PyUnicode_CheckExact(o)) return true;
  if (PyTuple_CheckExact(o)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i) {
      if (!is_foldable(PyTuple_GET_ITEM(o, i))) return false;
    }
    return true;
  }
  return false;
}

class Tracer {
 public:
  Tracer(CodeState& st, compat::Frame* f, const guards::CallInputs& in, const DecodedCode& code)
      : st_(st), frame_(f), in_(in), entry_(std::make_unique<CacheEntry>()) {
    cur_ = FrameCtx{&root_fs_, &code, st.code, in.globals, in.builtins, nullptr, nullptr, 0};
  }

  std::unique_ptr<CacheEntry> run(Fallback* why);
  Status execute(Value* result);
  Status inline_call(PyObject* fn, std::vector<Value> args, PyObject* kw_names);

 private:
  using Handler = Status (Tracer::*)(const Instruction&);
  static const std::array<Handler, 256>& handlers();

  Status bind_arguments();
  Status step(const Instruction& ins);
  Status finish(const Value& ret);
  Status compile();

  Value pop() {
    Value v = std::move(cur_.fs->stack.back());
    cur_.fs->stack.pop_back();
    return v;
  }
  void push(Value v) { cur_.fs->stack.push_back(std::move(v)); }
  Value& top(size_t i = 1) { return cur_.fs->stack[cur_.fs->stack.size() - i]; }
  Status jump_to(int offset);
  Expected<jit::NodeId> operand(const Value& v);
  // Symbolic scalars
  int new_symbol(jit::SymType type, jit::SymValue hint, std::string source);
  Status push_sym(jit::SymExpr e, const char* what);
  Status guard_truth(const jit::SymExpr& cond, bool* out);
  std::string readable(const jit::SymExpr& e) const;
  Status call_op(jit::Op op, const std::vector<Value>& args);
  Status call_py_op(const PyOp& op, std::vector<Value> args, PyObject* kw_names);
  Value dim_value(jit::NodeId node, size_t d);
  Value shape_tuple(jit::NodeId node);
  Status call_shape_method(const std::string& name, const std::vector<Value>& args);
  Status fold_binary(int nb_op, const Value& lhs, const Value& rhs);
  Status truth(const Value& v, bool* out);
  std::string describe(const Value& v) const;
  std::string location(const Instruction& ins) const;

  // ---- handlers, one per opcode family; each starts with its stack effect ----
  Status op_nop(const Instruction&);
  Status op_load_fast(const Instruction&);
  Status op_store_fast(const Instruction&);
  Status op_load_deref(const Instruction&);
  Status op_store_deref(const Instruction&);
  Status op_load_const(const Instruction&);
  Status op_load_global(const Instruction&);
  Status op_load_attr(const Instruction&);
  Status op_load_method(const Instruction&);
  Status op_push_null(const Instruction&);
  Status op_make_function(const Instruction&);
  Status op_kw_names(const Instruction&);
  Status op_call(const Instruction&);
  Status op_binary_op(const Instruction&);
  Status op_unary_negative(const Instruction&);
  Status op_unary_not(const Instruction&);
  Status op_unary_invert(const Instruction&);
  Status op_compare_op(const Instruction&);
  Status op_is_op(const Instruction&);
  Status op_build_seq(const Instruction&);
  Status op_unpack_sequence(const Instruction&);
  Status op_binary_subscr(const Instruction&);
  Status op_pop_top(const Instruction&);
  Status op_copy(const Instruction&);
  Status op_swap(const Instruction&);
  Status op_jump(const Instruction&);
  Status op_pop_jump_if(const Instruction&);
  Status op_jump_if_or_pop(const Instruction&);
  Status op_return_value(const Instruction&);

  // The frame being traced: the root frame or an inlined callee.
  struct FrameCtx {
    FrameState* fs;
    const DecodedCode* code;
    PyCodeObject* co;
    PyObject* globals;         // borrowed
    PyObject* builtins;        // borrowed
    PyObject* guard_globals;   // for guards: nullptr = the call's own globals
    PyObject* guard_builtins;  // for guards: nullptr = the call's own builtins
    int depth;                 // 0 for the root frame
  };

  CodeState& st_;
  compat::Frame* frame_;
  const guards::CallInputs& in_;
  std::unique_ptr<CacheEntry> entry_;
  jit::Graph graph_;
  FrameState root_fs_;
  FrameCtx cur_;
  const Instruction* last_ins_ = nullptr;  // for the location of a failure
  PyCodeObject* last_co_ = nullptr;
  int steps_ = 0;

 public:
  std::string* trace_log_ = nullptr;  // FRAMEJIT_TRACE_DIR: each instruction traced
  std::vector<int> placeholder_slot_;  // argument slot of each placeholder
  std::vector<jit::NodeId> scalar_nodes_;  // the scalar_input node of each plan scalar
  jit::Bindings hints_;                    // each symbol's value in the traced call
  std::vector<std::string> symbol_sources_;  // each symbol's source, "L['n']"
  long stack_drift_ = 0;  // framejit's stack depth minus CPython's, see step()
};

// ---- setup ----

Status Tracer::bind_arguments() {
  PyCodeObject* code = cur_.co;
  if (code->co_flags & (CO_VARARGS | CO_VARKEYWORDS)) return unsupported("*args or **kwargs parameters");
  cur_.fs->locals.resize(static_cast<size_t>(code->co_nlocalsplus));
  // Free variables: the closure's cells, read now (COPY_FREE_VARS has not run yet)
  // and guarded. Cell variables stay plain locals: no closure is ever created.
  const int first_free = code->co_nlocalsplus - code->co_nfreevars;
  for (int k = 0; k < code->co_nfreevars; ++k) {
    if (in_.closure == nullptr) return unsupported("free variables without a closure");
    PyObject* v = PyCell_GET(PyTuple_GET_ITEM(in_.closure, k));
    if (v == nullptr) continue;  // an empty cell: reading it ends the trace
    const std::string name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(code->co_localsplusnames, first_free + k));
    entry_->guards.add_closure(k, name, v);
    cur_.fs->locals[static_cast<size_t>(first_free + k)] = Value::constant(PyRef::borrow(v));
  }
  const auto& refs = guards::torch_refs();
  for (int i = 0; i < in_.num_args; ++i) {
    PyObject* a = in_.args[i];
    const std::string name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(code->co_localsplusnames, i));
    Source src;
    src.kind = Source::Kind::Arg;
    src.arg = i;
    src.name = name;
    const auto& meta = in_.metas[static_cast<size_t>(i)];
    if (meta) {
      const std::optional<jit::DType> known = dtype_from_torch(meta->dtype);
      if (!known) return unsupported("tensor '" + name + "' has dtype " + repr_short(meta->dtype) + " (not supported yet)");
      const jit::DType dt = *known;
      if (!meta->is_cpu) return unsupported("tensor '" + name + "' is not on the CPU");
      if (meta->requires_grad) return unsupported("tensor '" + name + "' requires grad (autograd is not supported yet)");
      jit::Shape shape(meta->sizes.begin(), meta->sizes.begin() + meta->rank);
      // With dynamic shapes every size is a symbol, except 0 and 1 (specialized).
      std::array<int, guards::kMaxRank> dim_symbols;
      dim_symbols.fill(-1);
      jit::SymShape sym;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (st_.dynamic && shape[d] >= 2) {
          dim_symbols[d] = new_symbol(jit::SymType::Int, shape[d], "L['" + name + "'].size()[" + std::to_string(d) + "]");
          sym.push_back(jit::SymExpr::symbol(dim_symbols[d], jit::SymType::Int, 2));
        } else {
          sym.push_back(jit::SymExpr::integer(shape[d]));
        }
      }
      const jit::NodeId n = graph_.placeholder(dt, shape, std::move(sym));
      placeholder_slot_.push_back(i);
      entry_->guards.add_tensor(i, name, *meta, dim_symbols, /*strides=*/!st_.dynamic);
      cur_.fs->locals[static_cast<size_t>(i)] = Value::tensor(n, src);
    } else if (PyObject_TypeCheck(a, reinterpret_cast<PyTypeObject*>(refs.tensor_type))) {
      return unsupported("argument '" + name + "' is a tensor subclass or has unreadable metadata");
    } else if (PyBool_Check(a) || PyFloat_CheckExact(a) || PyLong_CheckExact(a)) {
      // Python numbers are symbols from the first call, except the ints 0 and 1 and
      // ints beyond int64 (those are constants, guarded by value).
      int overflow = 0;
      const long long iv = PyLong_CheckExact(a) ? PyLong_AsLongLongAndOverflow(a, &overflow) : 0;
      if (PyLong_CheckExact(a) && (overflow != 0 || iv == 0 || iv == 1)) {
        entry_->guards.add_scalar(i, name, a);
        cur_.fs->locals[static_cast<size_t>(i)] = Value::constant(PyRef::borrow(a), src);
        continue;
      }
      jit::SymType type = jit::SymType::Int;
      jit::SymValue hint = static_cast<int64_t>(iv);
      if (PyBool_Check(a)) {
        type = jit::SymType::Bool;
        hint = a == Py_True;
      } else if (PyFloat_CheckExact(a)) {
        type = jit::SymType::Float;
        hint = PyFloat_AS_DOUBLE(a);
      }
      const int id = new_symbol(type, hint, "L['" + name + "']");
      entry_->guards.add_symbol_arg(i, name, id, type);
      cur_.fs->locals[static_cast<size_t>(i)] = Value::sym(jit::SymExpr::symbol(id, type), src);
    } else if (a == Py_None || PyUnicode_CheckExact(a)) {
      entry_->guards.add_scalar(i, name, a);
      cur_.fs->locals[static_cast<size_t>(i)] = Value::constant(PyRef::borrow(a), src);
    } else {
      // Any other object: passed through unguarded; using it ends the trace.
      Value v = Value::constant(PyRef::borrow(a), src);
      v.opaque = true;
      cur_.fs->locals[static_cast<size_t>(i)] = std::move(v);
    }
  }
  return ok();
}

// Runs the current frame until its RETURN_VALUE.
Status Tracer::execute(Value* result) {
  while (true) {
    if (cur_.fs->pc >= cur_.code->instructions.size()) return unsupported("ran past the end of the bytecode");
    if (++steps_ > kMaxSteps) return unsupported("trace longer than " + std::to_string(kMaxSteps) + " instructions");
    last_ins_ = &cur_.code->instructions[cur_.fs->pc];
    last_co_ = cur_.co;
    if (Status s = step(*last_ins_)) return s;
    if (cur_.fs->ret) {
      *result = std::move(*cur_.fs->ret);
      return ok();
    }
  }
}

std::unique_ptr<CacheEntry> Tracer::run(Fallback* why) {
  Value ret;
  Status s = bind_arguments();
  if (!s) s = execute(&ret);
  if (!s) s = finish(ret);
  if (!s) s = compile();
  if (s) {
    why->reason = s->reason;
    why->location = last_ins_ ? location(*last_ins_) : location(cur_.code->instructions.front());
    if (PyErr_Occurred()) PyErr_Clear();
    return nullptr;
  }
  return std::move(entry_);
}

Status Tracer::step(const Instruction& ins) {
  Handler h = handlers()[static_cast<size_t>(ins.opcode)];
  const size_t pc = cur_.fs->pc;
  const size_t depth = cur_.fs->stack.size();
  Status s = h ? (this->*h)(ins) : unsupported("opcode " + std::string(opcode_name(ins.opcode)) + " (not supported yet)");
  if (s) return s;
  const bool jumped = cur_.fs->pc != pc;
  if (!jumped) cur_.fs->pc = pc + 1;  // handlers that jump set pc themselves
  // A handler whose stack effect differs from CPython's would make the trace drift
  // silently: compare with CPython's own table after every instruction.
  if (ins.opcode != op(Opcode::RETURN_VALUE)) {
    const int want = PyCompile_OpcodeStackEffectWithJump(ins.opcode, ins.has_arg() ? ins.arg : 0, jumped ? 1 : 0);
    const long got = static_cast<long>(cur_.fs->stack.size()) - static_cast<long>(depth);
    // CPython books a call's effect partly on PRECALL (-argc) and partly on CALL;
    // framejit does it all on CALL, so the two are compared together.
    stack_drift_ += got - want;
    if (stack_drift_ != 0 && ins.opcode != op(Opcode::PRECALL)) {
      log::interp().error("stack effect of {} is {} in framejit but {} in CPython", opcode_name(ins.opcode),
                          got, want);
      FJ_DEBUG_CHECK(false, "stack effect mismatch");
      return unsupported("internal error: stack effect mismatch at " + std::string(opcode_name(ins.opcode)));
    }
  }
  if (trace_log_ != nullptr) {
    std::string stack;
    for (const Value& v : cur_.fs->stack) stack += (stack.empty() ? "" : ", ") + describe(v);
    *trace_log_ += std::string(static_cast<size_t>(2 * cur_.depth), ' ') + std::to_string(ins.offset) + " " +
                   std::string(opcode_name(ins.opcode)) + " " + std::to_string(ins.arg) + "  (" +
                   location(ins) + ")  stack: [" + stack + "]\n";
  }
  if (log::enabled(log::Channel::Bytecode)) {
    std::string stack;
    for (const Value& v : cur_.fs->stack) stack += (stack.empty() ? "" : ", ") + describe(v);
    log::interp().info("{:>{}} {:<24} {:<5} line {:<4} stack: [{}]", ins.offset, 4 + 2 * cur_.depth,
                       opcode_name(ins.opcode), ins.arg, ins.line, stack);
  }
  return ok();
}

std::string Tracer::describe(const Value& v) const {
  switch (v.kind) {
    case ValueKind::Null: return "NULL";
    case ValueKind::Tensor: {
      const jit::Node& n = graph_.node(v.node);
      std::string s = "%" + std::to_string(v.node) + ":" + std::string(jit::dtype_name(n.dtype)) + "[";
      for (size_t i = 0; i < n.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(n.shape[i]);
      return s + "]";
    }
    case ValueKind::Const: return repr_short(v.obj.get());
    case ValueKind::Sym: return v.expr.str();
    case ValueKind::Tuple:
    case ValueKind::List: {
      std::string s = v.kind == ValueKind::Tuple ? "(" : "[";
      for (size_t i = 0; i < v.items.size(); ++i) s += (i ? ", " : "") + describe(v.items[i]);
      return s + (v.kind == ValueKind::Tuple ? ")" : "]");
    }
    case ValueKind::TensorMethod: return "Tensor." + v.method;
  }
  return "?";
}

std::string Tracer::location(const Instruction& ins) const {
  PyCodeObject* co = last_co_ ? last_co_ : cur_.co;
  return std::string(PyUnicode_AsUTF8(co->co_filename)) + ":" +
         std::to_string(ins.line >= 0 ? ins.line : co->co_firstlineno);
}

Status Tracer::jump_to(int offset) {
  const int idx = cur_.code->index_at(offset);
  if (idx < 0) return unsupported("jump to an unknown offset " + std::to_string(offset));
  cur_.fs->pc = static_cast<size_t>(idx);
  return ok();
}

// ---- values ----

bool is_opaque(const Value& v) { return v.kind == ValueKind::Const && v.opaque; }

bool is_shape_method(const std::string& name) { return name == "size" || name == "dim" || name == "numel"; }

PyObject* len_builtin() {
  static PyObject* len = PyDict_GetItemString(PyEval_GetBuiltins(), "len");
  return len;
}


// A Python number as a SymExpr: symbolic values as they are, plain constants folded in.
std::optional<jit::SymExpr> as_sym(const Value& v) {
  if (v.kind == ValueKind::Sym) return v.expr;
  if (v.kind != ValueKind::Const || v.opaque) return std::nullopt;
  PyObject* o = v.obj.get();
  if (PyBool_Check(o)) return jit::SymExpr::boolean(o == Py_True);
  if (PyFloat_CheckExact(o)) return jit::SymExpr::real(PyFloat_AS_DOUBLE(o));
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow == 0) return jit::SymExpr::integer(x);
  }
  return std::nullopt;
}

int Tracer::new_symbol(jit::SymType type, jit::SymValue hint, std::string source) {
  const int id = static_cast<int>(hints_.values.size());
  hints_.values.push_back(hint);
  symbol_sources_.push_back(std::move(source));
  return id;
}

// Pushes a symbolic result; one that has no value in the traced call (1 // 0) ends
// the trace, so that CPython raises the error.
Status Tracer::push_sym(jit::SymExpr e, const char* what) {
  const auto value = e.eval(hints_);
  if (!value) return unsupported(std::string(what) + " has no value here (CPython raises)");
  if (e.is_constant()) {
    push(Value::constant(PyRef::steal(sym_value_to_python(*value))));
  } else {
    push(Value::sym(std::move(e)));
  }
  return ok();
}

// Decides a condition on symbols with the traced call's values and guards the answer.
Status Tracer::guard_truth(const jit::SymExpr& cond, bool* out) {
  const jit::SymExpr as_bool = jit::to_bool(cond);
  const auto value = as_bool.eval(hints_);
  if (!value) return unsupported("a condition with no value here (CPython raises)");
  *out = std::get<bool>(*value);
  const jit::SymExpr holds = *out ? as_bool : jit::logical_not(as_bool);
  if (!holds.is_constant()) entry_->guards.add_expr(holds, readable(holds));
  return ok();
}

// An expression with each symbol replaced by its source: "L['y'] == 2".
std::string Tracer::readable(const jit::SymExpr& e) const {
  const std::string s = e.str();
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const bool starts = (s[i] == 's' || s[i] == 'f' || s[i] == 'b') && i + 1 < s.size() &&
                        std::isdigit(static_cast<unsigned char>(s[i + 1])) &&
                        (i == 0 || !std::isalnum(static_cast<unsigned char>(s[i - 1])));
    if (!starts) {
      out += s[i++];
      continue;
    }
    size_t j = i + 1;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    const size_t id = static_cast<size_t>(std::stoi(s.substr(i + 1, j - i - 1)));
    out += id < symbol_sources_.size() ? symbol_sources_[id] : s.substr(i, j - i);
    i = j;
  }
  return out;
}

// A Python number operand keeps its Python type (bool / int / float): it decides
// type promotion. Runtime values (SymExprs) take the kind of their traced value,
// which their guarded symbol types fix for every call of the entry.
Expected<jit::NodeId> Tracer::operand(const Value& v) {
  if (v.kind == ValueKind::Tensor) return v.node;
  if (v.kind == ValueKind::Sym) {
    const auto hint = v.expr.eval(hints_);
    if (!hint) return Error{"a scalar operand with no value here (CPython raises)"};
    if (v.expr.is_constant()) {
      switch (scalar_kind_of(*hint)) {
        case jit::ScalarKind::Int: return graph_.scalar_int(std::get<int64_t>(*hint));
        case jit::ScalarKind::Bool: return graph_.scalar(std::get<bool>(*hint) ? 1 : 0, jit::ScalarKind::Bool);
        case jit::ScalarKind::Float: return graph_.scalar(std::get<double>(*hint));
      }
    }
    for (size_t k = 0; k < entry_->plan.scalar_inputs.size(); ++k) {
      if (entry_->plan.scalar_inputs[k].same(v.expr)) return scalar_nodes_[k];
    }
    entry_->plan.scalar_inputs.push_back(v.expr);
    scalar_nodes_.push_back(graph_.scalar_input(scalar_kind_of(*hint)));
    return scalar_nodes_.back();
  }
  if (v.kind == ValueKind::Const && !is_opaque(v) && is_plain_scalar(v.obj.get())) {
    PyObject* o = v.obj.get();
    if (PyBool_Check(o)) return graph_.scalar(o == Py_True ? 1 : 0, jit::ScalarKind::Bool);
    if (PyLong_CheckExact(o)) {
      int overflow = 0;
      const long long i = PyLong_AsLongLongAndOverflow(o, &overflow);
      if (overflow != 0 || (i == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return Error{"a Python int beyond int64 as a tensor operand"};
      }
      return graph_.scalar_int(i);
    }
    return graph_.scalar(PyFloat_AS_DOUBLE(o));
  }
  return Error{"operand " + describe(v) + " is not a tensor or a Python number"};
}

Status Tracer::call_op(jit::Op op, const std::vector<Value>& args) {
  std::vector<jit::NodeId> ids;
  for (const Value& a : args) {
    auto id = operand(a);
    if (!id) return unsupported(std::string(jit::aten_name(op)) + ": " + id.error());
    ids.push_back(*id);
  }
  auto n = graph_.pointwise(op, ids);
  if (!n) return unsupported(std::string(jit::aten_name(op)) + ": " + n.error());
  push(Value::tensor(*n));
  return ok();
}

// A call of a table op: binds positional and keyword arguments to the op's
// parameters (defaults filled in), then records the node its Binding says.
Status Tracer::call_py_op(const PyOp& op, std::vector<Value> args, PyObject* kw_names) {
  const std::string what = op.name + "()";
  const size_t nkw = kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(kw_names)) : 0;
  const size_t npos = args.size() - nkw;
  if (npos > op.params.size()) return unsupported(what + " with too many arguments (CPython raises)");
  std::vector<std::optional<Value>> bound(op.params.size());
  for (size_t i = 0; i < npos; ++i) bound[i] = std::move(args[i]);
  for (size_t k = 0; k < nkw; ++k) {
    const std::string name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kw_names, static_cast<Py_ssize_t>(k)));
    const auto it = std::find(op.params.begin(), op.params.end(), name);
    if (it == op.params.end()) return unsupported(what + " with keyword '" + name + "' (not supported)");
    const size_t slot = static_cast<size_t>(it - op.params.begin());
    if (bound[slot]) return unsupported(what + " got '" + name + "' twice (CPython raises)");
    bound[slot] = std::move(args[npos + k]);
  }
  for (size_t i = 0; i < bound.size(); ++i) {
    if (bound[i]) continue;
    PyObject* d = default_object(op.defaults[i]);
    if (d == nullptr) return unsupported(what + " without '" + op.params[i] + "' (CPython raises)");
    bound[i] = Value::constant(PyRef::steal(d));
  }
  auto is_const = [](const Value& v, PyObject** out) {
    if (v.kind != ValueKind::Const || is_opaque(v)) return false;
    *out = v.obj.get();
    return true;
  };
  // Options (parameters past the operands) must equal their defaults under Plain.
  if (op.binding == Binding::Plain) {
    for (size_t i = op.operands; i < bound.size(); ++i) {
      PyObject* o = nullptr;
      PyRef d = PyRef::steal(default_object(op.defaults[i]));
      if (!is_const(*bound[i], &o) || !is_foldable(o) || PyObject_RichCompareBool(o, d.get(), Py_EQ) != 1) {
        if (PyErr_Occurred()) PyErr_Clear();
        return unsupported(what + " with " + op.params[i] + "=" + describe(*bound[i]) + " (not supported)");
      }
    }
  }
  std::vector<Value> operands;
  for (size_t i = 0; i < op.operands; ++i) operands.push_back(*bound[i]);
  switch (op.binding) {
    case Binding::Plain:
      return call_op(op.op, operands);
    case Binding::ClampBounds: {
      PyObject* o = nullptr;
      const bool no_min = is_const(operands[1], &o) && o == Py_None;
      const bool no_max = is_const(operands[2], &o) && o == Py_None;
      if (no_min && no_max) return unsupported("clamp() without bounds (eager raises)");
      if (no_min) return call_op(jit::Op::ClampMax, {operands[0], operands[2]});
      if (no_max) return call_op(jit::Op::ClampMin, {operands[0], operands[1]});
      return call_op(jit::Op::Clamp, operands);
    }
    case Binding::GeluApprox: {
      PyObject* o = nullptr;
      if (!is_const(*bound[1], &o) || !PyUnicode_CheckExact(o)) return unsupported("gelu() with a non-constant approximate");
      const std::string mode = PyUnicode_AsUTF8(o);
      if (mode == "none") return call_op(jit::Op::Gelu, operands);
      if (mode == "tanh") return call_op(jit::Op::GeluTanh, operands);
      return unsupported("gelu(approximate='" + mode + "') (eager raises)");
    }
    case Binding::CastFixed:
    case Binding::CastTo: {
      jit::DType to = op.dtype;
      if (op.binding == Binding::CastTo) {
        PyObject* o = nullptr;
        const auto d = is_const(*bound[1], &o) ? dtype_from_torch(o) : std::nullopt;
        if (!d) return unsupported(what + " to " + describe(*bound[1]) + " (not supported yet)");
        to = *d;
      }
      if (operands[0].kind != ValueKind::Tensor) return unsupported(what + " of " + describe(operands[0]));
      auto n = graph_.cast(operands[0].node, to);
      if (!n) return unsupported(what + ": " + n.error());
      push(*n == operands[0].node ? operands[0] : Value::tensor(*n));
      return ok();
    }
  }
  return unsupported(what + ": unknown binding");
}

Status Tracer::truth(const Value& v, bool* out) {
  if (v.kind == ValueKind::Tensor) return unsupported("a branch on a tensor's value (data-dependent control flow)");
  if (v.kind == ValueKind::Sym) return guard_truth(v.expr, out);
  if (v.kind == ValueKind::Tuple || v.kind == ValueKind::List) {
    *out = !v.items.empty();
    return ok();
  }
  if (v.kind != ValueKind::Const || is_opaque(v) || !is_foldable(v.obj.get())) {
    return unsupported("truth value of " + describe(v));
  }
  const int r = PyObject_IsTrue(v.obj.get());
  if (r < 0) return unsupported("truth value raised");
  *out = r == 1;
  return ok();
}

// ---- loads and stores ----

// ( -- )
Status Tracer::op_nop(const Instruction&) { return ok(); }

// ( -- value)
Status Tracer::op_load_fast(const Instruction& ins) {
  const Value& v = cur_.fs->locals[static_cast<size_t>(ins.arg)];
  if (v.kind == ValueKind::Null) return unsupported("read of an unbound local variable");
  push(v);
  return ok();
}

// ( -- value): a cell or free variable, kept as a plain local while tracing
Status Tracer::op_load_deref(const Instruction& ins) { return op_load_fast(ins); }

// (value -- )
Status Tracer::op_store_deref(const Instruction& ins) {
  PyCodeObject* code = cur_.co;
  if (ins.arg >= code->co_nlocalsplus - code->co_nfreevars) {
    return unsupported("assignment to a variable of an enclosing function");
  }
  return op_store_fast(ins);
}

// (value -- )
Status Tracer::op_store_fast(const Instruction& ins) {
  cur_.fs->locals[static_cast<size_t>(ins.arg)] = pop();
  return ok();
}

// ( -- value)
Status Tracer::op_load_const(const Instruction& ins) {
  push(Value::constant(PyRef::borrow(PyTuple_GET_ITEM(cur_.co->co_consts, ins.arg))));
  return ok();
}

// ( -- [NULL], value)
Status Tracer::op_load_global(const Instruction& ins) {
  PyObject* name = PyTuple_GET_ITEM(cur_.co->co_names, ins.arg >> 1);
  bool from_builtins = false;
  PyObject* v = PyDict_GetItemWithError(cur_.globals, name);
  if (v == nullptr && !PyErr_Occurred() && PyDict_Check(cur_.builtins)) {
    v = PyDict_GetItemWithError(cur_.builtins, name);
    from_builtins = true;
  }
  if (v == nullptr) return unsupported(std::string("global name '") + PyUnicode_AsUTF8(name) + "' is not defined");
  const std::string n = PyUnicode_AsUTF8(name);
  entry_->guards.add_global(n, v, from_builtins, cur_.guard_globals, cur_.guard_builtins);
  if (ins.arg & 1) push(Value::null());
  Source src;
  src.kind = Source::Kind::Global;
  src.name = n;
  src.from_builtins = from_builtins;
  src.globals = cur_.guard_globals;
  push(Value::constant(PyRef::borrow(v), src));
  return ok();
}

// Reads `name` of a module value read from a global (guarded by its attribute path).
static Status module_attr(Value& base, const std::string& name, Value* out,
                          guards::GuardSet& guards) {
  if (base.kind != ValueKind::Const || !PyModule_Check(base.obj.get()) ||
      base.source.kind != Source::Kind::Global || base.source.from_builtins) {
    return unsupported("attribute '" + name + "' of a value other than a global module");
  }
  PyObject* v = PyDict_GetItemString(PyModule_GetDict(base.obj.get()), name.c_str());
  if (v == nullptr) return unsupported("module attribute '" + name + "' not in the module's dict");
  Source src = base.source;
  src.attrs.push_back(name);
  guards.add_module_attr(src.name, src.attrs, v, base.source.globals);
  *out = Value::constant(PyRef::borrow(v), src);
  return ok();
}

// (owner -- value)
Status Tracer::op_load_attr(const Instruction& ins) {
  const std::string name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(cur_.co->co_names, ins.arg));
  Value owner = pop();
  if (owner.kind == ValueKind::Tensor) {
    if (name == "shape") {
      push(shape_tuple(owner.node));
      return ok();
    }
    if (name == "ndim") {
      push(Value::constant(PyRef::steal(PyLong_FromSize_t(graph_.node(owner.node).shape.size()))));
      return ok();
    }
    return unsupported("tensor attribute '." + name + "' (not supported yet)");
  }
  Value out;
  if (Status s = module_attr(owner, name, &out, entry_->guards)) return s;
  push(std::move(out));
  return ok();
}

// (owner -- method_or_NULL, self_or_value)
Status Tracer::op_load_method(const Instruction& ins) {
  const std::string name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(cur_.co->co_names, ins.arg));
  Value owner = pop();
  if (owner.kind == ValueKind::Tensor) {
    if (!tensor_method_op(name) && !is_shape_method(name)) {
      return unsupported("tensor method '." + name + "()' (not supported yet)");
    }
    push(Value::tensor_method(name));
    push(std::move(owner));
    return ok();
  }
  Value out;
  if (Status s = module_attr(owner, name, &out, entry_->guards)) return s;
  push(Value::null());
  push(std::move(out));
  return ok();
}

// (code -- function): a nested function without defaults or closure. Its calls are
// inlined; it must not escape, since eager makes a new one on every call.
Status Tracer::op_make_function(const Instruction& ins) {
  Value code = pop();
  if (ins.arg != 0) return unsupported("a nested function with defaults, annotations or a closure");
  if (code.kind != ValueKind::Const || !PyCode_Check(code.obj.get())) return unsupported("MAKE_FUNCTION of a non-code value");
  PyObject* fn = PyFunction_New(code.obj.get(), cur_.globals);
  if (fn == nullptr) return unsupported("cannot create the nested function");
  Value v = Value::constant(PyRef::steal(fn));
  v.fresh = true;
  push(std::move(v));
  return ok();
}

// ( -- NULL)
Status Tracer::op_push_null(const Instruction&) {
  push(Value::null());
  return ok();
}

// ( -- )
Status Tracer::op_kw_names(const Instruction& ins) {
  cur_.fs->kw_names = PyRef::borrow(PyTuple_GET_ITEM(cur_.co->co_consts, ins.arg));
  return ok();
}

// (method_or_NULL, callable_or_self, args[argc] -- result)
Status Tracer::op_call(const Instruction& ins) {
  const size_t argc = static_cast<size_t>(ins.arg);
  const PyRef kw_names = std::move(cur_.fs->kw_names);  // this call's (KW_NAMES), if any
  cur_.fs->kw_names = PyRef();
  std::vector<Value> args(cur_.fs->stack.end() - static_cast<std::ptrdiff_t>(argc), cur_.fs->stack.end());
  cur_.fs->stack.resize(cur_.fs->stack.size() - argc);
  Value second = pop();
  Value first = pop();
  Value callable;
  if (first.kind == ValueKind::Null) {
    callable = std::move(second);
  } else {
    callable = std::move(first);
    args.insert(args.begin(), std::move(second));
  }
  if (const PyOp* op = callable.kind == ValueKind::Const && !is_opaque(callable) ? torch_function_op(callable.obj.get()) : nullptr) {
    return call_py_op(*op, std::move(args), kw_names.get());
  }
  if (callable.kind == ValueKind::Const && !is_opaque(callable)) {
    // A Python function (or a bound method, or a framejit-compiled function): its
    // body is traced into the same graph.
    PyObject* target = callable.obj.get();
    if (PyObject* fn = compiled_function_target(target)) target = fn;
    if (PyMethod_Check(target) && PyFunction_Check(PyMethod_GET_FUNCTION(target))) {
      Value self = Value::constant(PyRef::borrow(PyMethod_GET_SELF(target)));
      self.opaque = true;
      args.insert(args.begin(), std::move(self));
      target = PyMethod_GET_FUNCTION(target);
    }
    if (PyFunction_Check(target)) return inline_call(target, std::move(args), kw_names.get());
  }
  if (callable.kind == ValueKind::TensorMethod) {
    if (const PyOp* op = tensor_method_op(callable.method)) return call_py_op(*op, std::move(args), kw_names.get());
    if (kw_names) return unsupported("keyword arguments to ." + callable.method + "()");
    return call_shape_method(callable.method, args);
  }
  if (kw_names) return unsupported("keyword arguments in a call to " + describe(callable) + " (not supported yet)");
  if (callable.kind == ValueKind::Const && callable.obj.get() == len_builtin() && args.size() == 1) {
    const Value& a = args[0];
    if (a.kind == ValueKind::Tensor && !graph_.node(a.node).shape.empty()) {
      push(dim_value(a.node, 0));
      return ok();
    }
    if (a.kind == ValueKind::Tuple || a.kind == ValueKind::List) {
      push(Value::constant(PyRef::steal(PyLong_FromSize_t(a.items.size()))));
      return ok();
    }
    return unsupported("len() of " + describe(a));
  }
  return unsupported("call to " + describe(callable) + " (not supported yet)");
}

// ---- inlining ----

constexpr int kMaxInlineDepth = 8;

const DecodedCode* decoded_code(PyCodeObject* co, std::string* error) {
  CodeState* cs = code_state(co, true);
  if (cs == nullptr) {
    PyErr_Clear();
    *error = "cannot attach framejit state to the code object";
    return nullptr;
  }
  if (!cs->decoded) {
    auto decoded = decode(co);
    if (!decoded) {
      *error = "cannot decode the bytecode: " + decoded.error();
      return nullptr;
    }
    cs->decoded = std::make_shared<const DecodedCode>(std::move(*decoded));
  }
  return static_cast<const DecodedCode*>(cs->decoded.get());
}

// Traces a call of the Python function `fn` in a frame of its own, binding
// arguments as CPython does (positional, keyword, defaults, *args).
Status Tracer::inline_call(PyObject* fn, std::vector<Value> args, PyObject* kw_names) {
  auto* func = reinterpret_cast<PyFunctionObject*>(fn);
  auto* co = reinterpret_cast<PyCodeObject*>(func->func_code);
  const std::string qualname = PyUnicode_AsUTF8(co->co_qualname);
  if (cur_.depth >= kMaxInlineDepth) {
    return unsupported("calls nested deeper than " + std::to_string(kMaxInlineDepth) + " (at " + qualname + ")");
  }
  if (co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) {
    return unsupported("call of the generator or coroutine " + qualname);
  }
  if (co->co_flags & CO_VARKEYWORDS) return unsupported("call of " + qualname + ", which takes **kwargs");
  std::string error;
  const DecodedCode* decoded = decoded_code(co, &error);
  if (decoded == nullptr) return unsupported(error);

  FrameState fs;
  fs.locals.resize(static_cast<size_t>(co->co_nlocalsplus));
  const size_t nkw = kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(kw_names)) : 0;
  const size_t npos = args.size() - nkw;
  const size_t argcount = static_cast<size_t>(co->co_argcount);
  const size_t nparams = argcount + static_cast<size_t>(co->co_kwonlyargcount);
  const bool varargs = co->co_flags & CO_VARARGS;
  const std::string bad = "arguments that do not match " + qualname + "'s parameters (CPython raises)";
  if (npos > argcount && !varargs) return unsupported(bad);
  std::vector<bool> set(nparams, false);
  for (size_t i = 0; i < std::min(npos, argcount); ++i) {
    fs.locals[i] = std::move(args[i]);
    set[i] = true;
  }
  if (varargs) {
    std::vector<Value> rest;
    for (size_t i = argcount; i < npos; ++i) rest.push_back(std::move(args[i]));
    fs.locals[nparams] = Value::sequence(ValueKind::Tuple, std::move(rest));
  }
  for (size_t k = 0; k < nkw; ++k) {
    PyObject* name = PyTuple_GET_ITEM(kw_names, static_cast<Py_ssize_t>(k));
    size_t j = static_cast<size_t>(co->co_posonlyargcount);
    while (j < nparams && PyUnicode_Compare(PyTuple_GET_ITEM(co->co_localsplusnames, j), name) != 0) ++j;
    if (j == nparams || set[j]) return unsupported(bad);
    fs.locals[j] = std::move(args[npos + k]);
    set[j] = true;
  }
  PyObject* defaults = func->func_defaults;
  const size_t ndef = defaults ? static_cast<size_t>(PyTuple_GET_SIZE(defaults)) : 0;
  for (size_t j = 0; j < nparams; ++j) {
    if (set[j]) continue;
    PyObject* d = nullptr;
    if (j < argcount && j + ndef >= argcount) {
      d = PyTuple_GET_ITEM(defaults, static_cast<Py_ssize_t>(j + ndef - argcount));
    } else if (j >= argcount && func->func_kwdefaults != nullptr) {
      d = PyDict_GetItemWithError(func->func_kwdefaults, PyTuple_GET_ITEM(co->co_localsplusnames, j));
    }
    if (d == nullptr) return unsupported(bad);
    Value v = Value::constant(PyRef::borrow(d));
    v.opaque = !is_foldable(d);  // a mutable default is used as-is, never looked into
    fs.locals[j] = std::move(v);
  }
  // Free variables: each closure cell's content, guarded by the cell itself.
  const int first_free = co->co_nlocalsplus - co->co_nfreevars;
  for (int k = 0; k < co->co_nfreevars; ++k) {
    PyObject* cell = PyTuple_GET_ITEM(func->func_closure, k);
    PyObject* v = PyCell_GET(cell);
    if (v == nullptr) continue;
    entry_->guards.add_cell(cell, PyUnicode_AsUTF8(PyTuple_GET_ITEM(co->co_localsplusnames, first_free + k)), v);
    fs.locals[static_cast<size_t>(first_free + k)] = Value::constant(PyRef::borrow(v));
  }

  const FrameCtx caller = cur_;
  const long caller_drift = std::exchange(stack_drift_, 0);  // the caller is between PRECALL and CALL
  const bool same_globals = func->func_globals == in_.globals;
  cur_ = FrameCtx{&fs, decoded, co, func->func_globals, func->func_builtins,
                  same_globals ? nullptr : func->func_globals, same_globals ? nullptr : func->func_builtins,
                  caller.depth + 1};
  Value ret;
  Status s = execute(&ret);
  cur_ = caller;
  stack_drift_ = caller_drift;
  if (s) return s;
  push(std::move(ret));
  return ok();
}

// ---- tensor sizes ----

// Size `d` of a tensor value, as a Python int value.
Value Tracer::dim_value(jit::NodeId node, size_t d) {
  const jit::SymExpr& s = graph_.node(node).sym[d];
  if (s.is_constant()) return Value::constant(PyRef::steal(PyLong_FromLongLong(*s.as_int())));
  return Value::sym(s);
}

Value Tracer::shape_tuple(jit::NodeId node) {
  std::vector<Value> dims;
  for (size_t d = 0; d < graph_.node(node).shape.size(); ++d) dims.push_back(dim_value(node, d));
  Value size = Value::sequence(ValueKind::Tuple, std::move(dims));
  size.torch_size = true;
  return size;
}

// x.size(), x.size(d), x.dim(), x.numel()
Status Tracer::call_shape_method(const std::string& name, const std::vector<Value>& args) {
  const jit::NodeId node = args[0].node;
  const size_t rank = graph_.node(node).shape.size();
  if (name == "dim" && args.size() == 1) {
    push(Value::constant(PyRef::steal(PyLong_FromSize_t(rank))));
    return ok();
  }
  if (name == "numel" && args.size() == 1) {
    jit::SymExpr n = jit::SymExpr::integer(1);
    for (size_t d = 0; d < rank; ++d) n = jit::mul(n, *as_sym(dim_value(node, d)));
    return push_sym(n, "numel()");
  }
  if (name == "size" && args.size() == 1) {
    push(shape_tuple(node));
    return ok();
  }
  if (name == "size" && args.size() == 2) {
    const Value& i = args[1];
    if (i.kind != ValueKind::Const || !PyLong_CheckExact(i.obj.get())) {
      return unsupported("size() with a non-constant dimension");
    }
    long d = PyLong_AsLong(i.obj.get());
    if (d < 0) d += static_cast<long>(rank);
    if (d < 0 || d >= static_cast<long>(rank)) return unsupported("size() dimension out of range (CPython raises)");
    push(dim_value(node, static_cast<size_t>(d)));
    return ok();
  }
  return unsupported("tensor ." + name + "() with these arguments");
}

// ---- operators ----

Status Tracer::fold_binary(int nb_op, const Value& lhs, const Value& rhs) {
  if (lhs.kind != ValueKind::Const || rhs.kind != ValueKind::Const || is_opaque(lhs) || is_opaque(rhs) ||
      !is_plain_scalar(lhs.obj.get()) || !is_plain_scalar(rhs.obj.get())) {
    return unsupported("binary operator " + std::to_string(nb_op) + " on " + describe(lhs) + " and " +
                       describe(rhs));
  }
  PyObject* r = binary_number_op(nb_op, lhs.obj.get(), rhs.obj.get());
  if (r == nullptr) {
    PyErr_Clear();
    return unsupported("constant operator raised (CPython will raise it)");
  }
  push(Value::constant(PyRef::steal(r)));
  return ok();
}

// (lhs, rhs -- result)
Status Tracer::op_binary_op(const Instruction& ins) {
  Value rhs = pop();
  Value lhs = pop();
  if (lhs.kind == ValueKind::Tensor || rhs.kind == ValueKind::Tensor) {
    if (ins.arg >= kNbInplaceAdd) return unsupported("in-place operator on a tensor (not supported yet)");
    if (auto op = binary_tensor_op(ins.arg)) return call_op(*op, {lhs, rhs});
    return unsupported("binary operator " + std::to_string(ins.arg) + " on tensors (not supported yet)");
  }
  if (lhs.kind == ValueKind::Sym || rhs.kind == ValueKind::Sym) {
    const auto a = as_sym(lhs), b = as_sym(rhs);
    if (!a || !b) return unsupported("binary operator on " + describe(lhs) + " and " + describe(rhs));
    const auto e = binary_sym_op(ins.arg, *a, *b);
    if (!e) return unsupported("binary operator " + std::to_string(ins.arg) + " on symbolic scalars (not supported yet)");
    return push_sym(*e, "a scalar expression");
  }
  return fold_binary(ins.arg, lhs, rhs);
}

// (value -- result)
Status Tracer::op_unary_negative(const Instruction&) {
  Value v = pop();
  if (v.kind == ValueKind::Tensor) return call_op(jit::Op::Neg, {v});
  if (v.kind == ValueKind::Sym) return push_sym(jit::neg(v.expr), "a negation");
  if (v.kind == ValueKind::Const && !is_opaque(v) && is_plain_scalar(v.obj.get())) {
    push(Value::constant(PyRef::steal(PyNumber_Negative(v.obj.get()))));
    return ok();
  }
  return unsupported("unary minus of " + describe(v));
}

// (value -- result)
Status Tracer::op_unary_not(const Instruction&) {
  Value v = pop();
  if (v.kind == ValueKind::Sym) return push_sym(jit::logical_not(jit::to_bool(v.expr)), "a negation");
  bool t = false;
  if (Status s = truth(v, &t)) return s;
  push(Value::constant(PyRef::borrow(t ? Py_False : Py_True)));
  return ok();
}

// (value -- result)
Status Tracer::op_unary_invert(const Instruction&) {
  Value v = pop();
  if (v.kind == ValueKind::Tensor) return call_op(jit::Op::BitwiseNot, {v});
  return unsupported("~ of " + describe(v) + " (not supported yet)");
}

// (lhs, rhs -- result)
Status Tracer::op_compare_op(const Instruction& ins) {
  Value rhs = pop();
  Value lhs = pop();
  if (lhs.kind == ValueKind::Tensor || rhs.kind == ValueKind::Tensor) {
    return call_op(compare_tensor_op(ins.arg), {lhs, rhs});
  }
  if (lhs.kind == ValueKind::Sym || rhs.kind == ValueKind::Sym) {
    const auto a = as_sym(lhs), b = as_sym(rhs);
    if (!a || !b) return unsupported("comparison of " + describe(lhs) + " and " + describe(rhs));
    return push_sym(compare_sym(ins.arg, *a, *b), "a comparison");
  }
  if (lhs.kind != ValueKind::Const || rhs.kind != ValueKind::Const || is_opaque(lhs) || is_opaque(rhs) ||
      !is_foldable(lhs.obj.get()) || !is_foldable(rhs.obj.get())) {
    return unsupported("comparison of " + describe(lhs) + " and " + describe(rhs));
  }
  PyObject* r = PyObject_RichCompare(lhs.obj.get(), rhs.obj.get(), ins.arg);
  if (r == nullptr) return unsupported("constant comparison raised (CPython will raise it)");
  push(Value::constant(PyRef::steal(r)));
  return ok();
}

// (lhs, rhs -- bool)
Status Tracer::op_is_op(const Instruction& ins) {
  Value rhs = pop();
  Value lhs = pop();
  bool same;
  const auto known = [](const Value& v) { return v.kind == ValueKind::Const && !is_opaque(v); };
  if (known(lhs) && known(rhs)) {
    same = lhs.obj.get() == rhs.obj.get();
  } else if ((lhs.kind == ValueKind::Tensor && known(rhs)) || (rhs.kind == ValueKind::Tensor && known(lhs))) {
    same = false;  // a tensor is never a constant object
  } else if ((lhs.kind == ValueKind::Sym && known(rhs) && rhs.obj.get() == Py_None) ||
             (rhs.kind == ValueKind::Sym && known(lhs) && lhs.obj.get() == Py_None)) {
    same = false;  // a number is never None
  } else if (lhs.kind == ValueKind::Tensor && rhs.kind == ValueKind::Tensor) {
    same = lhs.node == rhs.node;
  } else {
    return unsupported("'is' of " + describe(lhs) + " and " + describe(rhs));
  }
  push(Value::constant(PyRef::borrow((same != (ins.arg == 1)) ? Py_True : Py_False)));
  return ok();
}

// ---- sequences and stack ----

// (items[n] -- seq)
Status Tracer::op_build_seq(const Instruction& ins) {
  const size_t n = static_cast<size_t>(ins.arg);
  std::vector<Value> items(cur_.fs->stack.end() - static_cast<std::ptrdiff_t>(n), cur_.fs->stack.end());
  cur_.fs->stack.resize(cur_.fs->stack.size() - n);
  push(Value::sequence(ins.opcode == op(Opcode::BUILD_TUPLE) ? ValueKind::Tuple : ValueKind::List, std::move(items)));
  return ok();
}

// (seq -- items[n], reversed)
Status Tracer::op_unpack_sequence(const Instruction& ins) {
  Value seq = pop();
  std::vector<Value> items;
  if (seq.kind == ValueKind::Tuple || seq.kind == ValueKind::List) {
    items = seq.items;
  } else if (seq.kind == ValueKind::Const && !is_opaque(seq) && PyTuple_CheckExact(seq.obj.get())) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq.obj.get()); ++i) {
      items.push_back(Value::constant(PyRef::borrow(PyTuple_GET_ITEM(seq.obj.get(), i))));
    }
  } else {
    return unsupported("unpacking " + describe(seq));
  }
  if (items.size() != static_cast<size_t>(ins.arg)) return unsupported("unpacking a sequence of the wrong length");
  for (auto it = items.rbegin(); it != items.rend(); ++it) push(*it);
  return ok();
}

// (container, index -- item)
Status Tracer::op_binary_subscr(const Instruction&) {
  Value index = pop();
  Value seq = pop();
  if ((seq.kind == ValueKind::Tuple || seq.kind == ValueKind::List) && index.kind == ValueKind::Const &&
      PyLong_CheckExact(index.obj.get())) {
    long i = PyLong_AsLong(index.obj.get());
    const long n = static_cast<long>(seq.items.size());
    if (i < 0) i += n;
    if (PyErr_Occurred() || i < 0 || i >= n) return unsupported("index out of range (CPython raises)");
    push(seq.items[static_cast<size_t>(i)]);
    return ok();
  }
  return unsupported("subscript of " + describe(seq) + " (not supported yet)");
}

// (value -- )
Status Tracer::op_pop_top(const Instruction&) {
  pop();
  return ok();
}

// (items[n] -- items[n], items[0])
Status Tracer::op_copy(const Instruction& ins) {
  push(top(static_cast<size_t>(ins.arg)));
  return ok();
}

// swaps TOS with the n-th item
Status Tracer::op_swap(const Instruction& ins) {
  std::swap(top(1), top(static_cast<size_t>(ins.arg)));
  return ok();
}

// ---- control flow ----

// ( -- )
Status Tracer::op_jump(const Instruction& ins) { return jump_to(ins.target); }

// (cond -- )
Status Tracer::op_pop_jump_if(const Instruction& ins) {
  Value v = pop();
  bool jump = false;
  switch (ins.opcode) {
    case op(Opcode::POP_JUMP_FORWARD_IF_NONE):
    case op(Opcode::POP_JUMP_BACKWARD_IF_NONE):
    case op(Opcode::POP_JUMP_FORWARD_IF_NOT_NONE):
    case op(Opcode::POP_JUMP_BACKWARD_IF_NOT_NONE): {
      bool is_none;
      if (v.kind == ValueKind::Const && !is_opaque(v)) is_none = v.obj.get() == Py_None;
      else if (v.kind == ValueKind::Tensor || v.kind == ValueKind::Sym || v.kind == ValueKind::Tuple ||
               v.kind == ValueKind::List) is_none = false;
      else return unsupported("'is None' test of " + describe(v));
      const bool want_none = ins.opcode == op(Opcode::POP_JUMP_FORWARD_IF_NONE) || ins.opcode == op(Opcode::POP_JUMP_BACKWARD_IF_NONE);
      jump = is_none == want_none;
      break;
    }
    default: {
      bool t = false;
      if (Status s = truth(v, &t)) return s;
      const bool want = ins.opcode == op(Opcode::POP_JUMP_FORWARD_IF_TRUE) || ins.opcode == op(Opcode::POP_JUMP_BACKWARD_IF_TRUE);
      jump = t == want;
      break;
    }
  }
  return jump ? jump_to(ins.target) : ok();
}

// (cond -- cond if jumping)
Status Tracer::op_jump_if_or_pop(const Instruction& ins) {
  bool t = false;
  if (Status s = truth(top(), &t)) return s;
  if (t == (ins.opcode == op(Opcode::JUMP_IF_TRUE_OR_POP))) return jump_to(ins.target);
  pop();
  return ok();
}

// (value -- )
Status Tracer::op_return_value(const Instruction&) {
  cur_.fs->ret = pop();
  return ok();
}

const std::array<Tracer::Handler, 256>& Tracer::handlers() {
  static const std::array<Handler, 256> table = [] {
    std::array<Handler, 256> t{};
    for (int o : {op(Opcode::NOP), op(Opcode::RESUME), op(Opcode::PRECALL), op(Opcode::EXTENDED_ARG), op(Opcode::CACHE),
                   op(Opcode::MAKE_CELL), op(Opcode::COPY_FREE_VARS)}) t[o] = &Tracer::op_nop;
    t[op(Opcode::LOAD_FAST)] = &Tracer::op_load_fast;
    t[op(Opcode::STORE_FAST)] = &Tracer::op_store_fast;
    t[op(Opcode::LOAD_DEREF)] = &Tracer::op_load_deref;
    t[op(Opcode::STORE_DEREF)] = &Tracer::op_store_deref;
    t[op(Opcode::LOAD_CONST)] = &Tracer::op_load_const;
    t[op(Opcode::LOAD_GLOBAL)] = &Tracer::op_load_global;
    t[op(Opcode::LOAD_ATTR)] = &Tracer::op_load_attr;
    t[op(Opcode::LOAD_METHOD)] = &Tracer::op_load_method;
    t[op(Opcode::PUSH_NULL)] = &Tracer::op_push_null;
    t[op(Opcode::MAKE_FUNCTION)] = &Tracer::op_make_function;
    t[op(Opcode::KW_NAMES)] = &Tracer::op_kw_names;
    t[op(Opcode::CALL)] = &Tracer::op_call;
    t[op(Opcode::BINARY_OP)] = &Tracer::op_binary_op;
    t[op(Opcode::UNARY_NEGATIVE)] = &Tracer::op_unary_negative;
    t[op(Opcode::UNARY_NOT)] = &Tracer::op_unary_not;
    t[op(Opcode::UNARY_INVERT)] = &Tracer::op_unary_invert;
    t[op(Opcode::COMPARE_OP)] = &Tracer::op_compare_op;
    t[op(Opcode::IS_OP)] = &Tracer::op_is_op;
    t[op(Opcode::BUILD_TUPLE)] = &Tracer::op_build_seq;
    t[op(Opcode::BUILD_LIST)] = &Tracer::op_build_seq;
    t[op(Opcode::UNPACK_SEQUENCE)] = &Tracer::op_unpack_sequence;
    t[op(Opcode::POP_TOP)] = &Tracer::op_pop_top;
    t[op(Opcode::BINARY_SUBSCR)] = &Tracer::op_binary_subscr;
    t[op(Opcode::COPY)] = &Tracer::op_copy;
    t[op(Opcode::SWAP)] = &Tracer::op_swap;
    for (int o : {op(Opcode::JUMP_FORWARD), op(Opcode::JUMP_BACKWARD), op(Opcode::JUMP_BACKWARD_NO_INTERRUPT)}) t[o] = &Tracer::op_jump;
    for (int o : {op(Opcode::POP_JUMP_FORWARD_IF_FALSE), op(Opcode::POP_JUMP_FORWARD_IF_TRUE), op(Opcode::POP_JUMP_BACKWARD_IF_FALSE),
                   op(Opcode::POP_JUMP_BACKWARD_IF_TRUE), op(Opcode::POP_JUMP_FORWARD_IF_NONE), op(Opcode::POP_JUMP_FORWARD_IF_NOT_NONE),
                   op(Opcode::POP_JUMP_BACKWARD_IF_NONE), op(Opcode::POP_JUMP_BACKWARD_IF_NOT_NONE)}) {
      t[o] = &Tracer::op_pop_jump_if;
    }
    t[op(Opcode::JUMP_IF_FALSE_OR_POP)] = &Tracer::op_jump_if_or_pop;
    t[op(Opcode::JUMP_IF_TRUE_OR_POP)] = &Tracer::op_jump_if_or_pop;
    t[op(Opcode::RETURN_VALUE)] = &Tracer::op_return_value;
    return t;
  }();
  return table;
}

// ---- the end of a trace: plan and compile ----

Status Tracer::finish(const Value& ret) {
  std::unordered_map<jit::NodeId, int> output_index;
  std::vector<jit::NodeId> outputs;
  std::function<Status(const Value&, PlanValue*)> convert = [&](const Value& v, PlanValue* out) -> Status {
    switch (v.kind) {
      case ValueKind::Tensor: {
        const jit::Node& n = graph_.node(v.node);
        if (n.op == jit::Op::Placeholder) {
          out->kind = PlanValue::Kind::Arg;
          out->index = placeholder_slot_[static_cast<size_t>(n.index)];
          return ok();
        }
        auto [it, fresh] = output_index.emplace(v.node, static_cast<int>(outputs.size()));
        if (fresh) outputs.push_back(v.node);
        out->kind = PlanValue::Kind::GraphOutput;
        out->index = it->second;
        return ok();
      }
      case ValueKind::Const:
        if (v.fresh) return unsupported("returning a function defined in the frame");
        if (is_opaque(v) || v.source.kind == Source::Kind::Arg) {
          out->kind = PlanValue::Kind::Arg;
          out->index = v.source.arg;
        } else {
          out->kind = PlanValue::Kind::Const;
          out->obj = v.obj;
        }
        return ok();
      case ValueKind::Sym:
        out->kind = PlanValue::Kind::Sym;
        out->expr = v.expr;
        entry_->plan.must_evaluate.push_back(v.expr);
        return ok();
      case ValueKind::Tuple:
      case ValueKind::List:
        out->kind = v.kind == ValueKind::List ? PlanValue::Kind::List
                    : v.torch_size             ? PlanValue::Kind::Size
                                               : PlanValue::Kind::Tuple;
        out->items.resize(v.items.size());
        for (size_t i = 0; i < v.items.size(); ++i) {
          if (Status s = convert(v.items[i], &out->items[i])) return s;
        }
        return ok();
      case ValueKind::Null:
      case ValueKind::TensorMethod:
        return unsupported("returning " + describe(v));
    }
    return unsupported("returning an unknown value");
  };
  if (Status s = convert(ret, &entry_->plan.ret)) return s;
  // A frame without tensor arguments and without tensor results is Python's work.
  if (outputs.empty() && placeholder_slot_.empty()) return unsupported("no tensor work in this frame");
  graph_.set_outputs(outputs);
  entry_->plan.graph_args = placeholder_slot_;
  for (jit::NodeId id : outputs) {
    const jit::Node& n = graph_.node(id);
    OutputSpec spec;
    spec.dtype = n.dtype;
    spec.sym = n.sym;
    spec.is_static = std::all_of(n.sym.begin(), n.sym.end(), [](const jit::SymExpr& e) { return e.is_constant(); });
    for (const jit::SymExpr& e : n.sym) {
      if (!e.is_constant()) entry_->plan.must_evaluate.push_back(e);
    }
    if (spec.is_static) {
      spec.shape = n.shape;
      spec.strides = contiguous_strides(n.shape);
      spec.empty_args = empty_args_for(n.shape);
    }
    entry_->plan.outputs.push_back(std::move(spec));
  }
  for (const jit::SymExpr& a : graph_.assumptions()) entry_->guards.add_expr(a, readable(a));
  // Runtime numbers whose conversion eager checks (clamp bounds, where values):
  // guarded into the range that converts; outside it eager raises, so fall back.
  for (const jit::Graph::ScalarRange& r : graph_.scalar_ranges()) {
    const jit::SymExpr& e = entry_->plan.scalar_inputs[static_cast<size_t>(r.index)];
    const bool is_int = graph_.node(scalar_nodes_[static_cast<size_t>(r.index)]).scalar_kind == jit::ScalarKind::Int;
    auto bound = [&](double v) { return is_int ? jit::SymExpr::integer(static_cast<int64_t>(v)) : jit::SymExpr::real(v); };
    for (const jit::SymExpr& cond : {jit::ge(e, bound(r.lo)), jit::le(e, bound(r.hi))}) {
      const auto holds = cond.eval(hints_);
      if (!holds || holds->index() != 2 || !std::get<bool>(*holds)) return unsupported("a scalar operand out of the range eager converts (eager raises)");
      if (!cond.is_constant()) entry_->guards.add_expr(cond, readable(cond));
    }
  }
  return ok();
}

jit::CpuBackend* cpu_backend(std::string* error) {
  static std::mutex mu;
  static std::unique_ptr<jit::CpuBackend> backend;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mu);
  if (!backend && failure.empty()) {
    auto b = jit::CpuBackend::create();
    if (b) backend = std::move(*b);
    else failure = b.error();
  }
  *error = failure;
  return backend.get();
}

Status Tracer::compile() {
  // The ops that the outputs need, in order (for explain and the op list).
  std::vector<bool> live(graph_.size(), false);
  for (jit::NodeId id : graph_.outputs()) live[static_cast<size_t>(id)] = true;
  for (size_t i = graph_.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (jit::NodeId in : graph_.node(static_cast<jit::NodeId>(i)).inputs) live[static_cast<size_t>(in)] = true;
  }
  for (size_t i = 0; i < graph_.size(); ++i) {
    const jit::Node& n = graph_.node(static_cast<jit::NodeId>(i));
    if (live[i] && jit::op_family(n.op) == jit::Family::Pointwise) entry_->ops.emplace_back(jit::aten_name(n.op));
  }
  if (graph_.outputs().empty()) return ok();  // the plan only rebuilds the return value
  entry_->graph_text = graph_.str();
  if (log::enabled(log::Channel::Graph)) {
    log::interp().info("graph of {}:\n{}", PyUnicode_AsUTF8(st_.code->co_qualname), entry_->graph_text);
  }
  std::string error;
  jit::CpuBackend* backend = cpu_backend(&error);
  if (backend == nullptr) return unsupported("the CPU backend is unavailable: " + error);
  auto compiled = backend->compile(graph_);
  if (!compiled) return unsupported("compiling the graph failed: " + compiled.error());
  entry_->plan.graph = *compiled;
  return ok();
}

}  // namespace

std::unique_ptr<CacheEntry> trace_frame(CodeState& state, compat::Frame* f, const guards::CallInputs& in,
                                        Fallback* why) {
  std::string error;
  const DecodedCode* code = decoded_code(state.code, &error);
  if (code == nullptr) {
    why->reason = error;
    why->location = PyUnicode_AsUTF8(state.code->co_filename);
    return nullptr;
  }
  Tracer tracer(state, f, in, *code);
  if (log::trace_dir().empty()) return tracer.run(why);
  std::string trace;
  tracer.trace_log_ = &trace;
  std::unique_ptr<CacheEntry> entry = tracer.run(why);
  write_trace_dump(state.code, trace, entry.get(), *why);
  return entry;
}

}  // namespace fj::interp

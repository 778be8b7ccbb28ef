// What the tracer's handlers share outside the Tracer class: its limits, the Status
// a handler ends a trace with, and free functions over Values and Python objects
// (each defined in the file its comment names).
#pragma once

#include "interp/compat.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "guards/guards.h"
#include "interp/trace/bytecode.h"
#include "interp/trace/value.h"

namespace fj::interp {

constexpr int kMaxSteps = 100000;      // a trace longer than this gives up
constexpr int kNbInplaceAdd = 13;      // BINARY_OP arguments from here on are in-place
constexpr int kMaxInlineDepth = 32;    // deeper calls end the trace
constexpr size_t kMaxUnroll = 1024;    // longer loops (and iterators made now) end the trace
constexpr Py_ssize_t kMaxPathListItems = 64;  // a longer list attribute is guarded by identity
constexpr Py_ssize_t kMaxPathListTotal = 1024;  // ... and so are lists past this many items in one trace
constexpr int kMaxPathListDepth = 3;            // ... or nested deeper

constexpr int op(Opcode o) { return static_cast<int>(o); }

// Handlers return fj::Status (jit/common.h): ok() to go on, or an Error whose message
// is the reason to stop tracing; the frame then runs in CPython (a Fallback, with the
// location added where the trace ends).
inline Error unsupported(std::string why) { return Error{std::move(why)}; }

bool is_plain_scalar(PyObject* o);
// Constants whose operations run no user code: numbers, None, strings, tuples of these.
bool is_foldable(PyObject* o);
// The object's class compares (==) as object, str or int do, in C (ops_values.cpp).
bool compares_in_c(PyObject* o);
// Objects that never change and whose operations run no user code (ops_fold.cpp).
bool is_immutable_known(PyObject* o);
// Enum classes whose operations run only the enum module's code, and their members.
bool is_plain_enum_class(PyObject* cls);
bool is_plain_enum_member(PyObject* o);
// Builtins, classes and enum members: arguments guarded by identity (interpreter.cpp).
bool guarded_by_identity(PyObject* o);
// operator's function names for BINARY_OP's and COMPARE_OP's arguments ("" if none).
const char* binary_operator_name(int nb_op);
const char* compare_operator_name(int cmp);
// module.name looked up now (the module imported if needed), a new reference the caller
// keeps for the process, typically in a static; nullptr if missing, no error left set.
PyObject* lookup_attr(const char* module, const char* name);
// Whether fn is the Python function `qualname` defined in module `module` (a wrapper
// a library makes, known by its code; ops_call.cpp).
bool library_function(PyObject* fn, const char* module, const char* qualname);
// numpy.<name> (borrowed, kept for the process), once numpy is imported (ops_numpy.cpp).
PyObject* numpy_attr(const char* name);
// A NumPy scalar of a kind a symbol holds, as a constant tagged with its type.
std::optional<Value> numpy_scalar_constant(PyObject* r);
// The graph dtype of a NumPy scalar type (np.float64: Float64), if it has one.
std::optional<jit::DType> numpy_dtype(PyObject* type);
// While alive (and `on`), NumPy raises FloatingPointError where it would warn
// (np.seterr(all="raise")) and Python warnings raise (warnings.simplefilter("error")):
// a computation done while tracing is then one whose result no np.errstate of a later
// call could change, and that showed no warning (ops_numpy.cpp).
class NumpyStrict {
 public:
  explicit NumpyStrict(bool on);
  ~NumpyStrict();
  NumpyStrict(const NumpyStrict&) = delete;
  NumpyStrict& operator=(const NumpyStrict&) = delete;

 private:
  PyRef old_;       // np.seterr's settings before
  PyRef warnings_;  // the warnings.catch_warnings entered
};
// NumPy callables that compute from known numbers and change nothing (ufuncs, np.dtype...).
bool is_pure_numpy_callable(PyObject* fn);
// NumPy dtypes and np.finfo / np.iinfo records: immutable, read without user code.
bool is_numpy_metadata(PyObject* o);
// A functools.partial or itertools.count the frame made, an object of the trace (ops_higher.cpp).
bool is_partial_object(const Value& v);
bool is_count_object(const Value& v);
// operator.<name> (lookup_attr), and operator's getter classes.
PyObject* operator_function(const char* name);
bool is_operator_getter_class(PyObject* cls);
inline bool is_opaque(const Value& v) { return v.kind == ValueKind::Const && v.opaque; }
// An iterator whose end raises (Value::obj an exception: zip(strict=True) of uneven lengths).
inline bool pending_error(const Value& v) {
  return v.kind == ValueKind::Iterator && v.obj && PyExceptionInstance_Check(v.obj.get());
}
// A class whose call is its Python __new__ (ops_except.cpp), and whether what that
// returned still needs an __init__ of the class's own.
PyRef class_new_function(PyObject* cls);
bool needs_own_init(PyObject* cls, const Value& made);
// collections.namedtuple and typing.NamedTuple classes (ops_objects.cpp).
bool is_namedtuple_class(PyObject* cls);
// cls(*args) of an exception class whose construction runs no user code, made now;
// it never leaves the trace (fresh). nullopt: building it raised.
std::optional<Value> make_exception(PyObject* cls, PyObject* args);
bool is_shape_method(const std::string& name);
// A torch.dtype, device, layout, finfo or iinfo (exactly): immutable, compared in C.
bool is_torch_metadata_object(PyObject* o);
// None, "cpu" or torch.device("cpu") (interp/torch/creation.cpp).
bool is_cpu_device(PyObject* o);
// A module attribute that module code reads but the module's dict does not hold
// (torch._VF.dropout, torch.backends.cudnn.enabled), or nullptr (tensor_meta.cpp).
// *opaque: the value may only be passed on, never looked into.
PyObject* torch_module_fallback_attr(PyObject* module, const std::string& name, bool* opaque);
// Calls fn on each value of `roots` and on every item inside them (breaks.cpp).
void walk_values(std::vector<Value*>& roots, const std::function<void(Value&)>& fn);
// A constant a dict value may hold as a key: hashed and compared without user code (ops_star.cpp).
bool plain_key(const Value& v);
// The position of `key` among a Dict value's keys (items 0, 2, 4, ...), or -1 (ops_star.cpp).
long dict_find(const Value& dict, PyObject* key);
// collections.OrderedDict, defaultdict, Counter and deque (borrowed; ops_collections.cpp)
PyObject* ordered_dict_class();
PyObject* default_dict_class();
PyObject* counter_class();
PyObject* deque_class();
// The locals and stack of a frame state, as roots for walk_values.
std::vector<Value*> state_roots(FrameState& fs);
// A Python number as a SymExpr: symbolic values as they are (a NumPy scalar's too, as
// torch and indexing take it), plain constants folded in.
std::optional<jit::SymExpr> as_sym(const Value& v);
// name of a module read from a global (or imported, see ops_import.cpp), guarded by
// its attribute path (ops_load_store.cpp).
Status module_attr(const Value& base, const std::string& name, Value* out, guards::GuardSet& guards);
// "L['self'].fc.weight": how a person finds a value again.
std::string source_text(const Source& s);
// The decoded bytecode of a code object, decoded once and kept in its CodeState.
Expected<const DecodedCode*> decoded_code(PyCodeObject* co);

}  // namespace fj::interp

// Handlers for sequences, the value stack, jumps and RETURN_VALUE.
#include <algorithm>
#include <string_view>

#include "interp/trace/tracer.h"

namespace fj::interp {

// ---- sequences and stack ----

// (items[n] -- seq)
Status Tracer::op_build_seq(const Instruction& ins) {
  const size_t n = static_cast<size_t>(ins.arg);
  std::vector<Value> items(cur_.fs->stack.end() - static_cast<std::ptrdiff_t>(n), cur_.fs->stack.end());
  cur_.fs->stack.resize(cur_.fs->stack.size() - n);
  Value seq = Value::sequence(ins.opcode == op(Opcode::BUILD_TUPLE) ? ValueKind::Tuple : ValueKind::List,
                              std::move(items));
  seq.identity = next_identity_++;
  push(std::move(seq));
  return ok();
}

// (list, ...[arg - 1], item -- list, ...): a list comprehension's list (or a
// display's), which lives only on the value stack, so it is extended in place.
Status Tracer::op_list_append(const Instruction& ins) {
  auto& stack = cur_.fs->stack;
  const auto depth = static_cast<size_t>(ins.arg);
  if (depth == 0 || depth >= stack.size()) return unsupported("LIST_APPEND below the value stack");
  Value& list = stack[stack.size() - 1 - depth];
  if (list.kind != ValueKind::List || list.obj) return unsupported("LIST_APPEND to " + describe(list));
  list.items.push_back(pop());
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
  if (is_tensor(seq)) {
    FJ_TRY(require_tensor_attr("__getitem__"));
    return subscript(seq, index);
  }
  if (seq.kind == ValueKind::Dict) return dict_subscript(seq, index);
  if (std::optional<Status> s = path_dict_item(seq, index, nullptr)) return std::move(*s);
  if ((seq.kind == ValueKind::Tuple || seq.kind == ValueKind::List) && !seq.obj && index.kind == ValueKind::Const &&
      !is_opaque(index) && PySlice_Check(index.obj.get())) {  // x.shape[1:], t[::2]
    Py_ssize_t start, stop, step, n;
    if (PySlice_GetIndicesEx(index.obj.get(), static_cast<Py_ssize_t>(seq.items.size()), &start, &stop, &step, &n) < 0) {
      guards::clear_error();
      return unsupported("a bad slice (CPython raises)");
    }
    std::vector<Value> items;
    for (Py_ssize_t i = 0, j = start; i < n; ++i, j += step) items.push_back(seq.items[static_cast<size_t>(j)]);
    Value out = Value::sequence(seq.kind, std::move(items));
    out.torch_size = seq.torch_size;
    out.identity = next_identity_++;
    push(std::move(out));
    return ok();
  }
  const bool const_tuple = seq.kind == ValueKind::Const && !is_opaque(seq) &&
                           (PyTuple_CheckExact(seq.obj.get()) ||
                            (PyList_CheckExact(seq.obj.get()) && seq.reg < 0 && seq.source.kind == Source::Kind::Global));
  if ((seq.kind == ValueKind::Tuple || seq.kind == ValueKind::List || const_tuple) && index.kind == ValueKind::Sym &&
      index.expr.type() == jit::SymType::Int) {  // which item: the index's value, guarded
    PyRef i;
    FJ_TRY(concrete_number(index, "an index", &i));
    index = Value::constant(std::move(i));
  }
  if ((seq.kind == ValueKind::Tuple || seq.kind == ValueKind::List) && index.kind == ValueKind::Const &&
      PyLong_CheckExact(index.obj.get())) {
    long i = PyLong_AsLong(index.obj.get());
    const long n = static_cast<long>(seq.items.size());
    if (i < 0) i += n;
    if (PyErr_Occurred() || i < 0 || i >= n) {
      guards::clear_error();
      PyErr_SetString(PyExc_IndexError, seq.kind == ValueKind::Tuple ? "tuple index out of range" : "list index out of range");
      return raise_python_error("index out of range (CPython raises)");
    }
    push(seq.items[static_cast<size_t>(i)]);
    return ok();
  }
  if (seq.kind == ValueKind::Const && !is_opaque(seq) && seq.reg < 0 && PyList_CheckExact(seq.obj.get()) &&
      index.kind == ValueKind::Const && PyLong_CheckExact(index.obj.get())) {
    // An item of a list found by path (a module's table): that item, guarded by path;
    // the list's length is not (a log list that grows keeps its entry).
    const long long k = PyLong_AsLongLong(index.obj.get());
    guards::clear_error();
    guards::PathRoot root;
    PyRef holder;
    if (k >= 0 && k < PyList_GET_SIZE(seq.obj.get()) && path_root(seq, &root, &holder)) {
      Value item;
      FJ_TRY(found_at_path(seq, "#" + std::to_string(k), PyList_GET_ITEM(seq.obj.get(), k), &item));
      push(std::move(item));
      return ok();
    }
  }
  if (std::optional<Status> s = subscript_constants(seq, index)) return std::move(*s);
  if (DequeCalls::is_deque(seq)) return DequeCalls::subscript(*this, seq, index);
  if (std::optional<Status> s = python_dunder(seq, "__getitem__", {index})) return std::move(*s);
  // a range, bytes or str constant: its item as CPython computes it
  if (std::optional<Status> s = fold_operator("getitem", seq, index, /*specialize=*/false)) return std::move(*s);
  if (std::optional<Status> s = fold_operator("getitem", seq, index, /*specialize=*/true)) return std::move(*s);
  return unsupported("subscript of " + describe(seq) + " (not supported yet)");
}

// obj.<dunder>(args...) for an operator (obj[index], `key in obj`) where obj's class
// defines the method in Python (a registry such as transformers' AttentionInterface, a
// collections.abc.Mapping): the method is traced as a call, guarded as a method read at
// obj's path (an object made in the frame: by its class's guard). nullopt: not such an
// object.
std::optional<Status> Tracer::python_dunder(const Value& obj, const char* dunder, std::vector<Value> args) {
  PyRef name = PyRef::steal(PyUnicode_InternFromString(dunder));
  PyObject* fn = nullptr;
  if (obj.kind == ValueKind::Object) {
    fn = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(obj.obj.get()), name.get());
    if (fn == nullptr || !PyFunction_Check(fn)) return std::nullopt;
  } else {
    if (obj.kind != ValueKind::Const || is_opaque(obj) || obj.fresh) return std::nullopt;
    fn = _PyType_Lookup(Py_TYPE(obj.obj.get()), name.get());
    guards::PathRoot root;
    PyRef holder;
    if (fn == nullptr || !PyFunction_Check(fn) || !path_root(obj, &root, &holder)) return std::nullopt;
    guards().add_path_method(source_text(obj.source), root, obj.source.attrs, dunder, fn);
  }
  const PyRef keep = PyRef::borrow(fn);
  args.insert(args.begin(), obj);
  return inline_call(fn, std::move(args), nullptr);
}

// c[i] where both are known and the subscript runs no user code: a builtin type's
// __class_getitem__ (list[int] is a types.GenericAlias), an item or slice of a
// constant tuple or string. Computed now; where CPython raises, the trace ends there.
// nullopt: not such a subscript.
std::optional<Status> Tracer::subscript_constants(const Value& seq, const Value& index) {
  if (seq.kind != ValueKind::Const || is_opaque(seq) || seq.fresh) return std::nullopt;
  PyObject* c = seq.obj.get();
  PyRef key;
  if (index.kind == ValueKind::Const && !is_opaque(index) && !index.fresh) {
    key = index.obj;
  } else if (index.kind == ValueKind::Tuple && !index.obj && !index.torch_size) {  // dict[str, int]
    key = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(index.items.size())));
    for (size_t i = 0; i < index.items.size(); ++i) {
      const Value& item = index.items[i];
      if (item.kind != ValueKind::Const || is_opaque(item) || item.fresh) return std::nullopt;
      PyTuple_SET_ITEM(key.get(), static_cast<Py_ssize_t>(i), PyRef(item.obj).release());
    }
  } else {
    return std::nullopt;
  }
  const bool builtin_type = PyType_Check(c) && Py_IS_TYPE(c, &PyType_Type) &&
                            !(reinterpret_cast<PyTypeObject*>(c)->tp_flags & Py_TPFLAGS_HEAPTYPE);
  bool pure_index = PyLong_Check(key.get()) && Py_IS_TYPE(key.get(), &PyLong_Type);
  if (PySlice_Check(key.get())) {
    auto* sl = reinterpret_cast<PySliceObject*>(key.get());
    pure_index = is_foldable(sl->start) && is_foldable(sl->stop) && is_foldable(sl->step);
  }
  const bool sequence = (PyTuple_CheckExact(c) || PyUnicode_CheckExact(c)) && is_foldable(c) && pure_index;
  if (!builtin_type && !sequence) return std::nullopt;
  PyObject* r = PyObject_GetItem(c, key.get());
  if (r == nullptr) {
    guards::clear_error();
    return unsupported("subscript of " + describe(seq) + " (CPython raises)");
  }
  push(Value::constant(PyRef::steal(r)));
  return ok();
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
               v.kind == ValueKind::List || v.kind == ValueKind::Dict || v.kind == ValueKind::Object) is_none = false;
      else if (std::optional<bool> s = singleton_test(v, Value::constant(PyRef::borrow(Py_None)))) is_none = *s;
      else return unsupported("'is None' test of " + describe(v));
      const bool want_none = ins.opcode == op(Opcode::POP_JUMP_FORWARD_IF_NONE) || ins.opcode == op(Opcode::POP_JUMP_BACKWARD_IF_NONE);
      jump = is_none == want_none;
      break;
    }
    default: {
      bool t = false;
      const bool want = ins.opcode == op(Opcode::POP_JUMP_FORWARD_IF_TRUE) || ins.opcode == op(Opcode::POP_JUMP_BACKWARD_IF_TRUE);
      if (v.kind == ValueKind::Tensor && can_branch_plan()) return branch_on(std::move(v), ins, want);
      FJ_TRY(truth(v, &t));
      jump = t == want;
      break;
    }
  }
  return jump ? jump_to(ins.target) : ok();
}

// (cond -- cond if jumping)
Status Tracer::op_jump_if_or_pop(const Instruction& ins) {
  bool t = false;
  FJ_TRY(truth(top(), &t));
  if (t == (ins.opcode == op(Opcode::JUMP_IF_TRUE_OR_POP))) return jump_to(ins.target);
  pop();
  return ok();
}

// ---- loops: unrolled over sequences known while tracing ----


// (iterable -- iterator)
// Whether o has a length (a sized constant: a tuple, str, range, set); no error is left set.
static bool has_length(PyObject* o) {
  const bool sized = PyObject_Length(o) >= 0;
  if (!sized) guards::clear_error();
  return sized;
}

Status Tracer::op_get_iter(const Instruction& ins) {
  Value seq = pop();
  Value it;
  it.kind = ValueKind::Iterator;
  if (pending_error(seq) && ins.opcode != op(Opcode::GET_ITER)) {
    return unsupported("an iterator that raises at its end, read at once (not supported yet)");  // only loops raise it
  }
  if (seq.kind == ValueKind::Iterator) {  // iter() of an iterator is itself
    // list(g), zip(g), *g of a generator expression run ahead of a write since then.
    if (run_ahead_stale(seq)) {
      return unsupported("a generator expression consumed after a write it may read (not supported yet)");
    }
    push(std::move(seq));
    return ok();
  }
  if (seq.kind == ValueKind::Tuple || seq.kind == ValueKind::List) {
    // A list iterator reads the list at each step: one over a list the frame holds
    // keeps its identity (set_list_items updates its items), or its argument source.
    if (is_traced_list(seq)) it.identity = seq.identity;
    if (seq.kind == ValueKind::List && seq.source.kind == Source::Kind::Arg && seq.source.arg >= 0 &&
        seq.source.attrs.empty()) {
      it.source = seq.source;
    }
    it.items = std::move(seq.items);
  } else if (seq.kind == ValueKind::Const && knowable(seq, false) && has_length(seq.obj.get())) {
    // a constant tuple, range, str, frozenset, or a set the frame made: its items now
    PyObject* o = seq.obj.get();
    if (static_cast<size_t>(PyObject_Length(o)) > kMaxUnroll) {
      return unsupported("a loop of more than " + std::to_string(kMaxUnroll) + " iterations");
    }
    PyRef iter = PyRef::steal(PyObject_GetIter(o));
    while (PyObject* item = iter ? PyIter_Next(iter.get()) : nullptr) it.items.push_back(Value::constant(PyRef::steal(item)));
    if (seq.fresh && PySet_CheckExact(o)) it.obj = seq.obj;  // a set the frame changes: FOR_ITER checks its size
    if (!iter || PyErr_Occurred()) {
      guards::clear_error();
      return unsupported("cannot read the loop's items");
    }
  } else if (seq.kind == ValueKind::Dict) {
    // for key in d: its keys now; a change of d while the loop runs ends the trace
    // (may_change_dict), where eager raises or would see the change
    it.identity = seq.identity;
    for (size_t j = 0; j < seq.items.size(); j += 2) it.items.push_back(seq.items[j]);
  } else if (is_path_dict(seq) && static_cast<size_t>(PyDict_GET_SIZE(seq.obj.get())) <= kMaxUnroll) {
    for (PyRef& key : path_dict_keys(seq)) it.items.push_back(Value::constant(std::move(key)));
  } else if (is_tensor(seq)) {
    // for row in x: the views x[0], x[1], ... (Tensor.__iter__ unbinds dim 0)
    FJ_TRY(require_tensor_attr("__iter__"));
    const jit::SymShape xs = graph_.node(seq.node).sym;
    if (xs.empty()) return unsupported("iterating over a 0-d tensor (eager raises)");
    int64_t n;
    FJ_TRY(specialize(xs[0], "a loop over a tensor's rows", &n));
    if (static_cast<size_t>(n) > kMaxUnroll) return unsupported("a loop of more than " + std::to_string(kMaxUnroll) + " iterations");
    for (int64_t i = 0; i < n; ++i) {
      auto r = graph_.select(seq.node, 0, jit::SymExpr::integer(i));
      if (!r) return unsupported("a loop over a tensor's rows: " + r.error());
      if (may_be_noncontig(seq.node)) mark_noncontig(*r);
      mark_view(*r, seq.node);
      it.items.push_back(Value::tensor(*r));
    }
  } else if (container_items(seq, &it.items).ok()) {
    // an nn.Sequential or nn.ModuleList: its submodules
  } else if (DequeCalls::is_deque(seq)) {
    return DequeCalls::iterate(*this, seq);
  } else if (seq.kind == ValueKind::Object) {
    // an object of the frame: its class's Python __iter__, which must give an iterator
    if (std::optional<Status> s = python_dunder(seq, "__iter__", {})) {
      FJ_TRY(std::move(*s));
      if (top().kind != ValueKind::Iterator) return unsupported("__iter__ of " + describe(seq) + " gave " + describe(top()));
      return ok();
    }
    return unsupported("iterating over " + describe(seq) + " (not supported yet)");
  } else {
    return unsupported("iterating over " + describe(seq) + " (not supported yet)");
  }
  push(std::move(it));
  return ok();
}

// The submodules of an nn.Sequential or nn.ModuleList (exactly those types, so their
// __iter__ is torch's), each read as an attribute; the set of submodules is guarded.
Status Tracer::container_items(const Value& seq, std::vector<Value>* items) {
  if (seq.kind != ValueKind::Const || seq.fresh) return unsupported("not a container module");
  PyObject* obj = seq.obj.get();
  bool container = false;
  for (PyObject* t : guards::module_call_refs().containers) container |= Py_TYPE(obj) == reinterpret_cast<PyTypeObject*>(t);
  if (!container) return unsupported("not a container module");
  PyObject** dictptr = _PyObject_GetDictPtr(obj);
  PyObject* modules = dictptr && *dictptr ? PyDict_GetItemString(*dictptr, "_modules") : nullptr;
  if (modules == nullptr || !PyDict_CheckExact(modules)) return unsupported("a container module without _modules");
  if (static_cast<size_t>(PyDict_GET_SIZE(modules)) > kMaxUnroll) return unsupported("a loop over too many submodules");
  guards::PathRoot root;
  PyRef holder;
  if (!path_root(seq, &root, &holder)) return unsupported("a container module not found again by its path");
  guards().add_dict_keys(source_text(seq.source) + "._modules", root, seq.source.attrs, modules);
  Py_ssize_t pos = 0;
  PyObject* key;
  while (PyDict_Next(modules, &pos, &key, nullptr)) {
    if (!PyUnicode_Check(key)) return unsupported("a submodule name that is not a string");
    Value item;
    const std::string name = FJ_TRY(guards::utf8_of(key));
    FJ_TRY(attr_of(seq, name, &item));
    items->push_back(std::move(item));
  }
  return ok();
}

// Whether `it`, run ahead of its consumer, has items left that a change since it ran
// may make stale: one of what it reads (Value::reads), or of anything.
bool Tracer::run_ahead_stale(const Value& it) const {
  if (it.writes < 0 || (it.next >= it.items.size() && !it.dict_view)) return false;
  for (size_t k = static_cast<size_t>(it.writes); k < write_log_.size(); ++k) {
    const int id = write_log_[k];
    if (id <= -2) continue;  // an own iterator advanced (what a generator took from one: inline_call)
    if (id == -1 || !it.reads || std::find(it.reads->begin(), it.reads->end(), id) != it.reads->end()) return true;
  }
  return false;
}

// The identities of the lists, dicts and objects in `roots` and inside them; null
// (anything) where they hold what may read more: an iterator run ahead that reads
// anything, or a function over the frame's variables (a closure called later).
std::shared_ptr<const std::vector<int>> Tracer::identities_in(std::vector<Value*> roots) const {
  auto ids = std::make_shared<std::vector<int>>();
  bool anything = false;
  walk_values(roots, [&](Value& v) {
    if (v.identity >= 0) ids->push_back(v.identity);
    if (v.kind == ValueKind::Iterator && v.writes >= 0) {
      if (!v.reads) anything = true;
      else ids->insert(ids->end(), v.reads->begin(), v.reads->end());
    }
    anything |= v.kind == ValueKind::Const && v.fresh && v.obj && has_traced_cells(v.obj.get());
  });
  return anything ? nullptr : ids;
}

// (iterator -- iterator, item) or, when exhausted, (iterator -- ) and jump
Status Tracer::op_for_iter(const Instruction& ins) {
  Value& it = top();
  if (it.kind != ValueKind::Iterator) return unsupported("FOR_ITER over " + describe(it));
  // A generator expression's items were computed when it was made: after an in-place
  // write, eager would compute the next ones from the new values.
  if (run_ahead_stale(it)) {
    return unsupported("a generator expression consumed by a loop that writes tensors in place (not supported yet)");
  }
  if (it.obj && PySet_CheckExact(it.obj.get()) && static_cast<size_t>(PySet_GET_SIZE(it.obj.get())) != it.items.size()) {
    PyErr_SetString(PyExc_RuntimeError, "Set changed size during iteration");
    return raise_python_error("a set changed while a loop iterates over it (CPython raises)");
  }
  if (it.next < it.items.size()) {
    Value item = it.items[it.next++];
    advance_everywhere(it);
    push(std::move(item));
    return ok();
  }
  if (pending_error(it)) {  // zip(strict=True) of iterables of different lengths
    // A generator is run ahead of its consumer: eager would raise later, at a next().
    if (cur_.fs->yields) return unsupported("a generator whose loop raises at its end (not supported yet)");
    Value exc = Value::constant(it.obj);
    exc.fresh = true;
    return raise_exception(std::move(exc), "zip(strict=True) of iterables of different lengths (CPython raises)");
  }
  pop();
  return jump_to(ins.target);
}

// (manager -- exit, entered): `with torch.no_grad():` and `with torch.enable_grad():`.
// The block is traced as it stands; the mode is tracked per recorded node (a node
// recorded where it is off carries no gradient, see compile_joint). An exception
// leaving the block restores the mode as it passes (op_with_except_start).
Status Tracer::op_before_with(const Instruction&) {
  // After an opaque call a failure inside the block could not resume in CPython (the
  // grad mode change is not real while tracing): the block runs there from its start.
  if (committed_ && cur_.depth == 0) return unsupported("a with block after a graph break");
  Value mgr = pop();
  if (mgr.kind == ValueKind::Object) return enter_object(mgr);
  if (mgr.kind != ValueKind::Const || is_opaque(mgr) || !is_grad_mode_manager(mgr.obj.get())) {
    return unsupported("a with block on " + describe(mgr) + " (not supported yet)");
  }
  enter_grad_block(mgr.obj.get());
  Value exit;
  exit.kind = ValueKind::GradModeExit;
  push(std::move(exit));
  push(Value::constant(PyRef::borrow(Py_None)));
  return ok();
}

// BEFORE_WITH of an object made in the frame whose class has Python __enter__ and
// __exit__: its bound __exit__ (which the block's end calls with three Nones) and what
// __enter__ returns, both traced. An exception leaving the block (WITH_EXCEPT_START)
// ends the trace.
Status Tracer::enter_object(const Value& mgr) {
  static PyObject* enter_name = PyUnicode_InternFromString("__enter__");
  static PyObject* exit_name = PyUnicode_InternFromString("__exit__");
  auto* type = reinterpret_cast<PyTypeObject*>(mgr.obj.get());
  PyObject* enter = _PyType_Lookup(type, enter_name);
  PyObject* exit = _PyType_Lookup(type, exit_name);
  if (enter == nullptr || exit == nullptr || !PyFunction_Check(enter) || !PyFunction_Check(exit)) {
    return unsupported("a with block on " + describe(mgr) + " (not supported yet)");
  }
  Value bound = Value::constant(PyRef::borrow(exit));
  bound.fresh = true;  // a method bound to the object, as object_attr makes one
  bound.items.push_back(mgr);
  push(std::move(bound));
  return inline_call(enter, {mgr}, nullptr);
}

// (value -- )
Status Tracer::op_return_value(const Instruction&) {
  cur_.fs->ret = pop();
  return ok();
}

// ( -- ): the start of a generator run to its end (inline_call). CPython
// returns the generator here and the first resumption pushes None for the POP_TOP
// that follows; both are skipped.
Status Tracer::op_return_generator(const Instruction&) {
  const size_t next = cur_.fs->pc + 1;
  if (!cur_.fs->yields || next >= cur_.code->instructions.size() ||
      cur_.code->instructions[next].opcode != op(Opcode::POP_TOP)) {
    return unsupported("a generator (not supported yet)");
  }
  cur_.fs->pc = next + 1;
  return ok();
}

// (value -- sent): the value is kept as the generator's next item; next() sends None.
Status Tracer::op_yield_value(const Instruction&) {
  if (!cur_.fs->yields) return unsupported("yield outside a generator run to its end (not supported yet)");
  if (cur_.fs->yields->size() >= kMaxUnroll) return unsupported("a generator of more than " + std::to_string(kMaxUnroll) + " items");
  cur_.fs->yields->push_back(pop());
  push(Value::constant(PyRef::borrow(Py_None)));
  return ok();
}

// BUILD_MAP (key, value, ... -- dict); BUILD_CONST_KEY_MAP (values..., keys -- dict).
// Keys are constants whose hashing runs no user code (str, numbers, None).
Status Tracer::op_build_map(const Instruction& ins) {
  const size_t n = static_cast<size_t>(ins.arg);
  std::vector<Value> keys, values;
  if (ins.opcode == op(Opcode::BUILD_CONST_KEY_MAP)) {
    Value k = pop();
    if (k.kind != ValueKind::Const || !PyTuple_CheckExact(k.obj.get()) || PyTuple_GET_SIZE(k.obj.get()) != static_cast<Py_ssize_t>(n)) {
      return unsupported("BUILD_CONST_KEY_MAP without a tuple of keys");
    }
    for (size_t i = 0; i < n; ++i) keys.push_back(Value::constant(PyRef::borrow(PyTuple_GET_ITEM(k.obj.get(), static_cast<Py_ssize_t>(i)))));
    values.assign(cur_.fs->stack.end() - static_cast<std::ptrdiff_t>(n), cur_.fs->stack.end());
    cur_.fs->stack.resize(cur_.fs->stack.size() - n);
  } else {
    std::vector<Value> items(cur_.fs->stack.end() - static_cast<std::ptrdiff_t>(2 * n), cur_.fs->stack.end());
    cur_.fs->stack.resize(cur_.fs->stack.size() - 2 * n);
    for (size_t i = 0; i < n; ++i) {
      keys.push_back(std::move(items[2 * i]));
      values.push_back(std::move(items[2 * i + 1]));
    }
  }
  Value dict;
  dict.kind = ValueKind::Dict;
  for (size_t i = 0; i < n; ++i) {
    const Value& k = keys[i];
    if (!plain_key(k)) return unsupported("a dict key " + describe(k) + " (not supported yet)");
    // a repeated key keeps its first position and takes the last value
    if (const long at = dict_find(dict, k.obj.get()); at >= 0) {
      dict.items[static_cast<size_t>(at) + 1] = std::move(values[i]);
    } else {
      dict.items.push_back(k);
      dict.items.push_back(std::move(values[i]));
    }
  }
  dict.identity = next_identity_++;
  push(std::move(dict));
  return ok();
}

}  // namespace fj::interp

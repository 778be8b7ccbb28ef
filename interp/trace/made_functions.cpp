// A function the frame made (MAKE_FUNCTION: a nested def, a lambda, a closure) that
// leaves it, returned or stored: the plan makes it anew at each call from the traced
// one's code and globals, as eager's frame does, with its defaults (traced ones as
// the frame computed them) and a closure of new cells holding what the frame's
// variables hold as it returns: one cell per variable however many functions share
// it, and a function that its own closure holds is that same function.
#include "interp/trace/tracer.h"

#include "interp/runtime/plan.h"

namespace fj::interp {

namespace {

// A repeat of an object the value already made, or its new memo (*first).
template <typename Key>
void memo_of(std::map<Key, int>& memos, const Key& key, PlanValue* out, ConvertCtx& ctx, bool* first) {
  auto [it, fresh] = memos.emplace(key, ctx.num_memos);
  *first = fresh;
  if (!fresh) {
    out->kind = PlanValue::Kind::Repeat;
    out->index = it->second;
    return;
  }
  out->memo = ctx.num_memos++;
}

}  // namespace

Status Tracer::convert_function(const Value& v, PlanValue* out, ConvertCtx& ctx) {
  PyObject* fn = v.obj.get();
  auto* f = reinterpret_cast<PyFunctionObject*>(fn);
  if (f->func_dict != nullptr && PyDict_GET_SIZE(f->func_dict) != 0) {
    return unsupported("a function made in the frame with attributes of its own, leaving it (not supported yet)");
  }
  bool first = false;
  memo_of(ctx.object_memo, fn, out, ctx, &first);
  if (!first) return ok();
  out->kind = PlanValue::Kind::Function;
  out->obj = v.obj;
  out->items.resize(2);
  out->items[0].kind = out->items[1].kind = PlanValue::Kind::Null;
  if (const auto made = made_defaults_.find(fn); made != made_defaults_.end()) {
    if (made->second.defaults.kind != ValueKind::Null) FJ_TRY(convert(made->second.defaults, &out->items[0], ctx));
    if (made->second.kwdefaults.kind != ValueKind::Null) FJ_TRY(convert(made->second.kwdefaults, &out->items[1], ctx));
  }
  for (Py_ssize_t k = 0; f->func_closure != nullptr && k < PyTuple_GET_SIZE(f->func_closure); ++k) {
    PyObject* cell = PyTuple_GET_ITEM(f->func_closure, k);
    const auto at = traced_cells_.find(cell);
    if (at == traced_cells_.end()) return unsupported("a function made in the frame over a cell it does not trace");
    PlanValue c;  // one cell per variable (each LOAD_CLOSURE made a stand-in of its own)
    memo_of(ctx.cell_memo, std::pair<const void*, int>(at->second.first, at->second.second), &c, ctx, &first);
    if (first) {
      c.kind = PlanValue::Kind::Cell;
      c.items.resize(1);
      const Value& content = at->second.first->locals[static_cast<size_t>(at->second.second)];
      if (content.kind == ValueKind::Null) c.items[0].kind = PlanValue::Kind::Null;
      else FJ_TRY(convert(content, &c.items[0], ctx));
    }
    out->items.push_back(std::move(c));
  }
  return ok();
}

}  // namespace fj::interp

// Guards on tensors: an argument or attribute-path tensor matching what the trace
// saw, the memory of tensors updated in place, and sequences of tensors.
#include <algorithm>

#include "guards/guard_kinds.h"

namespace fj::guards {
namespace {

bool is_plain_tensor(PyObject* t) noexcept {
  const TorchRefs& r = torch_refs();
  return Py_TYPE(t) == reinterpret_cast<PyTypeObject*>(r.tensor_type) ||
         Py_TYPE(t) == reinterpret_cast<PyTypeObject*>(r.parameter_type);
}

// The strides torch gives a new contiguous tensor of these sizes (a size-1 or size-0
// dim steps as if its size were 1).
bool standard_strides(const TensorMeta& m) noexcept {
  int64_t expected = 1;
  for (int d = m.rank - 1; d >= 0; --d) {
    const auto k = static_cast<size_t>(d);
    if (m.strides[k] != expected) return false;
    expected *= std::max<int64_t>(m.sizes[k], 1);
  }
  return true;
}

std::string dims_str(const std::array<int64_t, kMaxRank>& d, int rank) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(d[static_cast<size_t>(i)]);
  return s + "]";
}

}  // namespace

// ---- TensorSpec ----------------------------------------------------------------

bool TensorSpec::matches(const TensorMeta& m, jit::Bindings& b) const noexcept {
  if (m.dtype != meta.dtype || m.is_cpu != meta.is_cpu || m.requires_grad != meta.requires_grad ||
      m.is_inference != meta.is_inference || m.is_ndarray != meta.is_ndarray || m.rank != meta.rank) {
    return false;
  }
  for (size_t i = 0; i < static_cast<size_t>(meta.rank); ++i) {
    const int sym = dim_symbols[i];
    if (sym >= 0) {
      if (m.sizes[i] < 2) return false;  // 0 and 1 are specialized
      b.values[static_cast<size_t>(sym)] = m.sizes[i];
    } else if (m.sizes[i] != meta.sizes[i]) {
      return false;
    }
    if (check_strides && m.strides[i] != meta.strides[i]) return false;
  }
  return !contiguous || standard_strides(m);
}

std::string TensorSpec::mismatch(const TensorMeta& m, const std::string& who) const {
  const TensorMeta& e = meta;
  if (m.dtype != e.dtype) return who + " dtype mismatch: expected " + describe_object(e.dtype) + ", actual " + describe_object(m.dtype);
  if (m.is_cpu != e.is_cpu) return who + " device mismatch: expected " + (e.is_cpu ? "cpu" : "non-cpu");
  if (m.requires_grad != e.requires_grad) {
    return who + " requires_grad mismatch: expected " + (e.requires_grad ? "True" : "False");
  }
  if (m.is_inference != e.is_inference) {
    return who + " is_inference mismatch: expected " + (e.is_inference ? "True" : "False");
  }
  if (m.is_ndarray != e.is_ndarray) return who + " is no longer a " + (e.is_ndarray ? "numpy.ndarray" : "torch.Tensor");
  if (m.rank != e.rank) {
    return who + " rank mismatch: expected " + std::to_string(e.rank) + ", actual " + std::to_string(m.rank);
  }
  for (int i = 0; i < e.rank; ++i) {
    const auto k = static_cast<size_t>(i);
    if (dim_symbols[k] >= 0) {
      if (m.sizes[k] < 2) {
        return who + " size at dim " + std::to_string(i) + " is " + std::to_string(m.sizes[k]) +
               ", which is specialized (the entry has a symbolic size >= 2)";
      }
      continue;
    }
    if (m.sizes[k] != e.sizes[k]) {
      return who + " size mismatch at dim " + std::to_string(i) + ": expected " + std::to_string(e.sizes[k]) +
             ", actual " + std::to_string(m.sizes[k]);
    }
  }
  for (int i = 0; i < e.rank && check_strides; ++i) {
    const auto k = static_cast<size_t>(i);
    if (m.strides[k] != e.strides[k]) {
      return who + " stride mismatch at dim " + std::to_string(i) + ": expected " + std::to_string(e.strides[k]) +
             ", actual " + std::to_string(m.strides[k]);
    }
  }
  if (contiguous && !standard_strides(m)) return who + " is no longer contiguous: stride=" + dims_str(m.strides, m.rank);
  return who + " changed";
}

std::string TensorSpec::text(const std::string& who) const {
  std::string sizes = "[";
  for (int i = 0; i < meta.rank; ++i) {
    const auto k = static_cast<size_t>(i);
    sizes += (i ? ", " : "") + (dim_symbols[k] >= 0 ? "s" + std::to_string(dim_symbols[k]) : std::to_string(meta.sizes[k]));
  }
  sizes += "]";
  return who + (meta.is_ndarray ? ": numpy.ndarray of " : ": torch.Tensor ") + describe_object(meta.dtype) + (meta.is_cpu ? " cpu" : " non-cpu") + " size=" + sizes +
         (check_strides ? " stride=" + dims_str(meta.strides, meta.rank) : "") + (contiguous ? " contiguous" : "") +
         (meta.requires_grad ? " requires_grad" : "") + (meta.is_inference ? " inference" : "");
}

bool is_standard_contiguous(const TensorMeta& m) noexcept { return standard_strides(m); }

// ---- ArgTensor -----------------------------------------------------------------

bool ArgTensor::check(const CallInputs& in, jit::Bindings& b) const noexcept {
  const std::optional<TensorMeta>& m = in.metas[static_cast<size_t>(arg)];
  return m && spec.matches(*m, b);
}

std::string ArgTensor::failure(const CallInputs& in) const {
  const std::string who = "tensor '" + name + "'";
  const std::optional<TensorMeta>& m = in.metas[static_cast<size_t>(arg)];
  if (!m) return who + " is no longer a torch.Tensor: got " + Py_TYPE(in.args[arg])->tp_name;
  return spec.mismatch(*m, who);
}

std::string ArgTensor::text() const { return spec.text("tensor '" + name + "'"); }

// ---- PathTensor ----------------------------------------------------------------

// The tensor is held from the moment it is found: torch releases the GIL inside some
// of the reads of tensor_meta, and another thread may rebind the attribute meanwhile.
bool PathTensor::check(const CallInputs& in, jit::Bindings& b) const noexcept {
  PyRef t = PyRef::borrow(path.walk(in));
  if (!t || !is_plain_tensor(t.get())) return false;
  Expected<TensorMeta> m = tensor_meta(t.get());
  if (m.failed()) return false;
  const auto k = static_cast<size_t>(slot);
  in.path_metas[k] = *m;  // found and read now, kept for the plan
  in.path_tensors[k] = std::move(t);
  return spec.matches(in.path_metas[k], b);
}

std::string PathTensor::failure(const CallInputs& in) const {
  const std::string who = "tensor " + name;
  const PyRef t = PyRef::borrow(path.walk(in));
  if (!t) return who + " can no longer be read";
  if (!is_plain_tensor(t.get())) return who + " is no longer a torch.Tensor: got " + Py_TYPE(t.get())->tp_name;
  Expected<TensorMeta> m = tensor_meta(t.get());
  if (m.failed()) return who + ": " + m.error();
  return spec.mismatch(*m, who);
}

std::string PathTensor::text() const { return spec.text("tensor " + name); }

// ---- NoOverlap -----------------------------------------------------------------

namespace {

// The bytes [lo, hi) that a tensor's elements span (empty: lo == hi).
struct Extent {
  uintptr_t lo = 0, hi = 0;
  bool empty() const { return lo == hi; }
  bool disjoint(const Extent& o) const { return empty() || o.empty() || hi <= o.lo || o.hi <= lo; }
};

// A tensor's extent from its data pointer and metadata; false when the pointer
// cannot be read.
bool byte_extent(PyObject* t, const TensorMeta& m, Extent* out) noexcept {
  static PyObject* s_data_ptr = interned("data_ptr").release();  // kept for the process
  const TorchRefs& r = torch_refs();
  const int64_t elem = m.dtype == r.float64 || m.dtype == r.int64 ? 8 : m.dtype == r.float32 || m.dtype == r.int32 ? 4 : 1;
  void* array_data = nullptr;  // a NumPy array argument: its buffer
  TensorMeta array_meta;
  PyRef p = m.is_ndarray && read_ndarray_meta(t, &array_meta, &array_data)
                ? PyRef::steal(PyLong_FromVoidPtr(array_data))
                : PyRef::steal(PyObject_CallMethodNoArgs(t, s_data_ptr));
  if (!p) {
    PyErr_Clear();
    return false;
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(PyLong_AsVoidPtr(p.get()));
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  int64_t last = 0;
  for (int d = 0; d < m.rank; ++d) {
    if (m.sizes[d] == 0) {
      *out = {base, base};
      return true;
    }
    last += (m.sizes[d] - 1) * m.strides[d];
  }
  *out = {base, base + static_cast<uintptr_t>((last + 1) * elem)};
  return true;
}

// No two elements at one address: ordered by stride, each dim steps past the whole
// span of the smaller ones (a sufficient test, as for dense or sliced tensors).
bool no_internal_overlap(const TensorMeta& m) noexcept {
  std::array<std::pair<int64_t, int64_t>, kMaxRank> dims{};  // (stride, size)
  int n = 0;
  for (int d = 0; d < m.rank; ++d) {
    if (m.sizes[d] == 0) return true;
    if (m.sizes[d] > 1) dims[static_cast<size_t>(n++)] = {m.strides[d], m.sizes[d]};
  }
  std::sort(dims.begin(), dims.begin() + n);
  int64_t span = 1;  // elements covered by the smaller dims
  for (int k = 0; k < n; ++k) {
    if (dims[static_cast<size_t>(k)].first < span) return false;
    span = dims[static_cast<size_t>(k)].first * (dims[static_cast<size_t>(k)].second - 1) + span;
  }
  return true;
}

// What find_overlap() found: nothing, or which tensor (a) and with what (b).
struct Overlap {
  enum class What : uint8_t { None, Unreadable, NoDataPtr, Internal, Shared } what = What::None;
  size_t a = 0, b = 0;
};

// The tensor `ref` of a NoOverlap guard and its metadata, or false when this call
// has none there.
bool tensor_at(const CallInputs& in, int ref, PyObject** t, const TensorMeta** m) noexcept {
  if (ref >= 0) {
    if (ref >= in.num_args || !in.metas[static_cast<size_t>(ref)]) return false;
    *t = in.args[ref];
    *m = &*in.metas[static_cast<size_t>(ref)];
    return true;
  }
  const auto slot = static_cast<size_t>(-ref - 1);
  if (slot >= in.path_tensors.size() || !in.path_tensors[slot]) return false;
  *t = in.path_tensors[slot].get();
  *m = &in.path_metas[slot];
  return true;
}

Overlap find_overlap(const NoOverlap& g, const CallInputs& in) noexcept {
  using What = Overlap::What;
  const size_t n = g.tensors.size();
  std::array<Extent, 8> few;  // no allocation for the usual handful of tensors
  std::vector<Extent> many(n > few.size() ? n : 0);
  Extent* ext = n > few.size() ? many.data() : few.data();
  for (size_t k = 0; k < n; ++k) {
    PyObject* t = nullptr;
    const TensorMeta* m = nullptr;
    if (!tensor_at(in, g.tensors[k], &t, &m)) return {What::Unreadable, k};
    if (!byte_extent(t, *m, &ext[k])) return {What::NoDataPtr, k};
    if (k < g.num_updated && !no_internal_overlap(*m)) return {What::Internal, k};
  }
  for (size_t a = 0; a < std::min(g.num_updated, n); ++a) {
    for (size_t b = 0; b < n; ++b) {
      if (a == b || (b < g.num_updated && b < a)) continue;
      if (!ext[a].disjoint(ext[b])) return {What::Shared, a, b};
    }
  }
  return {};
}

}  // namespace

bool NoOverlap::check(const CallInputs& in, jit::Bindings&) const noexcept {
  return find_overlap(*this, in).what == Overlap::What::None;
}

std::string NoOverlap::failure(const CallInputs& in) const {
  const Overlap o = find_overlap(*this, in);
  switch (o.what) {
    case Overlap::What::None: return "";
    case Overlap::What::Unreadable: return names[o.a] + " is no longer a tensor that can be read";
    case Overlap::What::NoDataPtr: return "cannot read the data pointer of " + names[o.a];
    case Overlap::What::Internal: return names[o.a] + ", updated in place, has elements that share memory";
    case Overlap::What::Shared: return names[o.a] + ", updated in place, shares memory with " + names[o.b];
  }
  return "";
}

std::string NoOverlap::text() const {
  std::string s = "no shared memory between";
  for (size_t k = 0; k < names.size(); ++k) s += (k ? ", " : " ") + names[k] + (k < num_updated ? " (updated in place)" : "");
  return s;
}

// ---- SequenceIs ----------------------------------------------------------------

bool SequenceIs::check(const CallInputs& in, jit::Bindings&) const noexcept {
  PyObject* v = in.args[arg];
  if (v == nullptr || reinterpret_cast<PyObject*>(Py_TYPE(v)) != type.get()) return false;
  if (!keys) return Py_SIZE(v) == length;
  if (PyDict_GET_SIZE(v) != length) return false;
  Py_ssize_t pos = 0, i = 0;
  PyObject* key;
  while (PyDict_Next(v, &pos, &key, nullptr)) {
    PyObject* want = PyTuple_GET_ITEM(keys.get(), i++);
    if (key != want && (!PyUnicode_CheckExact(key) || !_PyUnicode_EQ(key, want))) return false;
  }
  return true;
}

std::string SequenceIs::failure(const CallInputs&) const {
  if (keys) return name + " no longer has exactly the keys " + describe_object(keys.get());
  return name + " is no longer a " + reinterpret_cast<PyTypeObject*>(type.get())->tp_name + " of " +
         std::to_string(length) + " items";
}

std::string SequenceIs::text() const {
  if (keys) return name + " is a dict with the keys " + describe_object(keys.get());
  return name + " is a " + reinterpret_cast<PyTypeObject*>(type.get())->tp_name + " of " + std::to_string(length) +
         " items";
}

}  // namespace fj::guards

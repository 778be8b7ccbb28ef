// Reductions and cumulative sums over a dim that is not the innermost one, of a
// KernelEmitter (jit/codegen/kernel_emitter.h), on the CPU: the kernel's innermost loop is
// cut into tiles of kLaneTile positions ("lanes"), and such a reduction runs, once
// per tile, its reduced loops outside and a loop over the tile's lanes inside,
// accumulating into one slot per lane (a stack array), so that it reads memory
// along the contiguous dim and vectorizes. Each lane still combines its elements
// in the order of the reduced dims, as the per-element loop does. A cumulative sum
// over an outer dim keeps one running total per lane, the tile loop placed outside
// the scanned dim's loop (which then runs whole, in order, in each thread).
#include "jit/codegen/kernel_emitter.h"

#include <algorithm>
#include <cmath>

namespace fj::jit::lower {

namespace {

// What walking a value's definition found about the kernel's innermost dim: no
// buffer is read with it at a position other than the buffer's last dim (so
// interchanging keeps reads contiguous), and some buffer is read with it there
// (so interchanging pays).
struct LaneReads {
  bool friendly = true;
  bool contiguous = false;

  void join(const LaneReads& r) {
    friendly = friendly && r.friendly;
    contiguous = contiguous || r.contiguous;
  }
};

// For each dim of a node, the kernel dim its index follows (-1: another value).
using DimMap = std::vector<int>;

// Walks the values a kernel stores, following how each one indexes its operands,
// to find the reductions and cumulative sums that could run per lane of a tile of
// the innermost kernel dim `lane`.
class LanePlanner {
 public:
  LanePlanner(const Graph& g, const Schedule& s, const KernelSpec& k, int lane) : g_(g), s_(s), k_(k), t_(lane) {}

  std::set<NodeId> lane_reductions;  // reductions whose operand is read along the lane at its last dim
  std::set<int> scans;               // kernel dims that a cumulative sum could scan per lane
  bool inner_scan = false;           // a cumulative sum along the lane dim itself (its own running total)

  LaneReads walk(NodeId id, const DimMap& map) {
    auto key = std::make_pair(id, map);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    const Node& n = g_.node(id);
    const int32_t buf = s_.buffer_of[static_cast<size_t>(id)];
    const bool from_memory = n.op == Op::Placeholder || (buf >= 0 && !stored_here(id));
    return memo_[key] = from_memory ? read(map) : walk_family(id, n, map);
  }

 private:
  bool stored_here(NodeId id) const {
    return std::any_of(k_.stores.begin(), k_.stores.end(), [&](const KernelSpec::Store& st) { return st.node == id; });
  }
  bool has_lane(const DimMap& map) const { return std::find(map.begin(), map.end(), t_) != map.end(); }
  // Whether the lane indexes some dim but the last.
  bool lane_outside_last(const DimMap& map) const {
    for (size_t p = 0; p + 1 < map.size(); ++p) {
      if (map[p] == t_) return true;
    }
    return false;
  }

  // A buffer read at `map`.
  LaneReads read(const DimMap& map) const {
    LaneReads out;
    out.friendly = !lane_outside_last(map);
    out.contiguous = !map.empty() && map.back() == t_;
    return out;
  }

  static DimMap broadcast_map(const DimMap& map, const Node& in) {
    const size_t lead = map.size() - in.rank();
    DimMap m(in.rank(), -1);
    for (size_t j = 0; j < in.rank(); ++j) m[j] = is_const(in.sym[j], 1) ? -1 : map[lead + j];
    return m;
  }

  LaneReads walk_family(NodeId id, const Node& n, const DimMap& map) {
    LaneReads out;
    switch (op_family(n.op)) {
      case Family::Pointwise:
        for (NodeId in : n.inputs) {
          if (!is_python_scalar(g_.node(in))) out.join(walk(in, broadcast_map(map, g_.node(in))));
        }
        break;
      case Family::Reduction: out.join(walk_reduction(id, n, map)); break;
      case Family::View: out.join(walk_view(id, n, map)); break;
      case Family::Input:
      case Family::Constant:
      case Family::Creation:
      case Family::Item:
        break;
      case Family::Index:
      case Family::Extern:
        if (has_lane(map)) out.friendly = false;
        break;
    }
    return out;
  }

  LaneReads walk_reduction(NodeId id, const Node& n, const DimMap& map) {
    const Node& x = g_.node(n.inputs[0]);
    DimMap xm(x.rank(), -1);
    if (n.op == Op::CumSum) {
      xm = map;
    } else {
      size_t p = 0;
      for (size_t d = 0; d < x.rank(); ++d) {
        const bool red = std::binary_search(n.dims.begin(), n.dims.end(), static_cast<int64_t>(d));
        if (!red) xm[d] = map[p++];
        else if (n.keepdim) ++p;
      }
    }
    const LaneReads r = walk(n.inputs[0], xm);
    const bool lane_last = !xm.empty() && xm.back() == t_;
    if (n.op == Op::CumSum) {
      const auto ds = static_cast<size_t>(n.dims[0]);
      if (xm[ds] == t_) inner_scan = true;
      else if (lane_last && r.friendly && xm[ds] >= 0) scans.insert(xm[ds]);
    } else if (n.op != Op::ArgMax && n.op != Op::ArgMin && lane_last && r.friendly && r.contiguous) {
      lane_reductions.insert(id);
    }
    return r;
  }

  LaneReads walk_view(NodeId id, const Node& n, const DimMap& map) {
    const Node& in = g_.node(n.inputs.empty() ? id : n.inputs[0]);
    LaneReads out;
    switch (n.op) {
      case Op::Permute: {
        DimMap m(in.rank(), -1);
        for (size_t d = 0; d < map.size(); ++d) m[static_cast<size_t>(n.dims[d])] = map[d];
        out.join(walk(n.inputs[0], m));
        break;
      }
      case Op::Expand: out.join(walk(n.inputs[0], broadcast_map(map, in))); break;
      case Op::Slice:
      case Op::Flip: out.join(walk(n.inputs[0], map)); break;
      case Op::Select: {
        DimMap m = map;
        m.insert(m.begin() + n.dims[0], -1);
        out.join(walk(n.inputs[0], m));
        break;
      }
      case Op::Cat:
      case Op::SliceScatter:
        for (NodeId in_id : n.inputs) out.join(walk(in_id, map));
        break;
      case Op::Reshape: {
        // Followed only when the last dims agree (a view that merges or splits
        // outer dims); the lane anywhere else: unknown reads.
        DimMap m(in.rank(), -1);
        if (lane_outside_last(map)) out.friendly = false;
        if (!map.empty() && in.rank() > 0 && n.sym.back().same(in.sym.back())) m.back() = map.back();
        else if (has_lane(map)) out.friendly = false;
        out.join(walk(n.inputs[0], m));
        break;
      }
      default:
        if (has_lane(map)) out.friendly = false;
        break;
    }
    return out;
  }

  const Graph& g_;
  const Schedule& s_;
  const KernelSpec& k_;
  const int t_;
  std::map<std::pair<NodeId, DimMap>, LaneReads> memo_;
};

}  // namespace

// Chooses the tiled loop nest for this kernel (see the file comment), or none:
// lane_reductions_ are the reductions whose operand is read along the innermost
// kernel dim at its own last dim; scan_dim_ is the kernel dim that a cumulative sum
// scans (the tile loop goes outside it). Run before the loops are emitted.
void KernelEmitter::plan_lanes() {
  tile_dim_ = scan_dim_ = -1;
  lane_reductions_.clear();
  if (options_.target != Target::Cpu || !options_.lane_loops) return;
  int t = -1;
  for (size_t d = 0; d < k_.shape.size(); ++d) {
    if (!is_const(k_.shape[d], 1)) t = static_cast<int>(d);
  }
  if (t < 0) return;
  LanePlanner planner(g_, s_, k_, t);
  for (const KernelSpec::Store& st : k_.stores) {
    const Node& n = g_.node(st.node);
    if (!same_shape(n.sym, k_.shape)) continue;
    DimMap map(n.rank());
    for (size_t d = 0; d < map.size(); ++d) map[d] = is_const(n.sym[d], 1) ? -1 : static_cast<int>(d);
    planner.walk(st.node, map);
  }
  lane_reductions_ = std::move(planner.lane_reductions);
  // One scanned dim, with only size-1 dims between it and the innermost one (the
  // running totals are per lane), and no running total along the innermost dim
  // (threads split that dim instead of the scanned one).
  if (planner.scans.size() == 1 && !planner.inner_scan) {
    const int ks = *planner.scans.begin();
    bool between_ok = ks < t;
    for (int d = ks + 1; d < t; ++d) between_ok = between_ok && is_const(k_.shape[static_cast<size_t>(d)], 1);
    if (between_ok) {
      scan_dim_ = ks;
      // The scanned loop must run whole in each thread: threads split the tiles.
      if (k_.split_dim == ks) s_.kernels[static_cast<size_t>(kernel_)].split_dim = t;
    }
  }
  if (scan_dim_ >= 0 || !lane_reductions_.empty()) tile_dim_ = t;
}

// The tile loop over kernel dim tile_dim_ (placed at loop depth `d`: the innermost
// dim, or the scanned dim when a cumulative sum is planned), then the loops from d
// inward with the lane loop innermost.
void KernelEmitter::emit_tile_loop(size_t d, Index& idx) {
  const auto t = static_cast<size_t>(tile_dim_);
  const bool split = static_cast<int>(t) == k_.split_dim;
  Value* lo = split ? begin_ : b_.getInt64(0);
  Value* hi = split ? end_ : size_value(k_.shape[t]);
  Value* count = b_.CreateUDiv(b_.CreateAdd(b_.CreateSub(hi, lo), b_.getInt64(kLaneTile - 1)), b_.getInt64(kLaneTile));
  emit_loop(b_.getInt64(0), count, [&](Ix tb) {
    const size_t level = frames_.size() - 1;
    Tile tile{level, nullptr, nullptr, {}};
    hoisted(level, [&] {
      tile.begin = b_.CreateAdd(lo, b_.CreateMul(tb.v, b_.getInt64(kLaneTile)), "tile.begin");
      tile.end = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(tile.begin, b_.getInt64(kLaneTile)), hi,
                                          nullptr, "tile.end");
      return nullptr;
    });
    tile_ = std::move(tile);
    emit_level(d, idx);
    tile_.reset();
  }, false);
}

// The loop over the open tile's lanes (kernel dim tile_dim_).
void KernelEmitter::emit_lane_loop(size_t d, Index& idx) {
  const uint64_t tile_bit = uint64_t{1} << tile_->level;
  emit_loop(tile_->begin, tile_->end, [&](Ix i) {
    lanes_.insert(i.v);
    idx[d] = Ix{i.v, i.mask | tile_bit};
    loop_var_[d] = i.v;
    emit_level(d + 1, idx);
  }, contig_);
}

// The bits of the loops outside the open tile loop (depth 0 excluded).
uint64_t KernelEmitter::outer_bits() const {
  uint64_t m = 0;
  for (size_t f = 1; f < tile_->level; ++f) m |= uint64_t{1} << f;
  return m;
}

// A reduction read at a lane of the open tile, at its operand's last dim, and at
// positions fixed for the whole tile along its other kept dims: its per-lane
// results for the tile, computed in the tile's hoist code (once per tile), read at
// this lane. nullptr: not such a reduction (the caller emits its own loop).
Value* KernelEmitter::lane_reduction(NodeId id, const Index& idx) {
  if (!tile_ || !contig_ || !lane_reductions_.count(id)) return nullptr;
  const Node& r = g_.node(id);
  const Node& x = g_.node(r.inputs[0]);
  Index full(x.rank());
  std::vector<size_t> reduced;
  size_t p = 0;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (std::binary_search(r.dims.begin(), r.dims.end(), static_cast<int64_t>(d))) {
      if (r.keepdim) ++p;
      full[d] = zero();
      if (!is_const(x.sym[d], 1)) reduced.push_back(d);
      continue;
    }
    full[d] = idx[p++];
  }
  const size_t last = x.rank() - 1;
  if (!lanes_.count(full[last].v)) return nullptr;
  const uint64_t outer = outer_bits();
  uint64_t seen = 0;
  for (size_t d = 0; d < last; ++d) {
    if (lanes_.count(full[d].v) || (full[d].mask & ~outer) != 0) return nullptr;
    seen |= full[d].mask;
  }
  // Computed once per tile only if its position depends on every loop outside the
  // tile (else the caller's rules apply: a buffer of its own).
  if (seen != outer) return nullptr;
  stash_request_ = {-1, -1};
  std::vector<Value*> key_idx;
  for (size_t d = 0; d < last; ++d) key_idx.push_back(full[d].v);
  auto key = std::make_pair(id, key_idx);
  const DType c = r.compute;
  llvm::Type* ty = el_.reg_type(c);
  auto lane_slot = [&](Value* acc, Value* lane) {
    Value* off = b_.CreateSub(lane, tile_->begin);
    return b_.CreateInBoundsGEP(ty, acc, off);
  };
  Value* lane_here = full[last].v;
  auto found = tile_->accs.find(key);
  if (found != tile_->accs.end()) return el_.convert(b_.CreateLoad(ty, lane_slot(found->second, lane_here)), c, r.dtype);

  llvm::IRBuilder<> e(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  Value* acc = e.CreateAlloca(llvm::ArrayType::get(ty, kLaneTile));
  const bool fp = is_floating(c);
  Value* init = reduction_identity(r);
  const uint64_t tile_bit = uint64_t{1} << tile_->level;
  hoisted(tile_->level, [&] {
    emit_loop(tile_->begin, tile_->end, [&](Ix i) { b_.CreateStore(init, lane_slot(acc, i.v)); }, true);
    std::function<void(size_t)> level = [&](size_t q) {
      if (q == reduced.size()) {
        emit_loop(tile_->begin, tile_->end, [&](Ix i) {
          lanes_.insert(i.v);
          full[last] = Ix{i.v, i.mask | tile_bit};
          Value* v = el_.convert(value(r.inputs[0], full), x.dtype, c);
          combine(r.op, fp, c, lane_slot(acc, i.v), nullptr, v, nullptr, /*keep_ties=*/true);
        }, contig_);
        return;
      }
      const size_t d = reduced[q];
      emit_loop(b_.getInt64(0), size_value(x.sym[d]), [&](Ix i) {
        full[d] = i;
        level(q + 1);
      }, contig_);
    };
    level(0);
    return nullptr;
  });
  tile_->accs[key] = acc;
  return el_.convert(b_.CreateLoad(ty, lane_slot(acc, lane_here)), c, r.dtype);
}

// Whether a cumulative sum read at `idx` can keep a running total per lane: it
// scans along the planned dim, read at that dim's loop variable (the loop inside
// the tile loop, run whole and in order), at a lane of the open tile at its last
// dim, and at positions fixed for the whole tile elsewhere.
bool KernelEmitter::lane_scan(const Node& r, const Index& idx) const {
  if (!tile_ || scan_dim_ < 0) return false;
  const auto ds = static_cast<size_t>(r.dims[0]);
  const size_t last = idx.size() - 1;
  Value* scan_var = loop_var_[static_cast<size_t>(scan_dim_)];
  if (ds == last || scan_var == nullptr || idx[ds].v != scan_var || !lanes_.count(idx[last].v)) return false;
  const uint64_t outer = outer_bits();
  for (size_t d = 0; d < last; ++d) {
    if (d == ds) continue;
    if (idx[d].v == scan_var || lanes_.count(idx[d].v) || (idx[d].mask & ~outer) != 0) return false;
  }
  return true;
}

// A running total per lane, in a stack array that lives across the scanned loop's
// iterations.
Value* KernelEmitter::emit_lane_scan(const Node& r, const Index& idx) {
  llvm::Type* ty = el_.reg_type(r.compute);
  llvm::IRBuilder<> e(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  Value* acc = e.CreateAlloca(llvm::ArrayType::get(ty, kLaneTile));
  return emit_running_scan(r, idx, b_.CreateInBoundsGEP(ty, acc, b_.CreateSub(idx.back().v, tile_->begin)));
}

}  // namespace fj::jit::lower

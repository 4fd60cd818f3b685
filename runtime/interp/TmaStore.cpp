// TMA stores (tma_store, tma_store_commit, tma_store_wait_read, tma_store_wait), as
// compiler/ir/Intrinsics.h defines them: the bulk-group side of the bulk tensor copies.
//
// A tma_store reads its box from shared memory and writes global memory when it is issued,
// clipped at the tensor's edges as the hardware clips (the global values are the final ones:
// nothing of the kernel reads them back). What the GPU leaves to the program is checked:
// - the async proxy reads the box after the issue, until the issuer's wait_group.read that
//   completes its group: until then every element of the box is "being read", and a write of
//   it by anyone (the next tile's staging writes before the wait and its barrier) is an error
//   naming the store;
// - when issued, each element must have been written by a thread that ran fence_proxy_async
//   since (the generic proxy's writes are not visible to the async proxy otherwise), and
//   before the issuer in the race checker's order (a barrier, or a named barrier's phase,
//   between the writers and the issuer): the store is a read of the box by the issuer's warp
//   (the race checker orders the lanes of one warp only by syncthreads, and the consumers
//   meet at a named barrier, which the whole warp passes: its own lanes count as ordered);
// - when the wait returns, the box counts as read by the issuer's warp there, so a write by
//   another warp needs a barrier after that wait;
// - a block that ends with a store not awaited (wait_group or wait_group.read) is an error.
// Groups are per thread, as cp.async's: a store belongs to the issuer's next commit; wait(n)
// completes all of the thread's committed groups but the n most recent.
#include "runtime/interp/SharedMemoryChecker.h"
#include "runtime/interp/TmaBox.h"
#include "runtime/interp/WarpIntrinsic.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

#include <algorithm>
#include <sstream>

namespace tessel::interp {

namespace {

std::string by(const Machine &M, const std::string &op, uint32_t t) {
  return op + " by " + M.where(t) + " in kernel '" + M.kernel + "'";
}

class StoreCode : public StmtCode {
public:
  StoreCode(const TensorMap &map, PtrArg src, std::vector<ExprPtr> coords)
      : map_(map), src_(std::move(src)), coords_(std::move(coords)) {}

  void exec(Machine &M, const Mask &m) override {
    const Val *si = src_.index->eval(M, m);
    std::vector<const Val *> c;
    for (auto &e : coords_)
      c.push_back(e->eval(M, m));
    const TensorMapParam &p = map_.param;
    Memory &src = *src_.mem;
    Memory &dst = *map_.mem;
    const int64_t e = src.dtype.bytes();
    const size_t rank = p.dims.size();
    int64_t box_elems = 1;
    for (int64_t x : p.box)
      box_elems *= x;
    const std::string op = intrinsic::tma_store;

    m.each([&](uint32_t t) {
      const int64_t s0 = si[t].i;
      std::vector<int64_t> x(rank);
      for (size_t d = 0; d < rank; ++d)
        x[d] = c[d][t].i;
      std::ostringstream what;
      what << op << " of tensor map '" << p.var.name() << "' at (";
      for (size_t d = 0; d < rank; ++d)
        what << (d ? ", " : "") << x[d];
      what << ") from '" << src.name << "'[" << s0 << "..]";
      const int64_t align = p.swizzle ? 1024 : 128;
      user_check(s0 * e % align == 0, "interp")
          << by(M, op, t) << ": the source '" << src.name << "'[" << s0 << "] is at byte "
          << s0 * e << " of the buffer, not a multiple of " << align
          << " (the shared source of a tma_store is 128-byte aligned, 1024-byte when the map "
             "swizzles)";
      user_check(s0 >= 0 && s0 + box_elems <= src.size, "interp")
          << by(M, op, t) << ": the box of " << box_elems << " elements of tensor map '"
          << p.var.name() << "' at '" << src.name << "'[" << s0 << "] does not fit in '"
          << src.name << "' (" << src.size << " elements)";

      PendingTmaStore store;
      store.src = &src;
      store.group = M.store_groups[t];
      store.what = what.str();
      store.cells.reserve(size_t(box_elems));
      std::vector<int64_t> b(rank, 0); // the element's coordinates in the box
      for (int64_t j = 0; j < box_elems; ++j) {
        const int64_t f = swizzled(s0 + j, e, p.swizzle);
        if (f < 0 || f >= src.size)
          report_out_of_bounds(M, src, false, f, src.size, int32_t(t));
        check_source(M, src, f, t, store.what);
        shared_read(M, src, f, warp_agent(t / 32));
        store.cells.push_back(f);
        // Clipped at the tensor's edges, as TMA does.
        if (const std::optional<int64_t> off = box_element_offset(p, x, b))
          dst.data[size_t(*off)] = src.data[size_t(f)];
        next_box_element(p, b);
      }
      for (int64_t f : store.cells)
        src.shadow[size_t(f)].store_reading = true;
      M.pending_stores[t].push_back(std::move(store));
    });
  }

private:
  /// Element f of the source: written by a thread that fenced the async proxy since, and
  /// before the issuer in the race checker's order.
  void check_source(const Machine &M, const Memory &src, int64_t f, uint32_t t,
                    const std::string &what) const {
    const ShadowCell &s = src.shadow[size_t(f)];
    if (s.write_epoch == 0 && !s.in_flight)
      user_error("interp") << by(M, intrinsic::tma_store, t) << ": " << what << " reads '"
                           << src.name << "'[" << f
                           << "], which no thread has written since its allocation: the "
                              "writers of a staging tile meet the issuer at a barrier "
                              "(syncthreads, or the consumers' named barrier) after their "
                              "fence_proxy_async, before the store is issued";
    if (s.write_epoch != 0 && s.writer >= 0 && size_t(s.writer) < M.proxy_fences.size() &&
        M.proxy_fences[size_t(s.writer)] <= s.writer_fences)
      user_error("interp") << by(M, intrinsic::tma_store, t) << ": " << what << " reads '"
                           << src.name << "'[" << f << "], which " << M.thread_name(s.writer)
                           << " wrote with no fence_proxy_async since; the async proxy may not "
                              "see the write: each thread that writes the staging tile runs "
                              "fence_proxy_async, then a barrier, before the store is issued";
    if (M.opts.check_races && unordered_write(M, s, warp_agent(t / 32)))
      user_error("interp") << "data race on shared buffer '" << src.name << "'[" << f
                           << "] in block " << M.block_name() << " of kernel '" << M.kernel
                           << "': " << M.agent_name(s.writer) << " wrote it and "
                           << M.thread_name(t) << " issues the " << what
                           << " with no barrier between (barrier interval " << M.epoch
                           << "); the writers of a staging tile meet the issuer at a barrier "
                              "(syncthreads, or the consumers' named barrier) after their "
                              "fence_proxy_async";
  }

  const TensorMap &map_;
  PtrArg src_;
  std::vector<ExprPtr> coords_;
};

class CommitCode : public StmtCode {
public:
  void exec(Machine &M, const Mask &m) override {
    m.each([&](uint32_t t) { ++M.store_groups[t]; });
  }
};

/// tma_store_wait_read(n) or tma_store_wait(n): the thread's committed groups but the n most
/// recent are complete; their boxes are read (by the thread, here) and may be written again.
class WaitCode : public StmtCode {
public:
  explicit WaitCode(int64_t n) : n_(n) {}
  void exec(Machine &M, const Mask &m) override {
    m.each([&](uint32_t t) {
      const uint32_t committed = M.store_groups[t];
      const uint32_t done = committed > n_ ? uint32_t(committed - n_) : 0;
      land_groups(M.pending_stores[t], done, [&](const PendingTmaStore &s) {
        for (int64_t f : s.cells) {
          s.src->shadow[size_t(f)].store_reading = still_read(M, *s.src, f, &s);
          if (M.opts.check_races)
            record_read(M, s.src->shadow[size_t(f)], warp_agent(t / 32));
        }
      });
    });
  }

private:
  /// Whether another store not awaited reads element f too.
  static bool still_read(const Machine &M, const Memory &mem, int64_t f,
                         const PendingTmaStore *self) {
    for (const auto &per_thread : M.pending_stores)
      for (const PendingTmaStore &s : per_thread)
        if (&s != self && s.src == &mem &&
            std::find(s.cells.begin(), s.cells.end(), f) != s.cells.end())
          return true;
    return false;
  }
  int64_t n_;
};

} // namespace

StmtPtr compile_tma_store(Compiler &C, const Call *call) {
  const std::string &n = call->name;
  const std::vector<Expr> &a = call->args;
  if (n == intrinsic::tma_store_commit) {
    user_check(a.empty(), "interp") << n << " takes no arguments, got " << Expr(call);
    return std::make_unique<CommitCode>();
  }
  if (n == intrinsic::tma_store_wait_read || n == intrinsic::tma_store_wait) {
    auto groups = a.size() == 1 ? as_const_int(a[0]) : std::nullopt;
    user_check(groups && *groups >= 0, "interp")
        << n << " takes one argument, a constant count of groups (0 or more), got " << Expr(call);
    return std::make_unique<WaitCode>(*groups);
  }
  user_check(n == intrinsic::tma_store, "interp") << "unknown intrinsic '" << n << "'";
  user_check(a.size() >= 3, "interp") << n << " takes (map, src, c0, ..., c{r-1}), got "
                                      << Expr(call);
  const auto *v = a[0].as<Variable>();
  const TensorMap *map = nullptr;
  for (const TensorMap &m : C.M.tensor_maps)
    if (m.param.var.get() == v)
      map = &m;
  user_check(map != nullptr && !map->param.im2col, "interp")
      << n << " in kernel '" << C.M.kernel << "': the first argument " << a[0]
      << " is not one of the kernel's tiled tensor maps (LoweredFunc::tensor_maps)";
  const TensorMapParam &p = map->param;
  user_check(a.size() == 2 + p.dims.size(), "interp")
      << n << " of tensor map '" << p.var.name() << "' (rank " << p.dims.size()
      << ") takes (map, src, c0, ..., c" << p.dims.size() - 1 << "), got " << a.size() - 2
      << " coordinates: " << Expr(call);
  PtrArg src = compile_box_tile(C, call, a[1], *map, /*source=*/true);
  std::vector<ExprPtr> coords;
  for (size_t d = 2; d < a.size(); ++d) {
    user_check(a[d].type().is_scalar() && a[d].type().is_integer_like() && !a[d].type().is_bool(),
               "interp")
        << n << ": a coordinate must be a scalar integer, got " << a[d] << " (" << a[d].type()
        << ")";
    coords.push_back(C.expr(a[d]));
  }
  return std::make_unique<StoreCode>(*map, std::move(src), std::move(coords));
}

void check_tma_stores_done(const Machine &M) {
  for (uint32_t t = 0; t < M.pending_stores.size(); ++t)
    if (!M.pending_stores[t].empty())
      user_error("interp") << "kernel '" << M.kernel << "': block " << M.block_name()
                           << " ends while the " << M.pending_stores[t][0].what << " issued by "
                           << M.thread_name(t)
                           << " was not awaited; the issuer runs tma_store_commit and "
                              "tma_store_wait(0) (cp.async.bulk.wait_group 0) before the block "
                              "ends";
}

void keep_store_reads(Machine &M, Memory &mem) {
  for (const auto &per_thread : M.pending_stores)
    for (const PendingTmaStore &s : per_thread)
      if (s.src == &mem)
        for (int64_t f : s.cells)
          mem.shadow[size_t(f)].store_reading = true;
}

void report_store_reading(const Machine &M, const Memory &mem, int64_t index, int32_t agent) {
  for (uint32_t t = 0; t < M.pending_stores.size(); ++t)
    for (const PendingTmaStore &s : M.pending_stores[t])
      if (s.src == &mem && std::find(s.cells.begin(), s.cells.end(), index) != s.cells.end())
        user_error("interp") << "write to shared buffer '" << mem.name << "'[" << index
                             << "] by " << M.agent_name(agent) << " of block " << M.block_name()
                             << " in kernel '" << M.kernel << "' while the " << s.what
                             << " issued by " << M.thread_name(t)
                             << " may still read it: its issuer waits for it "
                                "(tma_store_wait_read, cp.async.bulk.wait_group.read) and a "
                                "barrier follows before the staging tile is written again";
  internal_error << "interp: '" << mem.name << "'[" << index << "] read by no tma_store";
}

} // namespace tessel::interp

// The Hopper warpgroup-level intrinsics (wgmma_*) on a warpgroup's accumulator registers.
//
// A wgmma.accumulator allocation of S floats is a warpgroup's: each of its 128 threads holds
// S / 128 registers, kept per warp as mma.* fragments are ([warp][lane][S / 128]), and register
// i of tile `index` (64 x n) is the element of the tile that Intrinsics.h gives, so a wrong lane
// mapping in a schedule gives wrong numbers here as on the GPU. wgmma_mma reads A and B from
// shared memory through the no-swizzle canonical layouts; warp w of a group computes only rows
// 16 (w % 4) .. 16 (w % 4) + 15 of the tile, so it runs warp by warp like mma_sync, after the
// call is checked to be made by all 4 warps of the group with the same operands.
//
// Asynchrony is modelled as cp.async's is: a wgmma_mma reads its operands when issued, keeps
// them, and lands in the accumulator when a wgmma_wait of the warp completes its commit group,
// in issue order, so several wgmma_mma on one tile chain as they do on the GPU. What the PTX ISA
// leaves undefined is an error: a wgmma_mma on a tile that wgmma_fill or wgmma_store accessed
// with no wgmma_fence between, filling or storing a tile whose results are still pending,
// shared operands changed before the wait that lands their wgmma_mma (compared with the values
// read at issue, or the destination of a tma_load in flight), and a block that ends with results
// not landed.
#include "runtime/interp/SharedMemoryChecker.h"
#include "runtime/interp/WarpIntrinsic.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

namespace tessel::interp {

namespace {

// Per warp and tile, Memory::tile_shape holds n / 8 (1..32; 0: never filled) and kTouched while
// ordinary instructions (wgmma_fill, wgmma_store) accessed the tile since the warp's last
// wgmma_fence: a wgmma_mma must not follow such an access unfenced.
constexpr uint8_t kTouched = 0x40;
constexpr uint8_t kNMask = 0x3f;

// Row (of the warp's 16: 16 (w % 4) + row of the tile) and column of register i of lane l.
struct RowCol {
  int row, col;
};
RowCol acc_element(int l, int i) {
  return {l / 4 + 8 * ((i / 2) % 2), 8 * (i / 4) + 2 * (l % 4) + i % 2};
}

// A warp's view of its accumulator tiles, with the checks every access makes; `intrin` names the
// accessing intrinsic in errors.
struct AccumulatorTiles {
  std::string intrin;
  Memory *acc = nullptr;
  int n = 0;

  std::string by(const Machine &M, uint32_t w) const {
    return intrin + " by warp " + std::to_string(w) + " (warp " + std::to_string(w % 4) +
           " of warpgroup " + std::to_string(w / 4) + ") of block " + M.block_name();
  }

  static Val &reg(Memory &frag, uint32_t w, int lane, int64_t p) {
    return frag.data[size_t(w) * (frag.size / 4) + size_t(lane) * (frag.size / 128) + p];
  }

  uint8_t &state(Memory &frag, uint32_t w, int64_t tile) const {
    return frag.tile_shape[size_t(w) * frag.tiles_per_warp + size_t(tile)];
  }

  /// The first of tile `tile`'s registers in each thread, checked against the allocation.
  int64_t tile_first(const Machine &M, uint32_t w, int64_t tile) const {
    const int64_t regs = acc->size / 128;
    user_check(tile >= 0 && (tile + 1) * (n / 2) <= regs, "interp")
        << by(M, w) << ": tile index " << tile << " is out of bounds of accumulator '"
        << acc->name << "' (" << regs << " registers per thread, tiles 64 x " << n << " of "
        << n / 2 << ")";
    return tile * (n / 2);
  }

  /// Register r of a 64 x n tile exists in every thread (0 <= r < n / 2).
  void check_register(const Machine &M, uint32_t w, int64_t r) const {
    user_check(r >= 0 && r < n / 2, "interp")
        << by(M, w) << ": register " << r << " of a 64 x " << n << " tile; a thread holds "
        << n / 2;
  }

  /// The tile was filled as a 64 x n tile (an error otherwise).
  void check_filled(const Machine &M, uint32_t w, int64_t tile) const {
    int held = state(*acc, w, tile) & kNMask;
    user_check(held != 0, "interp")
        << by(M, w) << " reads tile " << tile << " of accumulator '" << acc->name
        << "', which was not filled since its allocation (wgmma_mma accumulates: wgmma_fill "
           "the tile first)";
    user_check(held * 8 == n, "interp")
        << by(M, w) << ": tile " << tile << " of accumulator '" << acc->name << "' holds 64 x "
        << held * 8 << " but is used as 64 x " << n;
  }

  /// An error if a wgmma_mma of warp w on the tile has not landed: ordinary instructions
  /// (`what`) must not access it before the wgmma_wait that completes its group.
  void check_landed(const Machine &M, uint32_t w, int64_t tile, const char *what) const {
    for (const PendingWgmma &p : M.pending_wgmma[w])
      if (p.acc == acc && p.tile == tile)
        user_error("interp")
            << by(M, w) << " " << what << " tile " << tile << " of accumulator '" << acc->name
            << "' while a wgmma_mma on it "
            << (p.group < M.wgmma_groups[w] ? "of a committed group has not completed"
                                            : "is not even committed")
            << "; wgmma_commit and wgmma_wait for its group first";
  }

};

class WgmmaCode : public WarpIntrinsicCode, public AccumulatorTiles {
public:
  enum Op { Fill, Mma, MmaRs, Fence, Commit, Wait, Store, AccToA };

  Op op = Fence;
  Memory *a_mem = nullptr, *b_mem = nullptr; ///< mma (a_mem: registers for mma_rs, acc_to_a)
  int k = 16;                                ///< mma: K of one instruction (32: 8-bit operands)
  bool trans_b = false;                      ///< mma
  int swizzle = 0;                           ///< mma: bytes of the swizzled layouts (0: none)
  Memory *ptr_mem = nullptr;                 ///< store
  int lanes = 1;                             ///< store: elements per access
  int limits = 0;                            ///< store: 1 with a column limit, 2 also rows
  uint32_t wait_n = 0;                       ///< wait

private:
  void run(Machine &M, uint32_t w, const std::vector<int64_t> &a,
           const std::vector<LaneValues> &lane_args) override {
    switch (op) {
    case Fill:
      return run_fill(M, w, a[0], a[1]);
    case Mma:
      return run_mma(M, w, a);
    case MmaRs:
      // (index, a_index, b_ptr, b_lbo, b_sbo): as Mma's, A's tile in place of its pointer.
      return run_mma(M, w, {a[0], a[1], 0, 0, a[2], a[3], a[4]});
    case AccToA:
      return run_acc_to_a(M, w, a[0], a[1]);
    case Fence:
      return run_fence(M, w);
    case Commit:
      ++M.wgmma_groups[w];
      return;
    case Wait:
      return run_wait(M, w);
    case Store:
      return run_store(M, w, a[0], a[1], limits >= 1 ? a[2] : INT64_MAX,
                       limits == 2 ? a[3] : INT64_MAX, lane_args[0]);

    }
  }

  void run_fill(Machine &M, uint32_t w, int64_t tile, int64_t bits) {
    int64_t first = tile_first(M, w, tile);
    check_landed(M, w, tile, "writes");
    Val v;
    v.i = bits;
    DataType from = uniform_[1]->type;
    Val value;
    value.f = round_float(acc->num.kind, from.is_float() ? v.f : double(v.i));
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < n / 2; ++i)
        reg(*acc, w, l, first + i) = value;
    state(*acc, w, tile) = uint8_t(n / 8) | kTouched;
  }

  // The first half of 64 x k tile `a_tile` of the A operand `a_mem` (registers), checked.
  int64_t a_first(const Machine &M, uint32_t w, int64_t a_tile, int64_t k) const {
    const int64_t halves = a_mem->size / 128;
    user_check(a_tile >= 0 && (a_tile + 1) * (k / 2) <= halves, "interp")
        << by(M, w) << ": A tile " << a_tile << " (64 x " << k << ") is out of bounds of '"
        << a_mem->name << "' (" << halves << " halves a thread)";
    return a_tile * (k / 2);
  }

  // wgmma_acc_to_a: A tile `a_tile` (64 x n) = the accumulator tile, rounded to A's type; of
  // 8-bit A, each k32 slice's columns in the order a thread holds them (wgmma_fp8_a_column):
  // A's value 4 (2 h + j) + b of the slice (a_element) is the accumulator's register
  // 8 h + 4 (b / 2) + 2 j + b % 2 of it, in the same lane.
  void run_acc_to_a(Machine &M, uint32_t w, int64_t a_tile, int64_t tile) {
    const int64_t first = tile_first(M, w, tile), afirst = a_first(M, w, a_tile, n);
    check_filled(M, w, tile);
    check_landed(M, w, tile, "reads");
    // The k slices n / k a_tile .. of A must not be read by a wgmma_mma_rs in flight.
    const int slices = n / k;
    for (const PendingWgmma &p : M.pending_wgmma[w])
      user_check(p.a != a_mem || p.a_tile < 0 || p.a_tile < a_tile * slices ||
                     p.a_tile >= (a_tile + 1) * slices,
                 "interp")
          << by(M, w) << " rewrites A tile " << a_tile << " of '" << a_mem->name
          << "' while a wgmma_mma_rs that reads it (group " << p.group
          << ") has not landed; wgmma_wait for it first";
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < n / 2; ++i) {
        int src = i;
        if (k == 32) {
          const int s = i / 16, e = i % 16, h = e / 8, j = (e / 4) % 2, b = e % 4;
          src = 16 * s + 8 * h + 4 * (b / 2) + 2 * j + b % 2;
        }
        reg(*a_mem, w, l, afirst + i).f =
            round_float(a_mem->num.kind, reg(*acc, w, l, first + src).f);
      }
  }

  // Where element (r, c) of a warp's 16 rows of a 64 x k A tile in registers is: an
  // accumulator's layout for k 16 (lane 4 (r % 8) + (c % 8) / 2, value 4 (c / 8) + 2 (r / 8) +
  // c % 2), the 8-bit fragment for k 32 (lane 4 (r % 8) + (c % 16) / 4, value 4 (2 (c / 16) +
  // r / 8) + c % 4: four consecutive columns a register).
  std::pair<int, int64_t> a_element(int64_t r, int64_t c) const {
    if (k == 32)
      return {int(4 * (r % 8) + (c % 16) / 4), 4 * (2 * (c / 16) + r / 8) + c % 4};
    return {int(4 * (r % 8) + (c % 8) / 2), 4 * (c / 8) + 2 * (r / 8) + c % 2};
  }

  // Issue: reads this warp's 16 rows of A and all of B now (checked, recorded for the race
  // check and kept with their values), the product lands at wgmma_wait. With A in registers
  // (MmaRs, a[1] its 64 x 16 tile), each row's values from the lanes holding them.
  void run_mma(Machine &M, uint32_t w, const std::vector<int64_t> &a) {
    const int64_t tile = a[0];
    tile_first(M, w, tile);
    check_filled(M, w, tile);
    user_check(!(state(*acc, w, tile) & kTouched), "interp")
        << by(M, w) << ": tile " << tile << " of accumulator '" << acc->name
        << "' was accessed by wgmma_fill / wgmma_store since the warp's last wgmma_fence; "
           "call wgmma_fence between them and the wgmma_mma";
    const char *names[] = {"a_ptr", "a_lbo", "a_sbo", "b_ptr", "b_lbo", "b_sbo"};
    const bool rs = op == MmaRs;
    const int64_t bytes = a_mem->dtype.bytes(), unit = 16 / bytes;
    for (int j = rs ? 3 : 0; j < 6; ++j)
      user_check(a[1 + j] % unit == 0, "interp")
          << by(M, w) << ": " << names[j] << " = " << a[1 + j] << " elements, not a multiple of "
          << unit << " (16 bytes, as the matrix descriptor encodes it)";
    PendingWgmma p{acc, tile, n, k, M.wgmma_groups[w], a_mem, b_mem, {}, {}};
    p.cells.reserve(size_t(16 + n) * size_t(k));
    p.values.reserve(p.cells.capacity());
    const int32_t agent = warp_agent(w);
    auto read = [&](Memory &mem, int64_t i) {
      if (i < 0 || i >= mem.size)
        report_out_of_bounds(M, mem, false, i, mem.size, agent);
      shared_read(M, mem, i, agent);
      p.cells.push_back(i);
      p.values.push_back(mem.data[size_t(i)]);
    };
    const int64_t gw = w % 4, ap = a[1], a_lbo = a[2], a_sbo = a[3];
    const int64_t bp = a[4], b_lbo = a[5], b_sbo = a[6];
    // A: this warp's 16 rows, from registers (a row r of them and column c at lane
    // 4 (r % 8) + (c % 8) / 2, half 4 (c / 8) + 2 (r / 8) + c % 2 of the slice: an
    // accumulator's layout) or from shared memory; then all of B.
    if (rs) {
      const int64_t afirst = a_first(M, w, a[1], k);
      p.a_tile = a[1];
      for (int64_t r = 0; r < 16; ++r)
        for (int64_t c = 0; c < k; ++c) {
          auto [lane, i] = a_element(r, c);
          p.values.push_back(reg(*a_mem, w, lane, afirst + i));
        }
    }
    if (swizzle) {
      // Rows of W = swizzle / bytes elements; offsets from the buffer's start (1024-byte aligned
      // on the GPU) have their byte address bits 4.. (the 16-byte unit) XORed with bits 7..:
      // Swizzle<log2(swizzle / 16), 4, 3> (element bits 3.. with 6.. for halves, 4.. with 7..
      // for 8-bit values).
      const int64_t W = swizzle / bytes, mask = swizzle / 16 - 1;
      auto S = [mask, bytes](int64_t f) {
        const int64_t b = f * bytes;
        return (b ^ (((b >> 7) & mask) << 4)) / bytes;
      };
      for (int64_t m = 16 * gw; m < 16 * gw + 16 && !rs; ++m)
        for (int64_t kk = 0; kk < k; ++kk)
          read(*a_mem, S(ap + (m % 8) * W + (m / 8) * a_sbo + kk));
      for (int64_t kk = 0; kk < k; ++kk)
        for (int64_t c = 0; c < n; ++c)
          read(*b_mem, S(trans_b ? bp + (c % W) + (c / W) * b_lbo + (kk % 8) * W + (kk / 8) * b_sbo
                                 : bp + (c % 8) * W + (c / 8) * b_sbo + kk));
    } else {
      for (int64_t m = 16 * gw; m < 16 * gw + 16 && !rs; ++m)
        for (int64_t k = 0; k < 16; ++k)
          read(*a_mem, ap + (m % 8) * 8 + (m / 8) * a_sbo + (k % 8) + (k / 8) * a_lbo);
      for (int64_t k = 0; k < 16; ++k)
        for (int64_t c = 0; c < n; ++c)
          read(*b_mem, bp + (c / 8) * b_sbo + (k / 8) * b_lbo +
                           (trans_b ? (c % 8) + (k % 8) * 8 : (c % 8) * 8 + (k % 8)));
    }
    M.pending_wgmma[w].push_back(std::move(p));
  }

  void run_fence(Machine &M, uint32_t w) {
    for (auto &mem : M.memories)
      if (mem->frag == FragKind::WgmmaAccumulator && !mem->tile_shape.empty())
        for (int64_t t = 0; t < mem->tiles_per_warp; ++t)
          state(*mem, w, t) &= uint8_t(~kTouched);
  }

  // Groups [0, committed - wait_n) complete: their wgmma_mma land in issue order, each adding
  // its product to the accumulator as the previous one left it. Each product is exact in
  // double and the sum is rounded once to float32 (as mma_sync; the GPU's order and rounding
  // inside one wgmma are unspecified, so tests use exact inputs or a tolerance). 8-bit operands
  // too: the GPU's fp8 wgmma keeps only about 14 bits of the sum it adds to, which is not
  // modelled (a schedule that promotes each K block into float32, gemm_fp8, is bounded by it).
  void run_wait(Machine &M, uint32_t w) {
    const uint32_t committed = M.wgmma_groups[w];
    const uint32_t done = committed > wait_n ? committed - wait_n : 0;
    land_groups(M.pending_wgmma[w], done, [&](const PendingWgmma &p) {
      // With A in registers, A's values come first and only B's cells are recorded.
      const size_t a_cells = 16 * size_t(p.k), skipped = p.a_tile >= 0 ? a_cells : 0;
      for (size_t j = 0; j < p.cells.size(); ++j) {
        const Memory &mem = j + skipped < a_cells ? *p.a : *p.b;
        const Val now = mem.data[size_t(p.cells[j])];
        // A tma_load issued into an operand after the wgmma_mma read it may land before the
        // wgmma reads it on the GPU, whenever the executor lands it.
        user_check(!mem.shadow[size_t(p.cells[j])].in_flight, "interp")
            << by(M, w) << ": shared operand '" << mem.name << "'[" << p.cells[j]
            << "] of a wgmma_mma on tile " << p.tile << " of accumulator '" << p.acc->name
            << "' (group " << p.group << ") is the destination of a tma_load issued before "
               "wgmma_wait (in flight); wait for the group before loading the operands again";
        user_check(now.i == p.values[j + skipped].i, "interp")
            << by(M, w) << ": shared operand '" << mem.name << "'[" << p.cells[j]
            << "] of a wgmma_mma on tile " << p.tile << " of accumulator '" << p.acc->name
            << "' (group " << p.group << ") was overwritten before wgmma_wait ("
            << p.values[j + skipped].f << " when issued, now " << now.f
            << "); wait for the group before writing the operands again";
      }
      const Val *A = p.values.data(), *B = A + a_cells;
      const int64_t first = p.tile * (p.n / 2);
      for (int l = 0; l < 32; ++l)
        for (int i = 0; i < p.n / 2; ++i) {
          RowCol x = acc_element(l, i);
          Val &d = reg(*p.acc, w, l, first + i);
          double sum = d.f;
          for (int k = 0; k < p.k; ++k)
            sum += A[x.row * p.k + k].f * B[k * p.n + x.col].f;
          d.f = round_float(p.acc->num.kind, sum);
        }
    });
  }

  // Each thread writes register i at ptr + 8 ((i / 2) % 2) stride + 8 (i / 4) + i % 2.
  // Stores the tile's columns below `limit` and rows below `row_limit` (counted from its first
  // column and row).
  void run_store(Machine &M, uint32_t w, int64_t tile, int64_t stride, int64_t limit,
                 int64_t row_limit, const LaneValues &ptr) {
    Memory &mem = *ptr_mem;
    const int64_t first = tile_first(M, w, tile);
    check_filled(M, w, tile);
    check_landed(M, w, tile, "reads");
    // Lanes 8 (whole sectors through shuffles) store element by element as far as where and
    // what go; the others store groups of `lanes`, aligned, whole or not at all.
    const int group = lanes == 8 ? 1 : lanes;
    user_check(limit == INT64_MAX || limit % group == 0, "interp")
        << by(M, w) << ": the column limit " << limit << " is not a multiple of the " << lanes
        << " elements stored at a time";
    for (int l = 0; l < 32; ++l) {
      const int32_t thread = int32_t(32 * w + l);
      // lanes 4: the quad's pointers (to columns 2 (l % 4)) exchange pairs; each lane stores 4
      // elements from its quad's first pointer + 4 (l % 4), so that one must be aligned.
      const int64_t first_of_access = lanes == 4 ? ptr[l] - 2 * (l % 4) : ptr[l];
      // lanes 4 and 8 also take the quad's row from its first lane's pointer.
      user_check((lanes != 4 && lanes != 8) || ptr[l] - 2 * (l % 4) == ptr[l - l % 4], "interp")
          << by(M, w) << ": lanes " << lanes
          << " needs the pointers of a quad of lanes 2 elements apart; "
          << M.thread_name(uint32_t(thread)) << " points at '" << mem.name << "' + " << ptr[l]
          << ", its quad's first lane at + " << ptr[l - l % 4];
      user_check(first_of_access % group == 0, "interp")
          << by(M, w) << ": " << M.thread_name(uint32_t(thread)) << " stores " << lanes
          << " elements at '" << mem.name << "' + " << first_of_access
          << ", which is not aligned to " << lanes * mem.dtype.bytes() << " bytes";
      for (int i = 0; i < n / 2; ++i) {
        if (2 * (l % 4) + 8 * (i / 4) + i % 2 >= limit ||
            16 * (w % 4) + l / 4 + 8 * ((i / 2) % 2) >= row_limit)
          continue;
        int64_t e = ptr[l] + 8 * ((i / 2) % 2) * stride + 8 * (i / 4) + i % 2;
        if (e < 0 || e >= mem.size)
          report_out_of_bounds(M, mem, true, e, mem.size, thread);
        if (mem.scope == MemScope::Shared)
          shared_write(M, mem, e, thread);
        // Rounded to the memory's type (float16 / bfloat16 outputs; float32 stays exact).
        Val v;
        v.f = round_float(mem.num.kind, reg(*acc, w, l, first + i).f);
        mem.data[size_t(e)] = v;
      }
    }
    state(*acc, w, tile) |= kTouched;
  }
};

/// fence_proxy_async(), per thread: orders the thread's generic-proxy writes of shared memory
/// before the async proxy's reads of them (wgmma, tma_store). The executor has one proxy: a
/// wgmma_mma reads shared memory when issued, after every earlier write (a missing fence goes
/// unnoticed there); the thread's fence count lets a tma_store check that every writer of its
/// box fenced after writing (TmaStore.cpp).
class ProxyFenceCode : public StmtCode {
public:
  void exec(Machine &M, const Mask &m) override {
    if (M.proxy_fences.empty())
      return;
    m.each([&](uint32_t t) { ++M.proxy_fences[t]; });
  }
};

} // namespace

namespace {

// wgmma_reg(acc, index, n, r): each thread's register r of the tile, checked as wgmma_store
// checks its reads (filled, landed).
class WgmmaRegCode : public ExprCode, public AccumulatorTiles {
public:
  WgmmaRegCode(uint32_t n_threads, ExprPtr tile, ExprPtr r)
      : ExprCode(Float(32), n_threads), tile_(std::move(tile)), r_(std::move(r)) {}
  const Val *eval(Machine &M, const Mask &m) override {
    const Val *tile = tile_->eval(M, m), *r = r_->eval(M, m);
    m.each([&](uint32_t t) {
      const uint32_t w = t / 32;
      const int64_t first = tile_first(M, w, tile[t].i);
      check_register(M, w, r[t].i);
      check_filled(M, w, tile[t].i);
      check_landed(M, w, tile[t].i, "reads");
      out[t] = reg(*acc, w, int(t % 32), first + r[t].i);
    });
    return out.data();
  }

private:
  ExprPtr tile_, r_;
};

} // namespace

namespace {

// A warpgroup's rows (wgmma.rows) of R floats: thread (warp w, lane l) holds R / 32 values,
// kept per warp ([warp][lane][R / 32]); value 2 index + h is row 16 (w % 4) + l / 4 + 8 h of
// 64-row tile `index`.
struct RowTiles {
  Memory *rows = nullptr;
  std::string intrin;

  Val &at(const Machine &M, uint32_t t, int64_t index, int64_t h) const {
    const int64_t per_thread = rows->size / 32;
    user_check(index >= 0 && 2 * index + 1 < per_thread && (h == 0 || h == 1), "interp")
        << intrin << " by thread " << M.where(t) << ": row " << h << " of tile " << index
        << " of rows '" << rows->name << "' (" << rows->size / 64
        << " tiles of 64 rows, 2 rows of each a thread)";
    return rows->data[size_t(t / 32) * size_t(rows->size) + size_t(t % 32) * size_t(per_thread) +
                      size_t(2 * index + h)];
  }
};

class WgmmaRowCode : public ExprCode, public RowTiles {
public:
  WgmmaRowCode(uint32_t n_threads, ExprPtr index, ExprPtr h)
      : ExprCode(Float(32), n_threads), index_(std::move(index)), h_(std::move(h)) {}
  const Val *eval(Machine &M, const Mask &m) override {
    const Val *index = index_->eval(M, m), *h = h_->eval(M, m);
    m.each([&](uint32_t t) { out[t] = at(M, t, index[t].i, h[t].i); });
    return out.data();
  }

private:
  ExprPtr index_, h_;
};

class WgmmaRowSetCode : public StmtCode, public RowTiles {
public:
  WgmmaRowSetCode(ExprPtr index, ExprPtr h, ExprPtr value)
      : index_(std::move(index)), h_(std::move(h)), value_(std::move(value)) {}
  void exec(Machine &M, const Mask &m) override {
    const Val *index = index_->eval(M, m), *h = h_->eval(M, m);
    const Val *value = value_->eval(M, m);
    m.each([&](uint32_t t) {
      at(M, t, index[t].i, h[t].i).f = round_float(rows->num.kind, value[t].f);
    });
  }

private:
  ExprPtr index_, h_, value_;
};

Memory *compile_rows(Compiler &C, const Call *call) {
  Memory *m = compile_fragment(C, call, call->args[0], FragKind::WgmmaRows);
  user_check(m->dtype == Float(32) && m->size % 64 == 0, "interp")
      << call->name << ": rows '" << m->name << "' hold " << m->size << " x " << m->dtype
      << "; wgmma.rows hold float32, whole 64-row tiles";
  return m;
}

} // namespace

ExprPtr compile_wgmma_row(Compiler &C, const Call *call) {
  user_check(call->args.size() == 3, "interp")
      << call->name << " takes 3 arguments (rows, index, h), got " << Expr(call);
  auto code = std::make_unique<WgmmaRowCode>(C.M.n_threads, C.expr(call->args[1]),
                                             C.expr(call->args[2]));
  code->intrin = call->name;
  code->rows = compile_rows(C, call);
  return code;
}

StmtPtr compile_wgmma_row_set(Compiler &C, const Call *call) {
  user_check(call->args.size() == 4 && call->args[3].type() == Float(32), "interp")
      << call->name << " takes 4 arguments (rows, index, h, value), the value float32, got "
      << Expr(call);
  auto code = std::make_unique<WgmmaRowSetCode>(C.expr(call->args[1]), C.expr(call->args[2]),
                                                C.expr(call->args[3]));
  code->intrin = call->name;
  code->rows = compile_rows(C, call);
  return code;
}

namespace {

// wgmma_reg_set(acc, index, n, r, value): each calling thread's register r of the tile (an
// ordinary register write: threads may take part or not, under a per-row mask). A tile first
// written this way holds 64 x n from then on (its other registers stay NaN, as the allocation
// left them, until written).
class WgmmaRegSetCode : public StmtCode, public AccumulatorTiles {
public:
  WgmmaRegSetCode(ExprPtr tile, ExprPtr r, ExprPtr value)
      : tile_(std::move(tile)), r_(std::move(r)), value_(std::move(value)) {}
  void exec(Machine &M, const Mask &m) override {
    const Val *tile = tile_->eval(M, m), *r = r_->eval(M, m), *value = value_->eval(M, m);
    m.each([&](uint32_t t) {
      const uint32_t w = t / 32;
      const int64_t first = tile_first(M, w, tile[t].i);
      check_register(M, w, r[t].i);
      uint8_t &s = state(*acc, w, tile[t].i);
      if ((s & kNMask) == 0)
        s = uint8_t(n / 8);
      check_filled(M, w, tile[t].i);
      check_landed(M, w, tile[t].i, "writes");
      reg(*acc, w, int(t % 32), first + r[t].i).f = round_float(acc->num.kind, value[t].f);
      s |= kTouched;
    });
  }

private:
  ExprPtr tile_, r_, value_;
};

} // namespace

ExprPtr compile_wgmma_reg(Compiler &C, const Call *call) {
  user_check(call->args.size() == 4, "interp")
      << call->name << " takes 4 arguments (acc, index, n, r), got " << Expr(call);
  user_check(C.M.n_threads % 128 == 0, "interp")
      << "kernel '" << C.M.kernel << "' calls " << call->name << " with " << C.M.n_threads
      << " threads per block; wgmma needs whole warpgroups, so use a multiple of 128";
  auto code = std::make_unique<WgmmaRegCode>(C.M.n_threads, C.expr(call->args[1]),
                                             C.expr(call->args[3]));
  code->intrin = call->name;
  code->acc = compile_fragment(C, call, call->args[0], FragKind::WgmmaAccumulator);
  code->n = int(const_arg(call, 2, "n"));
  user_check(code->n % 8 == 0 && code->n >= 8 && code->n <= 256, "interp")
      << call->name << ": n = " << code->n << "; wgmma's n is a multiple of 8 from 8 to 256";
  return code;
}

StmtPtr compile_wgmma(Compiler &C, const Call *call) {
  if (call->name == intrinsic::wgmma_row_set)
    return compile_wgmma_row_set(C, call);
  if (call->name == intrinsic::fence_proxy_async) {
    user_check(call->args.empty(), "interp")
        << "fence_proxy_async takes no arguments, got " << Expr(call);
    return std::make_unique<ProxyFenceCode>();
  }
  auto code = std::make_unique<WgmmaCode>();
  code->src = Expr(call);
  code->name_ = call->name;
  code->intrin = call->name;
  code->group_warps_ = 4;
  const std::string &n = call->name;
  const std::vector<Expr> &a = call->args;
  user_check(C.M.n_threads % 128 == 0, "interp")
      << "kernel '" << C.M.kernel << "' calls " << n << " with " << C.M.n_threads
      << " threads per block; wgmma needs whole warpgroups, so use a multiple of 128";
  auto expect_args = [&](size_t k, const char *signature) {
    user_check(a.size() == k, "interp")
        << n << " takes " << k << " arguments " << signature << ", got " << a.size() << ": "
        << Expr(call);
  };
  auto uniform = [&](const Expr &e, const char *what) {
    user_check(e.type().is_scalar(), "interp") << n << ": " << what << " must be a scalar";
    code->add_uniform(C.expr(e), what);
  };
  auto accumulator = [&]() {
    Memory *m = compile_fragment(C, call, a[0], FragKind::WgmmaAccumulator);
    user_check(m->dtype == Float(32) && m->size % 128 == 0, "interp")
        << n << ": accumulator '" << m->name << "' holds " << m->size << " x " << m->dtype
        << "; a wgmma.accumulator holds float32, a multiple of 128 (one register per thread)";
    code->acc = m;
    uniform(a[1], "index");
    code->n = int(const_arg(call, 2, "n"));
    user_check(code->n % 8 == 0 && code->n >= 8 && code->n <= 256, "interp")
        << n << ": n = " << code->n << "; wgmma's n is a multiple of 8 from 8 to 256";
  };
  // A shared pointer, uniform over the warpgroup (it becomes a matrix descriptor).
  auto operand = [&](const Expr &e, const char *what) {
    PtrArg p = compile_pointer(C, call, e);
    user_check(p.mem->scope == MemScope::Shared &&
                   (p.mem->dtype == Float(16) || p.mem->dtype == BFloat(16) ||
                    p.mem->dtype.is_float8()),
               "interp")
        << n << ": operand '" << p.mem->name << "' is " << p.mem->dtype << " in "
        << scope_name(p.mem->scope) << " memory; wgmma reads float16, bfloat16 or float8 from "
        << "shared memory";
    code->add_uniform(std::move(p.index), what);
    return p.mem;
  };

  if (n == intrinsic::wgmma_fill) {
    expect_args(4, "(acc, index, n, value)");
    code->op = WgmmaCode::Fill;
    accumulator();
    uniform(a[3], "value");
    return code;
  }
  // B's offsets, then trans_b and swizzle, from argument `at` on.
  auto b_layout = [&](size_t at) {
    uniform(a[at], "b_lbo");
    uniform(a[at + 1], "b_sbo");
    int64_t t = const_arg(call, int(at) + 2, "trans_b");
    user_check(t == 0 || t == 1, "interp") << n << ": trans_b must be 0 or 1, got " << t;
    code->trans_b = t == 1;
    int64_t sw = const_arg(call, int(at) + 3, "swizzle");
    user_check(sw == 0 || sw == 32 || sw == 64 || sw == 128, "interp")
        << n << ": swizzle must be 0, 32, 64 or 128, got " << sw;
    code->swizzle = int(sw);
  };
  // A's and B's types (one 16-bit type, or two float8 types: K of one instruction 32), then
  // B's layout from argument `b_at` on: float8 is read K-major from swizzled tiles.
  auto operand_types = [&](size_t b_at) {
    const bool fp8 = code->a_mem->dtype.is_float8();
    user_check(fp8 ? code->b_mem->dtype.is_float8() : code->a_mem->dtype == code->b_mem->dtype,
               "interp")
        << n << ": A ('" << code->a_mem->name << "') is " << code->a_mem->dtype << " but B ('"
        << code->b_mem->name << "') is " << code->b_mem->dtype
        << "; wgmma takes one 16-bit input type, or two float8 types";
    code->k = fp8 ? 32 : 16;
    b_layout(b_at);
    user_check(!fp8 || (code->swizzle != 0 && !code->trans_b), "interp")
        << n << ": float8 operands are read K-major (trans_b 0) from swizzled tiles (swizzle "
        << "32, 64 or 128); got trans_b " << code->trans_b << ", swizzle " << code->swizzle;
  };
  if (n == intrinsic::wgmma_mma) {
    expect_args(11, "(acc, index, n, a_ptr, a_lbo, a_sbo, b_ptr, b_lbo, b_sbo, trans_b, swizzle)");
    code->op = WgmmaCode::Mma;
    accumulator();
    code->a_mem = operand(a[3], "a_ptr");
    uniform(a[4], "a_lbo");
    uniform(a[5], "a_sbo");
    code->b_mem = operand(a[6], "b_ptr");
    operand_types(7);
    return code;
  }
  // A from registers: a wgmma.matrix_a allocation of float16 or bfloat16, whole 64 x 16 tiles,
  // or of float8, whole 64 x 32 tiles (K of one instruction).
  auto register_operand = [&](const Expr &e) {
    Memory *m = compile_fragment(C, call, e, FragKind::WgmmaA);
    const bool fp8 = m->dtype.is_float8();
    user_check((m->dtype == Float(16) || m->dtype == BFloat(16) || fp8) &&
                   m->size % (fp8 ? 2048 : 1024) == 0,
               "interp")
        << n << ": A operand '" << m->name << "' holds " << m->size << " x " << m->dtype
        << "; a wgmma.matrix_a holds float16 or bfloat16, whole 64 x 16 tiles, or float8, "
           "whole 64 x 32 tiles";
    code->k = fp8 ? 32 : 16;
    return m;
  };
  if (n == intrinsic::wgmma_mma_rs) {
    expect_args(10, "(acc, index, n, a, a_index, b_ptr, b_lbo, b_sbo, trans_b, swizzle)");
    code->op = WgmmaCode::MmaRs;
    accumulator();
    code->a_mem = register_operand(a[3]);
    uniform(a[4], "a_index");
    code->b_mem = operand(a[5], "b_ptr");
    operand_types(6);
    return code;
  }
  if (n == intrinsic::wgmma_acc_to_a) {
    expect_args(5, "(a, a_index, acc, index, n)");
    code->op = WgmmaCode::AccToA;
    code->a_mem = register_operand(a[0]);
    uniform(a[1], "a_index");
    Memory *m = compile_fragment(C, call, a[2], FragKind::WgmmaAccumulator);
    code->acc = m;
    uniform(a[3], "index");
    code->n = int(const_arg(call, 4, "n"));
    user_check(code->n % code->k == 0 && code->n >= code->k && code->n <= 256, "interp")
        << n << ": n = " << code->n << "; an A tile's columns are whole k" << code->k
        << " slices, " << code->k << " to 256";
    return code;
  }
  if (n == intrinsic::wgmma_store) {
    user_check(a.size() >= 6 && a.size() <= 8, "interp")
        << n << " takes 6 to 8 arguments (acc, index, n, ptr, stride, lanes[, limit[, "
        << "row_limit]]), got " << a.size() << ": " << Expr(call);
    code->op = WgmmaCode::Store;
    accumulator();
    uniform(a[4], "stride");
    code->limits = int(a.size()) - 6;
    if (code->limits >= 1)
      uniform(a[6], "limit");
    if (code->limits == 2)
      uniform(a[7], "row_limit");
    code->lanes = int(const_arg(call, 5, "lanes"));
    user_check(code->lanes == 1 || code->lanes == 2 || code->lanes == 4 || code->lanes == 8,
               "interp")
        << n << ": lanes must be 1, 2, 4 or 8, got " << code->lanes;
    PtrArg p = compile_pointer(C, call, a[3]);
    const DataType out = p.mem->dtype;
    user_check(code->lanes != 8 || out == Float(32), "interp")
        << n << ": lanes 8 stores float32 outputs, got '" << p.mem->name << "' of " << out;
    user_check(code->lanes != 4 || code->n % 16 == 0, "interp")
        << n << ": lanes 4 stores tiles n a multiple of 16, got n=" << code->n << " for '"
        << p.mem->name << "'";
    user_check((p.mem->scope == MemScope::Global || p.mem->scope == MemScope::Shared) &&
                   (out == Float(32) || out == Float(16) || out == BFloat(16)),
               "interp")
        << n << ": '" << p.mem->name << "' is " << out << " in " << scope_name(p.mem->scope)
        << " memory; the store writes float32, float16 or bfloat16 to global or shared memory";
    code->ptr_mem = p.mem;
    code->add_per_lane(std::move(p.index));
    return code;
  }
  if (n == intrinsic::wgmma_reg_set) {
    expect_args(5, "(acc, index, n, r, value)");
    user_check(a[4].type() == Float(32), "interp")
        << n << ": the value must be float32 (a register of the accumulator), got " << a[4].type();
    auto set = std::make_unique<WgmmaRegSetCode>(C.expr(a[1]), C.expr(a[3]), C.expr(a[4]));
    set->intrin = n;
    set->acc = compile_fragment(C, call, a[0], FragKind::WgmmaAccumulator);
    set->n = int(const_arg(call, 2, "n"));
    user_check(set->n % 8 == 0 && set->n >= 8 && set->n <= 256, "interp")
        << n << ": n = " << set->n << "; wgmma's n is a multiple of 8 from 8 to 256";
    return set;
  }
  if (n == intrinsic::wgmma_wait) {
    // The register arrays after n name what the wait completes, for codegen's fences.
    user_check(!a.empty(), "interp") << n << " takes (n[, register arrays...]): " << Expr(call);
    int64_t k = const_arg(call, 0, "n");
    user_check(k >= 0, "interp") << n << " takes a non-negative group count, got " << k;
    code->op = WgmmaCode::Wait;
    code->wait_n = uint32_t(k);
    return code;
  }
  if (n == intrinsic::wgmma_fence) { // its arguments name registers, for codegen's fences
    code->op = WgmmaCode::Fence;
    return code;
  }
  if (n == intrinsic::wgmma_commit) {
    expect_args(0, "()");
    code->op = WgmmaCode::Commit;
    return code;
  }
  user_error("interp") << "unknown wgmma intrinsic '" << n << "'";
}

void check_wgmma_landed(const Machine &M) {
  for (uint32_t w = 0; w < M.pending_wgmma.size(); ++w)
    for (const PendingWgmma &p : M.pending_wgmma[w])
      user_error("interp") << "kernel '" << M.kernel << "': block " << M.block_name()
                           << " ends while warp " << w << " has a wgmma_mma on tile " << p.tile
                           << " of accumulator '" << p.acc->name << "' that no wgmma_wait "
                           << "completed (group " << p.group
                           << (p.group < M.wgmma_groups[w] ? "" : ", not committed")
                           << "); wgmma_commit and wgmma_wait(0) before the results are used";
}

} // namespace tessel::interp

#include "schedules/Attention.h"

#include "compiler/support/Error.h"
#include "compiler/tessel.h"
#include "schedules/GemmWgmma.h"
#include "schedules/WgmmaIntrinsics.h"
#include "schedules/WmmaIntrinsics.h"

#include <array>
#include <cmath>
#include <numbers>

namespace tessel {

namespace {

// A (b, h, rows, d) tile of a global operand in shared memory, copied 8 elements (16 bytes) a
// thread by the block's `threads` threads, `x_threads` of them along threadIdx.x.
void copy_rows_to_shared(Schedule &s, const Tensor &tile, const IterVar &tx, const IterVar &ty,
                         int64_t threads, int64_t x_threads) {
  auto ax = s[tile].op_axis();
  auto [c, v] = s[tile].split(ax[3], 8);
  auto [f, t] = s[tile].split(s[tile].fuse(ax[2], c), threads);
  (void)f;
  auto [fy, fx] = s[tile].split(t, x_threads);
  s[tile].bind(fy, ty).bind(fx, tx).vectorize(v);
}

struct StepTensors {
  Tensor Q, K, V, S, rowmax, m_new, P, Pq, PV, O, rowsum;
};

// The step's two contractions on WMMA (16x16x16, float32 accumulators), a warp per 32 queries:
// the scores S^T = K Q^T (stored key-major, S(t, b, h, j, i)) from K's tile and the block's
// Q tile in shared memory, stored to shared memory, where each thread reads its query's column
// (consecutive threads, consecutive words: no bank conflicts) for its row max, new max and
// probabilities; the probabilities in Q's type, key-major again, are P V's A operand (a
// col_major fragment) with V's tile. Q's tile is copied once a block, K's and V's tiles of the
// next step by cp.async during this one (a ring of 2), 16 bytes a thread; the shared rows are
// padded against bank conflicts of the fragment loads and stores.
void schedule_tensor_cores(Schedule &s, const StepTensors &x, Stage fold, const IterVar &t,
                           const IterVar &block, const IterVar &tx, const IterVar &ty,
                           int64_t warps, DataType dtype) {
  constexpr int64_t kFrag = 16;
  const WmmaShape shape;
  s[x.P].compute_inline();
  // A tile of a global operand in shared memory, its rows padded.
  auto copy_to_shared = [&](const Tensor &tile) {
    s[tile].storage_align(s[tile].op_axis(2), 16, 8);
    copy_rows_to_shared(s, tile, tx, ty, 32 * warps, 32);
  };
  // An accumulator over (t, b, h, rows, cols) in 16x16 fragments (a warp's: the columns are
  // its queries, or its rows for P V); returns its K-step loop.
  auto tile_accumulator = [&](const Tensor &acc) {
    auto ax = s[acc].op_axis();
    auto [ro, ri] = s[acc].split(ax[3], kFrag);
    auto [co, ci] = s[acc].split(ax[4], kFrag);
    auto [ko, ki] = s[acc].split(s[acc].reduce_axis()[0], kFrag);
    s[acc].reorder({ax[0], ax[1], ax[2], ko, ro, co, ri, ci, ki});
    s[acc].tensorize(ri, wmma_gemm(shape, Float(32), dtype));
    return ko;
  };
  // The fragments of a stage over (t, b, h, rows, cols) stored by the warps whose queries are
  // its axis `queries` (3 or 4), its other axis in chunks of 32 (or 16) columns; returns the
  // chunk loop, where the accumulator of a chunk is computed (fewer registers than all of it).
  auto store_fragments = [&](const Tensor &out, int queries) {
    auto ax = s[out].op_axis();
    const IterVar &other = ax[7 - queries];
    auto [qw, qf] = s[out].split_nparts(ax[queries], warps);
    s[out].bind(qw, ty);
    auto [oc, of] = s[out].split(other, *as_const_int(other.dom().extent) % 32 == 0 ? 32 : kFrag);
    auto [qo, qi] = s[out].split(qf, kFrag);
    auto [fo, fi] = s[out].split(of, kFrag);
    if (queries == 3)
      s[out].reorder({qw, oc, qo, fo, qi, fi});
    else
      s[out].reorder({qw, oc, fo, qo, fi, qi});
    s[out].storage_align(ax[3], 32, 4);
    s[out].tensorize(queries == 3 ? qi : fi, wmma_store_matrix(shape, Float(32), "shared"));
    return oc;
  };
  auto load_fragments = [&](const Tensor &frag, const char *scope) {
    auto [ro, ri] = s[frag].split(s[frag].op_axis(-2), kFrag);
    auto [co, ci] = s[frag].split(s[frag].op_axis(-1), kFrag);
    s[frag].reorder({ro, co, ri, ci});
    s[frag].tensorize(ri, wmma_load_matrix(scope, "", shape, dtype));
  };

  // S^T = K Q^T: Q's tile once a block, K's once a step.
  Tensor QS = s.cache_read(x.Q, "shared", {x.S}), KS = s.cache_read(x.K, "shared", {x.S});
  Tensor KF = s.cache_read(KS, "wmma.matrix_a", {x.S});
  Tensor QF = s.cache_read(QS, "wmma.matrix_b", {x.S});
  Tensor SF = s.cache_write(x.S, "wmma.accumulator");
  s[x.S].compute_at(fold, t).set_scope("shared");
  s[SF].compute_at(s[x.S], store_fragments(x.S, 4));
  IterVar sk = tile_accumulator(SF);
  s[QS].compute_at(s[x.O], block);
  s[KS].compute_at(fold, t);
  for (const Tensor &c : {QF, KF})
    s[c].compute_at(s[SF], sk);
  copy_to_shared(QS);
  copy_to_shared(KS);
  load_fragments(KF, "wmma.matrix_a");
  load_fragments(QF, "wmma.matrix_b");

  // P V, from the probabilities each thread wrote for its query.
  s[x.Pq].set_scope("shared");
  {
    auto ax = s[x.Pq].op_axis();
    s[x.Pq].storage_align(ax[3], 16, 8);
    auto [qy, qx] = s[x.Pq].split(ax[4], 32);
    s[x.Pq].reorder({qy, qx, ax[3]});
    s[x.Pq].bind(qy, ty).bind(qx, tx);
  }
  Tensor PF = s.cache_read(x.Pq, "wmma.matrix_a", {x.PV});
  Tensor VS = s.cache_read(x.V, "shared", {x.PV});
  Tensor VF = s.cache_read(VS, "wmma.matrix_b", {x.PV});
  Tensor PVF = s.cache_write(x.PV, "wmma.accumulator");
  s[x.PV].set_scope("shared");
  s[PVF].compute_at(s[x.PV], store_fragments(x.PV, 3));
  IterVar pk = tile_accumulator(PVF);
  s[VS].compute_at(fold, t);
  for (const Tensor &c : {PF, VF})
    s[c].compute_at(s[PVF], pk);
  copy_to_shared(VS);
  s[KS].pipeline(2);
  s[VS].pipeline(2);
  load_fragments(PF, "wmma.matrix_a");
  load_fragments(VF, "wmma.matrix_b");
}

// The step on wgmma, a warpgroup per 64 queries (`warpgroups` a block, on threadIdx.y), each
// with its own fold, everything of it in the warpgroup's registers: S = Q K^T (Q's tile in
// shared memory once a block, K's tile of the step, both in the 128-byte swizzled layout), the
// row max and the row sum, the new max and the probabilities (distributed by the accumulator's
// layout), the probabilities rounded into P V's A operand, P V with V's tile; the fold's update
// (m, l in wgmma.rows, o an accumulator) and O32 = o / l distributed too.
void schedule_wgmma(Schedule &s, const StepTensors &x, Stage fold, const IterVar &t,
                    const IterVar &block, const Tensor &m_last,
                    const Tensor &l_last, const Tensor &O32, const IterVar &tx,
                    const IterVar &ty, int64_t warpgroups, int64_t D, int64_t Bk,
                    DataType dtype, int stages, bool tma, int slack, bool warp_roles) {
  // K of one wgmma: 16 of 16-bit values, 32 of float8 ones (32 bytes of a row either way).
  const bool fp8 = dtype.is_float8();
  const int64_t kK = fp8 ? 32 : 16;
  // The tiles in shared memory in the 128-byte swizzled layout (rows of 64 halves or 128 float8
  // values, their 16-byte units permuted: wgmma reads them without bank conflicts), copied 16
  // bytes a thread, consecutive threads along a 128-byte row; or (K's and V's, `tma`) by TMA:
  // one thread's boxes on the ring's mbarriers (bulk_copy).
  constexpr int kSwizzle = 128;
  const int per16 = 16 / dtype.bytes(); // values in 16 bytes
  auto copy_to_shared = [&](const Tensor &tile, const Tensor &reader, bool tma = false) {
    Tensor sh = s.cache_read(tile, "shared", {reader});
    s[sh].swizzle(kSwizzle);
    if (tma) {
      s[sh].bulk_copy();
      return sh;
    }
    auto ax = s[sh].op_axis();
    auto [c, v] = s[sh].split(ax[3], per16);
    auto [block, unit] = s[sh].split(c, kSwizzle / 16);
    s[sh].reorder({block, ax[2], unit, v});
    auto [f, th] = s[sh].split(s[sh].fuse(s[sh].fuse(block, ax[2]), unit), 128);
    s[sh].bind(th, tx).vectorize(v);
    // The block's warpgroups share each tile and copy it together.
    if (warpgroups > 1) {
      auto [f2, wg] = s[sh].split(f, warpgroups);
      (void)f2;
      s[sh].bind(wg, ty);
    }
    return sh;
  };
  // A contraction over (t, b, h, rows, cols) in k16 slices, tensorized at its rows.
  auto contraction = [&](const Tensor &acc, const std::shared_ptr<const TensorIntrin> &intrin) {
    s[acc].compute_at(fold, t).set_scope("wgmma.accumulator");
    auto ax = s[acc].op_axis();
    auto [ko, ki] = s[acc].split(s[acc].reduce_axis()[0], kK);
    s[acc].reorder({ko, ax[0], ax[1], ax[2], ax[3], ax[4], ki}).unroll(ko);
    s[acc].tensorize(ax[3], intrin);
  };
  contraction(x.S, wgmma_gemm(Bk, "col_major", kSwizzle, dtype));
  Tensor QS = copy_to_shared(x.Q, x.S), KS = copy_to_shared(x.K, x.S, tma);
  s[QS].compute_at(s[x.O], block);
  s[KS].compute_at(fold, t);
  // The row max of the scores (causal: masked) and the row sum of P by wgmma_row_reduce (a
  // tree of each thread's registers, then the quad's shuffles).
  for (auto [rows, kind] : {std::pair{x.rowmax, RowReduce::Max}, {x.rowsum, RowReduce::Sum}}) {
    s[rows].compute_at(fold, t).set_scope("wgmma.rows");
    s[rows].tensorize(s[rows].op_axis(3), wgmma_row_reduce(Bk, kind));
  }
  s[x.m_new].compute_at(fold, t).set_scope("wgmma.rows");
  s[x.P].compute_at(fold, t).set_scope("wgmma.accumulator");
  s[x.Pq].compute_at(fold, t).set_scope("wgmma.matrix_a");
  s[x.Pq].tensorize(s[x.Pq].op_axis(3), wgmma_acc_to_a(Bk, dtype));
  // P V: V's tile keys by rows (16-bit), or, float8 (K-major only), VT's: D rows of keys.
  contraction(x.PV, wgmma_gemm_rs(D, fp8 ? "col_major" : "row_major", kSwizzle, dtype));
  Tensor VS = copy_to_shared(x.V, x.PV, tma);
  s[VS].compute_at(fold, t);
  // K's and V's tiles of the next key blocks by TMA or cp.async during this one.
  if (stages > 1) {
    s[KS].pipeline(stages, slack);
    s[VS].pipeline(stages, slack);
  }
  // A producer warpgroup fills the ring; the block's warpgroups consume it.
  if (warp_roles)
    fold.warp_specialize();
  // The fold: its states in registers, the key blocks outside the rows.
  fold.set_scope("wgmma.accumulator").set_scope("wgmma.rows", m_last).set_scope("wgmma.rows",
                                                                                  l_last);
  auto fx = fold.op_axis();
  fold.reorder({fx[0], fx[1], t, fx[2]});
  s[O32].set_scope("wgmma.accumulator");
}

// What both programs (and packed sequences) take of Q's, K's and V's type and heads.
void check_operands(const AttentionParams &a, DataType dtype, const char *context) {
  user_check(dtype == Float(16) || dtype == BFloat(16) || dtype == Float8E4M3(), context)
      << "Q, K and V are float16, bfloat16 or float8_e4m3 (attention on wgmma), not " << dtype;
  user_check(a.Hkv > 0 && a.H % a.Hkv == 0, context)
      << "the " << a.Hkv << " key/value heads must divide the " << a.H << " query heads";
}

// Q, K and V of attention's programs: (B, H, S, D) views, of (B, S, H, D) buffers read through
// their strides when `a.bshd`; checked (check_operands).
std::array<Tensor, 3> attention_operands(const AttentionParams &a, DataType dtype,
                                         const char *context) {
  check_operands(a, dtype, context);
  auto view = [&](int64_t S, int64_t H, const char *name) {
    if (!a.bshd)
      return placeholder({a.B, H, S, a.D}, dtype, name);
    return placeholder({a.B, H, S, a.D}, dtype, name, {S * H * a.D, a.D, H * a.D, 1});
  };
  return {view(a.Sq, a.H, "Q"), view(a.Sk, a.Hkv, "K"), view(a.Sk, a.Hkv, "V")};
}

// The shape parameters both registered programs take (B, H, HKV, SQ, SK, D, CAUSAL, BSHD).
AttentionParams attention_shape(const ShapeParams &p) {
  AttentionParams a;
  a.B = p.at("B");
  a.H = p.at("H");
  a.Hkv = p.at("HKV");
  a.Sq = p.at("SQ");
  a.Sk = p.at("SK");
  a.D = p.at("D");
  a.causal = p.at("CAUSAL") != 0;
  a.bshd = p.at("BSHD") != 0;
  return a;
}

} // namespace

std::vector<Tensor> online_softmax(const IterVar &t, const Tensor &m, const Tensor &l,
                                   const Tensor &o, const Tensor &m_new, const Tensor &rowsum,
                                   const Tensor &PV, const std::string &name,
                                   std::function<Expr(const std::vector<Var> &)> where,
                                   Expr (*exponential)(Expr), bool pv_holds_o) {
  // A step tensor at (t, the first `n` of v) and a state at them.
  auto step = [&](const Tensor &x, const std::vector<Var> &v, size_t n) {
    std::vector<Expr> idx = {t};
    idx.insert(idx.end(), v.begin(), v.begin() + long(n));
    return x(idx);
  };
  auto state = [](const Tensor &x, const std::vector<Var> &v) {
    return x(std::vector<Expr>(v.begin(), v.end()));
  };
  const size_t rows = m.ndim();
  // A block rescales the running sum and output by exp(m_old - m_new) (or 2^ in base 2).
  auto alpha = [&](const std::vector<Var> &v) {
    return exponential(state(m, {v.begin(), v.begin() + long(rows)}) - step(m_new, v, rows));
  };
  // Two parts' states (m, l, o) merged: each part's sums rescaled to the larger max (a part
  // that saw no key, m = -inf, weighs 0).
  auto weight = [exponential](const Expr &m_part, const Expr &m_both) {
    return select(m_part == Expr(-INFINITY), Expr(0.0f), exponential(m_part - m_both));
  };
  auto merged = [weight](size_t k) {
    return [weight, k](const std::vector<Expr> &a, const std::vector<Expr> &b) {
      Expr m_both = max(a[0], b[0]);
      return k == 0 ? m_both : a[k] * weight(a[0], m_both) + b[k] * weight(b[0], m_both);
    };
  };
  return fold(t,
              {{m, Expr(-INFINITY), [&](auto &v) { return step(m_new, v, rows); }, merged(0)},
               {l, Expr(0.0f),
                [&](auto &v) { return state(l, v) * alpha(v) + step(rowsum, v, rows); },
                merged(1)},
               {o, Expr(0.0f),
                [&](auto &v) {
                  return pv_holds_o ? step(PV, v, rows + 1)
                                    : state(o, v) * alpha(v) + step(PV, v, rows + 1);
                },
                merged(2)}},
              name, std::move(where));
}

// Packed sequences: the length of sequence b, from the offsets where each starts (B + 1).
Expr sequence_length(const Tensor &offsets, const Expr &b) {
  return offsets(b + 1) - offsets(b);
}

// Packed sequences (a.packed_tokens > 0): Q, K and V as (tokens, heads, D) buffers, the B
// sequences one after another, `offsets` (B + 1, int32) where each starts; returns the
// operands as (B, heads, Sq, D) tensors of the tokens from each sequence's start on, zero past
// the buffer's end: a read guarded by the buffer's edge, which copies inline as a predicated
// cp.async or a TMA box at a row read from the offsets (the hardware zero-fills past the edge).
// Past a sequence's end they are the next sequence's tokens: its keys are masked (their
// probabilities 0, so V's rows there weigh nothing) and its queries' rows never gathered.
std::array<Tensor, 3> packed_operands(const AttentionParams &a, DataType dtype,
                                      const Tensor &offsets, std::array<Tensor, 3> &packed) {
  check_operands(a, dtype, "attention");
  auto gather = [&](int64_t H, const char *name) {
    Tensor x = placeholder({a.packed_tokens, H, a.D}, dtype, name);
    Tensor g = compute(
        {a.B, H, a.Sq, a.D},
        [&](Var b, Var h, Var i, Var d) {
          Expr row = offsets(b) + i;
          return if_then_else(row < int(a.packed_tokens), x(row, h, d), make_zero(dtype));
        },
        std::string(name) + "_seq", {"b", "h", "i", "d"});
    return std::pair{x, g};
  };
  auto [q, qg] = gather(a.H, "Q");
  auto [k, kg] = gather(a.Hkv, "K");
  auto [v, vg] = gather(a.Hkv, "V");
  packed = {q, k, v};
  return {qg, kg, vg};
}

namespace {

// Decoding on attention's fold (attention_decode_wgmma): the user's decoding shape and the
// chunks its keys are split into.
struct DecodeGrid {
  AttentionParams shape;
  int64_t chunks = 1;
  /// A key/value head's query heads, and its rows in the fold (g x Sq, head-major).
  int64_t group() const { return shape.H / shape.Hkv; }
  int64_t rows() const { return group() * shape.Sq; }
};

// Decoding's operands as the fold's: chunk p of batch b's keys is the fold's batch p B + b (its
// Sk = the chunk's keys), and a key/value head's g query heads and Sq queries are its rows,
// head-major (row r: head r / Sq of the group, query r % Sq), zero past g Sq to the block's
// 64. Views of the user's Q, K, V (`args`), inlined into their tiles' copies.
std::array<Tensor, 3> decode_operands(const DecodeGrid &grid, const AttentionParams &a,
                                      DataType dtype, std::array<Tensor, 3> &args) {
  const AttentionParams &u = grid.shape;
  args = attention_operands(u, dtype, "attention_decode");
  const int g = int(grid.group()), sq = int(u.Sq), b0 = int(u.B);
  const int chunk = int(u.Sk / grid.chunks);
  Tensor q = compute(
      {a.B, a.H, a.Sq, a.D},
      [&](Var b, Var h, Var r, Var d) {
        return if_then_else(r < int(grid.rows()),
                            args[0](floormod(b, b0), h * g + floordiv(r, sq), floormod(r, sq), d),
                            make_zero(dtype));
      },
      "Q_rows", {"b", "h", "i", "d"});
  auto keys = [&](const Tensor &x, const std::string &name) {
    return compute(
        {a.B, a.H, a.Sk, a.D},
        [&](Var b, Var h, Var j, Var d) {
          return x(floormod(b, b0), h, floordiv(b, b0) * chunk + j, d);
        },
        name, {"b", "h", "j", "d"});
  };
  return {q, keys(args[1], "K_chunk"), keys(args[2], "V_chunk")};
}

// Decoding's merge of its chunks (a kernel of its own): with lse_p each chunk's rows'
// logsumexp and op_p its normalized output, X = max_p lse_p, W = sum_p exp(lse_p - X) and
// O = sum_p exp(lse_p - X) op_p / W in Q's type, over the user's (B, H, Sq, D).
struct ChunkMerge {
  Tensor X, W, Osum, O;
};
ChunkMerge merge_chunks(const AttentionParams &u, int64_t chunks, DataType dtype,
                        const std::function<Expr(const Expr &, Var, Var, Var)> &lse,
                        const std::function<Expr(const Expr &, Var, Var, Var, Var)> &op) {
  IterVar p1 = reduce_axis({0, chunks}, "p1"), p2 = reduce_axis({0, chunks}, "p2"),
          p3 = reduce_axis({0, chunks}, "p3");
  ChunkMerge m;
  m.X = compute(
      {u.B, u.H, u.Sq}, [&](Var b, Var h, Var i) { return max(lse(p1, b, h, i), {p1}); }, "X",
      {"b", "h", "i"});
  m.W = compute(
      {u.B, u.H, u.Sq},
      [&](Var b, Var h, Var i) { return sum(exp(lse(p2, b, h, i) - m.X(b, h, i)), {p2}); }, "W",
      {"b", "h", "i"});
  m.Osum = compute(
      {u.B, u.H, u.Sq, u.D},
      [&](Var b, Var h, Var i, Var dd) {
        return sum(op(p3, b, h, i, dd) * exp(lse(p3, b, h, i) - m.X(b, h, i)), {p3});
      },
      "Osum", {"b", "h", "i", "d"});
  m.O = compute(
      {u.B, u.H, u.Sq, u.D},
      [&](Var b, Var h, Var i, Var dd) {
        return (m.Osum(b, h, i, dd) / m.W(b, h, i)).astype(dtype);
      },
      "O", {"b", "h", "i", "d"});
  return m;
}

// The merge's kernel: a block per (batch, head, query), a thread per column of D.
void schedule_merge(Schedule &s, const ChunkMerge &m) {
  auto [b, h, i, dd] = s[m.O].axes<4>();
  IterVar row = s[m.O].fuse(s[m.O].fuse(b, h), i);
  s[m.O].bind(row, thread_axis("blockIdx.x"));
  s[m.O].bind(dd, thread_axis("threadIdx.x"));
  for (const Tensor &x : {m.X, m.W})
    s[x].compute_at(s[m.O], row).set_scope("local");
  s[m.Osum].compute_at(s[m.O], dd).set_scope("local");
}

} // namespace

static ScheduledProgram attention_program(const AttentionParams &a, DataType dtype,
                                          const DecodeGrid *decode);

ScheduledProgram attention(const AttentionParams &a, DataType dtype) {
  return attention_program(a, dtype, nullptr);
}

// attention's program; `decode`: the fold of decoding (attention_decode_wgmma), its chunks'
// rows merged by a second kernel.
static ScheduledProgram attention_program(const AttentionParams &a, DataType dtype,
                                          const DecodeGrid *decode) {
  const bool packed = a.packed_tokens > 0;
  internal_check(!decode || (a.wgmma && a.lse && !packed && !a.causal && a.H == a.Hkv))
      << "decoding's fold is wgmma's, with its rows' logsumexp, over g = 1 and no mask";
  user_check(!packed || (a.Sq == a.Sk && !a.persistent_blocks), "attention")
      << "packed sequences (" << a.packed_tokens << " tokens) take as many queries as keys a "
      << "sequence (Sq = Sk: its longest) and a block a tile (not a persistent grid: the tiles "
         "walk different numbers of key blocks); got Sq = "
      << a.Sq << ", Sk = " << a.Sk << (a.persistent_blocks ? ", PB" : "");
  Tensor offsets;
  std::array<Tensor, 3> packed_args;
  if (packed)
    offsets = placeholder({a.B + 1}, Int(32), "offsets");
  std::array<Tensor, 3> decode_args;
  auto [Q, K, V] = packed   ? packed_operands(a, dtype, offsets, packed_args)
                   : decode ? decode_operands(*decode, a, dtype, decode_args)
                            : attention_operands(a, dtype, "attention");
  // Packed, a sequence's queries and keys are padded to the longest (the entry's LMAX).
  const std::string longest = packed ? " (LMAX, the longest sequence)" : "";
  user_check(a.block_keys > 0 && a.Sk % a.block_keys == 0, "attention")
      << "the " << a.Sk << " keys" << longest << " are walked in blocks of " << a.block_keys
      << ", which must divide them: choose a block of keys (BK) that does";
  user_check(!a.causal || a.Sk >= a.Sq, "attention")
      << "causal attention aligns the last query with the last key, so every query sees a "
         "key only with at least as many keys as queries (Sk = "
      << a.Sk << ", Sq = " << a.Sq << ")";
  user_check(!a.tensor_cores || a.wgmma ||
                 ((a.block_queries == 32 || a.block_queries == 64 || a.block_queries == 128) &&
                  a.Sq % a.block_queries == 0 && a.D % 16 == 0 && a.block_keys % 16 == 0),
             "attention")
      << "the Tensor Core schedule (WMMA, 16x16x16 fragments, a warp per 32 queries) takes "
         "32, 64 or 128 queries a block, a number of queries that is a multiple of it, and a "
         "head dim and block of keys that are multiples of 16; got "
      << a.block_queries << " queries a block, Sq = " << a.Sq << longest << ", D = " << a.D
      << ", " << a.block_keys << " keys a block: change them, or use CUDA cores (TC=0)";
  user_check(!a.tma || (a.wgmma && a.stages > 1), "attention")
      << "TMA fills (tma) are the wgmma schedule's (TC=2) ring of 2 or more stages; got "
      << (a.wgmma ? "" : "another path and ") << a.stages << " stage(s)";
  user_check(a.slack == 0 || (a.tma && a.stages >= 2 + a.slack), "attention")
      << "a slack of " << a.slack << " is the TMA ring's (TMA=1) and needs " << 2 + a.slack
      << " stages or more; got " << (a.tma ? "" : "no TMA ring and ") << a.stages
      << " stage(s)";
  user_check(!a.accumulate_o || a.wgmma, "attention")
      << "P V accumulated onto o (ACC=1) is the wgmma schedule's (TC=2)";
  user_check(!a.overlap || (a.wgmma && a.accumulate_o), "attention")
      << "the overlap inside a warpgroup (OVL=1) takes the wgmma schedule (TC=2) with P V onto "
         "o (accumulate_o)";
  user_check(!a.warp_roles || a.tma, "attention")
      << "warp roles (WS=1: a producer warpgroup issuing K's and V's fills) need the wgmma "
         "schedule's TMA ring (TC=2, TMA=1, STAGES >= 2)";
  user_check(!a.ping_pong || (a.wgmma && a.block_queries == 128), "attention")
      << "ping-pong (PP=1) takes turns between the two warpgroups of a block of 128 queries on "
         "the wgmma schedule (TC=2, BQ=128); got "
      << (a.wgmma ? "" : "another path and ") << a.block_queries << " queries a block";
  user_check(!a.wgmma || ((a.block_queries == 64 || a.block_queries == 128) &&
                          a.Sq % a.block_queries == 0 && a.D % 64 == 0 &&
                          a.D <= 256 && a.block_keys % 16 == 0 && a.block_keys <= 256),
             "attention")
      << "the wgmma schedule (a warpgroup per 64 queries, tiles in 128-byte swizzled rows) takes "
         "64 or 128 queries a block, a number of queries that is a multiple of it, a head dim "
         "that is a multiple of 64 up to 256 and a block of keys that is a multiple of 16 up to "
         "256; got "
      << a.block_queries << " queries a block, Sq = " << a.Sq << ", D = " << a.D << ", "
      << a.block_keys << " keys a block: change them, or use WMMA (TC=1)";
  user_check(!a.persistent_blocks || (a.warp_roles && !a.causal && !a.reverse_blocks),
             "attention")
      << "a persistent grid (PB=" << a.persistent_blocks << ") takes the wgmma schedule with a "
      << "producer warpgroup (TC=2, WS=1 or the overlap's default) and the same key blocks in "
      << "every tile (not causal, not reversed); got "
      << (!a.warp_roles ? "no producer warpgroup" : a.causal ? "CAUSAL=1" : "REV=1")
      << ": drop PB and LW";
  user_check(a.last_wave_parts < 2 || a.persistent_blocks, "attention")
      << "splitting the last round's tiles (LW=" << a.last_wave_parts
      << ") takes a persistent grid (PB)";
  // float8 (e4m3): on wgmma, V transposed by a first kernel into VT with each 32 keys in the
  // order the probabilities' A registers hold them (wgmma_acc_to_a), since 8-bit wgmma reads
  // B K-major only; rows of 128 bytes (D and the key blocks multiples of 128); O in float16.
  const bool fp8 = dtype.is_float8();
  user_check(!fp8 || (a.wgmma && !packed && !decode && a.D % 128 == 0 &&
                      a.block_keys % 128 == 0),
             "attention")
      << "float8 attention takes the wgmma schedule (TC=2) with a head dim and a block of keys "
         "that are multiples of 128 (rows of 128 bytes), not packed sequences or decoding; got "
      << (a.wgmma ? "" : "another path, ") << "D = " << a.D << ", " << a.block_keys
      << " keys a block";
  const int g = int(a.H / a.Hkv), bk = int(a.block_keys), off = int(a.Sk - a.Sq);
  const int64_t T = a.Sk / a.block_keys, Bk = a.block_keys;
  // The wgmma schedule's tensors of the step are query-major (a warpgroup's rows are its
  // queries), the WMMA schedule's key-major (see S below): (t, b, h, query, key) either way in
  // the functions below, whose tensors index in their own order.
  const bool query_major = a.wgmma;
  auto step_shape = [&]() -> std::vector<Expr> {
    return query_major ? std::vector<Expr>{T, a.B, a.H, a.Sq, Bk}
                       : std::vector<Expr>{T, a.B, a.H, Bk, a.Sq};
  };
  const std::vector<std::string> step_names =
      query_major ? std::vector<std::string>{"t", "b", "h", "i", "j"}
                  : std::vector<std::string>{"t", "b", "h", "j", "i"};
  // x(t, b, h, query i, key j) of a step tensor in its order.
  auto at = [&](const Tensor &x, const Expr &tb, const Expr &b, const Expr &h, const Expr &i,
                const Expr &j) { return query_major ? x(tb, b, h, i, j) : x(tb, b, h, j, i); };
  // A step tensor from f(t, b, h, i, j).
  auto step_compute = [&](const std::function<Expr(Var, Var, Var, Var, Var)> &f,
                          const std::string &name) {
    return compute(
        step_shape(),
        [&](Var tb, Var b, Var h, Var x, Var y) {
          return query_major ? f(tb, b, h, x, y) : f(tb, b, h, y, x);
        },
        name, step_names);
  };
  // The softmax in base 2 (FlashAttention's): the scores' scale times log2 e, so that a
  // probability is one multiply-add and the special-function unit's 2^x (fast_exp2).
  // float8: the scores of Q and K stored scaled down by their descale factors (FlashAttention-
  // 3's q_descale and k_descale, 1-element float32 inputs) scaled back with the softmax's own;
  // O by v_descale.
  Tensor q_descale, k_descale, v_descale;
  Expr scale = float(std::numbers::log2e / std::sqrt(double(a.D)));
  if (fp8) {
    q_descale = placeholder({1}, Float(32), "q_descale");
    k_descale = placeholder({1}, Float(32), "k_descale");
    v_descale = placeholder({1}, Float(32), "v_descale");
    scale = scale * q_descale(0) * k_descale(0);
  }
  // Conditions of the causal mask and of packed sequences' lengths, either of them undefined
  // where it does not apply: both, or the one that does.
  auto conjoin = [](const Expr &x, const Expr &y) {
    return !x.defined() ? y : !y.defined() ? x : x && y;
  };
  // Where query i of sequence b sees key j (packed: the keys of its sequence).
  auto visible = [&](const Expr &b, const Expr &i, const Expr &j) {
    return conjoin(a.causal ? j <= i + off : Expr(),
                   packed ? j < sequence_length(offsets, b) : Expr());
  };

  // A step: block t of keys. Its scores and their row max read no state; the new running max,
  // the probabilities, their row sum and their product with V's block read the running max m.
  IterVar t = fold_axis({0, T}, "t");
  Tensor m = fold_state({a.B, a.H, a.Sq}, Float(32), "m");
  Tensor l = fold_state({a.B, a.H, a.Sq}, Float(32), "l");
  Tensor o = fold_state({a.B, a.H, a.Sq, a.D}, Float(32), "o");
  // The scores of block t, a contraction over the head dimension (scaled where read: the
  // row max scales once, a probability in its multiply-add). For
  // WMMA key-major (S(t, b, h, j, i) is query i's score of key j, S^T = K Q^T: a thread per
  // query reads its column), for wgmma query-major (S = Q K^T, the warpgroup's rows).
  IterVar d = reduce_axis({0, a.D}, "d");
  Tensor S = step_compute(
      [&](Var tb, Var b, Var h, Var i, Var j) {
        Expr q = Q(b, h, i, d).astype(Float(32)), k = K(b, h / g, tb * bk + j, d).astype(Float(32));
        return sum(query_major ? q * k : k * q, {d});
      },
      "S");
  // Causal, the scores of the keys a query does not see are -inf (FlashAttention's mask):
  // the row max is over all of them and their probabilities 2^-inf = 0.
  Tensor Sm = S;
  if (a.causal || packed)
    Sm = step_compute(
        [&](Var tb, Var b, Var h, Var i, Var j) {
          return if_then_else(visible(b, i, tb * bk + j), at(S, tb, b, h, i, j), -INFINITY);
        },
        "Smask");
  IterVar j1 = reduce_axis({0, Bk}, "j1");
  Tensor rowmax = compute(
      {T, a.B, a.H, a.Sq},
      [&](Var tb, Var b, Var h, Var i) { return max(at(Sm, tb, b, h, i, j1), {j1}); }, "rowmax",
      {"t", "b", "h", "i"});
  Tensor m_new = compute(
      {T, a.B, a.H, a.Sq},
      [&](Var tb, Var b, Var h, Var i) { return max(m(b, h, i), rowmax(tb, b, h, i) * scale); },
      "m_new", {"t", "b", "h", "i"});
  Tensor P = step_compute(
      [&](Var tb, Var b, Var h, Var i, Var j) {
        return fast_exp2(at(Sm, tb, b, h, i, j) * scale - m_new(tb, b, h, i));
      },
      "P");
  IterVar j2 = reduce_axis({0, Bk}, "j2");
  Tensor rowsum = compute(
      {T, a.B, a.H, a.Sq},
      [&](Var tb, Var b, Var h, Var i) { return sum(at(P, tb, b, h, i, j2), {j2}); }, "rowsum",
      {"t", "b", "h", "i"});
  // The probabilities in Q's type, the A operand of the second contraction (as FlashAttention
  // rounds them), and their product with V's block (float8: VT's, its keys in the order P's
  // columns are).
  Tensor Pq = step_compute(
      [&](Var tb, Var b, Var h, Var i, Var j) {
        return at(P, tb, b, h, i, fp8 ? wgmma_fp8_a_column(j) : Expr(j)).astype(dtype);
      },
      "Pq");
  Tensor VT;
  if (fp8)
    VT = compute(
        {a.B, a.Hkv, a.D, a.Sk},
        [&](Var b, Var h, Var dd, Var key) { return V(b, h, wgmma_fp8_a_column(key), dd); },
        "VT", {"b", "h", "d", "s"});
  IterVar j3 = reduce_axis({0, Bk}, "j3");
  // accumulate_o: P V summed onto o rescaled, o alpha + P V (a reduction from that initial
  // value), alpha = 2^(m - m_new) a tensor of the step's rows; the fold's o then takes it.
  Tensor alpha;
  if (a.accumulate_o)
    alpha = compute(
        {T, a.B, a.H, a.Sq},
        [&](Var tb, Var b, Var h, Var i) { return fast_exp2(m(b, h, i) - m_new(tb, b, h, i)); },
        "alpha", {"t", "b", "h", "i"});
  Tensor PV = compute(
      {T, a.B, a.H, a.Sq, a.D},
      [&](Var tb, Var b, Var h, Var i, Var dd) {
        Expr v = fp8 ? VT(b, h / g, dd, tb * bk + j3) : V(b, h / g, tb * bk + j3, dd);
        return sum(at(Pq, tb, b, h, i, j3).astype(Float(32)) * v.astype(Float(32)),
                   {j3}, Expr(),
                   a.accumulate_o ? o(b, h, i, dd) * alpha(tb, b, h, i) : Expr());
      },
      "PV", {"t", "b", "h", "i", "d"});

  // The blocks holding a key the query sees: causal, those up to its own; packed, those
  // inside its sequence (a loop bound read from the offsets), for a block of queries that
  // starts inside it (uniform over the block: a block wholly past its sequence's end walks no
  // key, its rows of O 0 / 0; the rows past the end in the last block are computed from the
  // next sequence's tokens; the gather of O reads neither).
  std::function<Expr(const std::vector<Var> &)> where;
  if (a.causal || packed)
    where = [&](const std::vector<Var> &v) {
      Expr in_sequence;
      if (packed) {
        Expr len = sequence_length(offsets, v[0]);
        const int bq = int(a.block_queries);
        in_sequence = t * bk < len && floordiv(v[2], bq) * bq < len;
      }
      return conjoin(a.causal ? t * bk <= v[2] + off : Expr(), in_sequence);
    };
  std::vector<Tensor> state =
      online_softmax(t, m, l, o, m_new, rowsum, PV, "softmax", where, fast_exp2,
                     a.accumulate_o);
  const Tensor &o_last = state[2], &l_last = state[1], &m_last = state[0];
  // The rows' logsumexp (natural; m is in base 2) for a backward pass, a second output; O
  // then reads it, o exp(m ln 2 - LSE) = o / l, so that it is computed with O.
  auto natural_max = [&](Var b, Var h, Var i) {
    return m_last(b, h, i) * float(std::numbers::ln2);
  };
  Tensor LSE;
  if (a.lse)
    LSE = compute(
        {a.B, a.H, a.Sq},
        [&](Var b, Var h, Var i) { return natural_max(b, h, i) + log(l_last(b, h, i)); },
        packed ? "LSE_seq" : decode ? "lse_chunk" : "LSE", {"b", "h", "i"});
  // With LSE, a row's 1 / l as exp(m ln 2 - LSE).
  auto lse_factor = [&](Var b, Var h, Var i) {
    return exp(natural_max(b, h, i) - LSE(b, h, i));
  };
  // O = o / l in Q's type.
  auto quotient = [&](Var b, Var h, Var i, Var dd) {
    if (a.lse)
      return o_last(b, h, i, dd) * lse_factor(b, h, i);
    return o_last(b, h, i, dd) / l_last(b, h, i);
  };
  // wgmma: the quotient a tensor of its own, in the registers, o times a factor of its row
  // computed once (2 a thread, in wgmma.rows), 1 / l or exp(m ln 2 - LSE): not a division
  // (an IEEE one is a dozen instructions) nor an exp an element (H200, bench/RESULTS.md
  // 2026-11-29 06:40: the epilogue was 5% of the D = 128 kernel).
  Tensor O32, row_factor;
  if (a.wgmma) {
    row_factor = compute(
        {a.B, a.H, a.Sq},
        [&](Var b, Var h, Var i) {
          return a.lse ? lse_factor(b, h, i) : Expr(1.0f) / l_last(b, h, i);
        },
        "row_factor", {"b", "h", "i"});
    O32 = compute(
        {a.B, a.H, a.Sq, a.D},
        [&](Var b, Var h, Var i, Var dd) {
          Expr v = o_last(b, h, i, dd) * row_factor(b, h, i);
          return fp8 ? v * v_descale(0) : v;
        },
        "O32", {"b", "h", "i", "d"});
  }
  // Decoding: each chunk's rows of O in float32 for the merge, the group's g x Sq rows only
  // (the store's row limit: the padding's rows are not written).
  const DataType o_dtype = decode ? Float(32) : fp8 ? Float(16) : dtype;
  const int64_t o_rows = decode ? decode->rows() : a.Sq;
  Tensor O = compute(
      {a.B, a.H, o_rows, a.D},
      [&](Var b, Var h, Var i, Var dd) {
        return (a.wgmma ? O32(b, h, i, dd) : quotient(b, h, i, dd)).astype(o_dtype);
      },
      packed ? "O_seq" : decode ? "O_chunk" : "O", {"b", "h", "i", "d"});
  // Packed: each token's row of O gathered from its sequence's (a second kernel), and with LSE
  // each token's logsumexp, (H, tokens) as FlashAttention's varlen forward returns it (a
  // third). Token n's sequence is the number of sequences that end at or before it.
  Tensor seq, O_packed, lse_seq, LSE_packed;
  auto sequence_of = [&](const char *name) {
    IterVar bs = reduce_axis({0, a.B}, "bs");
    return compute(
        {a.packed_tokens},
        [&](Var n) { return sum(if_then_else(offsets(bs + 1) <= n, 1, 0), {bs}); }, name,
        {"n"});
  };
  if (packed) {
    seq = sequence_of("seq");
    O_packed = compute(
        {a.packed_tokens, a.H, a.D},
        [&](Var n, Var h, Var dd) { return O(seq(n), h, n - offsets(seq(n)), dd); }, "O",
        {"n", "h", "d"});
    if (a.lse) {
      lse_seq = sequence_of("lse_seq");
      LSE_packed = compute(
          {a.H, a.packed_tokens},
          [&](Var h, Var n) { return LSE(lse_seq(n), h, n - offsets(lse_seq(n))); }, "LSE",
          {"h", "n"});
    }
  }

  // Decoding: the chunks' rows merged (a kernel of its own), as attention_decode's: with
  // X = max_p lse_p and W = sum_p exp(lse_p - X), O = sum_p exp(lse_p - X) O_p / W, query i of
  // head h at row (h mod g) Sq + i of its key/value head h / g.
  ChunkMerge merge;
  if (decode) {
    const AttentionParams &u = decode->shape;
    const int g0 = int(decode->group()), sq = int(u.Sq), b0 = int(u.B);
    merge = merge_chunks(
        u, decode->chunks, dtype,
        [&](const Expr &p, Var b, Var h, Var i) {
          return LSE(p * b0 + b, h / g0, floormod(h, g0) * sq + i);
        },
        [&](const Expr &p, Var b, Var h, Var i, Var dd) {
          return O(p * b0 + b, h / g0, floormod(h, g0) * sq + i, dd);
        });
  }
  // A block per (b, h, block_queries queries), a thread per query; the fold per thread in
  // registers, the block's row max (and, on CUDA cores, scores) at its axis with the rest of
  // the step.
  Schedule s = create_schedule(decode    ? std::vector<Tensor>{merge.O}
                               : !packed ? std::vector<Tensor>{O}
                               : a.lse   ? std::vector<Tensor>{O_packed, LSE_packed}
                                         : std::vector<Tensor>{O_packed});
  IterVar tx = thread_axis("threadIdx.x");
  auto [b, h, i, dd] = s[O].axes<4>();
  auto [io, ii] = s[O].split(i, a.block_queries);
  s[O].reorder({b, h, io, ii, dd});
  IterVar block = io; // a persistent grid walks the tiles (b h, io) in order
  if (a.persistent_blocks) {
    s[O].persistent(s[O].fuse(b, h), io, 1, a.persistent_blocks);
  } else {
    block = s[O].fuse(s[O].fuse(b, h), io);
    s[O].bind(block, thread_axis("blockIdx.x"));
  }
  if (a.reverse_blocks) // each head's query blocks longest first (causal: the last are short)
    s[O].reverse(block);
  if (a.wgmma) {
    // A warpgroup per 64 queries (threadIdx.y: 1 or 2 a block), the fold per warpgroup; O stored
    // from its registers.
    const int64_t warpgroups = a.block_queries / 64;
    IterVar wg = block, rows = ii, ty = thread_axis(Range(0, int(warpgroups)), "threadIdx.y");
    s[O].env_threads({thread_axis(Range(0, 128), "threadIdx.x")});
    if (warpgroups > 1) {
      auto [iw, i64] = s[O].split(ii, 64);
      s[O].bind(iw, ty);
      wg = iw;
      rows = i64;
    }
    s[O].tensorize(rows, wgmma_store_matrix(a.D, "global", o_dtype));
    Stage fold_stage = s[o_last];
    fold_stage.compute_at(s[O], wg);
    if (fp8) {
      // VT: a kernel of its own before the fold's, a block per 128 keys of a (batch, head):
      // their rows of V copied to shared memory 16 bytes a thread along a row (rows padded by
      // 4 bytes: the transposed reads, a thread a key, fall in different banks), then VT's
      // 128 x 128 tile written a thread a key along its rows.
      constexpr int64_t kKeys = 128, kThreads = 256;
      const IterVar vx = thread_axis("threadIdx.x");
      Stage vt = s[VT];
      auto ax = vt.op_axis();
      auto [so, si] = vt.split(ax[3], kKeys);
      vt.reorder({ax[0], ax[1], so, ax[2], si});
      IterVar vb = vt.fuse(vt.fuse(ax[0], ax[1]), so);
      vt.bind(vb, thread_axis("blockIdx.x"));
      auto [vo, vi] = vt.split(vt.fuse(ax[2], si), kThreads);
      (void)vo;
      vt.bind(vi, vx);
      Tensor VS = s.cache_read(V, "shared", {VT});
      s[VS].compute_at(vt, vb);
      auto va = s[VS].op_axis();
      s[VS].storage_align(va[2], 128, 4);
      auto [dc, dv] = s[VS].split(va[3], 16);
      auto [co, ci] = s[VS].split(s[VS].fuse(va[2], dc), kThreads);
      (void)co;
      s[VS].bind(ci, vx).vectorize(dv);
    }
    schedule_wgmma(s, {Q, K, fp8 ? VT : V, S, rowmax, m_new, P, Pq, PV, O, rowsum}, fold_stage,
                   t, block,
                   m_last, l_last, O32, tx, ty, warpgroups, a.D, Bk, dtype,
                   int(a.stages), a.tma, int(a.slack), a.warp_roles);
    s[O32].compute_at(s[O], wg);
    s[row_factor].compute_at(s[O], wg).set_scope("wgmma.rows");
    if (a.accumulate_o)
      s[alpha].compute_at(fold_stage, t).set_scope("wgmma.rows");
    if (a.lse) { // each warpgroup its rows (LSE is global: read at wg, its region is the block's)
      s[LSE].compute_at(s[O], wg);
      if (warpgroups > 1)
        s[LSE].bind(s[LSE].split(s[LSE].op_axis(2), 64).first, ty);
    }
    if (a.last_wave_parts > 1)
      fold_stage.split_last_wave(t, int(a.last_wave_parts));
    if (a.ping_pong)
      fold_stage.ping_pong(t);
    if (a.overlap)
      fold_stage.overlap_steps(t);
    if (a.causal || packed) // S masked in the registers
      s[Sm].compute_at(fold_stage, t).set_scope("wgmma.accumulator");
  } else {
  if (a.causal || packed) // S masked where read
    s[Sm].compute_inline();
  auto [iy, ix] = s[O].split(ii, 32);
  IterVar ty = thread_axis("threadIdx.y");
  s[O].bind(iy, ty).bind(ix, tx);
  Stage fold_stage = s[o_last];
  fold_stage.compute_at(s[O], ix).set_scope("local");
  if (a.lse) { // a thread its query's (LSE is global: read at ix, its region is the block's)
    s[LSE].compute_at(s[O], ix);
    auto [ly, lx] = s[LSE].split(s[LSE].op_axis(2), 32);
    s[LSE].bind(ly, ty).bind(lx, tx);
  }
  s[rowmax].compute_at(fold_stage, t).set_scope("local");
  if (a.tensor_cores) {
    schedule_tensor_cores(s, {Q, K, V, S, rowmax, m_new, P, Pq, PV, O, rowsum}, fold_stage, t,
                          block, tx, ty, a.block_queries / 32, dtype);
  } else {
    s[S].compute_at(fold_stage, t).set_scope("local");
    s[Pq].compute_inline();
  }
  }
  // Causal, on every path: the key blocks every query of the block sees run without the mask,
  // which only the diagonal blocks then evaluate (with the overlap, a branch around the mask's
  // statement: its loop keeps one body).
  if (a.causal || packed)
    s[o_last].specialize(t);

  if (decode) {
    // The views inline where Q, K and V are read (their tiles' copies); the merge.
    for (const Tensor &x : {Q, K, V})
      s[x].compute_inline();
    schedule_merge(s, merge);
    const AttentionParams &u = decode->shape;
    ScheduledProgram prog{s, {decode_args[0], decode_args[1], decode_args[2], merge.O}, 3, 0};
    prog.flops = 4.0 * double(u.B * u.H * u.Sq * u.D) * double(u.Sk);
    return prog;
  }

  if (packed) {
    // The gathers inline where Q, K and V are read (their shared tiles' copies, predicated by
    // the sequence's length); O's rows of the padded grid gathered per token: a block a token,
    // its sequence found once, 8 columns (16 bytes) a thread, up to 256 threads.
    for (const Tensor &x : {Q, K, V})
      s[x].compute_inline();
    auto [n, h, dd] = s[O_packed].axes<3>();
    auto [row, cols] = s[O_packed].split(s[O_packed].fuse(h, dd), 8);
    int64_t threads = 256;
    while ((a.H * a.D / 8) % threads != 0)
      threads /= 2;
    IterVar lanes = s[O_packed].split(row, threads).second;
    s[O_packed].bind(n, thread_axis("blockIdx.x"));
    s[O_packed].bind(lanes, thread_axis("threadIdx.x"));
    s[O_packed].vectorize(cols);
    s[seq].compute_at(s[O_packed], n).set_scope("local");
    ScheduledProgram prog{s, {packed_args[0], packed_args[1], packed_args[2], offsets, O_packed},
                          4, 0};
    if (a.lse) { // a thread a token, its sequence found by the thread
      auto [lh, ln] = s[LSE_packed].axes<2>();
      auto [lo, li] = s[LSE_packed].split(s[LSE_packed].fuse(lh, ln), 128);
      s[LSE_packed].bind(lo, thread_axis("blockIdx.x")).bind(li, thread_axis("threadIdx.x"));
      s[lse_seq].compute_at(s[LSE_packed], li).set_scope("local");
      prog.args.push_back(LSE_packed);
    }
    // The padded grid's work; the registry counts the sequences' own (their lengths are data).
    prog.flops = 4.0 * double(a.B * a.H * a.D) * double(a.Sq) * double(a.Sk);
    return prog;
  }

  ScheduledProgram prog{s, {Q, K, V, O}, 3, 0};
  if (fp8) // Q, K, V, q_descale, k_descale, v_descale, O
    prog = ScheduledProgram{s, {Q, K, V, q_descale, k_descale, v_descale, O}, 6, 0};
  if (a.lse)
    prog.args.push_back(LSE);
  // 4 flops per (query, visible key, dim): the two products and their sums.
  double pairs = 0;
  for (int64_t q = 0; q < a.Sq; ++q)
    pairs += a.causal ? double(std::min(a.Sk, q + off + 1)) : double(a.Sk);
  prog.flops = 4.0 * double(a.B * a.H * a.D) * pairs;
  return prog;
}

ScheduledProgram attention_decode(const AttentionParams &a, DataType dtype,
                                  const DecodeSchedule &k) {
  user_check(!dtype.is_float8(), "attention_decode")
      << "decoding takes float16 or bfloat16 Q, K and V, not " << dtype;
  auto [Q, K, V] = attention_operands(a, dtype, "attention_decode");
  const int ring = k.ring;
  const int64_t split_keys = k.split_keys, lanes = k.lanes,
                rows_in_flight = k.rows ? k.rows : ring == 0 && !k.prefetch ? 16 : 8;
  user_check(lanes == 4 || lanes == 8 || lanes == 16, "attention_decode")
      << "a key row is shared by 4, 8 or 16 threads along threadIdx.x (LANES), not " << lanes;
  user_check(rows_in_flight >= 1 && rows_in_flight <= 16, "attention_decode")
      << "each thread loads 1 to 16 rows of K and V in a stretch (ROWS), not " << rows_in_flight;
  // P V splits the head dim over the 128 / lanes threads along y, 4 or more columns each.
  const int64_t y_threads = 128 / lanes;
  user_check(a.D % 64 == 0 && a.D % (4 * y_threads) == 0, "attention_decode")
      << "the head dim is read by " << lanes << " threads a key row and split over "
      << y_threads << " threads for P V (16-byte loads): D a multiple of "
      << std::max<int64_t>(64, 4 * y_threads) << ", got " << a.D
      << (lanes < 16 ? "; more threads a row (LANES=16) take D a multiple of 64" : "");
  user_check(split_keys % 128 == 0 && split_keys > 0 && a.Sk % split_keys == 0,
             "attention_decode")
      << "the " << a.Sk << " keys are split into chunks of " << split_keys
      << " keys, a block each: choose a multiple of 128 (SPLIT) that divides them";
  user_check(!k.prefetch || ring == 0, "attention_decode")
      << "the register prefetch (PF=1) takes K's and V's rows straight to registers (RING=0), "
         "not through a ring of shared tiles (RING="
      << ring << ")";
  user_check(ring == 0 || ring == 2 || ring == 3, "attention_decode")
      << "K's and V's rows come straight to registers (RING=0) or through a ring of 2 or 3 "
         "shared-memory tiles, not "
      << ring;
  user_check(!a.causal || (a.Sk >= a.Sq && a.Sq <= split_keys), "attention_decode")
      << "causal decoding aligns the last query with the last key; it takes Sq <= SPLIT <= Sk "
         "(got Sq = "
      << a.Sq << ", SPLIT = " << split_keys << ", Sk = " << a.Sk << ")";
  const int g = int(a.H / a.Hkv), c = int(split_keys), off = int(a.Sk - a.Sq);
  const int64_t splits = a.Sk / split_keys, C = split_keys;
  const float scale = 1.0f / std::sqrt(float(a.D));
  const DataType F32 = Float(32);
  // Key j of chunk p, and whether query i sees key k.
  auto key = [&](const Expr &p, const Expr &j) { return p * c + j; };
  auto visible = [&](const Expr &i, const Expr &k) { return a.causal ? k <= i + off : Expr(); };

  // Each chunk's softmax over (chunk p, batch, head, query), as FlashDecoding writes it: the
  // scores S, their max m and sum of exponentials l, the chunk's logsumexp lse = m + log l, the
  // probabilities normalized by it, Pn = exp(S - lse), and the chunk's output op = Pn V.
  // The queries scaled once (a block's are in its threads' registers), so that a score is one
  // multiply-add a key element.
  Tensor Qs = compute(
      {a.B, a.H, a.Sq, a.D},
      [&](Var b, Var h, Var i, Var dd) { return Q(b, h, i, dd).astype(F32) * scale; }, "Qs",
      {"b", "h", "i", "d"});
  IterVar d = reduce_axis({0, a.D}, "d");
  Tensor S = compute(
      {splits, a.B, a.H, a.Sq, C},
      [&](Var p, Var b, Var h, Var i, Var j) {
        return sum(Qs(b, h, i, d) * K(b, h / g, key(p, j), d).astype(F32), {d});
      },
      "S", {"p", "b", "h", "i", "j"});
  IterVar j1 = reduce_axis({0, C}, "j1"), j2 = reduce_axis({0, C}, "j2"),
          j3 = reduce_axis({0, C}, "j3");
  Tensor m = compute(
      {splits, a.B, a.H, a.Sq},
      [&](Var p, Var b, Var h, Var i) {
        return max(S(p, b, h, i, j1), {j1}, visible(i, key(p, j1)));
      },
      "m", {"p", "b", "h", "i"});
  Tensor l = compute(
      {splits, a.B, a.H, a.Sq},
      [&](Var p, Var b, Var h, Var i) {
        return sum(exp(S(p, b, h, i, j2) - m(p, b, h, i)), {j2}, visible(i, key(p, j2)));
      },
      "l", {"p", "b", "h", "i"});
  Tensor lse = compute(
      {splits, a.B, a.H, a.Sq},
      [&](Var p, Var b, Var h, Var i) { return m(p, b, h, i) + log(l(p, b, h, i)); }, "lse",
      {"p", "b", "h", "i"});
  Tensor Pn = compute(
      {splits, a.B, a.H, a.Sq, C},
      [&](Var p, Var b, Var h, Var i, Var j) {
        Expr e = exp(S(p, b, h, i, j) - lse(p, b, h, i));
        return a.causal ? if_then_else(visible(i, key(p, j)), e, 0.0f) : e;
      },
      "Pn", {"p", "b", "h", "i", "j"});
  Tensor op = compute(
      {splits, a.B, a.H, a.Sq, a.D},
      [&](Var p, Var b, Var h, Var i, Var dd) {
        return sum(Pn(p, b, h, i, j3) * V(b, h / g, key(p, j3), dd).astype(F32), {j3});
      },
      "op", {"p", "b", "h", "i", "d"});
  // The merge.
  ChunkMerge merge = merge_chunks(
      a, splits, dtype, [&](const Expr &p, Var b, Var h, Var i) { return lse(p, b, h, i); },
      [&](const Expr &p, Var b, Var h, Var i, Var dd) { return op(p, b, h, i, dd); });
  const Tensor &O = merge.O;

  // Kernel 1: a block per (chunk, batch, key/value head) with its g query heads, X x Y = 128
  // threads (X = lanes, 16 by default). The scores: a key row per X threads along x (D / X
  // elements each: one 16-byte load at D = 128, X = 16), their dot products with every query
  // summed across x (shuffles) into shared memory, Y rows at a time along y. m and l summed across x, every thread keeping its
  // copy; lse written to global memory by every thread (each then reads its own writes: no
  // barrier, lower() allows such a workspace at the block); Pn a key a thread into shared
  // memory. P V: each thread's partial sums over its keys (j = x mod X) for its D / Y columns
  // (along y) and every query in registers, V read 16 bytes at a time, then summed across x.
  // Both contractions take `rows` rows a thread in an unrolled stretch (their loads can be in
  // flight together; measured faster than one copy of several rows, which costs registers).
  Schedule s = create_schedule({O});
  IterVar tx = thread_axis(Range(0, int(lanes)), "threadIdx.x");
  IterVar ty = thread_axis(Range(0, int(y_threads)), "threadIdx.y");
  auto vectorize_rows = [&](const Tensor &x) {
    auto [o, v] = s[x].split(s[x].op_axis(-1), 8);
    (void)o;
    s[x].vectorize(v);
  };
  // A thread's register copy of `x`'s rows for `reader`, read as a stream (each row once: not
  // allocated in L1, whose lines would bound the loads in flight; 4% faster on an H200); with a
  // ring, through shared memory: the block's rows of one `at` iteration copied by cp.async, 16
  // bytes a thread, `ring` iterations in flight.
  auto staged = [&](const Tensor &x, const Tensor &reader, const IterVar &at) {
    if (ring == 0) {
      Tensor xl = s.cache_read(x, "local", {reader});
      s[xl].stream_loads();
      return xl;
    }
    Tensor xs = s.cache_read(x, "shared", {reader});
    s[xs].compute_at(s[reader], at);
    copy_rows_to_shared(s, xs, tx, ty, 128, lanes);
    s[xs].pipeline(ring);
    return s.cache_read(xs, "local", {reader});
  };
  IterVar block;
  const bool v_rows = k.v_rows && ring == 0 && !k.prefetch && (g * a.Sq * a.D) % 128 == 0;
  // With v_rows, P V as the scores read K: a V row per `lanes` threads along x (D / lanes
  // columns each, one 16-byte load at D = 128), threadIdx.y and the stretch walking the keys
  // (key = jo Y + y). Each thread's partial sums over its keys (RL, in registers) go to shared
  // memory (rf, one per y); op adds the Y partials of its outputs (OL, a register), the block's
  // g x Sq x D outputs spread over its threads.
  Tensor OL, rows_rf;
  if (v_rows) {
    OL = s.cache_write(op, "local");
    auto [jo, jy] = s[OL].split(s[OL].reduce_axis()[0], y_threads);
    (void)jo;
    rows_rf = s.rfactor(OL, jy);
  }
  auto [p, b, h, i, dd] = s[op].axes<5>();
  auto [hkv, hg] = s[op].split(h, g);
  block = s[op].fuse(s[op].fuse(p, b), hkv);
  s[op].bind(block, thread_axis("blockIdx.x"));
  // A thread's partial sums (`x`: axes (part, p, b, h, i, d)) over stretches of rows_in_flight
  // rows, unrolled so that a stretch's loads can be in flight together.
  auto stretches = [&](const Tensor &x) {
    auto ax = s[x].op_axis();
    auto [jo, ji] = s[x].split(s[x].reduce_axis()[0], rows_in_flight);
    s[x].reorder({ax[0], ax[1], ax[2], jo, ji, ax[3], ax[4], ax[5]});
    s[x].unroll(ji);
    return std::pair{jo, ji};
  };
  Tensor VL;
  if (v_rows) {
    IterVar f = s[op].fuse(s[op].fuse(hg, i), dd);
    auto [fo, ft] = s[op].split(f, 128);
    auto [fy, fx] = s[op].split(ft, lanes);
    (void)fo;
    s[op].bind(fy, ty).bind(fx, tx);
    s[OL].compute_at(s[op], fx);
    Tensor RL = s.cache_write(rows_rf, "local");
    s[rows_rf].compute_at(s[op], block).set_scope("shared");
    auto rx = s[rows_rf].op_axis(); // (y, p, b, h, i, d)
    auto [rdx, rds] = s[rows_rf].split(rx[5], a.D / lanes);
    s[rows_rf].reorder({rx[0], rdx, rx[1], rx[2], rx[3], rx[4], rds});
    s[rows_rf].bind(rx[0], ty).bind(rdx, tx);
    s[RL].compute_at(s[rows_rf], rdx);
    auto [ljo, lji] = stretches(RL);
    VL = staged(V, RL, ljo);
    s[VL].compute_at(s[RL], lji);
  } else {
    IterVar jo, jx;
    if (k.prefetch) // each thread's keys contiguous, so that a stretch's copy is its rows
      std::tie(jx, jo) = s[op].split_nparts(s[op].reduce_axis()[0], lanes);
    else
      std::tie(jo, jx) = s[op].split(s[op].reduce_axis()[0], lanes);
    (void)jo;
    Tensor rf = s.rfactor(op, jx);
    auto [dy, ds] = s[op].split_nparts(dd, y_threads);
    s[op].reorder({block, dy, hg, i, ds});
    s[op].bind(dy, ty).bind(s[op].reduce_axis()[0], tx);
    s[rf].compute_at(s[op], dy).set_scope("local");
    auto [rjo, rji] = stretches(rf);
    VL = staged(V, rf, rjo);
    if (k.prefetch) { // the next stretch's rows loaded before this one's arithmetic
      s[VL].compute_at(s[rf], rjo);
      s[VL].pipeline(2);
      s[rf].unroll(rjo);
    } else {
      s[VL].compute_at(s[rf], rji);
    }
  }
  vectorize_rows(VL);
  {
    s[S].compute_at(s[op], block).set_scope("shared");
    auto [p, b, h, i, j] = s[S].axes<5>();
    IterVar jr, jy;
    if (k.prefetch)
      std::tie(jy, jr) = s[S].split_nparts(j, y_threads);
    else
      std::tie(jr, jy) = s[S].split(j, y_threads);
    auto [jro, jri] = s[S].split(jr, rows_in_flight);
    auto [dt, dr] = s[S].split_nparts(s[S].reduce_axis()[0], lanes);
    s[S].reorder({p, b, jro, jy, jri, h, i, dt, dr});
    s[S].bind(jy, ty).bind(dt, tx).unroll(jri);
    Tensor KL = staged(K, S, jro);
    if (k.prefetch) {
      s[KL].compute_at(s[S], jro);
      s[KL].pipeline(2);
      s[S].unroll(jro);
    } else {
      s[KL].compute_at(s[S], jri);
    }
    vectorize_rows(KL);
    Tensor QL = s.cache_read(Q, "local", {Qs});
    s[QL].compute_at(s[op], block);
    vectorize_rows(QL);
    s[Qs].compute_at(s[op], block).set_scope("local");
  }
  for (const Tensor &x : {m, l, lse})
    s[x].compute_at(s[op], block);
  for (const Tensor &x : {m, l}) {
    s[x].set_scope("local");
    auto [jr, jx] = s[x].split(s[x].reduce_axis()[0], lanes);
    (void)jr;
    s[x].bind(jx, tx);
  }
  {
    s[Pn].compute_at(s[op], block).set_scope("shared");
    auto [jr, jt] = s[Pn].split(s[Pn].op_axis(-1), 128);
    auto [jy, jx] = s[Pn].split(jt, lanes);
    (void)jr;
    s[Pn].bind(jy, ty).bind(jx, tx);
  }

  // Kernel 2: the merge.
  schedule_merge(s, merge);

  ScheduledProgram prog{s, {Q, K, V, O}, 3, 0};
  // 4 flops per (query, key, dim), the causal mask's few skipped pairs counted.
  prog.flops = 4.0 * double(a.B * a.H * a.Sq * a.D) * double(a.Sk);
  return prog;
}

// A persistent grid's blocks: the SMs of an H100 or H200.
constexpr int64_t kPersistentBlocks = 132;

static int64_t decode_split_keys(const AttentionParams &u, int64_t block_keys) {
  // The longest power-of-two chunk up to 16384 keys that still gives every SM a block: the
  // fewer and longer the chunks, the faster, one block streaming an SM's share nearly as fast
  // as two (H200, bench/RESULTS.md 2026-11-29 ninth session, B=16 32k keys, the default ring:
  // 16384 0.475 ms, 8192 0.477-0.480, 4096 0.480-0.481, 2048 0.501). Else the shortest chunk
  // that divides the keys, for the most blocks.
  int64_t shortest = 0;
  for (int64_t c = 16384; c >= block_keys; c /= 2)
    if (u.Sk % c == 0) {
      if (u.B * u.Hkv * (u.Sk / c) >= kPersistentBlocks)
        return c;
      shortest = c;
    }
  return shortest ? shortest : u.Sk;
}

ScheduledProgram attention_decode_wgmma(const AttentionParams &u, DataType dtype,
                                        const DecodeWgmma &k) {
  check_operands(u, dtype, "attention_decode");
  const int64_t g = u.H / u.Hkv;
  user_check(!u.causal || u.Sq == 1, "attention_decode")
      << "decoding on wgmma (TC=2) takes no mask: not causal, or causal with one query (which "
         "sees every key); got "
      << u.Sq << " causal queries: use the CUDA-core decoder (TC=0)";
  user_check(g * u.Sq <= 64, "attention_decode")
      << "decoding on wgmma (TC=2) takes a key/value head's " << g << " query heads x " << u.Sq
      << " queries as the rows of one warpgroup, at most 64: use the CUDA-core decoder (TC=0)";
  user_check(u.D == 64 || u.D == 128 || u.D == 256, "attention_decode")
      << "decoding on wgmma (TC=2) takes a head dim of 64, 128 or 256, not " << u.D;
  user_check(k.tma || (!k.overlap && !k.persistent_blocks), "attention_decode")
      << "the overlap of steps (OVL=1) and a persistent grid (PB) take the TMA ring (TMA=1)";
  // By cp.async a slot of 32 KiB or more (H200, bench/RESULTS.md 2026-11-29 ninth session: at
  // D = 64 128 keys 0.244 ms, 64 keys 0.275); by TMA 128 keys where S's registers allow.
  const int64_t block_keys =
      k.block_keys ? k.block_keys : (k.tma ? u.D <= 128 : u.D == 64) ? 128 : 64;
  const int64_t split_keys = k.split_keys ? k.split_keys : decode_split_keys(u, block_keys);
  user_check(block_keys > 0 && split_keys % block_keys == 0 && split_keys > 0 &&
                 u.Sk % split_keys == 0,
             "attention_decode")
      << "the " << u.Sk << " keys are split into chunks of " << split_keys << " (SPLIT), "
      << "walked in blocks of " << block_keys << " (BK): SPLIT must divide the keys and be a "
      << "multiple of BK";
  AttentionParams a;
  a.B = u.B * (u.Sk / split_keys);
  a.H = a.Hkv = u.Hkv;
  a.Sq = 64;
  a.Sk = split_keys;
  a.D = u.D;
  a.causal = false;
  a.tensor_cores = a.wgmma = true;
  a.block_queries = 64;
  a.block_keys = block_keys;
  a.stages = k.stages ? k.stages : k.tma ? 3 : 2;
  a.tma = k.tma && a.stages > 1;
  a.warp_roles = k.warp_roles && a.tma;
  a.lse = true;
  a.accumulate_o = u.D == 256 || k.overlap; // (a separate accumulator spills at D = 256)
  a.overlap = k.overlap;
  a.persistent_blocks = k.persistent_blocks;
  a.last_wave_parts = k.last_wave_parts;
  AttentionParams shape = u;
  shape.causal = false;
  DecodeGrid grid{shape, u.Sk / split_keys};
  return attention_program(a, dtype, &grid);
}

bool overlap_pays(const AttentionParams &a) {
  if (!a.wgmma || !a.tma)
    return false;
  // D = 128: causal where the mask is one branch on the diagonal block (key blocks as tall as
  // the query blocks; H200, bench/RESULTS.md 2026-11-28 19:30: 1.05 ms against 1.23 without).
  if (a.D == 128)
    return a.block_queries == 128 && (!a.causal || a.block_keys == a.block_queries);
  // D = 256 with one warpgroup a block (H200, bench/RESULTS.md 2026-11-29 13:30, B=4 H=16
  // S=4096: causal 1.11 ms against 1.15 with the producer alone, not causal 2.05 against 2.10).
  return a.D == 256 && a.block_queries == 64;
}

AttentionParams take_overlap(AttentionParams a) {
  a.overlap = a.accumulate_o = true;
  a.stages = std::max<int64_t>(a.stages, 3); // a slot holds one step's V and the next's K
  a.warp_roles = true;
  // In turns where a block has two warpgroups, but causal in order (H200, bench/RESULTS.md
  // 2026-11-28 19:30: slower); causal longest first, in turns (2026-11-29 06:40: 0.981-0.985
  // ms against 0.998-1.002 in order, either alone level).
  a.ping_pong = a.block_queries == 128 && (!a.causal || a.reverse_blocks);
  return a;
}

bool turns_pay(const AttentionParams &a) {
  // H200, bench/RESULTS.md 2026-11-29 13:30, B=4 H=16 S=4096 D=256: 1.70 ms against 1.78 with
  // the producer alone, 1.84 with neither, 2.05 for the overlap with 64 queries a block (which
  // with 128 overflows shared memory); causal, 128 queries a block spill registers.
  return a.wgmma && a.tma && a.D == 256 && a.block_queries == 128 && !a.causal;
}

AttentionParams take_turns(AttentionParams a) {
  a.accumulate_o = a.warp_roles = a.ping_pong = true;
  return a;
}

AttentionParams attention_path(AttentionParams a, int64_t tc, int64_t block_queries,
                               int64_t block_keys, bool hopper) {
  if (tc == 3) {
    const bool fits = a.Sq % 64 == 0 && a.Sk % 64 == 0 && (a.D == 64 || a.D == 128 || a.D == 256);
    tc = hopper && fits ? 2 : 1;
  }
  a.tensor_cores = tc != 0;
  a.wgmma = tc == 2;
  a.tma = a.wgmma && a.stages > 1;
  if (a.wgmma) {
    // Two warpgroups a block at D = 128, and at D = 256 when not causal (where 128 queries
    // spill registers).
    const bool two_groups = a.D == 128 || (a.D == 256 && !a.causal);
    a.block_queries = block_queries ? block_queries : two_groups && a.Sq % 128 == 0 ? 128 : 64;
    a.block_keys = block_keys ? block_keys : a.D <= 128 && a.Sk % 128 == 0 ? 128 : 64;
  } else {
    a.block_queries = block_queries ? block_queries : 64;
    a.block_keys = block_keys ? block_keys : 16;
  }
  return a;
}

AttentionParams attention_choice(const ShapeParams &p, bool hopper) {
  AttentionParams shape = attention_shape(p);
  const int64_t stages = p.at("STAGES"); // 0: the path's
  shape.stages = stages ? stages : 2;
  AttentionParams a = attention_path(shape, p.at("TC"), p.at("BQ"), p.at("BK"), hopper);
  a.tma = a.tma && p.at("TMA") != 0; // the path's TMA ring unless TMA=0
  // PP, WS, ACC and OVL 2 (their defaults): the path's.
  const int64_t pp = p.at("PP"), ws = p.at("WS"), acc = p.at("ACC"), overlap = p.at("OVL");
  a.ping_pong = pp == 1;
  a.slack = p.at("SLACK");
  a.warp_roles = ws == 1;
  a.lse = p.at("LSE") != 0;
  const int64_t reverse = p.at("REV"); // 2 (the default): the overlap's choice below
  a.reverse_blocks = reverse == 1;
  const int64_t blocks = p.at("PB"), last_wave = p.at("LW");
  a.persistent_blocks = blocks;
  if (last_wave > 1) { // a split last round walks a persistent grid
    a.last_wave_parts = last_wave;
    a.persistent_blocks = blocks ? blocks : kPersistentBlocks;
  }
  // P V onto o at D = 256, where a separate accumulator (128 registers a thread) spills (H200,
  // bench/RESULTS.md 2026-11-29 13:30: 2.67 ms against 3.44 with 64 queries a block).
  a.accumulate_o = acc == 1 || (acc == 2 && a.wgmma && a.D == 256);
  if (overlap == 1 || (overlap == 2 && overlap_pays(a))) {
    if (overlap == 2 && reverse == 2 && a.causal && a.block_queries == 128)
      a.reverse_blocks = true;
    a = take_overlap(a);
    if (stages) // the ring, the turns and the producer as given
      a.stages = stages;
    if (pp != 2)
      a.ping_pong = pp == 1;
    if (ws != 2)
      a.warp_roles = ws == 1;
    // Not causal (every tile the same key blocks), with the producer warpgroup: a persistent
    // grid whose last round's tiles are split by their key blocks over the idle SMs (H200,
    // bench/RESULTS.md 2026-11-29 04:00: 1.73 ms against 1.76 at B=8 H=16 S=4096 D=128).
    if (overlap == 2 && !blocks && !last_wave && !a.causal && a.warp_roles &&
        !a.reverse_blocks && a.D == 128) {
      a.persistent_blocks = kPersistentBlocks;
      a.last_wave_parts = 8;
    }
  } else if (turns_pay(a)) {
    a = take_turns(a); // then P V onto o, the turns and the producer as given
    if (acc != 2)
      a.accumulate_o = acc == 1;
    if (pp != 2)
      a.ping_pong = pp == 1;
    if (ws != 2)
      a.warp_roles = ws == 1;
  }
  return a;
}

ScheduleEntry attention_entry() {
  ScheduleEntry e;
  e.name = "attention";
  e.description =
      "fused attention O = softmax(Q K^T / sqrt(D)) V, one kernel: B batches, H query heads "
      "over HKV key/value heads, SQ queries, SK keys, head dim D; CAUSAL 1 aligns the last "
      "query with the last key; BSHD 1 reads Q, K, V as (B, S, H, D) buffers through their "
      "strides (0: (B, H, S, D)); O is (B, H, SQ, D). The online softmax is a fold over blocks of "
      "BK keys, a thread per query and BQ queries a block; TC 1: Q K^T and P V on WMMA Tensor "
      "Cores (a warp per 32 queries; BQ 32, 64 or 128), 2: on Hopper's wgmma with the softmax "
      "and the states in a warpgroup's registers (BQ 64 or 128: 1 or 2 warpgroups a block "
      "sharing K's and V's tiles; D 64, 128 or 256; K's and V's tiles in a ring of STAGES, by "
      "TMA on mbarriers (TMA 1, the default: on the wgmma path with STAGES > 1) or cp.async "
      "(TMA 0; SLACK 1 refills a slot a key block after its release: STAGES >= 3); PP 1: two "
      "warpgroups issue their GEMMs in turns; WS 1: a producer warpgroup fills the TMA ring; "
      "PP and WS 2, their default: with the overlap below WS 1 and PP 1 (causal: PP 1 with "
      "the blocks reversed, REV), at D 256 not causal with BQ 128 both 1, else 0), "
      "0: CUDA cores, 3 (the default): 2 on a Hopper GPU where its schedule takes the shape, "
      "else 1. BK and BQ 0 (the default): the path's (wgmma: 128 and 128 where they fit, but "
      "BQ 64 at D 64 and causal at D 256, BK 64 at D 256; WMMA "
      "and CUDA cores: 16 and 64). LSE 1: a second output LSE (B, H, SQ), float32, the rows' "
      "natural logsumexp for a backward pass. ACC 1 (wgmma): P V accumulated onto o rescaled "
      "instead of a separate accumulator, 0: not, 2 (the default): at D 256 and with the "
      "overlap. OVL 1 (wgmma; implies ACC 1): the next key block's "
      "Q K^T issued with this block's P V and its softmax run beside it (FlashAttention-3's "
      "overlap inside a warpgroup), 0: not, 2 (the default): where it measured faster (wgmma, "
      "D 128 with BQ 128, causal only with BK 128; D 256 with BQ 64). STAGES 0 (the default): "
      "3 with the overlap, "
      "else 2. REV 1: the blocks in reverse, each head's query blocks longest first, 0: in "
      "order, 2 (the default): reversed where the overlap's default takes a causal fold of BQ "
      "128 (and then in turns). PB > 0 (wgmma with a producer warpgroup, not causal): a persistent "
      "grid of PB blocks walking the (batch x head, query block) tiles in order; LW > 1: its "
      "last round's tiles split by their key blocks into up to LW parts on the blocks the "
      "round leaves idle, the parts' softmax states merged (on PB blocks, or 132); LW 1: not "
      "split; PB and LW 0 (the default): a block a tile, or where OVL's default takes the "
      "overlap at D 128, not causal, with the producer: PB 132 and LW 8. In float8_e4m3 "
      "(wgmma; D and BK multiples of 128): Q, K, V, then q_descale, k_descale and v_descale "
      "(1-element float32: the scores times q_descale k_descale, O times v_descale), and O in "
      "float16; P rounded to e4m3 for P V, V transposed by a first kernel";
  e.default_shape = {{"B", 1},   {"H", 4},      {"HKV", 4},  {"SQ", 256}, {"SK", 256}, {"D", 64},
                     {"CAUSAL", 0}, {"BSHD", 1}, {"BK", 0}, {"BQ", 0},  {"TC", 3},
                     {"STAGES", 0}, {"PP", 2}, {"TMA", 1}, {"SLACK", 0}, {"WS", 2}, {"LSE", 0},
                     {"ACC", 2},   {"OVL", 2},     {"REV", 2}, {"PB", 0}, {"LW", 0}};
  e.nonnegative = {"CAUSAL", "BSHD", "TC",  "BK",  "BQ",  "PP",     "TMA",
                   "SLACK",  "WS",   "LSE", "ACC", "OVL", "STAGES", "REV", "PB", "LW"};
  e.choices = {{"CAUSAL", {0, 1}}, {"BSHD", {0, 1}}, {"TC", {0, 1, 2, 3}}, {"PP", {0, 1, 2}},
               {"TMA", {0, 1}},       {"SLACK", {0, 1}}, {"WS", {0, 1, 2}},
               {"LSE", {0, 1}}, {"ACC", {0, 1, 2}}, {"OVL", {0, 1, 2}}, {"REV", {0, 1, 2}}};
  e.dtypes = {Float(16), BFloat(16), Float8E4M3()};
  e.knobs = {{"BK", {16, 32, 64, 128}},
             {"BQ", {32, 64, 128}},
             {"STAGES", {1, 2, 3}},
             {"PP", {0, 1}},
             {"TMA", {0, 1}},
             {"SLACK", {0, 1}},
             {"WS", {0, 1}},
             {"OVL", {0, 1}},
             {"PB", {0, 132}},
             {"LW", {1, 8, 16}}};
  e.build = [](const ShapeParams &p, DataType dtype) {
    return attention(attention_choice(p, hopper_gpu()), dtype);
  };
  return e;
}

std::vector<int64_t> packed_lengths(int64_t sequences, int64_t longest, int64_t shortest) {
  user_check(shortest >= 1 && shortest <= longest, "attention_varlen")
      << "the sequences' lengths run from MINLEN to LMAX: 1 <= MINLEN <= LMAX, got MINLEN = "
      << shortest << " and LMAX = " << longest;
  std::vector<int64_t> lengths;
  for (int64_t b = 0; b < sequences; ++b)
    lengths.push_back(longest - (longest - shortest) * b / std::max<int64_t>(sequences - 1, 1));
  return lengths;
}

ScheduleEntry attention_varlen_entry() {
  ScheduleEntry e;
  e.name = "attention_varlen";
  e.description =
      "fused attention over packed sequences, as serving engines pass them: Q (N x H x D), K "
      "and V (N x HKV x D) hold B sequences one after another (N tokens in all), an int32 "
      "input `offsets` (B + 1) where each starts; O (N x H x D) packed likewise; each sequence "
      "attends to its own keys (CAUSAL 1: to those up to its query). The sequences' lengths "
      "run from LMAX (the first) down to MINLEN (the last), evenly; `tessel run` and the checks "
      "give those offsets. attention's fold over a padded (sequence, head, LMAX) grid, each "
      "tile read from its sequence's first token on (by TMA or cp.async; past the buffer's end "
      "zero), the keys past the sequence's end masked, then a kernel gathering each token's row "
      "of O; a block of queries past its sequence's end walks no keys. TC 2: the step on "
      "Hopper's wgmma (BQ 64 or 128, D 64, 128 or 256, LMAX a multiple of 64), with "
      "attention's STAGES, TMA, PP, WS and OVL (OVL 2, the default: its overlap of steps "
      "where attention takes it, in order of query blocks; not its persistent grid: the tiles "
      "walk different numbers of key blocks), 1: on WMMA "
      "(BQ 32, 64 or 128 queries a block, dividing LMAX; BK a multiple of 16 dividing it), 0: "
      "CUDA cores, 3 (the default): 2 on a Hopper GPU where it takes the shape, else 1. BQ and "
      "BK 0: the path's, as attention's. LSE 1: a second output LSE (H, N), float32, each "
      "token's natural logsumexp for a backward pass (FlashAttention's varlen layout).";
  e.default_shape = {{"B", 3},      {"H", 4},      {"HKV", 2}, {"LMAX", 128}, {"MINLEN", 40},
                     {"D", 64},     {"CAUSAL", 0}, {"TC", 3},  {"BQ", 0},     {"BK", 0},
                     {"STAGES", 0}, {"TMA", 1},    {"PP", 2},  {"WS", 2},     {"OVL", 2},
                     {"LSE", 0}};
  e.nonnegative = {"CAUSAL", "TC", "BQ", "BK", "STAGES", "TMA", "PP", "WS", "OVL", "LSE"};
  e.choices = {{"CAUSAL", {0, 1}}, {"TC", {0, 1, 2, 3}}, {"TMA", {0, 1}},
               {"PP", {0, 1, 2}},  {"WS", {0, 1, 2}},    {"OVL", {0, 1, 2}},
               {"LSE", {0, 1}}};
  e.dtypes = {Float(16), BFloat(16)};
  e.knobs = {{"BK", {16, 32, 64, 128}}, {"BQ", {32, 64, 128}}, {"STAGES", {1, 2, 3}},
             {"TMA", {0, 1}},           {"PP", {0, 1}},      {"WS", {0, 1}},
             {"OVL", {0, 1}}};
  e.build = [](const ShapeParams &p, DataType dtype) {
    const std::vector<int64_t> lengths =
        packed_lengths(p.at("B"), p.at("LMAX"), p.at("MINLEN"));
    // attention's choice of path and knobs at the padded shape, on a block a tile.
    ShapeParams padded = p;
    padded["SQ"] = padded["SK"] = p.at("LMAX");
    for (const char *k : {"BSHD", "SLACK", "PB", "LW"})
      padded[k] = 0;
    padded["ACC"] = 2;
    padded["REV"] = 0; // (the overlap's causal default would reverse the blocks: not timed)
    AttentionParams a = attention_choice(padded, hopper_gpu());
    a.persistent_blocks = a.last_wave_parts = 0;
    // The TMA ring with a producer warpgroup, the consumers not in turns (H200, B=8 H=16
    // LMAX=4096 MINLEN=1024 D=128, bench/RESULTS.md 2026-11-29 seventh session: 1.05 ms
    // against 1.17 without the producer (255 registers, spilling), 1.46 in turns, 1.21 by
    // cp.async; causal 0.66 against 0.69, 0.83, 0.71); with the overlap of steps where
    // attention takes it (eighth session: 0.90 ms against 1.08 without, causal 0.55 / 0.64).
    if (p.at("WS") == 2)
      a.warp_roles = a.tma;
    if (p.at("PP") == 2)
      a.ping_pong = false;
    std::vector<double> offsets = {0};
    double pairs = 0;
    for (int64_t len : lengths) {
      offsets.push_back(offsets.back() + double(len));
      pairs += a.causal ? double(len) * double(len + 1) / 2 : double(len) * double(len);
    }
    a.packed_tokens = int64_t(offsets.back());
    ScheduledProgram prog = attention(a, dtype);
    prog.given_inputs[3] = std::move(offsets);
    prog.flops = 4.0 * double(a.H * a.D) * pairs;
    return prog;
  };
  return e;
}

// Whether decoding at `u` fits attention_decode_wgmma (its checks, and 64-key blocks).
static bool decode_fits_wgmma(const AttentionParams &u) {
  return (!u.causal || u.Sq == 1) && u.H / u.Hkv * u.Sq <= 64 && u.Sk % 64 == 0 &&
         (u.D == 64 || u.D == 128 || u.D == 256);
}

ScheduleEntry attention_decode_entry() {
  ScheduleEntry e;
  e.name = "attention_decode";
  e.description =
      "decoding attention O = softmax(Q K^T / sqrt(D)) V for a few queries against a long "
      "key/value cache, two kernels: B batches, H query heads over HKV key/value heads, SQ "
      "queries, SK keys, head dim D (a multiple of 64); the keys split into chunks of SPLIT, "
      "each chunk's softmax for the head group's queries (max, sum, P V) computed apart, then "
      "a merge of the chunks; CAUSAL 1 aligns the last query with the last key; BSHD as "
      "attention's; O is (B, H, SQ, D). On CUDA cores (TC 0) a block per (chunk, batch, "
      "key/value head), SPLIT a multiple of 128; "
      "RING 2 or 3 brings K's and V's rows through that many shared-memory tiles by cp.async "
      "(0, the default: straight to registers); LANES threads share a key row (4, 8, 16), each "
      "loading ROWS rows of K and V in a stretch (0, the default: 16 straight to registers, 8 "
      "through a ring or prefetched); PF 1 (RING 0): each thread's rows "
      "contiguous and the next stretch's loaded before this one's arithmetic (a register "
      "copy pipelined over 2 stages); VROWS 1 (the default, where RING 0, PF 0 and the "
      "group's outputs fill the 128 threads) reads V's rows as K's, LANES threads a row, "
      "the partial sums added across threadIdx.y in shared memory, VROWS 0 a key a thread "
      "along x, summed by shuffles. TC 0: that decoder on CUDA cores; TC 2: on Hopper's "
      "wgmma, attention's fold with a key/value head's g query heads x SQ queries as a "
      "warpgroup's 64 rows (at most 64; not causal, or causal with one query) and each chunk "
      "of SPLIT keys a batch of the fold (SPLIT 0: 512 on CUDA cores; on wgmma the longest "
      "power of two up to 16384 dividing SK that leaves a block an SM), its blocks of BK keys "
      "through a ring of STAGES shared tiles, filled by the block's cp.async (TMA 0, the "
      "default; BK 0: 64, 128 at D 64; STAGES 0: 2) or by TMA (TMA 1; BK 0: 128, 64 at D 256; "
      "STAGES 0: 3) "
      "from a producer warpgroup (WS 1; 0: none), PB > 0 a persistent grid (TMA 1; LW > 1: "
      "its last round's chunks split into up to LW parts, as attention's), OVL 1 attention's "
      "overlap of steps (TMA 1: the next key block's Q K^T with this one's P V, the softmax "
      "beside them); TC 3 (the default): 2 on a Hopper GPU where it fits, else 0. The "
      "chunks' rows of O in float32 and their logsumexp merged as above";
  e.default_shape = {{"B", 2},     {"H", 8},      {"HKV", 2},     {"SQ", 1},
                     {"SK", 4096}, {"D", 128},    {"CAUSAL", 0},  {"BSHD", 1},
                     {"SPLIT", 0}, {"RING", 0},   {"LANES", 16},  {"ROWS", 0},
                     {"PF", 0},    {"VROWS", 1},  {"TC", 3},      {"BK", 0},
                     {"STAGES", 0}, {"TMA", 0},   {"WS", 1},      {"PB", 0},
                     {"LW", 0},     {"OVL", 0}};
  e.nonnegative = {"CAUSAL", "BSHD", "RING", "PF", "VROWS", "ROWS", "SPLIT", "BK", "STAGES",
                   "TMA", "WS", "PB", "LW", "TC", "OVL"};
  e.choices = {{"CAUSAL", {0, 1}}, {"BSHD", {0, 1}}, {"RING", {0, 2, 3}}, {"LANES", {4, 8, 16}},
               {"PF", {0, 1}},     {"VROWS", {0, 1}}, {"TC", {0, 2, 3}}, {"TMA", {0, 1}},
               {"WS", {0, 1}},     {"OVL", {0, 1}}};
  e.dtypes = {Float(16), BFloat(16)};
  // Both paths' knobs (the CUDA-core decoder's RING, LANES, ROWS, PF and VROWS; the wgmma
  // fold's BK and STAGES; SPLIT both's): the path TC 3 takes ignores the other's.
  e.knobs = {{"SPLIT", {256, 512, 1024, 4096, 16384}},
             {"RING", {0, 2, 3}},
             {"LANES", {4, 8, 16}},
             {"ROWS", {0, 4, 8, 16}},
             {"PF", {0, 1}},
             {"VROWS", {0, 1}},
             {"BK", {64, 128}},
             {"STAGES", {2, 3}}};
  e.build = [](const ShapeParams &p, DataType dtype) {
    AttentionParams shape = attention_shape(p);
    const int64_t tc = p.at("TC");
    if (tc == 2 || (tc == 3 && hopper_gpu() && decode_fits_wgmma(shape))) {
      DecodeWgmma k;
      k.split_keys = p.at("SPLIT");
      k.block_keys = p.at("BK");
      k.stages = p.at("STAGES");
      k.tma = p.at("TMA") != 0;
      k.warp_roles = p.at("WS") != 0;
      k.persistent_blocks = p.at("PB");
      k.last_wave_parts = p.at("LW");
      k.overlap = p.at("OVL") != 0;
      return attention_decode_wgmma(shape, dtype, k);
    }
    DecodeSchedule k;
    if (p.at("SPLIT"))
      k.split_keys = p.at("SPLIT");
    k.ring = int(p.at("RING"));
    k.lanes = p.at("LANES");
    k.rows = p.at("ROWS");
    k.prefetch = p.at("PF") != 0;
    k.v_rows = p.at("VROWS") != 0;
    return attention_decode(shape, dtype, k);
  };
  return e;
}

} // namespace tessel

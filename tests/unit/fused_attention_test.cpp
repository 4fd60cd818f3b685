// Attention fused into one kernel with a fold (fold_axis / fold_state / fold):
// the online softmax carried over blocks of keys, its running max m, sum l and
// output o (states of different shapes: per row, and per row and head
// dimension) updated once a block with the rescale exp(m_old - m_new). Written
// as the DSL writes it, scheduled with its primitives (a thread per query, the
// states in registers, the block's tensors computed at the fold's axis),
// checked on the executor against float64 and, where there is a GPU, on it.
// Causal attention skips the blocks above the diagonal through the fold's
// `where` (ReduceBounds bounds the fold loop), the diagonal block masked in the
// scores.
#include "AttentionReference.h"
#include "SassUtil.h"
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "runtime/Device.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tessel;
using tessel::test::expect_error;

namespace {

struct FusedAttention {
  Tensor Q, K, V, S, Rowmax, Mnew, P, Rowsum, PV, O;
  std::vector<Tensor> state; // m, l, o after the last block
  Schedule s;

  FusedAttention(const AttentionShape &a, int64_t Bk, int64_t queries_per_block = 32) {
    const int g = int(a.H / a.Hkv), bk = int(Bk), off = int(a.Sk - a.Sq);
    const int64_t T = a.Sk / Bk;
    auto view = [](int64_t B, int64_t S, int64_t H, int64_t D, const char *name) {
      return placeholder({B, H, S, D}, Float(16), name, {S * H * D, D, H * D, 1});
    };
    Q = view(a.B, a.Sq, a.H, a.D, "Q");
    K = view(a.B, a.Sk, a.Hkv, a.D, "K");
    V = view(a.B, a.Sk, a.Hkv, a.D, "V");
    const float scale = 1.0f / std::sqrt(float(a.D));
    auto visible = [&](const Expr &i, const Expr &j) { return j <= i + off; };

    // One block t of keys: its scores, their row max, and, from the running max
    // m, the new max, the probabilities, their row sum and their product with
    // the block of V.
    IterVar t = fold_axis({0, T}, "t");
    Tensor m = fold_state({a.B, a.H, a.Sq}, Float(32), "m");
    Tensor l = fold_state({a.B, a.H, a.Sq}, Float(32), "l");
    Tensor o = fold_state({a.B, a.H, a.Sq, a.D}, Float(32), "o");
    IterVar d = reduce_axis({0, a.D}, "d");
    S = compute({T, a.B, a.H, a.Sq, Bk},
                [&](Var tb, Var b, Var h, Var i, Var j) {
                  return sum(Q(b, h, i, d).astype(Float(32)) *
                                 K(b, h / g, tb * bk + j, d).astype(Float(32)) * scale,
                             {d});
                },
                "S", {"t", "b", "h", "i", "j"});
    IterVar j1 = reduce_axis({0, Bk}, "j1");
    Rowmax = compute({T, a.B, a.H, a.Sq},
                     [&](Var tb, Var b, Var h, Var i) {
                       return max(S(tb, b, h, i, j1), {j1},
                                  a.causal ? visible(i, tb * bk + j1) : Expr());
                     },
                     "rowmax", {"t", "b", "h", "i"});
    Mnew =
        compute({T, a.B, a.H, a.Sq},
                [&](Var tb, Var b, Var h, Var i) { return max(m(b, h, i), Rowmax(tb, b, h, i)); },
                "m_new", {"t", "b", "h", "i"});
    P = compute({T, a.B, a.H, a.Sq, Bk},
                [&](Var tb, Var b, Var h, Var i, Var j) {
                  Expr p = exp(S(tb, b, h, i, j) - Mnew(tb, b, h, i));
                  return a.causal ? if_then_else(visible(i, tb * bk + j), p, 0.0f) : p;
                },
                "P", {"t", "b", "h", "i", "j"});
    IterVar j2 = reduce_axis({0, Bk}, "j2");
    Rowsum = compute({T, a.B, a.H, a.Sq},
                     [&](Var tb, Var b, Var h, Var i) { return sum(P(tb, b, h, i, j2), {j2}); },
                     "rowsum", {"t", "b", "h", "i"});
    IterVar j3 = reduce_axis({0, Bk}, "j3");
    PV = compute({T, a.B, a.H, a.Sq, a.D},
                 [&](Var tb, Var b, Var h, Var i, Var dd) {
                   return sum(P(tb, b, h, i, j3) * V(b, h / g, tb * bk + j3, dd).astype(Float(32)),
                              {j3});
                 },
                 "PV", {"t", "b", "h", "i", "d"});

    // The online softmax: each block rescales l and o by exp(m_old - m_new).
    auto alpha = [&](const std::vector<Var> &v) {
      return exp(m(v[0], v[1], v[2]) - Mnew(t, v[0], v[1], v[2]));
    };
    std::function<Expr(const std::vector<Var> &)> where;
    if (a.causal) // the blocks with a key the row sees
      where = [&](const std::vector<Var> &v) { return t * bk <= v[2] + off; };
    state = fold(
        t,
        {{m, Expr(-INFINITY), [&](auto &v) { return Mnew(t, v[0], v[1], v[2]); }},
         {l, Expr(0.0f),
          [&](auto &v) { return l(v[0], v[1], v[2]) * alpha(v) + Rowsum(t, v[0], v[1], v[2]); }},
         {o, Expr(0.0f),
          [&](auto &v) {
            return o(v[0], v[1], v[2], v[3]) * alpha(v) + PV(t, v[0], v[1], v[2], v[3]);
          }}},
        "softmax", where);
    const Tensor &ofin = state[2], &lfin = state[1];
    O = compute({a.B, a.H, a.Sq, a.D},
                [&](Var b, Var h, Var i, Var dd) {
                  return (ofin(b, h, i, dd) / lfin(b, h, i)).astype(Float(16));
                },
                "O", {"b", "h", "i", "d"});

    // A block per (b, h, queries_per_block queries), a thread per query; the
    // fold per thread in registers, the block's scores and row max computed at
    // its axis too.
    s = create_schedule({O});
    auto [b, h, i, dd] = s[O].axes<4>();
    auto [io, ii] = s[O].split(i, queries_per_block);
    s[O].reorder({b, h, io, ii, dd});
    s[O].bind(s[O].fuse(s[O].fuse(b, h), io), thread_axis("blockIdx.x"));
    s[O].bind(ii, thread_axis("threadIdx.x"));
    Stage fold_stage = s[ofin];
    fold_stage.compute_at(s[O], ii).set_scope("local");
    for (const Tensor &x : {S, Rowmax})
      s[x].compute_at(fold_stage, t).set_scope("local");
  }
};

std::string describe(const AttentionShape &a, int64_t Bk) {
  return "B=" + std::to_string(a.B) + " Sq=" + std::to_string(a.Sq) +
         " Sk=" + std::to_string(a.Sk) + " H=" + std::to_string(a.H) +
         " Hkv=" + std::to_string(a.Hkv) + " D=" + std::to_string(a.D) +
         " Bk=" + std::to_string(Bk) + (a.causal ? " causal" : "");
}

const AttentionShape kShapes[] = {
    {1, 32, 32, 2, 2, 16, false}, {2, 32, 32, 4, 2, 8, true}, {1, 16, 48, 4, 1, 16, true}};

} // namespace

// The fold's float64 reference is attention's (the textbook's, computed here),
// and the fused kernel computes it on the executor: non-causal, causal with
// grouped-query heads, and multi-query with more keys than queries.
TEST(FusedAttention, MatchesTheTextbookOnTheExecutor) {
  for (const AttentionShape &a : kShapes) {
    SCOPED_TRACE(describe(a, 8));
    FusedAttention att(a, 8);
    CheckProblem p = make_check_problem({att.Q, att.K, att.V, att.O}, 3, 7);
    std::vector<double> want =
        textbook_attention(a, p.inputs[0].values, p.inputs[1].values, p.inputs[2].values);
    ASSERT_EQ(p.reference.size(), want.size());
    double worst = 0;
    for (size_t e = 0; e < want.size(); ++e) // O is rounded to float16 by the definition
      worst = std::max(worst, std::abs(p.reference[e] - want[e]) / (1 + std::abs(want[e])));
    EXPECT_LT(worst, 1.0 / 1024);
    CheckResult r = check_on_cpu(att.s, {att.Q, att.K, att.V, att.O}, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

// One kernel: the fold's states are registers of each thread, its key loop
// carries them, and the block's tensors are computed inside it; causal, the
// loop stops at the block's diagonal.
TEST(FusedAttention, OneKernelWithTheStatesInRegisters) {
  FusedAttention att({1, 64, 64, 2, 2, 16, true}, 16);
  LoweredModule m = lower(att.s, {att.Q, att.K, att.V, att.O});
  ASSERT_EQ(m.funcs.size(), 1u) << to_string(m);
  const std::string ir = to_string(m.funcs[0]);
  EXPECT_NE(ir.find("allocate(o, float32, [16]), storage_scope = local;"), std::string::npos) << ir;
  // Block x of 32 queries sees the key blocks 0 .. 2x + 1 (16 keys a block).
  EXPECT_NE(ir.find("for (t: int32, 0, floormod(blockIdx.x, 2) * 2 + 2)"), std::string::npos) << ir;
}

// Its CUDA compiles with NVRTC, the states' loops over the head dimension unrolled by the
// compiler into registers: nothing spills at D = 64 and 128.
TEST(FusedAttention, CompilesWithoutSpills) {
  for (int64_t D : {64, 128}) {
    FusedAttention att({1, 128, 128, 2, 2, D, true}, 16);
    LoweredModule m = lower(att.s, {att.Q, att.K, att.V, att.O});
    CompiledKernel k = tessel::test::compile_for_sm90(m, codegen_cuda(m), "fused_attention.cu");
    ASSERT_FALSE(k.cubin.empty()) << k.log;
    EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << "D=" << D << "\n" << k.log;
  }
}

// What the fold refuses, and how it says so.
TEST(FusedAttention, MistakesAreClearErrors) {
  IterVar t = fold_axis({0, 4}, "t");
  Tensor m = fold_state({8}, Float(32), "m");
  Tensor o = fold_state({8, 4}, Float(32), "o");
  Tensor X = placeholder({4, 8, 4}, Float(32), "X");
  // A state read at another index.
  expect_error(
      [&] {
        (void)fold(t, {{m, Expr(0.0f), [&](auto &v) { return m(v[0]) + m(Expr(0)); }}}, "f");
      },
      {"reads state 'm' at index 0 in dimension 0"});
  // The state with axes of its own read by another's update.
  expect_error(
      [&] {
        (void)fold(t,
                   {{m, Expr(0.0f), [&](auto &v) { return o(v[0], Expr(0)); }},
                    {o, Expr(0.0f), [&](auto &v) { return o(v[0], v[1]); }}},
                   "f");
      },
      {"which has axes of its own"});
  // A step tensor without the steps as its first axis.
  Tensor bad = compute(
      {8}, [&](Var i) { return m(i) * 2.0f; }, "bad");
  expect_error(
      [&] {
        (void)fold(t, {{m, Expr(0.0f), [&](auto &v) { return bad(v[0]); }}}, "f");
      },
      {"its first axis must be the fold's steps"});
  // Two states that read each other's old values.
  Tensor l = fold_state({8}, Float(32), "l");
  expect_error(
      [&] {
        (void)fold(t,
                   {{m, Expr(0.0f), [&](auto &v) { return l(v[0]); }},
                    {l, Expr(0.0f), [&](auto &v) { return m(v[0]); }}},
                   "f");
      },
      {"read each other's values before the step"});
  // The fold axis cannot be split; a step tensor left outside the fold is
  // refused.
  Tensor step = compute(
      {4, 8}, [&](Var tb, Var i) { return m(i) + X(tb, i, 0); }, "step");
  std::vector<Tensor> r = fold(t, {{m, Expr(0.0f), [&](auto &v) { return step(t, v[0]); }}}, "f");
  Tensor out = compute(
      {8}, [&](Var i) { return r[0](i) * 1.0f; }, "out");
  Schedule s = create_schedule({out});
  expect_error([&] { (void)s[r[0]].split(t, 2); }, {"is a fold axis"});
  s[step].compute_root().set_scope("global");
  expect_error([&] { (void)lower(s, {X, out}); }, {"s[step].compute_at(s[f], t)"});
}

TEST(FusedAttention, GpuMatchesTheReference) {
  if (!Device::available())
    GTEST_SKIP() << Device::unavailable_reason();
  for (const AttentionShape &a : {AttentionShape{2, 128, 128, 4, 2, 64, false},
                                  AttentionShape{2, 128, 128, 4, 1, 64, true}}) {
    SCOPED_TRACE(describe(a, 16));
    FusedAttention att(a, 16);
    CheckResult r = check_on_gpu(att.s, {att.Q, att.K, att.V, att.O}, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

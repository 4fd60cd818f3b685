// Attention written as tensor expressions from what the DSL has today (the unfused form the
// fused kernel of the attention issue will replace): Q, K and V as PyTorch passes them,
// (batch, seq, heads, dim) buffers read as (batch, heads, seq, dim) views through their strides;
// grouped-query heads as an index map (K and V of head h / g); causal attention as a predicate
// on the reductions over the keys (the query i sees keys j <= i + Sk - Sq), whose serial loops
// run only over the key blocks the predicate allows (ReduceBounds). Each stage a kernel of its
// own; the definition's float64 reference against attention computed here as the textbook writes
// it, and the scheduled program on the executor against that reference.
#include "AttentionReference.h"
#include "TestUtil.h"

#include "compiler/tessel.h"
#include "runtime/Check.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tessel;

namespace {

struct Attention {
  Tensor Q, K, V, S, Mx, E, L, P, O;
  Schedule s;

  explicit Attention(const AttentionShape &a) {
    const int64_t g = a.H / a.Hkv;
    // (B, S, H, D) buffers as (B, H, S, D) views.
    auto view = [](int64_t B, int64_t S, int64_t H, int64_t D, const char *name) {
      return placeholder({B, H, S, D}, Float(16), name, {S * H * D, D, H * D, 1});
    };
    Q = view(a.B, a.Sq, a.H, a.D, "Q");
    K = view(a.B, a.Sk, a.Hkv, a.D, "K");
    V = view(a.B, a.Sk, a.Hkv, a.D, "V");
    const float scale = 1.0f / std::sqrt(float(a.D));
    const int64_t off = a.Sk - a.Sq; // the last query sees every key
    auto visible = [&](const Expr &i, const Expr &j) {
      return a.causal ? j <= i + int(off) : Expr();
    };
    IterVar d = reduce_axis({0, a.D}, "d");
    S = compute(
        {a.B, a.H, a.Sq, a.Sk},
        [&](Var b, Var h, Var i, Var j) {
          return sum(Q(b, h, i, d).astype(Float(32)) * K(b, h / int(g), j, d).astype(Float(32)) *
                         scale,
                     {d});
        },
        "S", {"b", "h", "i", "j"});
    IterVar j1 = reduce_axis({0, a.Sk}, "j1");
    Mx = compute(
        {a.B, a.H, a.Sq},
        [&](Var b, Var h, Var i) { return max(S(b, h, i, j1), {j1}, visible(i, j1)); }, "Mx",
        {"b", "h", "i"});
    E = compute(
        {a.B, a.H, a.Sq, a.Sk},
        [&](Var b, Var h, Var i, Var j) {
          Expr e = exp(S(b, h, i, j) - Mx(b, h, i));
          return a.causal ? if_then_else(j <= i + int(off), e, 0.0f) : e;
        },
        "E", {"b", "h", "i", "j"});
    IterVar j2 = reduce_axis({0, a.Sk}, "j2");
    L = compute(
        {a.B, a.H, a.Sq}, [&](Var b, Var h, Var i) { return sum(E(b, h, i, j2), {j2}); }, "L",
        {"b", "h", "i"});
    // The probabilities, inlined into O's reduction.
    P = compute(
        {a.B, a.H, a.Sq, a.Sk},
        [&](Var b, Var h, Var i, Var j) { return E(b, h, i, j) / L(b, h, i); }, "P",
        {"b", "h", "i", "j"});
    IterVar j3 = reduce_axis({0, a.Sk}, "j3");
    O = compute(
        {a.B, a.H, a.Sq, a.D},
        [&](Var b, Var h, Var i, Var dd) {
          return sum(P(b, h, i, j3) * V(b, h / int(g), j3, dd).astype(Float(32)), {j3},
                     visible(i, j3));
        },
        "O", {"b", "h", "i", "d"});
    s = create_schedule({O});
    s[P].compute_inline();
    // O: a block per (b, h, block of 8 queries), a thread per (query, d); its key loop in
    // blocks of 8, whose causal bound the predicate gives.
    {
      auto [b, h, i, dd] = s[O].axes<4>();
      auto [io, ii] = s[O].split(i, 8);
      s[O].bind(s[O].fuse(s[O].fuse(b, h), io), thread_axis("blockIdx.x"));
      s[O].bind(s[O].fuse(ii, dd), thread_axis("threadIdx.x"));
      auto [jo, ji] = s[O].split(s[O].reduce_axis()[0], 8);
      (void)jo;
      (void)ji;
    }
    // The other stages: a block per (b, h), a thread per query.
    for (const Tensor &t : {S, Mx, E, L}) {
      std::vector<IterVar> ax = s[t].op_axis();
      s[t].bind(s[t].fuse(ax[0], ax[1]), thread_axis("blockIdx.x"));
      s[t].bind(ax[2], thread_axis("threadIdx.x"));
    }
  }

  CheckResult check() { return check_on_cpu(s, {Q, K, V, O}, 3); }
};

} // namespace

// Non-causal and causal, multi-head and grouped-query (4 query heads over 2 and over 1 key
// heads), more keys than queries (a decoding-like step of 8 queries over 40 keys).
TEST(AttentionDefinition, UnfusedMatchesTheReference) {
  for (AttentionShape a : {AttentionShape{1, 24, 24, 2, 2, 16, false},
                           AttentionShape{2, 16, 16, 4, 2, 8, true},
                           AttentionShape{1, 8, 40, 4, 1, 16, true}}) {
    SCOPED_TRACE("B=" + std::to_string(a.B) + " Sq=" + std::to_string(a.Sq) +
                 " Sk=" + std::to_string(a.Sk) + " H=" + std::to_string(a.H) +
                 " Hkv=" + std::to_string(a.Hkv) + " D=" + std::to_string(a.D) +
                 (a.causal ? " causal" : ""));
    Attention att(a);
    // The definition is attention: its float64 reference is the textbook's.
    CheckProblem p = make_check_problem({att.Q, att.K, att.V, att.O}, 3, 1);
    std::vector<double> want =
        textbook_attention(a, p.inputs[0].values, p.inputs[1].values, p.inputs[2].values);
    ASSERT_EQ(p.reference.size(), want.size());
    double worst = 0;
    for (size_t e = 0; e < want.size(); ++e)
      worst = std::max(worst, std::abs(p.reference[e] - want[e]));
    EXPECT_LT(worst, 1e-9);
    // Its schedule computes the definition.
    CheckResult r = att.check();
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

// Causal: O's key loop runs only over the blocks of keys its queries see (for (j3.outer, 0,
// ...) bounded by the block's queries), the boundary block masked by the predicate.
TEST(AttentionDefinition, CausalKeyLoopStopsAtTheDiagonal) {
  Attention att({1, 16, 16, 2, 2, 8, true});
  LoweredModule m = lower(att.s, {att.Q, att.K, att.V, att.O});
  std::string ir = to_string(m.funcs.back());
  EXPECT_NE(ir.find("for (j3.outer: int32, 0, floormod(blockIdx.x, 2) + 1)"), std::string::npos)
      << ir;
}

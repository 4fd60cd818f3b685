// Stage::specialize and the specialize_loops pass: a loop whose body compares its variable with
// the block's (a triangular mask) runs the iterations every thread passes without the
// comparison, decided by a predicate of the loop and the block; conditions the pass cannot
// decide stay; the results match float64 on the executor; causal attention evaluates its mask
// on the diagonal key blocks only, with the overlap inside a warpgroup too (a branch around the
// mask's statements; the row guards that hold on every step dropped).
#include "TestUtil.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "schedules/Attention.h"

#include <gtest/gtest.h>

using namespace tessel;
using tessel::test::count_of;
using tessel::test::expect_error;

namespace {

// C = A below and on the diagonal, 0 above: rows in blocks of 16 (a thread each), columns in
// blocks of 8 walked by loop jo, `cond` the mask (j <= i by default).
struct Triangle {
  Tensor A, C;
  Schedule s;
  IterVar jo;
  explicit Triangle(int64_t N, const std::function<Expr(Var, Var)> &cond = {}) {
    A = placeholder({N, N}, Float(32), "A");
    C = compute(
        {N, N},
        [&](Var i, Var j) { return if_then_else(cond ? cond(i, j) : j <= i, A(i, j), 0.0f); },
        "C");
    s = create_schedule({C});
    auto [i, j] = s[C].axes<2>();
    auto [io, ii] = s[C].split(i, 16);
    auto [jo_, ji] = s[C].split(j, 8);
    jo = jo_;
    s[C].reorder({io, jo, ii, ji});
    s[C].bind(io, thread_axis("blockIdx.x")).bind(ii, thread_axis("threadIdx.x"));
  }
};

} // namespace

// Column block jo is below the diagonal for all 16 rows of block x when 8 jo + 7 <= 16 x:
// those iterations store A without the mask.
TEST(SpecializeLoops, TriangularMaskOnlyOnTheDiagonal) {
  Triangle t(64);
  t.s[t.C].specialize(t.jo);
  LoweredModule m = lower(t.s, {t.A, t.C});
  const std::string ir = to_string(m);
  EXPECT_NE(ir.find("for (i1.outer: int32, 0, 8) {\n    if (i1.outer <= blockIdx.x * 2 - 1) {"),
            std::string::npos)
      << ir;
  EXPECT_EQ(count_of(ir, "if_then_else("), 1) << ir; // in the other branch only
  CheckResult r = check_on_cpu(t.s, {t.A, t.C}, 1);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

// Conditions it cannot decide for every thread and inner iteration by the loop's variable stay,
// and with none to drop the loop is unchanged: a mask on the row alone (no j.outer in it), one
// on the column modulo 16 (j.outer inside a floormod).
TEST(SpecializeLoops, LeavesWhatItCannotDecide) {
  for (auto cond : {std::function<Expr(Var, Var)>([](Var i, Var) { return i <= 40; }),
                    std::function<Expr(Var, Var)>([](Var, Var j) { return floormod(j, 16) < 8; })}) {
    Triangle t(64, cond);
    t.s[t.C].specialize(t.jo);
    LoweredModule m = lower(t.s, {t.A, t.C});
    const std::string ir = to_string(m);
    EXPECT_EQ(ir.find("if (i1.outer"), std::string::npos) << ir;
    EXPECT_EQ(count_of(ir, "if_then_else("), 1) << ir;
    CheckResult r = check_on_cpu(t.s, {t.A, t.C}, 1);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  Triangle t(32);
  auto [a, b] = t.s[t.C].split(t.jo, 2);
  (void)a;
  (void)b;
  expect_error([&] { t.s[t.C].specialize(t.jo); },
               {"specialize", "stage 'C'", "already split or fused away"});
}

// Causal attention on wgmma: the key blocks below the block's diagonal run without the mask (no
// if_then_else, no guarded row max); the branch with the mask is taken on the diagonal only.
TEST(SpecializeLoops, CausalAttentionMasksTheDiagonalBlocksOnly) {
  AttentionParams a;
  a.B = 1, a.H = 2, a.Hkv = 1, a.Sq = 256, a.Sk = 256, a.D = 64, a.causal = true;
  a.block_keys = 64, a.block_queries = 128, a.tensor_cores = a.wgmma = true, a.stages = 2;
  ScheduledProgram p = attention(a, Float(16));
  LoweredModule m = lower(p.schedule, p.args);
  const std::string ir = to_string(m);
  const size_t branch = ir.find("    if (t <= floormod(blockIdx.x, 2) * 2 - 1");
  ASSERT_NE(branch, std::string::npos) << ir;
  const size_t other = ir.find("\n    } else {\n", branch);
  ASSERT_NE(other, std::string::npos) << ir;
  const std::string unmasked = ir.substr(branch, other - branch);
  EXPECT_EQ(count_of(unmasked, "if_then_else("), 0) << unmasked;
  EXPECT_EQ(count_of(unmasked, "wgmma_thread_id(), 4) * 2 <"), 0) << unmasked;
  EXPECT_GT(count_of(ir.substr(other), "if_then_else("), 0) << ir;
}

// Causal attention with the overlap inside a warpgroup (overlap_steps), 128 queries and 128 keys
// a block: the loop keeps one body (the overlap cuts it at its two wgmma groups), so the branch
// goes around the mask's statements alone, taken on the diagonal block (step t's softmax is key
// block t + 1's: t <= x - 2 in the rotated loop, 1 <= x in the prologue's block 0); the rows'
// guards, which hold on every step of the triangular loop, are gone from both copies (o then
// takes P V onto itself unguarded: one set of registers). Checked on the executor.
TEST(SpecializeLoops, OverlappedStepsBranchAroundTheMaskOnly) {
  AttentionParams a;
  a.B = 1, a.H = 1, a.Hkv = 1, a.Sq = 512, a.Sk = 512, a.D = 128, a.causal = true;
  a.block_keys = 128, a.block_queries = 128, a.tensor_cores = a.wgmma = a.tma = true;
  a.overlap = a.accumulate_o = true, a.stages = 3;
  ScheduledProgram p = attention(a, Float(16));
  const std::string ir = to_string(lower(p.schedule, p.args));
  const size_t prologue = ir.find("  if (1 <= blockIdx.x) {\n    @wgmma_reg_set(Smask, 0, 128, 0, "
                                  "@wgmma_reg(S, 0, 128, 0))");
  ASSERT_NE(prologue, std::string::npos) << ir;
  const size_t loop = ir.find("for (t: int32, 0, blockIdx.x) {", prologue);
  ASSERT_NE(loop, std::string::npos) << ir;
  const size_t branch = ir.find("    if (t <= blockIdx.x - 2) {\n      @wgmma_reg_set(Smask, 0, "
                                "128, 0, @wgmma_reg(S, 0, 128, 0))",
                                loop);
  ASSERT_NE(branch, std::string::npos) << ir;
  const std::string body = ir.substr(loop);
  EXPECT_EQ(count_of(body, "} else {"), 1) << body; // the mask's, nothing else branched
  EXPECT_EQ(count_of(body, "@wgmma_commit()"), 3) << body; // the loop's two, the epilogue's P V
  EXPECT_EQ(count_of(ir, "if (t * 128 <="), 0) << ir;      // no row guard
  const size_t other = ir.find("\n    } else {\n", branch);
  ASSERT_NE(other, std::string::npos) << ir;
  EXPECT_EQ(count_of(ir.substr(branch, other - branch), "if_then_else("), 0) << ir;
  EXPECT_GT(count_of(ir.substr(other), "if_then_else("), 0) << ir;
  CheckResult r = check_on_cpu(p.schedule, p.args, 3);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

// Stage::reverse: a loop run from its last iteration to its first, the stage and the stages
// computed inside it seeing extent - 1 - the loop's value (a let inside the loop). On a block
// axis it orders the blocks (causal attention's query blocks longest first). The IR's let, the
// executor's results against float64 (a bound block axis, a serial data axis with its
// reduction's initialization, a stage computed inside), specialize_loops taking the let of a
// block index as uniform, codegen's C division of the reversed index (known non-negative), and
// the errors of misuse.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "schedules/Attention.h"

#include <gtest/gtest.h>

using namespace tessel;
using tessel::test::count_of;
using tessel::test::expect_error;

TEST(Reverse, BlockAxisAndComputedInside) {
  Tensor A = placeholder({64, 32}, Float(32), "A");
  Tensor B = compute({64, 32}, [&](Var i, Var j) { return A(i, j) * 2.0f; }, "B", {"i", "j"});
  Tensor C = compute({64, 32}, [&](Var i, Var j) { return B(i, j) + cast(Float(32), i); }, "C",
                     {"i", "j"});
  Schedule s = create_schedule({C});
  auto [i, j] = s[C].axes<2>();
  auto [io, ii] = s[C].split(i, 16);
  s[C].bind(io, thread_axis("blockIdx.x")).bind(ii, thread_axis("threadIdx.x"));
  s[C].reverse(io);
  s[B].compute_at(s[C], io).set_scope("shared");
  auto [bi, bj] = s[B].axes<2>();
  s[B].bind(bi, thread_axis("threadIdx.x"));
  std::string ir = to_string(lower(s, {A, C}));
  EXPECT_NE(ir.find("let i.outer.rev: int32 = 3 - blockIdx.x"), std::string::npos) << ir;
  EXPECT_NE(ir.find("A[i.outer.rev * 512"), std::string::npos) << ir; // B's copy: the tile too
  CheckResult r = check_on_cpu(s, {A, C}, 1);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

// A serial data axis of a reduction reversed: its initialization's loop binds the value too.
TEST(Reverse, SerialAxisOfAReduction) {
  Tensor A = placeholder({48, 40}, Float(32), "A");
  IterVar k = reduce_axis({0, 40}, "k");
  Tensor C = compute({48}, [&](Var i) { return sum(A(i, k), {k}); }, "C", {"i"});
  Schedule s = create_schedule({C});
  auto [io, ii] = s[C].split(s[C].op_axis(0), 8);
  s[C].reverse(io).reverse(ii);
  std::string ir = to_string(lower(s, {A, C}));
  EXPECT_NE(ir.find("let i.outer.rev: int32 = 5 - i.outer"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let i.inner.rev: int32 = 7 - i.inner"), std::string::npos) << ir;
  CheckResult r = check_on_cpu(s, {A, C}, 1);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

// Causal attention's blocks in reverse (knob REV); its key loop is still specialized (the mask
// on the diagonal blocks only): the let of the block index is uniform.
TEST(Reverse, CausalAttentionLongestFirst) {
  AttentionParams a{.B = 1, .Sq = 128, .Sk = 128, .H = 4, .Hkv = 2, .D = 64, .causal = true};
  a = attention_path(a, 2, 64, 64, true);
  a.reverse_blocks = true;
  ScheduledProgram p = attention(a, Float(16));
  std::string ir = to_string(lower(p.schedule, p.args));
  EXPECT_NE(ir.find("let b.h.fused.i.outer.fused.rev: int32 = 7 - blockIdx.x"), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("if (t <= floormod(b.h.fused.i.outer.fused.rev, 2) - 1) {"), std::string::npos)
      << ir;
  // CUDA: 7 - blockIdx.x is known non-negative (blockIdx.x < 8), so its divisions are C's.
  std::string cuda = codegen_cuda(lower(p.schedule, p.args));
  EXPECT_EQ(cuda.find("tessel_floordiv"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("b_h_fused_i_outer_fused_rev % 2"), std::string::npos) << cuda;
}

TEST(Reverse, Errors) {
  Tensor A = placeholder({64, 64}, Float(32), "A");
  Tensor C = compute({64, 64}, [&](Var i, Var j) { return A(i, j); }, "C", {"i", "j"});
  Schedule s = create_schedule({C});
  auto [i, j] = s[C].axes<2>();
  s[C].reverse(i);
  expect_error([&] { s[C].reverse(i); }, {"axis 'i'", "reversed already"});
  expect_error([&] { s[C].split(i, 8); }, {"axis 'i'", "is reversed", "split it before"});
  expect_error([&] { s[C].fuse(i, j); }, {"is reversed", "fuse it before"});
  Schedule r = create_schedule({C});
  auto [ri, rj] = r[C].axes<2>();
  auto [bi, ii] = r[C].split(ri, 16);
  auto [bj, jj] = r[C].split(rj, 16);
  r[C].reorder({bi, bj, ii, jj});
  r[C].rasterize(bi, bj, 2);
  expect_error([&] { r[C].reverse(bi); }, {"axis 'i.outer'", "tile axes of rasterize"});
  Schedule q = create_schedule({C});
  auto [qi, qj] = q[C].axes<2>();
  auto [qbi, qii] = q[C].split(qi, 16);
  auto [qbj, qjj] = q[C].split(qj, 16);
  q[C].reorder({qbi, qbj, qii, qjj});
  q[C].reverse(qbi);
  expect_error([&] { q[C].rasterize(qbi, qbj, 2); }, {"axis 'i.outer'", "is reversed"});
}

// Schedule primitives and what a user gets when misusing them.
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "TestUtil.h"
#include "schedules/Gemm.h"
#include "schedules/Registry.h"

#include <gtest/gtest.h>

using namespace tessel;
using tessel::test::expect_error;

namespace {

struct Gemm {
  GemmTensors g = gemm_definition(64, 64, 32, Float(32));
  Schedule s = create_schedule({g.C});
};

} // namespace

TEST(Schedule, SplitFuseReorderTrackLeaves) {
  Gemm t;
  Stage c = t.s[t.g.C];
  auto [i, j] = c.axes<2>();
  auto [io, ii] = c.split(i, 16);
  auto [jo, ji] = c.split_nparts(j, 4);
  EXPECT_EQ(io.name(), "i.outer");
  EXPECT_EQ(ji.name(), "j.inner");
  c.reorder({io, jo, ii, ji});
  IterVar f = c.fuse(io, jo);
  EXPECT_EQ(f.name(), "i.outer.j.outer.fused");
  std::vector<std::string> names;
  for (const IterVar &iv : c.leaf_iter_vars())
    names.push_back(iv.name());
  EXPECT_EQ(names, (std::vector<std::string>{"i.outer.j.outer.fused", "i.inner", "j.inner", "k"}));
}

TEST(Schedule, TileOrdersOuterThenInner) {
  Gemm t;
  Stage c = t.s[t.g.C];
  auto [i, j] = c.axes<2>();
  auto tiles = c.tile(i, j, 8, 8);
  EXPECT_EQ(c.leaf_iter_vars()[0].name(), "i.outer");
  EXPECT_EQ(c.leaf_iter_vars()[1].name(), "j.outer");
  EXPECT_TRUE(c.leaf_iter_vars()[3].same_as(tiles[3]));
}

TEST(Schedule, CacheStagesRewriteReaders) {
  Gemm t;
  Tensor CL = t.s.cache_write(t.g.C, "local");
  Tensor AS = t.s.cache_read(t.g.A, "shared", {CL});
  EXPECT_EQ(CL.name(), "C.local");
  EXPECT_EQ(AS.name(), "A.shared");
  EXPECT_EQ(t.s[AS].scope(), "shared");
  // The cache_write stage keeps the user's reduce axis, so it can still be split there.
  ASSERT_EQ(t.s[CL].reduce_axis().size(), 1u);
  EXPECT_EQ(t.s[CL].reduce_axis()[0].name(), "k");
  EXPECT_EQ(t.s[CL].op_axis(0).name(), "i.c");
  EXPECT_TRUE(t.s[t.g.C].reduce_axis().empty());
  std::string body = to_string(t.s[CL].op());
  EXPECT_NE(body.find("A.shared[i.c, k]"), std::string::npos) << body;
  EXPECT_EQ(t.s[t.g.C].op_axis(-1).name(), "j");
}

TEST(ScheduleErrors, AxisOfAnotherStage) {
  Gemm t;
  Tensor CL = t.s.cache_write(t.g.C, "local");
  IterVar other = t.s[CL].op_axis(0);
  expect_error([&] { t.s[t.g.C].split(other, 4); },
               {"split", "axis 'i.c' is not an axis of stage 'C'", "belongs to stage 'C.local'"});
}

// A split that does not divide, its tail shifted inwards: the last block starts at 50 - 16 = 34
// (overlapping the one before), so the body has no guard and still writes every element once
// or, in the overlap, twice with the same value.
TEST(Schedule, SplitShiftingTheTailInwards) {
  GemmTensors g = gemm_definition(50, 24, 8, Float(32));
  Schedule s = create_schedule({g.C});
  Stage c = s[g.C];
  auto [i, j] = c.axes<2>();
  auto [io, ii] = c.split(i, 16, TailStrategy::ShiftInwards);
  c.bind(io, thread_axis("blockIdx.x"));
  c.bind(ii, thread_axis("threadIdx.x"));
  std::string ir = to_string(lower(s, {g.A, g.B, g.C}));
  EXPECT_NE(ir.find("min(blockIdx.x * 16, 34)"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("if ("), std::string::npos) << ir;
  CheckResult r = check_on_cpu(s, {g.A, g.B, g.C}, 2);
  EXPECT_TRUE(r.compare.ok) << r.str();

  // Errors: the reduction (the overlap would be summed twice), a factor past the extent.
  GemmTensors h = gemm_definition(8, 8, 8, Float(32));
  Schedule t = create_schedule({h.C});
  expect_error([&] { t[h.C].split(t[h.C].reduce_axis()[0], 3, TailStrategy::ShiftInwards); },
               {"axis 'k'", "reduction axis cannot shift inwards"});
  t[h.C].split(t[h.C].op_axis(0), 16, TailStrategy::ShiftInwards);
  expect_error([&] { lower(t, {h.A, h.B, h.C}); },
               {"axis 'i' has extent 8, less than the split factor 16"});
}

TEST(ScheduleErrors, AxisAlreadySplitOrFused) {
  Gemm t;
  Stage c = t.s[t.g.C];
  auto [i, j] = c.axes<2>();
  c.split(i, 8);
  expect_error([&] { c.split(i, 4); }, {"axis 'i' of stage 'C' was already split or fused away"});
  IterVar f = c.fuse(c.leaf_iter_vars()[1], j);
  (void)f;
  expect_error([&] { c.vectorize(j); }, {"'j'", "already split or fused"});
}

TEST(ScheduleErrors, ReorderWithDuplicates) {
  Gemm t;
  auto [i, j] = t.s[t.g.C].axes<2>();
  expect_error([&] { t.s[t.g.C].reorder({j, i, j}); }, {"reorder", "'j' is listed twice"});
}

TEST(ScheduleErrors, FuseNeedsAdjacentLoops) {
  Gemm t;
  Stage c = t.s[t.g.C];
  auto [i, j] = c.axes<2>();
  IterVar k = c.reduce_axis()[0];
  expect_error([&] { c.fuse(j, i); }, {"fuse", "adjacent", "'j' is loop 1", "'i' is loop 0"});
  expect_error([&] { c.fuse(j, k); }, {"reduction axis with data-parallel axis"});
}

TEST(ScheduleErrors, ComputeAtNonConsumer) {
  GemmTensors g = gemm_definition(32, 32, 32, Float(32));
  Tensor D = compute({32, 32}, [&](Var i, Var j) { return g.C(i, j) * 2.0f; }, "D");
  Schedule s = create_schedule({D});
  Tensor AS = s.cache_read(g.A, "shared", {g.C});
  // A.shared is read by C; D reads C, so it consumes A.shared only through C: allowed.
  s[AS].compute_at(s[D], s[D].op_axis(0));
  expect_error([&] { s[g.C].compute_at(s[AS], s[AS].op_axis(0)); },
               {"stage 'A.shared' does not consume 'C'"});
}

TEST(ScheduleErrors, CycleOfAttachments) {
  GemmTensors g = gemm_definition(32, 32, 32, Float(32));
  Tensor D = compute({32, 32}, [&](Var i, Var j) { return g.C(i, j) * 2.0f; }, "D");
  Tensor E = compute({32, 32}, [&](Var i, Var j) { return D(i, j) + 1.0f; }, "E");
  Schedule s = create_schedule({E});
  s[g.C].compute_at(s[D], s[D].op_axis(0));
  // D consumes C and C is at D: putting D at C would close a loop.
  expect_error([&] { s[D].compute_at(s[g.C], s[g.C].op_axis(0)); },
               {"does not consume"});
}

TEST(ScheduleErrors, BindingOneThreadTagTwice) {
  Gemm t;
  auto [i, j] = t.s[t.g.C].axes<2>();
  t.s[t.g.C].bind(i, thread_axis("threadIdx.x"));
  expect_error([&] { t.s[t.g.C].bind(j, thread_axis("threadIdx.x")); },
               {"thread tag 'threadIdx.x' is already bound"});
  expect_error([] { thread_axis("threadIdx.w"); }, {"unknown thread tag 'threadIdx.w'"});
  expect_error([&] { t.s[t.g.C].bind(t.s[t.g.C].reduce_axis()[0], thread_axis("blockIdx.x")); },
               {"reduction axis 'k' is bound to blockIdx.x", "bind it to threadIdx.x"});
}

TEST(ScheduleErrors, VectorizeTooLongOrOfReduction) {
  GemmTensors g = gemm_definition(64, 128, 32, Float(32));
  Schedule s = create_schedule({g.C});
  auto [i, j] = s[g.C].axes<2>();
  (void)i;
  s[g.C].reorder({s[g.C].reduce_axis()[0], j});
  s[g.C].vectorize(j);
  expect_error([&] { lower(s, {g.A, g.B, g.C}); },
               {"vectorize", "axis 'j' has extent 128", "split it"});
  Gemm u;
  expect_error([&] { u.s[u.g.C].vectorize(u.s[u.g.C].reduce_axis()[0]); },
               {"reduction axis 'k' cannot be vectorized"});
}

TEST(ScheduleErrors, BadArguments) {
  Gemm t;
  expect_error([&] { t.s[t.g.C].split(t.s[t.g.C].op_axis(0), 0); }, {"factor must be positive"});
  expect_error([&] { t.s[t.g.C].set_scope("texture"); }, {"unknown storage scope 'texture'"});
  expect_error([&] { t.s[t.g.C].compute_inline(); }, {"reduction and cannot be inlined"});
  expect_error([&] { t.s[t.g.A].compute_inline(); }, {"'A' is a placeholder"});
  expect_error([&] { t.s.stage("Q"); }, {"no stage named 'Q'", "A, B, C"});
  expect_error([&] { t.s[t.g.C].storage_align(t.s[t.g.C].op_axis(0), 4, 4); },
               {"0 <= offset < factor"});
  expect_error([&] { t.s[t.g.C].axes<3>(); }, {"stage 'C' has 2 axes, not 3"});
  expect_error([&] { t.s[t.g.C].pipeline(3); },
               {"stage 'C'", "only intermediate computed stages can be pipelined"});
  Tensor AS = t.s.cache_read(t.g.A, "shared", {t.g.C});
  expect_error([&] { t.s[AS].pipeline(1); }, {"'A.shared'", "2 to 8 stages, got 1"});
  expect_error([&] { t.s[AS].pipeline(9); }, {"2 to 8 stages, got 9"});
  expect_error([&] { t.s[AS].pipeline(2, 1); }, {"'A.shared'", "slack of 1 needs 3 stages"});
}

// A slack is a TMA ring's: a ring the block's threads fill by cp.async meets at a barrier each
// iteration, which a slack cannot loosen.
TEST(ScheduleErrors, SlackOfACpAsyncRing) {
  const ScheduleEntry &e = find_schedule("gemm_wmma");
  ScheduledProgram p = e.build(resolve_shape(e, {{"M", 128}, {"N", 128}, {"K", 128}}), Float(16));
  p.schedule.stage("A.shared").pipeline(3, 1);
  expect_error([&] { lower(p.schedule, p.args); },
               {"slack (1) is a TMA ring's", "bulk_copy"});
}

// stream_loads marks loads from global memory: a copy of a shared tile, or a placeholder, has
// none to mark.
TEST(ScheduleErrors, StreamLoadsNeedAReadOfGlobalMemory) {
  Gemm t;
  Tensor AS = t.s.cache_read(t.g.A, "shared", {t.g.C});
  Tensor AL = t.s.cache_read(AS, "local", {t.g.C});
  expect_error([&] { t.s[AL].stream_loads(); },
               {"stage 'A.shared.local'", "reads no tensor in global memory",
                "the copy that reads the global tensor"});
  expect_error([&] { t.s[t.g.B].stream_loads(); }, {"stage 'B'", "not a computed stage"});
  t.s[AS].stream_loads(); // reads A in global memory
}

TEST(ScheduleErrors, LowerArguments) {
  Gemm t;
  expect_error([&] { lower(t.s, {t.g.A, t.g.C}); },
               {"input 'B' is read but not among the arguments"});
  expect_error([&] { lower(t.s, {t.g.A, t.g.B}); }, {"output 'C' is not among the arguments"});
  expect_error([&] { lower(t.s, {t.g.A, t.g.B, t.g.C, t.g.A}); }, {"'A' is listed twice"});
}

TEST(ScheduleErrors, ConsumerOutsideAttachPoint) {
  GemmTensors g = gemm_definition(32, 32, 32, Float(32));
  Schedule s = create_schedule({g.C});
  Tensor CL = s.cache_write(g.C, "local");
  Tensor AS = s.cache_read(g.A, "shared", {CL});
  Tensor AL = s.cache_read(AS, "local", {CL});
  auto [i, j] = s[g.C].axes<2>();
  s[CL].compute_at(s[g.C], j);
  s[AL].compute_at(s[g.C], i);
  s[AS].compute_at(s[g.C], j);
  expect_error([&] { lower(s, {g.A, g.B, g.C}); },
               {"stage 'A.shared' is computed at 'C' loop 'j'", "consumer 'A.shared.local'",
                "loop 'i', outside of it"});
}

TEST(Lower, PrintAfterUnknownStepIsAnError) {
  Gemm t;
  LowerOptions o;
  o.print_after = {"vectorise"};
  expect_error([&] { lower(t.s, {t.g.A, t.g.B, t.g.C}, o); },
               {"unknown step 'vectorise'", "schedule_ops"});
}

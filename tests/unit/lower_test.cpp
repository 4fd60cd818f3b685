#include "TestUtil.h"

#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "schedules/Conv2dTensorCoreTutorial.h"
#include "schedules/Gemm.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace tessel;
using tessel::test::expect_error;

namespace {

std::string printed(const ScheduledProgram &p) {
  std::ostringstream os;
  os << lower(p.schedule, p.args);
  return os.str();
}

bool has(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

} // namespace

// The printed programs of the basic schedules: one kernel each, with its launch, and the
// constructs each schedule exists for.
TEST(Lower, PrintsEachScheduleAsOneKernelWithItsConstructs) {
  std::string naive = printed(gemm_naive(64, 64, 32, Float(32)));
  EXPECT_TRUE(has(naive, "kernel default_function(A: float32[64, 32], B: float32[32, 64], C: "
                         "float32[64, 64])\n  // grid (4, 4, 1), block (16, 16, 1)"))
      << naive;
  EXPECT_TRUE(has(naive, "for (k: int32, 0, 32) {")) << naive;
  EXPECT_FALSE(has(naive, "shared")) << naive;

  std::string tiled = printed(gemm_shared(128, 128, 64, Float(32)));
  EXPECT_TRUE(has(tiled, "@cp_async(")) << tiled;
  EXPECT_TRUE(has(tiled, "@syncthreads()")) << tiled;
  EXPECT_TRUE(has(tiled, "if (k.outer < 3) {")) << tiled; // the next tile's prefetch
  EXPECT_FALSE(has(tiled, "threadIdx.x < ")) << tiled;    // the blocks divide 128: no guard

  // 1000 = 62.5 blocks of 16: the last block's threads past the edge are guarded.
  std::string ragged = printed(gemm_shared(1000, 1000, 1000, Float(32)));
  EXPECT_TRUE(has(ragged, "if (blockIdx.y * 16 + threadIdx.y < 250 && blockIdx.x * 16 + "
                          "threadIdx.x < 250) {"))
      << ragged;

  std::string conv = printed(conv2d_tensorcore_tutorial({}, {.tensorize = true}));
  EXPECT_TRUE(has(conv, "@wmma_mma_sync(Conv.wmma.accumulator")) << conv;
  EXPECT_TRUE(has(conv, "storage_scope = wmma.accumulator;")) << conv;
  for (const std::string *text : {&naive, &tiled, &ragged, &conv}) {
    size_t kernels = 0;
    for (size_t at = text->find("kernel "); at != std::string::npos;
         at = text->find("kernel ", at + 1))
      kernels += at == 0 || (*text)[at - 1] == '\n';
    EXPECT_EQ(kernels, 1u) << *text;
  }
}

// A global stage that is not an argument is a workspace. Computed at the root it is a kernel
// of its own; computed at a loop of a kernel's root stage (its region the block's share), it is
// written beside that kernel's result and read by later kernels: here the row sums R beside
// Y = A / R, and O = Y + R in a second kernel; at the block loop every thread computes all of
// R, inside the threads' loops too (each computes the block's share). Computed inside a stage
// that is itself computed at another, it is refused.
TEST(Lower, GlobalStageComputedInAKernelsRootIsAWorkspaceOfThatKernel) {
  auto program = [](bool inside_threads) {
    Tensor A = placeholder({8, 32}, Float(32), "A");
    IterVar k = reduce_axis({0, 32}, "k");
    Tensor R = compute({8}, [&](Var i) { return sum(A(i, k), {k}); }, "R");
    Tensor Y = compute({8, 32}, [&](Var i, Var j) { return A(i, j) / R(i); }, "Y");
    Tensor O = compute({8, 32}, [&](Var i, Var j) { return Y(i, j) + R(i); }, "O");
    Schedule s = create_schedule({O});
    auto [i, j] = s[Y].axes<2>();
    s[Y].bind(i, thread_axis("blockIdx.x")).bind(j, thread_axis("threadIdx.x"));
    s[R].compute_at(s[Y], inside_threads ? j : i);
    auto [oi, oj] = s[O].axes<2>();
    s[O].bind(oi, thread_axis("blockIdx.x")).bind(oj, thread_axis("threadIdx.x"));
    return std::make_pair(s, std::vector<Tensor>{A, O});
  };
  for (bool inside_threads : {false, true}) {
    auto [s, args] = program(inside_threads);
    LoweredModule m = lower(s, args);
    ASSERT_EQ(m.funcs.size(), 2u) << m;
    EXPECT_EQ(m.num_workspaces, 2u); // Y and R
    CheckResult r = check_on_cpu(s, args, 1);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  // R inside Y, Y (local) inside O's kernel: R would be written in a stage's scope, not the
  // kernel's.
  Tensor A = placeholder({8, 32}, Float(32), "A");
  IterVar k = reduce_axis({0, 32}, "k");
  Tensor R = compute({8}, [&](Var i) { return sum(A(i, k), {k}); }, "R");
  Tensor Y = compute({8, 32}, [&](Var i, Var j) { return A(i, j) / R(i); }, "Y");
  Tensor O = compute({8, 32}, [&](Var i, Var j) { return Y(i, j) + 1.0f; }, "O");
  Schedule s = create_schedule({O});
  auto [oi, oj] = s[O].axes<2>();
  s[O].bind(oi, thread_axis("blockIdx.x")).bind(oj, thread_axis("threadIdx.x"));
  s[Y].compute_at(s[O], oj).set_scope("local");
  s[R].compute_at(s[Y], s[Y].op_axis(1));
  expect_error([&] { lower(s, {A, O}); },
               {"stage 'R' is stored in global memory but computed at loop", "of stage 'Y'",
                "itself computed inside another stage", "root stage"});
}

// CUDA's launch limits are checked at lowering (compiler/lower/LaunchLimits.h): a kernel that
// could never launch is a tessel::Error naming the stage, axis or buffer and what to change,
// where it used to pass `tessel lower`, `compile` and `export` and fail at cuLaunchKernel.
#include "TestUtil.h"

#include "compiler/lower/LaunchLimits.h"
#include "compiler/lower/Lower.h"
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "schedules/Registry.h"

#include <gtest/gtest.h>

using namespace tessel;
using tessel::test::expect_error;

namespace {

LoweredModule lower_registered(const std::string &name, const ShapeParams &shape,
                               const LowerOptions &options = {}) {
  const ScheduleEntry &e = find_schedule(name);
  ScheduledProgram p = e.build(resolve_shape(e, shape), e.dtypes.at(0));
  return lower(p.schedule, p.args, options);
}

// y[i] = x[i] * 2 with its axis split by `threads` and bound to blockIdx / threadIdx `tags`.
LoweredModule scale(int64_t n, int64_t threads, const char *block_tag, const char *thread_tag) {
  Tensor x = placeholder({n}, Float(32), "x");
  Tensor y = compute({n}, [&](Var i) { return x(i) * 2.0f; }, "y");
  Schedule s = create_schedule({y});
  auto [bo, bi] = s[y].split(s[y].axes<1>()[0], threads);
  s[y].bind(bo, thread_axis(block_tag)).bind(bi, thread_axis(thread_tag));
  return lower(s, {x, y});
}

// y = x + 1, a block of `tile` floats of x staged in shared memory at a time.
LoweredModule shared_tile(int64_t tile) {
  Tensor x = placeholder({1 << 20}, Float(32), "x");
  Tensor y = compute({1 << 20}, [&](Var i) { return x(i) + 1.0f; }, "y");
  Schedule s = create_schedule({y});
  Tensor xs = s.cache_read(x, "shared", {y});
  auto [bo, bi] = s[y].split(s[y].axes<1>()[0], tile);
  s[y].bind(bo, thread_axis("blockIdx.x"));
  s[xs].compute_at(s[y], bo);
  return lower(s, {x, y});
}

} // namespace

TEST(LaunchLimits, GridOverTheLimitNamesTheAxis) {
  // gemm_naive binds M/16 row blocks to blockIdx.y: 65537 of them.
  expect_error([] { lower_registered("gemm_naive", {{"M", 1048592}, {"N", 16}, {"K", 1}}); },
               {"kernel 'default_function' launches 65537 blocks along blockIdx.y",
                "axis 'i.outer' of stage 'C', bound to blockIdx.y", "limit of 65535",
                "bind that axis to blockIdx.x"});
  EXPECT_NO_THROW(lower_registered("gemm_naive", {{"M", 1048560}, {"N", 16}, {"K", 1}}));
  EXPECT_NO_THROW(scale(int64_t(65536) * 256, 256, "blockIdx.x", "threadIdx.x"));
  expect_error([] { scale(int64_t(65536) * 256, 256, "blockIdx.z", "threadIdx.x"); },
               {"65536 blocks along blockIdx.z", "axis 'i0.outer' of stage 'y'"});
}

TEST(LaunchLimits, BlockOverTheLimitNamesTheAxis) {
  expect_error([] { scale(1 << 20, 2048, "blockIdx.x", "threadIdx.x"); },
               {"2048 threads along threadIdx.x", "axis 'i0.inner' of stage 'y'",
                "limit of 1024"});
  expect_error([] { scale(1 << 20, 128, "blockIdx.x", "threadIdx.z"); },
               {"128 threads along threadIdx.z", "limit of 64"});
}

TEST(LaunchLimits, SharedMemoryAndWorkspace) {
  // A shared tile of 300 KiB: more than any GPU gives a block.
  expect_error([&] { shared_tile(76800); },
               {"needs 307200 bytes (300 KiB) of shared memory per block", "227 KiB"});

  // Split-K of more parts than K has steps was taken (SK=100000: terabytes of partial sums).
  expect_error([] { lower_registered("gemm_wgmma", {{"M", 4096}, {"N", 4096}, {"K", 4096}, {"SK", 100000}}); },
               {"split_k (knob SK) = 100000 parts of K=4096", "only 64 steps",
                "give at most 64 parts"});
  // Within the steps, but partial sums of 64 x 4096 x 4096 floats: 4 GiB.
  LowerOptions small;
  small.max_workspace_bytes = int64_t(1) << 30;
  expect_error([&] { lower_registered("gemm_wgmma", {{"M", 4096}, {"N", 4096}, {"K", 4096}, {"SK", 64}}, small); },
               {"the module needs 4 GiB of workspace", "'C_part', 4 GiB", "limit of 1 GiB",
                "max_workspace_bytes", "fewer parts"});
  EXPECT_NO_THROW(lower_registered("gemm_wgmma", {{"M", 4096}, {"N", 4096}, {"K", 4096}, {"SK", 4}}, small));
}

TEST(LaunchLimits, SharedMemoryOfEachArchitecture) {
  EXPECT_EQ(max_shared_bytes_per_block("sm_90a"), 227 * 1024);
  EXPECT_EQ(max_shared_bytes_per_block("sm_80"), 163 * 1024);
  EXPECT_EQ(max_shared_bytes_per_block("sm_86"), 99 * 1024);
  EXPECT_EQ(max_shared_bytes_per_block("sm_75"), 64 * 1024);
  EXPECT_EQ(max_shared_bytes_per_block("sm_120"), 0) << "not known: not checked";
  // 200 KiB of shared memory: a block on sm_90 has it, on sm_80 not. The build says so.
  LoweredModule m = shared_tile(51200);
  EXPECT_EQ(target_arch(m, "sm_90"), "sm_90");
  expect_error([&] { target_arch(m, "sm_80"); },
               {"needs 204800 bytes of shared memory per block", "on sm_80 can have at most 166912"});
}

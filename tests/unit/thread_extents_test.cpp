// Stages of one kernel that bind a thread axis with different extents: the kernel launches the
// largest, the stages under a smaller binding are guarded at their innermost statements
// (ThreadExtents), outside of which the barriers between stages stay.
#include "TestUtil.h"

#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "schedules/Gemm.h"

#include <gtest/gtest.h>

using namespace tessel;

namespace {

// gemm_shared's tiling (64 x 64 blocks of 16 x 16 threads, K steps of 16), but A's shared tile
// is copied by 8 x 16 threads and B's by 4 x 32: the block launches 16 x 32 threads; the copy
// of A runs on threadIdx.y < 8, the copy of B on threadIdx.y < 4, the GEMM on threadIdx.x < 16.
ScheduledProgram gemm_uneven_copies(int64_t M, int64_t N, int64_t K, bool double_buffer) {
  GemmTensors g = gemm_definition(M, N, K, Float(32));
  Schedule s = create_schedule({g.C});
  Tensor CL = s.cache_write(g.C, "local");
  Tensor AS = s.cache_read(g.A, "shared", {CL});
  Tensor BS = s.cache_read(g.B, "shared", {CL});
  IterVar ty_axis = thread_axis("threadIdx.y"), tx_axis = thread_axis("threadIdx.x");
  auto [i, j] = s[g.C].axes<2>();
  auto [bi, i_in] = s[g.C].split(i, 64);
  auto [bj, j_in] = s[g.C].split(j, 64);
  auto [ty, ii] = s[g.C].split_nparts(i_in, 16);
  auto [tx, ji] = s[g.C].split_nparts(j_in, 16);
  s[g.C].reorder({bi, bj, ty, tx, ii, ji});
  s[g.C].bind(bi, thread_axis("blockIdx.y"));
  s[g.C].bind(bj, thread_axis("blockIdx.x"));
  s[g.C].bind(ty, ty_axis);
  s[g.C].bind(tx, tx_axis);
  s[CL].compute_at(s[g.C], tx);
  auto [ko, ki] = s[CL].split(s[CL].reduce_axis()[0], 16);
  auto [ci, cj] = s[CL].axes<2>();
  s[CL].reorder({ko, ki, ci, cj});
  const std::tuple<Tensor, int, int> copies[] = {{AS, 8, 16}, {BS, 4, 32}};
  for (const auto &[t, rows, cols] : copies) {
    s[t].compute_at(s[CL], ko);
    auto [r, c] = s[t].axes<2>();
    IterVar f = s[t].fuse(r, c);
    auto [fo, fi] = s[t].split(f, rows * cols);
    auto [fty, ftx] = s[t].split_nparts(fi, rows);
    s[t].bind(fty, ty_axis);
    s[t].bind(ftx, tx_axis);
    if (double_buffer)
      s[t].double_buffer();
  }
  return gemm_program(g, s, M, N, K);
}

} // namespace

TEST(ThreadExtents, KernelLaunchesTheLargestAndGuardsTheRest) {
  ScheduledProgram p = gemm_uneven_copies(128, 64, 64, false);
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(m.funcs.size(), 1u);
  EXPECT_EQ(m.funcs[0].launch.block, (std::array<int64_t, 3>{32, 16, 1}));
  std::string ir = to_string(m);
  EXPECT_NE(ir.find("if (threadIdx.x < 16 && threadIdx.y < 8)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("if (threadIdx.y < 4)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("if (threadIdx.x < 16)"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("\"thread_extent\" = 8"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("\"thread_extent\" = 4;"), std::string::npos) << ir;
  // Barriers are never under a guard: every thread reaches them.
  for (size_t at = ir.find("@syncthreads"); at != std::string::npos;
       at = ir.find("@syncthreads", at + 1)) {
    size_t line = ir.rfind('\n', at);
    std::string indent = ir.substr(line + 1, at - line - 1);
    size_t guard = ir.rfind("if (thread", at);
    if (guard == std::string::npos)
      continue;
    size_t guard_line = ir.rfind('\n', guard);
    EXPECT_GT(guard - guard_line - 1, indent.size()) << "a barrier inside a guard:\n" << ir;
  }
}

TEST(ThreadExtents, UnevenCopiesMatchTheReferenceOnTheExecutor) {
  for (bool db : {false, true}) {
    SCOPED_TRACE(db ? "double-buffered" : "single-buffered");
    ScheduledProgram p = gemm_uneven_copies(128, 64, 48, db);
    CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs, 7);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

// gemm_wmma: the Tensor Core GEMM lowered and run on the CPU executor against a float64
// reference, its lowered IR checked for WMMA calls and the absence of scalar fragment accesses,
// compiled by NVRTC (and its SASS checked for HMMA where cuobjdump exists); then the errors
// of gemm_wmma's shape checks and of tensorize misuse on hand-written schedules.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Nvrtc.h"
#include "runtime/interp/Executor.h"
#include "schedules/GemmWmma.h"
#include "schedules/WmmaIntrinsics.h"

#include "ExactGemm.h"
#include "SassUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

using namespace tessel;
using tessel::test::count_of;
using tessel::test::expect_error;

namespace {

void check_on_executor(const ScheduledProgram &p, int64_t M, int64_t N, int64_t K) {
  EXPECT_EQ(tessel::test::exact_gemm_mismatch(lower(p.schedule, p.args), M, N, K), "");
}

} // namespace

TEST(GemmWmma, CpuExecutorMatchesReference) {
  check_on_executor(gemm_wmma(64, 64, 32), 64, 64, 32);
  check_on_executor(gemm_wmma(128, 128, 64), 128, 128, 64);
  check_on_executor(gemm_wmma(64, 192, 48), 64, 192, 48); // non-square, K step 16
  check_on_executor(gemm_wmma(48, 32, 80), 48, 32, 80);   // 3 fragments per warp
}

// bfloat16 A and B on WMMA fragments (sm_80 and later; float32 accumulator): exact on the
// executor, bf16 fragments in the CUDA, compiled for sm_80.
TEST(GemmWmma, BFloat16Inputs) {
  ScheduledProgram p = gemm_wmma(128, 128, 64, gemm_wmma_tiles(128, 128, 64), BFloat(16));
  EXPECT_EQ(p.args[0].dtype(), BFloat(16));
  check_on_executor(p, 128, 128, 64);
  std::string src = codegen_cuda(lower(p.schedule, p.args));
  EXPECT_NE(src.find("__nv_bfloat16, nvcuda::wmma::row_major>"), std::string::npos) << src;
  CompileOptions o;
  o.arch = "sm_80";
  EXPECT_FALSE(nvrtc_compile(src, nvrtc_options(o), "gemm_wmma_bf16.cu").cubin.empty());
  expect_error([] { gemm_wmma(64, 64, 32, gemm_wmma_tiles(64, 64, 32), Float(32)); },
               {"gemm_wmma", "must be float16 or bfloat16, got float32"});
}

TEST(GemmWmma, ExplicitTilesAndDoubleBuffer) {
  GemmWmmaTiles t{.block_row_warps = 1, .block_col_warps = 2, .warp_row_tiles = 2,
                  .warp_col_tiles = 2, .chunk = 1};
  check_on_executor(gemm_wmma(64, 128, 32, t), 64, 128, 32);
  GemmWmmaTiles db;
  db.stages = 2;
  check_on_executor(gemm_wmma(128, 128, 96, db), 128, 128, 96);
}

// N-stage pipelines (cp.async copies, one barrier per K step) at K loops longer and shorter
// than the pipeline: the executor lands each copy only at the cp_async_wait that completes it.
TEST(GemmWmma, PipelinedStagesMatchReference) {
  for (int stages : {2, 3, 4})
    for (int K : {32, 64, 160}) {
      GemmWmmaTiles t{.block_row_warps = 1, .block_col_warps = 2, .warp_row_tiles = 2,
                      .warp_col_tiles = 1, .chunk = 1, .stages = stages};
      SCOPED_TRACE("stages " + std::to_string(stages) + ", K " + std::to_string(K));
      check_on_executor(gemm_wmma(64, 64, K, t), 64, 64, K);
    }
}

// 128 x 256 tiles, K step 64, 4 stages: 4 x (128 x 72 + 64 x 264) halves = 208 KiB of shared
// memory, requested dynamically at launch.
TEST(GemmWmma, DeepPipelineUsesDynamicSharedMemory) {
  GemmWmmaTiles t{.block_row_warps = 2, .block_col_warps = 4, .warp_row_tiles = 4,
                  .warp_col_tiles = 4, .chunk = 4, .stages = 4};
  ScheduledProgram p = gemm_wmma(512, 512, 512, t);
  LoweredModule m = lower(p.schedule, p.args);
  EXPECT_EQ(m.funcs[0].launch.dynamic_shared_bytes, 4 * (128 * 72 + 64 * 264) * 2);
  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("extern __shared__"), std::string::npos) << src;
  EXPECT_NE(src.find("tessel_cp_async_wait<2>();"), std::string::npos) << src;
  CompileOptions o;
  o.arch = "sm_90";
  EXPECT_FALSE(nvrtc_compile(src, nvrtc_options(o), "gemm_wmma_deep.cu").cubin.empty());
  check_on_executor(gemm_wmma(256, 256, 320, t), 256, 256, 320);
}

TEST(GemmWmma, PipelinedIrWaitsThenSyncsOncePerStep) {
  GemmWmmaTiles t;
  t.stages = 3;
  ScheduledProgram p = gemm_wmma(256, 256, 256, t);
  std::string ir = to_string(lower(p.schedule, p.args));
  // Three stages of the padded 128 x 40 A tile and 32 x 136 B tile.
  EXPECT_NE(ir.find("allocate(A.shared, float16, [15360])"), std::string::npos) << ir;
  EXPECT_NE(ir.find("allocate(B.shared, float16, [13056])"), std::string::npos) << ir;
  EXPECT_NE(ir.find("@cp_async_wait(1)\n    @syncthreads()\n    if (k.outer < 6)"),
            std::string::npos) << ir;
  EXPECT_EQ(count_of(ir, "@syncthreads()"), 1) << ir;
  EXPECT_EQ(count_of(ir, "@cp_async_commit()"), 3) << ir;
  EXPECT_NE(ir.find(", 16, true)"), std::string::npos) << ir; // 16-byte copies
}

TEST(GemmWmma, TilesFollowTheShape) {
  GemmWmmaTiles big = gemm_wmma_tiles(1024, 1024, 1024);
  EXPECT_EQ(big.block_m(), 128);
  EXPECT_EQ(big.block_n(), 128);
  EXPECT_EQ(big.block_k(), 32);
  EXPECT_EQ(big.warps(), 8);
  GemmWmmaTiles small = gemm_wmma_tiles(64, 64, 64);
  EXPECT_EQ(small.block_m(), 64);
  EXPECT_EQ(small.block_n(), 64);
  GemmWmmaTiles odd = gemm_wmma_tiles(1008, 1024, 48);
  EXPECT_EQ(1008 % odd.block_m(), 0);
  EXPECT_EQ(odd.block_k(), 16);
}

// The lowered IR holds the four WMMA calls and no element-wise access of a fragment scope.
TEST(GemmWmma, LoweredIrUsesWmmaCallsOnly) {
  ScheduledProgram p = gemm_wmma(128, 128, 64);
  std::string ir = to_string(lower(p.schedule, p.args));
  for (const char *call : {"@wmma_fill_fragment(", "@wmma_load_matrix_sync(", "@wmma_mma_sync(",
                           "@wmma_store_matrix_sync("})
    EXPECT_NE(ir.find(call), std::string::npos) << call << "\n" << ir;
  for (const char *scalar : {".wmma.matrix_a[", ".wmma.matrix_b[", ".wmma.accumulator["})
    EXPECT_EQ(ir.find(scalar), std::string::npos) << scalar << "\n" << ir;
  // Shared tiles: rows padded by 8 halves, filled with 8-lane vector copies.
  EXPECT_NE(ir.find("allocate(A.shared, float16, [5120])"), std::string::npos) << ir; // 128 x 40
  EXPECT_NE(ir.find("allocate(B.shared, float16, [4352])"), std::string::npos) << ir; // 32 x 136
  EXPECT_NE(ir.find(", 40, \"row_major\")"), std::string::npos) << ir;
  EXPECT_NE(ir.find(", 136, \"row_major\")"), std::string::npos) << ir;
  EXPECT_EQ(count_of(ir, ", 1, 8)]"), 4) << ir; // ramp(..., 1, 8): load and store, A and B
  // One barrier after the tiles are loaded and one before they are overwritten.
  EXPECT_EQ(count_of(ir, "@syncthreads()"), 2) << ir;
  EXPECT_NE(ir.find("// grid (1, 1, 1), block (32, 2, 4)"), std::string::npos) << ir;

  // Before tensorize the same schedule is plain loops over the fragment buffers.
  GemmWmmaTiles plain;
  plain.tensorize = false;
  ScheduledProgram q = gemm_wmma(128, 128, 64, plain);
  std::string before = to_string(lower(q.schedule, q.args));
  EXPECT_EQ(before.find("@wmma_"), std::string::npos) << before;
  EXPECT_NE(before.find(".wmma.accumulator["), std::string::npos) << before;
}

TEST(GemmWmma, CudaSourceAndNvrtcForSm80AndSm90) {
  ScheduledProgram p = gemm_wmma(1024, 1024, 1024);
  LoweredModule m = lower(p.schedule, p.args);
  std::string src = codegen_cuda(m);
  for (const char *text :
       {"#include <mma.h>", "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> ",
        "nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major>",
        "nvcuda::wmma::fill_fragment(", "nvcuda::wmma::load_matrix_sync(",
        "nvcuda::wmma::mma_sync(", "nvcuda::wmma::store_matrix_sync(",
        "nvcuda::wmma::mem_row_major", "*(uint4*)(A_shared", "__launch_bounds__(256)"})
    EXPECT_NE(src.find(text), std::string::npos) << text << "\n" << src;

  if (!tessel::test::compiles_for_sm80_and_sm90(src, "gemm_wmma", {"HMMA"}))
    GTEST_SKIP() << tessel::test::kNoCuobjdump;
}

// Any shape: dimensions that are not whole fragments run on padded copies (GemmPadding.h), in
// float16 and bfloat16; exact on the executor.
TEST(GemmWmma, RaggedShapesRunOnPaddedCopies) {
  check_on_executor(gemm_wmma(100, 99, 77), 100, 99, 77);
  check_on_executor(gemm_wmma(48, 40, 64), 48, 40, 64); // N alone: B padded, C's block copied
  check_on_executor(gemm_wmma(64, 64, 40, gemm_wmma_tiles(64, 64, 40), BFloat(16)), 64, 64, 40);
  ScheduledProgram p = gemm_wmma(100, 99, 77);
  EXPECT_EQ(lower(p.schedule, p.args).funcs.size(), 3u); // copies, GEMM, C's block
}

TEST(GemmWmmaErrors, ShapesThatNoTileDivides) {
  expect_error([] { gemm_wmma(1008, 1024, 1024, GemmWmmaTiles{}); },
               {"M=1008 must be a multiple of 128 (the block tile: 2 warps x 4 fragments x 16)",
                "pad it or use tile sizes that divide it"});
  expect_error([] { gemm_wmma(1024, 1024, 1040, GemmWmmaTiles{}); },
               {"K=1040 must be a multiple of 32 (the K step"});
  GemmWmmaTiles many_warps{.block_row_warps = 4, .block_col_warps = 4, .warp_row_tiles = 1,
                           .warp_col_tiles = 1, .chunk = 1};
  expect_error([&] { gemm_wmma(64, 64, 64, many_warps); },
               {"must be multiples of 4096 halves", "512 threads x 8 halves"});
}

// ---- tensorize misuse on hand-written schedules ------------------------------------------

namespace {

// A one-warp GEMM, C (M x N) = A (M x K) * B (K x N), staged A, B -> shared -> fragments and
// accumulated in a fragment array; each test tensorizes (and breaks) one stage.
struct HandWrittenGemm {
  Tensor A, B, C, AS, BS, AF, BF, CF;
  Schedule s;

  HandWrittenGemm(int M, int N, int K, DataType in = Float(16), bool max_reduce = false) {
    A = placeholder({M, K}, in, "A");
    B = placeholder({K, N}, in, "B");
    IterVar k = reduce_axis({0, K}, "k");
    C = compute(
        {M, N},
        [&](Var i, Var j) {
          Expr prod = A(i, k).astype(Float(32)) * B(k, j).astype(Float(32));
          return max_reduce ? max(prod, {k}) : sum(prod, {k});
        },
        "C", {"i", "j"});
    s = create_schedule({C});
    AS = s.cache_read(A, "shared", {C});
    BS = s.cache_read(B, "shared", {C});
    AF = s.cache_read(AS, "wmma.matrix_a", {C});
    BF = s.cache_read(BS, "wmma.matrix_b", {C});
    CF = s.cache_write(C, "wmma.accumulator");
    IterVar tx = thread_axis("threadIdx.x");
    for (const Tensor &t : {AS, BS}) {
      auto [r, c] = s[t].axes<2>();
      auto [o, lane] = s[t].split(s[t].fuse(r, c), 32);
      s[t].bind(lane, tx);
    }
  }
  std::string lower_error() {
    try {
      lower(s, {A, B, C});
    } catch (const Error &e) {
      return e.what();
    }
    return "(no error)";
  }
};

void expect_in(const std::string &msg, std::initializer_list<const char *> parts) {
  if (std::getenv("TESSEL_SHOW_ERRORS"))
    std::cout << msg << "\n";
  for (const char *p : parts)
    EXPECT_NE(msg.find(p), std::string::npos) << "message lacks '" << p << "':\n" << msg;
}

} // namespace

// The accumulator's loops from the tensorize axis are 2x16x16x16: one loop too many, and the
// error points at the loop where the 16x16x16 block starts.
TEST(TensorizeErrors, WrongExtentSuggestsTheAxis) {
  HandWrittenGemm g(32, 32, 16);
  Stage cf = g.s[g.CF];
  auto [ci, cj] = cf.axes<2>();
  auto [cio, cii] = cf.split(ci, 16);
  auto [cjo, cji] = cf.split(cj, 16);
  cf.reorder({cjo, cio, cii, cji});
  cf.tensorize(cio, wmma_gemm());
  expect_in(g.lower_error(),
            {"tensorize of stage 'C.wmma.accumulator' at axis 'i.c.outer'", "16x16x16 block",
             "extents i.c.outer=2, i.c.inner=16, j.c.inner=16, k=16", "Tensorize at 'i.c.inner'"});
}

// Loops 32x16x16 where the intrinsic is 16x16x16: the error says which loop to split.
TEST(TensorizeErrors, WrongExtentSuggestsASplit) {
  HandWrittenGemm g(32, 32, 16);
  Stage cf = g.s[g.CF];
  auto [ci, cj] = cf.axes<2>();
  auto [cjo, cji] = cf.split(cj, 16);
  cf.reorder({cjo, ci, cji});
  cf.tensorize(ci, wmma_gemm());
  expect_in(g.lower_error(), {"16x16x16 block", "extents i.c=32, j.c.inner=16, k=16",
                              "split 'i.c' by 16"});
}

TEST(TensorizeErrors, WrongInputType) {
  HandWrittenGemm g(16, 16, 16, Float(32));
  auto [ai, ak] = g.s[g.AF].axes<2>();
  g.s[g.AF].tensorize(ai, wmma_load_matrix("wmma.matrix_a"));
  expect_in(g.lower_error(), {"wmma_load_matrix(wmma.matrix_a)", "is float16", "of float32"});
}

TEST(TensorizeErrors, WrongReduction) {
  HandWrittenGemm g(16, 16, 16, Float(16), /*max_reduce=*/true);
  auto [ci, cj] = g.s[g.CF].axes<2>();
  g.s[g.CF].tensorize(ci, wmma_gemm());
  expect_in(g.lower_error(), {"wmma_gemm", "reduces with sum but the stage with max"});
}

// Shared rows padded from 16 to 20 halves: 40 bytes, not a multiple of the 16 WMMA needs.
TEST(TensorizeErrors, MisalignedLeadingDimension) {
  HandWrittenGemm g(32, 16, 16);
  g.s[g.AS].storage_align(g.s[g.AS].op_axis(0), 32, 20);
  auto [ai, ak] = g.s[g.AF].axes<2>();
  auto [aio, aii] = g.s[g.AF].split(ai, 16);
  g.s[g.AF].tensorize(aii, wmma_load_matrix("wmma.matrix_a"));
  expect_in(g.lower_error(), {"A.shared", "leading dimension of 20 elements",
                              "multiple of 8 (16 bytes)", "storage_align"});
}

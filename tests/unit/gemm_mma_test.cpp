// gemm_mma: the ldmatrix / mma.sync GEMM lowered and run on the CPU executor against float64
// (exact inputs, so results must match exactly), its lowered IR checked for the mma calls with
// constant fragment indices and no scalar fragment access, its CUDA compiled by NVRTC for sm_80
// and sm_90 with HMMA.16816.F32 and LDSM in the SASS (where cuobjdump exists), and the errors
// of its shape checks.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "runtime/Nvrtc.h"
#include "schedules/GemmMma.h"

#include "ExactGemm.h"
#include "SassUtil.h"

#include <gtest/gtest.h>

#include <array>
#include <regex>

using namespace tessel;
using tessel::test::exact_gemm_mismatch;
using tessel::test::count_of;
using tessel::test::expect_error;

namespace {

std::string mismatch(const ScheduledProgram &p, int64_t M, int64_t N, int64_t K) {
  return exact_gemm_mismatch(lower(p.schedule, p.args), M, N, K);
}

} // namespace

TEST(GemmMma, CpuExecutorMatchesReference) {
  EXPECT_EQ(mismatch(gemm_mma(64, 64, 32), 64, 64, 32), "");
  EXPECT_EQ(mismatch(gemm_mma(96, 128, 48), 96, 128, 48), ""); // 3 fragments per warp, K step 16
  EXPECT_EQ(mismatch(gemm_mma(128, 64, 96), 128, 64, 96), "");
  EXPECT_EQ(mismatch(gemm_mma(16, 16, 16), 16, 16, 16), ""); // one warp, one fragment
}

TEST(GemmMma, ExplicitTilesAndPipelines) {
  GemmMmaTiles t{.block_row_warps = 1, .block_col_warps = 2, .warp_row_tiles = 2,
                 .warp_col_tiles = 2, .chunk = 1};
  EXPECT_EQ(mismatch(gemm_mma(64, 128, 32, t), 64, 128, 32), "");
  // Pipelined shared tiles: cp.async copies of the next steps while ldmatrix reads this one.
  for (int stages : {2, 3}) {
    GemmMmaTiles p;
    p.stages = stages;
    EXPECT_EQ(mismatch(gemm_mma(128, 128, 96, p), 128, 128, 96), "") << stages << " stages";
  }
}

// The lowered IR holds the mma calls, every fragment index a constant, and no element-wise
// access of a fragment scope.
TEST(GemmMma, LoweredIrUsesMmaCallsWithConstantIndices) {
  ScheduledProgram p = gemm_mma(128, 128, 64);
  std::string ir = to_string(lower(p.schedule, p.args));
  // A warp of 4x2 fragments: per 16-wide K slice 4 A loads, 2 B loads (.trans), 16 MMAs.
  EXPECT_EQ(count_of(ir, "@mma_ldmatrix(A.shared.mma.matrix_a, "), 4 * 2) << ir;
  EXPECT_EQ(count_of(ir, "@mma_ldmatrix(B.shared.mma.matrix_b, "), 2 * 2) << ir;
  EXPECT_EQ(count_of(ir, "@mma_sync("), 4 * 2 * 2 * 2) << ir;
  EXPECT_EQ(count_of(ir, "@mma_fill_fragment("), 16) << ir;
  EXPECT_EQ(count_of(ir, "@mma_store_fragment("), 16) << ir;
  std::smatch m;
  std::string rest = ir;
  std::regex call(R"(@mma_(ldmatrix|sync|fill_fragment|store_fragment)\(([^)]*))");
  int calls = 0;
  while (std::regex_search(rest, m, call)) {
    ++calls;
    std::regex constant_index(R"(^[A-Za-z_.]+, \d+(, |$))");
    EXPECT_TRUE(std::regex_search(m[2].str(), constant_index)) << m[0];
    rest = m.suffix();
  }
  EXPECT_EQ(calls, 8 + 4 + 32 + 16 + 16);
  for (const char *scalar : {".mma.matrix_a[", ".mma.matrix_b[", ".mma.accumulator["})
    EXPECT_EQ(ir.find(scalar), std::string::npos) << scalar << "\n" << ir;
  // ldmatrix of B stored K x N transposes; float2 stores (the last argument) of row stride 128.
  EXPECT_NE(ir.find("@mma_ldmatrix(B.shared.mma.matrix_b, 0, 4, 1, address_of(B.shared["),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("]), 128, 2)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("allocate(A.shared, float16, [5120])"), std::string::npos) << ir; // 128 x 40
  EXPECT_EQ(count_of(ir, "@syncthreads()"), 2) << ir;
}

TEST(GemmMma, CudaSourceAndSassForSm80AndSm90) {
  ScheduledProgram p = gemm_mma(1024, 1024, 1024);
  std::string src = codegen_cuda(lower(p.schedule, p.args));
  for (const char *text :
       {"float C_mma_accumulator[16][4];", "unsigned A_shared_mma_matrix_a[4][4];",
        "unsigned B_shared_mma_matrix_b[4][2];", "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", "__cvta_generic_to_shared(",
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "*(float2*)",
        "__launch_bounds__(256)"})
    EXPECT_NE(src.find(text), std::string::npos) << text << "\n" << src;
  EXPECT_EQ(src.find("nvcuda::wmma"), std::string::npos) << src;

  // Register fragments stay in registers: no local memory (LDL / STL).
  if (!tessel::test::compiles_for_sm80_and_sm90(
          src, "gemm_mma",
          {"HMMA.16816.F32", "LDSM.16.M88.4", "LDSM.16.MT88.4", "STG.E.64"},
          {"LDL", "STL"}))
    GTEST_SKIP() << tessel::test::kNoCuobjdump;
}

// cp.async pipelines (Stage::pipeline) feeding ldmatrix: LDGSTS and LDSM in one kernel.
TEST(GemmMma, PipelinedCompilesForSm80AndSm90) {
  GemmMmaTiles t;
  t.stages = 2; // two stages of the 128 x 128 block's tiles fit the 48 KiB of static shared
  ScheduledProgram p = gemm_mma(1024, 1024, 1024, t);
  std::string src = codegen_cuda(lower(p.schedule, p.args));
  EXPECT_NE(src.find("cp.async"), std::string::npos) << src;
  EXPECT_NE(src.find("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), std::string::npos) << src;
  if (!tessel::test::compiles_for_sm80_and_sm90(
          src, "gemm_mma_pipelined", {"LDGSTS", "LDSM.16.MT88.4", "HMMA.16816.F32"}))
    GTEST_SKIP() << tessel::test::kNoCuobjdump;
}

// bfloat16 A and B: the same fragments (ldmatrix moves any 16-bit element) and mma.sync's bf16
// form; exact on the executor (aligned and ragged), HMMA.16816.F32.BF16 in the SASS.
TEST(GemmMma, BFloat16Inputs) {
  ScheduledProgram p = gemm_mma(128, 128, 64, gemm_mma_tiles(128, 128, 64), BFloat(16));
  EXPECT_EQ(p.args[0].dtype(), BFloat(16));
  EXPECT_EQ(mismatch(p, 128, 128, 64), "");
  EXPECT_EQ(mismatch(gemm_mma(100, 24, 40, BFloat(16)), 100, 24, 40), "");
  std::string src = codegen_cuda(lower(p.schedule, p.args));
  // A warp's 4 x 2 fragments, two m16n8k16 each, for both 16-wide slices of the K step of 32.
  EXPECT_EQ(count_of(src, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), 32) << src;
  EXPECT_EQ(src.find(".f16.f16"), std::string::npos) << src;
  if (!tessel::test::compiles_for_sm80_and_sm90(src, "gemm_mma_bf16",
                                                {"HMMA.16816.F32.BF16", "LDSM.16.M88.4"},
                                                {"LDL", "STL"}))
    GTEST_SKIP() << tessel::test::kNoCuobjdump;
}

// C in float16 or bfloat16: the float32 sum rounded as each thread stores its elements (half2 /
// bfloat162 pairs), aligned and ragged, against float64 on the executor; compiled for sm_80.
// WMMA stores float32 fragments only, and says where narrower C runs.
TEST(GemmMma, NarrowOutput) {
  for (DataType out : {Float(16), BFloat(16)})
    for (auto [M, N, K] : {std::array<int64_t, 3>{128, 128, 64}, {100, 24, 40}}) {
      SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + " " +
                   out.str());
      ScheduledProgram p = gemm_mma(M, N, K, out, out);
      EXPECT_EQ(p.args.back().dtype(), out);
      CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs);
      EXPECT_TRUE(r.compare.ok) << r.str();
      std::string src = codegen_cuda(lower(p.schedule, p.args));
      EXPECT_NE(src.find(out == Float(16) ? "*(__half2*)" : "*(__nv_bfloat162*)"),
                std::string::npos) << src;
      CompileOptions o;
      o.arch = "sm_80";
      EXPECT_FALSE(nvrtc_compile(src, nvrtc_options(o), "gemm_mma_c16.cu").cubin.empty());
    }
  expect_error([] { tensor_core_gemm("gemm_wmma", 64, 64, 32, gemm_wmma_tiles(64, 64, 32), false,
                                     Float(16), Float(16)); },
               {"gemm_wmma", "C must be float32, got float16",
                "WMMA stores float32 fragments", "gemm_mma (mma.sync) or gemm_wgmma"});
}

// Dimensions that are not whole 16x16x16 fragments run on zero-padded copies of A and B (one
// kernel), the GEMM over the padded shape, and a last kernel copying C's leading block: exact.
TEST(GemmMma, RaggedShapesRunOnPaddedCopies) {
  ScheduledProgram p = gemm_mma(100, 24, 40);
  LoweredModule m = lower(p.schedule, p.args);
  // The copies (one kernel each here: B's is one block of 192 threads), the GEMM, C's block.
  ASSERT_EQ(m.funcs.size(), 4u);
  EXPECT_EQ(m.funcs[2].name, "default_function_C_full");
  EXPECT_EQ(m.funcs[2].arg_shapes[5], (std::vector<int64_t>{112, 32})); // C_full
  EXPECT_EQ(mismatch(p, 100, 24, 40), "");
  EXPECT_EQ(mismatch(find_schedule("gemm_mma").build({{"M", 64}, {"N", 64}, {"K", 40}}, Float(16)),
                     64, 64, 40),
            ""); // K alone: A and B padded, C as it is
}

TEST(GemmMmaErrors, ShapesThatNoTileDivides) {
  expect_error([] { gemm_mma(1008, 1024, 1024, GemmMmaTiles{}); },
               {"gemm_mma", "M=1008 must be a multiple of 128 (the block tile: 2 warps x 4 fragments x 16)"});
  expect_error([] { gemm_mma(1024, 1024, 1040, GemmMmaTiles{}); },
               {"K=1040 must be a multiple of 32 (the K step"});
}

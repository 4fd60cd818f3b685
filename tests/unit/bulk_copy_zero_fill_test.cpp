// TMA bulk copies of a read that is zero outside the tensor: a shared tile whose stage reads
// if_then_else(inside, A(i, k), 0), "inside" the tensor's bounds of the indices (a padded copy
// of A computed inline), is copied by boxes of A itself, whose elements past A's edges TMA
// fills with zeros. So a GEMM whose K is not a multiple of the K step reads its operands in
// place: one kernel, the tensor maps of A and B, the executor exact against float64, NVRTC for
// sm_90a. Conditions that are not the tensor's bounds, and other values than zero outside, are
// refused with the reason.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "schedules/GemmWgmma.h"

#include "ExactGemm.h"
#include "SassUtil.h"

#include <gtest/gtest.h>

#include <functional>

using namespace tessel;
using tessel::test::count_of;
using tessel::test::expect_error;

namespace {

// A(i, k) where `inside`, else `outside`, for k up to Kp.
using Guard = std::function<Expr(const Expr &i, const Expr &k)>;

// C (M x N) = sum over k < Kp of the guarded reads of A (M x K) and B (K x N), the reads
// computed inline into the shared tiles that TMA fills (gemm_wgmma's schedule).
struct ZeroFilledGemm {
  Tensor A, B, C;
  Schedule s;

  ZeroFilledGemm(int64_t M, int64_t N, int64_t K, int64_t Kp, const Guard &inside_a,
                 Expr outside = make_const(Float(16), 0)) {
    A = placeholder({M, K}, Float(16), "A");
    B = placeholder({K, N}, Float(16), "B");
    Tensor AP = compute(
        {M, Kp}, [&](Var i, Var k) { return if_then_else(inside_a(i, k), A(i, k), outside); },
        "A_pad", {"i", "k"});
    Tensor BP = compute(
        {Kp, N},
        [&](Var k, Var j) { return if_then_else(k < int(K), B(k, j), make_const(Float(16), 0)); },
        "B_pad", {"k", "j"});
    IterVar k = reduce_axis({0, Kp}, "k");
    C = compute(
        {M, N},
        [&](Var i, Var j) {
          return sum(AP(i, k).astype(Float(32)) * BP(k, j).astype(Float(32)), {k});
        },
        "C", {"i", "j"});
    s = create_schedule({C});
    s[AP].compute_inline();
    s[BP].compute_inline();
    WgmmaGemmStages st;
    st.C = C;
    st.AS = s.cache_read(AP, "shared", {C});
    st.BS = s.cache_read(BP, "shared", {C});
    st.CF = s.cache_write(C, "wgmma.accumulator");
    schedule_wgmma_gemm(s, st,
                        {.block_m = 128, .block_n = 64, .block_k = 64, .warpgroups_m = 2,
                         .stages = 3, .tma = true});
  }
  LoweredModule lowered() { return lower(s, {A, B, C}); }
};

} // namespace

// K = 136 is two steps of 64 and 8 more: the last step's boxes reach past A's columns and B's
// rows, which TMA fills with zeros as the guard would. The maps are A's and B's own shapes.
TEST(BulkCopyZeroFill, RaggedKReadsTheOperandsInPlace) {
  ZeroFilledGemm g(256, 128, 136, 192, [](const Expr &, const Expr &k) { return k < 136; });
  LoweredModule m = g.lowered();
  ASSERT_EQ(m.funcs.size(), 1u);
  EXPECT_EQ(m.num_workspaces, 0u);
  const LoweredFunc &f = m.funcs[0];
  ASSERT_EQ(f.tensor_maps.size(), 2u);
  EXPECT_EQ(f.tensor_maps[0].var.name(), "A_tmap");
  EXPECT_EQ(f.tensor_maps[0].dims, (std::vector<int64_t>{136, 256}));
  EXPECT_EQ(f.tensor_maps[0].box, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(f.tensor_maps[1].dims, (std::vector<int64_t>{128, 136}));
  std::string ir = to_string(m);
  EXPECT_EQ(ir.find("if_then_else"), std::string::npos) << ir;
  // The last step's box of A starts at column 128 and reaches 192 (k.outer < 2).
  EXPECT_NE(ir.find("@tma_load(A_tmap, @address_of(A_pad.shared[k.outer * 8192 + 8192]), "
                    "@address_of(k.outer_full[k.outer + 1]), k.outer * 64 + 64, blockIdx.y * 128)"),
            std::string::npos)
      << ir;
  EXPECT_EQ(tessel::test::exact_gemm_mismatch(m, 256, 128, 136), "");
  std::string src = codegen_cuda(m);
  CompiledKernel k = tessel::test::compile_for_sm90(m, src, "zero_fill.cu");
  ASSERT_FALSE(k.cubin.empty()) << k.log;
  EXPECT_EQ(k.kernels.at(0).stack_bytes, 0) << k.log;
}

// Both bounds of both dimensions, written either way round, and a condition true within the
// tile (k < 1000 of a tile that never gets there) are the tensor's bounds too.
TEST(BulkCopyZeroFill, BoundsInAnyFormAreAccepted) {
  ZeroFilledGemm g(256, 128, 136, 192, [](const Expr &i, const Expr &k) {
    return 0 <= k && k <= 135 && i < 256 && i >= 0 && 136 > k && k < 1000;
  });
  EXPECT_EQ(tessel::test::exact_gemm_mismatch(g.lowered(), 256, 128, 136), "");
}

TEST(BulkCopyZeroFill, OtherConditionsAndValuesAreRefused) {
  // Narrower than A: elements TMA would read are zero in the program.
  expect_error(
      [] {
        ZeroFilledGemm(256, 128, 136, 192, [](const Expr &, const Expr &k) { return k < 128; })
            .lowered();
      },
      {"'A_pad.shared' is filled by TMA", "reads 'A' where", "not a bound of one of its indices",
       "guard the read by the tensor's bounds only"});
  // Not a bound at all.
  expect_error(
      [] {
        ZeroFilledGemm(256, 128, 136, 192, [](const Expr &i, const Expr &k) {
          return k < 136 && floormod(i, 2) == 0;
        }).lowered();
      },
      {"'A_pad.shared' is filled by TMA", "not a bound of one of its indices"});
  // Something other than zero outside: TMA fills zeros only.
  expect_error(
      [] {
        ZeroFilledGemm(256, 128, 136, 192, [](const Expr &, const Expr &k) { return k < 136; },
                       make_const(Float(16), 1))
            .lowered();
      },
      {"'A_pad.shared' is filled by TMA", "not an element of a global tensor",
       "or zeros outside the tensor"});
}

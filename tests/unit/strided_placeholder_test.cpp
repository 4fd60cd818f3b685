// Strided placeholders: an input declared as a view of a buffer that is not compact row-major
// (placeholder(shape, dtype, name, strides)), read through its strides and never copied: the
// (batch, heads, seq, dim) view of attention's (batch, seq, heads, dim) Q, a batched GEMM whose
// A holds its batches interleaved. The declaration and its errors, the flattened index, the
// argument's size and the launch-time check of a view's strides, TMA tensor maps that carry the
// strides, and each kernel exact on the executor against float64 (inputs scattered into the
// strided buffer, NaN between its elements).
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "runtime/Device.h"
#include "runtime/TensorView.h"
#include "schedules/GemmWgmma.h"

#include "BatchedWgmmaGemm.h"
#include "SassUtil.h"

#include <gtest/gtest.h>

using namespace tessel;
using tessel::test::expect_error;

namespace {

constexpr int64_t kB = 2, kS = 48, kH = 3, kD = 64;

// The (B, H, S, D) view of a (B, S, H, D) buffer.
Tensor bhsd_view_of_bshd(const std::string &name) {
  return placeholder({kB, kH, kS, kD}, Float(16), name, {kS * kH * kD, kD, kH * kD, 1});
}

// O[b, h, s, d] = 2 Q[b, h, s, d] + 1, an element a thread.
struct Elementwise {
  Tensor Q, O;
  Schedule s;
  explicit Elementwise(Tensor q = bhsd_view_of_bshd("Q")) {
    Q = q;
    O = compute(
        {kB, kH, kS, kD},
        [&](Var b, Var h, Var i, Var d) { return Q(b, h, i, d).astype(Float(32)) * 2.0f + 1.0f; },
        "O", {"b", "h", "i", "d"});
    s = create_schedule({O});
    auto [b, h, i, d] = s[O].axes<4>();
    IterVar f = s[O].fuse(s[O].fuse(b, h), i);
    s[O].bind(f, thread_axis("blockIdx.x"));
    s[O].bind(d, thread_axis("threadIdx.x"));
  }
};

// C[b] = A[b] B[b] on gemm_wgmma's schedule with TMA fills, A (batch, M, K) stored as
// (M, batch, K): each batch's rows batch * K elements apart.
struct InterleavedBatchGemm : test::BatchedWgmmaGemm {
  static constexpr int64_t batch = 3, M = 256, N = 128, K = 192;
  explicit InterleavedBatchGemm(std::vector<int64_t> a_strides = {K, batch * K, 1})
      : BatchedWgmmaGemm(batch, M, N, K, test::batched_tma_tiles(3), std::move(a_strides)) {}
};

} // namespace

TEST(StridedPlaceholder, DeclaredWithItsStrides) {
  Tensor Q = bhsd_view_of_bshd("Q");
  EXPECT_EQ(Q.strides(), (std::vector<int64_t>{kS * kH * kD, kD, kH * kD, 1}));
  EXPECT_TRUE(placeholder({4, 4}, Float(16), "A").strides().empty());
  EXPECT_EQ(to_string(Q.op()), "placeholder Q[2, 3, 48, 64] float16 strides [9216, 64, 192, 1]");
  EXPECT_EQ(storage_elements({kB, kH, kS, kD}, Q.strides()), kB * kS * kH * kD);
  EXPECT_EQ(storage_elements({2, 3}, {}), 6);
  EXPECT_EQ(storage_elements({2, 3}, {8, 2}), 13); // rows 8 apart, every other column
}

TEST(StridedPlaceholder, BadStridesAreErrors) {
  expect_error([] { placeholder({4, 4}, Float(16), "A", {4}); },
               {"placeholder", "tensor 'A' has 2 dimensions but 1 strides"});
  expect_error([] { placeholder({4, 4}, Float(16), "A", {0, 1}); },
               {"tensor 'A': stride 0 of dimension 0 must be at least 1 element"});
}

// The flattened index walks the buffer through the strides; the argument is the buffer they
// span; the executor reads the scattered values (NaN between them would show a wrong index).
TEST(StridedPlaceholder, ElementwiseReadsThroughTheStrides) {
  Elementwise e;
  LoweredModule m = lower(e.s, {e.Q, e.O});
  const LoweredFunc &f = m.funcs.at(0);
  ASSERT_EQ(f.arg_strides.size(), 2u);
  EXPECT_EQ(f.arg_strides[0], e.Q.strides());
  EXPECT_TRUE(f.arg_strides[1].empty());
  std::string ir = to_string(m);
  EXPECT_NE(ir.find("Q: float16[2, 3, 48, 64] strides [9216, 64, 192, 1]"), std::string::npos)
      << ir;
  // Q's sequence index H * D apart, its head D apart; O's compact.
  EXPECT_NE(ir.find("Q[floordiv(blockIdx.x, 144) * 9216 + floormod(floordiv(blockIdx.x, 48), 3) "
                    "* 64 + floormod(blockIdx.x, 48) * 192 + threadIdx.x]"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("O[floordiv(blockIdx.x, 144) * 9216 + floormod(floordiv(blockIdx.x, 48), 3) "
                    "* 3072 + floormod(blockIdx.x, 48) * 64 + threadIdx.x]"),
            std::string::npos)
      << ir;
  CheckResult r = check_on_cpu(e.s, {e.Q, e.O}, 1);
  EXPECT_TRUE(r.compare.ok) << r.str();

  ModuleParams p = module_params(m);
  EXPECT_EQ(p.args[0].strides, e.Q.strides());
  EXPECT_EQ(p.args[0].numel(), kB * kS * kH * kD);
  EXPECT_NE(codegen_cuda(m).find("Q["), std::string::npos);

  // Rows padded to 72 elements: the buffer spans more than the tensor's elements, and the 8
  // between each row's last and the next row's first are NaN on the executor.
  Elementwise padded(placeholder({kB, kH, kS, kD}, Float(16), "Q", {kS * kH * 72, 72, kH * 72, 1}));
  LoweredModule mp = lower(padded.s, {padded.Q, padded.O});
  const int64_t spans = (kB - 1) * kS * kH * 72 + (kH - 1) * 72 + (kS - 1) * kH * 72 + kD;
  EXPECT_EQ(module_params(mp).args[0].numel(), spans);
  r = check_on_cpu(padded.s, {padded.Q, padded.O}, 1);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

// A view passed at launch must have the strides the module was built for; a dense view of the
// same shape is refused naming both layouts.
TEST(StridedPlaceholder, LaunchChecksTheViewsStrides) {
  Elementwise e;
  ModuleParams p = module_params(lower(e.s, {e.Q, e.O}));
  const CUdeviceptr base = 0x7f0000000000ull;
  std::vector<TensorView> views = {
      TensorView(base, Float(16), {kB, kH, kS, kD}, e.Q.strides()),
      TensorView(base + 0x100000, Float(32), {kB, kH, kS, kD})};
  EXPECT_NO_THROW(check_arguments(p, views, "test"));
  views[0].strides.clear();
  expect_error([&] { check_arguments(p, views, "test"); },
               {"argument 0 ('Q')", "with strides [9216, 64, 192, 1]",
                "got strides [9216, 3072, 64, 1]",
                "declare the placeholder with the view's strides"});
  // The output is dense; its row-major strides spelled out are the same layout.
  views[0].strides = e.Q.strides();
  views[1].strides = {kH * kS * kD, kS * kD, kD, 1};
  EXPECT_NO_THROW(check_arguments(p, views, "test"));
}

// TMA boxes of the interleaved A: the tensor map carries its strides (K, M, batch innermost
// first: 1, batch * K, K); exact on the executor against float64; NVRTC for sm_90a.
TEST(StridedPlaceholder, TmaBoxesOfAnInterleavedBatch) {
  InterleavedBatchGemm g;
  LoweredModule m = lower(g.s, {g.A, g.B, g.C});
  const LoweredFunc &f = m.funcs.at(0);
  ASSERT_EQ(f.tensor_maps.size(), 2u);
  using G = InterleavedBatchGemm;
  EXPECT_EQ(f.tensor_maps[0].dims, (std::vector<int64_t>{G::K, G::M, G::batch}));
  EXPECT_EQ(f.tensor_maps[0].strides, (std::vector<int64_t>{1, G::batch * G::K, G::K}));
  EXPECT_EQ(f.tensor_maps[1].strides, (std::vector<int64_t>{1, G::N, G::K * G::N}));
  CheckResult r = check_on_cpu(g.s, {g.A, g.B, g.C}, 2);
  EXPECT_TRUE(r.compare.ok) << r.str();
  CompiledKernel k = tessel::test::compile_for_sm90(m, codegen_cuda(m), "strided_tma.cu");
  EXPECT_FALSE(k.cubin.empty()) << k.log;
}

// TMA reads rows of consecutive elements: a view whose last dimension is strided is refused
// with what to do; rows that are not 16-byte multiples apart likewise.
TEST(StridedPlaceholder, TmaRefusesViewsItCannotBox) {
  using G = InterleavedBatchGemm;
  expect_error([] {
    InterleavedBatchGemm g({G::M * G::K * 2, G::K * 2, 2});
    lower(g.s, {g.A, g.B, g.C});
  },
               {"TMA reads rows of consecutive elements", "the last dimension of 'A' has stride 2",
                "copy it without TMA (cp.async)"});
  expect_error([] {
    InterleavedBatchGemm g({G::M * 200, 200 + 4, 1});
    lower(g.s, {g.A, g.B, g.C});
  },
               {"TMA needs the rows of 'A' 16-byte aligned", "dimension 1 is 408 bytes apart"});
}

// On the GPU: the elementwise kernel over a permuted and a padded view, and the TMA GEMM of an
// interleaved batch (its tensor map encoded with the strides), each against float64.
TEST(StridedPlaceholder, GpuMatchesTheReference) {
  if (!Device::available())
    GTEST_SKIP() << Device::unavailable_reason();
  for (Tensor q : {bhsd_view_of_bshd("Q"),
                   placeholder({kB, kH, kS, kD}, Float(16), "Q", {kS * kH * 72, 72, kH * 72, 1})}) {
    Elementwise e(q);
    CheckResult r = check_on_gpu(e.s, {e.Q, e.O}, 1);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  if (Device::get().arch() != "sm_90")
    GTEST_SKIP() << "TMA and wgmma need a Hopper GPU";
  InterleavedBatchGemm g;
  CheckResult r = check_on_gpu(g.s, {g.A, g.B, g.C}, 2);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

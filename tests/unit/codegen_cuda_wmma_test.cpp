// CUDA codegen of WMMA fragments and intrinsics, and the errors codegen reports.
#include "codegen_cuda_util.h"

#include "compiler/support/Error.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

Expr imm(int64_t v) { return make_const(Int(32), v); }

Stmt fill(const Buffer &frag, Expr index, Expr value) {
  return Evaluate::make(Call::make(Void(), intrinsic::wmma_fill_fragment,
                                   {data_of(frag), imm(16), imm(16), imm(16), std::move(index),
                                    std::move(value)},
                                   Call::Intrinsic));
}

Stmt load_matrix(const Buffer &frag, Expr index, Expr ptr, int stride, const char *layout) {
  return Evaluate::make(Call::make(Void(), intrinsic::wmma_load_matrix_sync,
                                   {data_of(frag), imm(16), imm(16), imm(16), std::move(index),
                                    std::move(ptr), imm(stride), StringImm::make(layout)},
                                   Call::Intrinsic));
}

Stmt mma(const Buffer &d, Expr di, const Buffer &a, Expr ai, const Buffer &b, Expr bi,
         const Buffer &c, Expr ci) {
  return Evaluate::make(Call::make(Void(), intrinsic::wmma_mma_sync,
                                   {data_of(d), std::move(di), data_of(a), std::move(ai),
                                    data_of(b), std::move(bi), data_of(c), std::move(ci)},
                                   Call::Intrinsic));
}

Stmt store_matrix(const Buffer &frag, Expr index, Expr ptr, int stride) {
  return Evaluate::make(Call::make(Void(), intrinsic::wmma_store_matrix_sync,
                                   {data_of(frag), imm(16), imm(16), imm(16), std::move(index),
                                    std::move(ptr), imm(stride), StringImm::make("row_major")},
                                   Call::Intrinsic));
}

/// C (32x16, fp32) = A (32x32 row-major fp16) * B (32x16 stored column-major, fp16), one warp:
/// two accumulator tiles, a k loop of two steps, A staged through shared memory.
struct WmmaGemm {
  Buffer A = flat_buffer("A", Float(16), 32 * 32), B = flat_buffer("B", Float(16), 32 * 16),
         C = flat_buffer("C", Float(32), 32 * 16);
  Buffer As = flat_buffer("A.shared", Float(16), 32 * 32, "shared");
  Buffer Af = flat_buffer("A.shared.wmma.matrix_a", Float(16), 2 * 256, "wmma.matrix_a");
  Buffer Bf = flat_buffer("B.wmma.matrix_b", Float(16), 256, "wmma.matrix_b");
  Buffer Cf = flat_buffer("C.wmma.accumulator", Float(32), 2 * 256, "wmma.accumulator");

  LoweredFunc make() const {
    IterVar tx = thread_axis("threadIdx.x");
    Var i("i"), k("k"), ax("ax0");
    Expr ramp = Ramp::make(ax * 256 + tx.var() * 8, 1, 8);
    Stmt stage = For::make(ax, 0, 4, ForKind::Unrolled, store(As, ramp, load(A, ramp)));
    Stmt init = For::make(i, 0, 2, ForKind::Unrolled, fill(Cf, i, Expr(0.0f)));
    Stmt loads = Seq::make(
        {For::make(i, 0, 2, ForKind::Unrolled,
                   load_matrix(Af, i, address_of(As, i * 512 + k * 16), 32, "row_major")),
         load_matrix(Bf, 0, address_of(B, k * 16), 32, "col_major")});
    Stmt update = For::make(i, 0, 2, ForKind::Unrolled, mma(Cf, i, Af, i, Bf, 0, Cf, i));
    Stmt kloop = For::make(k, 0, 2, ForKind::Serial, Seq::make({loads, update}));
    Stmt out = For::make(i, 0, 2, ForKind::Serial, store_matrix(Cf, i, address_of(C, i * 256), 16));
    Stmt body = Seq::make({stage, sync_threads(), init, kloop, out});
    body = allocate(As, allocate(Cf, allocate(Af, allocate(Bf, body))));
    return kernel("wmma_gemm", {A, B, C}, launch_thread(tx, 32, body), {1, 1, 1}, {32, 1, 1});
  }
};

std::string error_of(const LoweredFunc &f) {
  try {
    codegen(f);
  } catch (const Error &e) {
    return e.what();
  }
  return "(no error)";
}

} // namespace

TEST(CodeGenCUDAWmma, Gemm16x16x16) {
  std::string src = codegen(WmmaGemm().make());
  expect_filecheck(src, R"(
CHECK: #include <cuda_fp16.h>
CHECK-NEXT: #include <mma.h>
CHECK: wmma_gemm(const half* __restrict__ A, const half* __restrict__ B, float* __restrict__ C) {
CHECK-NEXT:   __shared__ __align__(32) half A_shared[1024];
CHECK-NEXT:   nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> C_wmma_accumulator[2];
CHECK-NEXT:   nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> A_shared_wmma_matrix_a[2];
CHECK-NEXT:   nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::col_major> B_wmma_matrix_b[1];
CHECK-NEXT:   #pragma unroll
CHECK-NEXT:   for (int ax0 = 0; ax0 < 4; ++ax0) {
CHECK-NEXT:     *(uint4*)(A_shared + ax0 * 256 + ((int)threadIdx.x) * 8) = *(const uint4*)(A + ax0 * 256 + ((int)threadIdx.x) * 8);
CHECK:        __syncthreads();
CHECK:          nvcuda::wmma::fill_fragment(C_wmma_accumulator[i], 0.0f);
CHECK:        for (int k = 0; k < 2; ++k) {
CHECK:            nvcuda::wmma::load_matrix_sync(A_shared_wmma_matrix_a[i_1], &A_shared[i_1 * 512 + k * 16], 32);
CHECK:          nvcuda::wmma::load_matrix_sync(B_wmma_matrix_b[0], &B[k * 16], 32);
CHECK:            nvcuda::wmma::mma_sync(C_wmma_accumulator[i_2], A_shared_wmma_matrix_a[i_2], B_wmma_matrix_b[0], C_wmma_accumulator[i_2]);
CHECK:          nvcuda::wmma::store_matrix_sync(&C[i_3 * 256], C_wmma_accumulator[i_3], 16, nvcuda::wmma::mem_row_major);
)");
  expect_compiles(src);
  // The tensor core instruction is in the PTX.
  NvrtcOutput ptx = nvrtc_compile(src, "compute_80");
  ASSERT_TRUE(ptx.ok) << ptx.log;
  EXPECT_NE(ptx.ptx.find("wmma.mma.sync"), std::string::npos);
}

TEST(CodeGenCUDAWmma, ShapeOfMmaOnlyFragmentComesFromItsPartners) {
  // Cf is only multiplied into and stored from; Af/Bf give the shape through mma_sync.
  WmmaGemm g;
  Buffer D = flat_buffer("D.wmma.accumulator", Float(32), 256, "wmma.accumulator");
  IterVar tx = thread_axis("threadIdx.x");
  Stmt body = Seq::make({load_matrix(g.Af, 0, address_of(g.A, 0), 32, "row_major"),
                         load_matrix(g.Bf, 0, address_of(g.B, 0), 32, "col_major"),
                         mma(D, 0, g.Af, 0, g.Bf, 0, D, 0),
                         store_matrix(D, 0, address_of(g.C, 0), 16)});
  body = allocate(g.Af, allocate(g.Bf, allocate(D, body)));
  std::string src = codegen(kernel("mma_only", {g.A, g.B, g.C}, launch_thread(tx, 32, body),
                                   {1, 1, 1}, {32, 1, 1}));
  EXPECT_NE(src.find("fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> D_wmma_accumulator[1];"),
            std::string::npos)
      << src;
  expect_compiles(src);
}

TEST(CodeGenCUDAErrors, FragmentReadLikeAnArray) {
  WmmaGemm g;
  IterVar tx = thread_axis("threadIdx.x");
  Stmt body = Seq::make({fill(g.Cf, 0, Expr(0.0f)), store(g.C, tx.var(), load(g.Cf, tx.var()))});
  body = launch_thread(tx, 32, allocate(g.Cf, body));
  std::string msg = error_of(kernel("bad", {g.C}, body, {1, 1, 1}, {32, 1, 1}));
  EXPECT_NE(msg.find("'C.wmma.accumulator'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("wmma_* intrinsics"), std::string::npos) << msg;
}

TEST(CodeGenCUDAErrors, UnknownIntrinsic) {
  Buffer A = flat_buffer("A", Float(32), 32);
  Stmt body = Evaluate::make(Call::make(Void(), "warp_shuffle", {}, Call::Intrinsic));
  std::string msg = error_of(kernel("bad", {A}, body, {1, 1, 1}, {1, 1, 1}));
  EXPECT_NE(msg.find("unknown intrinsic 'warp_shuffle'"), std::string::npos) << msg;
}

TEST(CodeGenCUDAErrors, MmaOperandInWrongScope) {
  WmmaGemm g;
  IterVar tx = thread_axis("threadIdx.x");
  // The matrix_b fragment passed where matrix_a belongs.
  Stmt body = Seq::make({load_matrix(g.Bf, 0, address_of(g.B, 0), 32, "col_major"),
                         fill(g.Cf, 0, Expr(0.0f)), mma(g.Cf, 0, g.Bf, 0, g.Bf, 0, g.Cf, 0)});
  body = launch_thread(tx, 32, allocate(g.Bf, allocate(g.Cf, body)));
  std::string msg = error_of(kernel("bad", {g.B}, body, {1, 1, 1}, {32, 1, 1}));
  EXPECT_NE(msg.find("expects a wmma.matrix_a fragment, but 'B.wmma.matrix_b'"),
            std::string::npos)
      << msg;
}

TEST(CodeGenCUDAErrors, FragmentWithoutLayout) {
  WmmaGemm g;
  IterVar tx = thread_axis("threadIdx.x");
  // Af is never loaded: its layout is unknown.
  Stmt body = Seq::make({load_matrix(g.Bf, 0, address_of(g.B, 0), 32, "col_major"),
                         fill(g.Cf, 0, Expr(0.0f)), mma(g.Cf, 0, g.Af, 0, g.Bf, 0, g.Cf, 0)});
  body = launch_thread(tx, 32, allocate(g.Af, allocate(g.Bf, allocate(g.Cf, body))));
  std::string msg = error_of(kernel("bad", {g.B}, body, {1, 1, 1}, {32, 1, 1}));
  EXPECT_NE(msg.find("'A.shared.wmma.matrix_a'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("layout"), std::string::npos) << msg;
}

TEST(CodeGenCUDAErrors, TooMuchStaticSharedMemory) {
  Buffer A = flat_buffer("A", Float(32), 32);
  Buffer S = flat_buffer("big.shared", Float(32), 16384, "shared");
  Stmt body = allocate(S, store(S, 0, load(A, 0)));
  std::string msg = error_of(kernel("big", {A}, body, {1, 1, 1}, {1, 1, 1}));
  EXPECT_NE(msg.find("48 KiB"), std::string::npos) << msg;
}

TEST(CodeGenCUDAErrors, Form1IsAnInternalError) {
  Buffer A = flat_buffer("A", Float(32), 32);
  Buffer T = Buffer::make("T", Float(32), {imm(4), imm(8)});
  Stmt body = BufferRealize::make(T, {Range(0, 4), Range(0, 8)}, store(A, 0, Expr(1.0f)));
  LoweredFunc f = kernel("form1", {A}, body, {1, 1, 1}, {1, 1, 1});
  EXPECT_THROW(codegen(f), InternalError);
}

TEST(CodeGenCUDAErrors, DuplicateKernelNames) {
  Buffer A = flat_buffer("A", Float(32), 32);
  LoweredModule m;
  m.funcs.push_back(kernel("k", {A}, store(A, 0, Expr(1.0f)), {1, 1, 1}, {1, 1, 1}));
  m.funcs.push_back(m.funcs[0]);
  EXPECT_THROW(codegen_cuda(m), Error);
}

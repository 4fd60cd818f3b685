// CUDA codegen: hand-built Form 2 kernels, their text (FileCheck and substrings) and NVRTC
// compilation for sm_80 and sm_90.
#include "TestUtil.h"
#include "codegen_cuda_util.h"

#include <cmath>

using namespace tessel;
using namespace tessel::testing;

namespace {

bool contains(const std::string &s, const std::string &sub) {
  return s.find(sub) != std::string::npos;
}

} // namespace

TEST(CodeGenCUDA, VectorAddFp32) {
  Buffer A = flat_buffer("A", Float(32), 1000), B = flat_buffer("B", Float(32), 1000),
         C = flat_buffer("C", Float(32), 1000);
  IterVar bx = thread_axis("blockIdx.x"), tx = thread_axis("threadIdx.x");
  Expr i = bx.var() * 256 + tx.var();
  Stmt body = IfThenElse::make(i < 1000, store(C, i, load(A, i) + load(B, i)));
  body = launch_thread(bx, 4, launch_thread(tx, 256, body));
  std::string src = codegen(kernel("vector_add", {A, B, C}, body, {4, 1, 1}, {256, 1, 1}));

  expect_filecheck(src, R"(
CHECK-NOT: #include
CHECK: extern "C" __global__ void __launch_bounds__(256) vector_add(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
CHECK-NEXT:   if (((int)blockIdx.x) * 256 + ((int)threadIdx.x) < 1000) {
CHECK-NEXT:     C[((int)blockIdx.x) * 256 + ((int)threadIdx.x)] = A[((int)blockIdx.x) * 256 + ((int)threadIdx.x)] + B[((int)blockIdx.x) * 256 + ((int)threadIdx.x)];
CHECK-NEXT:   }
CHECK-NEXT: }
)");
  EXPECT_TRUE(contains(src, "float* __restrict__ C")) << src;
  EXPECT_FALSE(contains(src, "tessel_floordiv")) << src;
  expect_compiles(src);
}

// fast_exp2 is the special-function unit's 2^x alone (a preamble helper around
// ex2.approx.ftz), exp2 CUDA's exp2f; on float16 both go through float.
TEST(CodeGenCUDA, FastExp2IsOneInstruction) {
  Buffer A = flat_buffer("A", Float(32), 256), B = flat_buffer("B", Float(16), 256);
  IterVar tx = thread_axis("threadIdx.x");
  Expr x = tx.var();
  Stmt body = Seq::make({store(A, x, fast_exp2(load(A, x)) + exp2(load(A, x))),
                         store(B, x, fast_exp2(load(B, x)))});
  std::string src = codegen(kernel("exp2s", {A, B}, launch_thread(tx, 256, body), {1, 1, 1},
                                   {256, 1, 1}));
  expect_filecheck(src, R"(
CHECK: __device__ __forceinline__ float tessel_fast_exp2f(float x) {
CHECK: asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
CHECK: A[((int)threadIdx.x)] = tessel_fast_exp2f(A[((int)threadIdx.x)]) + exp2f(A[((int)threadIdx.x)]);
CHECK-NEXT: B[((int)threadIdx.x)] = __float2half_rn(tessel_fast_exp2f(__half2float(B[((int)threadIdx.x)])));
)");
  expect_compiles(src);
}

TEST(CodeGenCUDA, Fp16WithCasts) {
  Buffer A = flat_buffer("A", Float(16), 512), B = flat_buffer("B", Float(32), 512),
         C = flat_buffer("C", Float(16), 512), D = flat_buffer("D", BFloat(16), 512);
  IterVar tx = thread_axis("threadIdx.x");
  Expr x = tx.var();
  Expr scaled = cast(Float(32), load(A, x)) * 2.0f + load(B, x);
  Expr relu = max(cast(Float(16), scaled), make_const(Float(16), 0.0));
  Expr e = Call::make(Float(16), "exp", {load(A, x)}, Call::PureExtern);
  Stmt body = Seq::make({store(C, x, relu + e * make_const(Float(16), -0.5)),
                         store(D, x, cast(BFloat(16), load(A, x))),
                         store(B, x, cast(Float(32), load(D, x)) + cast(Float(32), x))});
  body = launch_thread(tx, 512, body);
  std::string src = codegen(kernel("fp16_casts", {A, B, C, D}, body, {1, 1, 1}, {512, 1, 1}));

  expect_filecheck(src, R"(
CHECK: #include <cuda_fp16.h>
CHECK-NEXT: #include <cuda_bf16.h>
CHECK-NOT: #include <mma.h>
CHECK: fp16_casts(const half* __restrict__ A, float* __restrict__ B, half* __restrict__ C, __nv_bfloat16* __restrict__ D)
CHECK-NEXT: C[((int)threadIdx.x)] = __hmax(__float2half_rn(__half2float(A[((int)threadIdx.x)]) * 2.0f + B[((int)threadIdx.x)]), __float2half_rn(0.0f)) + __float2half_rn(expf(__half2float(A[((int)threadIdx.x)]))) * __float2half_rn(-0.5f);
CHECK-NEXT: D[((int)threadIdx.x)] = __float2bfloat16_rn(__half2float(A[((int)threadIdx.x)]));
CHECK-NEXT: B[((int)threadIdx.x)] = __bfloat162float(D[((int)threadIdx.x)]) + ((float)((int)threadIdx.x));
)");
  expect_compiles(src);
}

TEST(CodeGenCUDA, SharedTileWithSyncthreads) {
  Buffer A = flat_buffer("A", Float(32), 1024), B = flat_buffer("B", Float(32), 1024);
  Buffer As = flat_buffer("A.shared", Float(32), 128, "shared");
  IterVar bx = thread_axis("blockIdx.x"), tx = thread_axis("threadIdx.x");
  // A cache stage binds threadIdx.x again, as TVM's cooperative fetches do.
  IterVar tx2 = thread_axis("threadIdx.x");
  Stmt fill = launch_thread(tx2, 128, store(As, tx2.var(), load(A, bx.var() * 128 + tx2.var())));
  Stmt use = store(B, bx.var() * 128 + tx.var(), load(As, 127 - tx.var()) * 2.0f);
  Stmt body = allocate(As, Seq::make({fill, sync_threads(), launch_thread(tx, 128, use)}));
  body = launch_thread(bx, 8, body);
  LoweredFunc f = kernel("reverse_tile", {A, B}, body, {8, 1, 1}, {128, 1, 1});
  std::string src = codegen(f);

  expect_filecheck(src, R"(
CHECK: reverse_tile(const float* __restrict__ A, float* __restrict__ B) {
CHECK-NEXT:   __shared__ __align__(32) float A_shared[128];
CHECK-NEXT:   A_shared[((int)threadIdx.x)] = A[((int)blockIdx.x) * 128 + ((int)threadIdx.x)];
CHECK-NEXT:   __syncthreads();
CHECK-NEXT:   B[((int)blockIdx.x) * 128 + ((int)threadIdx.x)] = A_shared[127 - ((int)threadIdx.x)] * 2.0f;
)");
  expect_compiles(src);

  // The same kernel with dynamic shared memory: a slice of one extern array.
  EXPECT_EQ(cuda_shared_memory_bytes(f), 512);
  f.launch.dynamic_shared_bytes = 512;
  std::string dyn = codegen(f);
  expect_filecheck(dyn, R"(
CHECK: reverse_tile(
CHECK-NEXT:   extern __shared__ __align__(32) unsigned char tessel_dynamic_smem[];
CHECK-NEXT:   float* A_shared = (float*)(tessel_dynamic_smem + 0);
CHECK-NOT: __shared__ __align__(32) float
)");
  expect_compiles(dyn);
}

TEST(CodeGenCUDA, DynamicSharedMemoryOffsetsAreAligned) {
  Buffer A = flat_buffer("A", Float(16), 4096);
  Buffer S1 = flat_buffer("S1", Float(16), 100, "shared"), S2 = flat_buffer("S2", Float(32), 64, "shared");
  IterVar tx = thread_axis("threadIdx.x");
  Stmt body = Seq::make({store(S1, tx.var(), load(A, tx.var())),
                         store(S2, tx.var(), cast(Float(32), load(S1, tx.var()))), sync_threads(),
                         store(A, tx.var(), cast(Float(16), load(S2, 63 - tx.var())))});
  body = launch_thread(tx, 64, allocate(S1, allocate(S2, body)));
  LoweredFunc f = kernel("two_slices", {A}, body, {1, 1, 1}, {64, 1, 1});
  // 200 bytes of S1, then S2 at the next multiple of 32.
  EXPECT_EQ(cuda_shared_memory_bytes(f), 224 + 256);
  f.launch.dynamic_shared_bytes = 224 + 256;
  std::string src = codegen(f);
  EXPECT_TRUE(contains(src, "half* S1 = (half*)(tessel_dynamic_smem + 0);")) << src;
  EXPECT_TRUE(contains(src, "float* S2 = (float*)(tessel_dynamic_smem + 224);")) << src;
  expect_compiles(src);
}

TEST(CodeGenCUDA, VectorizedRampOf8Halves) {
  Buffer A = flat_buffer("A", Float(16), 1024), B = flat_buffer("B", Float(16), 1024),
         C = flat_buffer("C", Float(16), 1024);
  IterVar tx = thread_axis("threadIdx.x");
  Expr ramp = Ramp::make(tx.var() * 8, 1, 8);
  Stmt copy = store(B, ramp, load(A, ramp));
  Stmt add = store(C, ramp, load(A, ramp) + Broadcast::make(make_const(Float(16), 1.0), 8));
  Stmt body = launch_thread(tx, 128, Seq::make({copy, add}));
  std::string src = codegen(kernel("copy_halves", {A, B, C}, body, {1, 1, 1}, {128, 1, 1}));

  expect_filecheck(src, R"(
CHECK: copy_halves(const half* __restrict__ A, half* __restrict__ B, half* __restrict__ C) {
CHECK-NEXT:   *(uint4*)(B + ((int)threadIdx.x) * 8) = *(const uint4*)(A + ((int)threadIdx.x) * 8);
CHECK-NEXT:   alignas(16) half A_vec[8];
CHECK-NEXT:   *(uint4*)A_vec = *(const uint4*)(A + ((int)threadIdx.x) * 8);
CHECK-NEXT:   alignas(16) half C_vec[8];
CHECK-NEXT:   C_vec[0] = A_vec[0] + __float2half_rn(1.0f);
CHECK:        C_vec[7] = A_vec[7] + __float2half_rn(1.0f);
CHECK-NEXT:   *(uint4*)(C + ((int)threadIdx.x) * 8) = *(uint4*)C_vec;
CHECK-NEXT: }
)");
  expect_compiles(src);
}

// Inside a stream_loads attr (Stage::stream_loads) the vector loads of buffers the kernel does
// not write skip L1 (tessel_ld_stream: 16, 8 and 4 bytes); a buffer it writes, and loads outside
// the attr, keep the plain load. The helper compiles for every size.
TEST(CodeGenCUDA, StreamLoadsSkipL1) {
  Buffer A = flat_buffer("A", Float(32), 1024), H = flat_buffer("H", Float(16), 1024),
         C = flat_buffer("C", Float(32), 1024), E = flat_buffer("E", Float(16), 1024),
         W = flat_buffer("W", Float(32), 1024);
  IterVar tx = thread_axis("threadIdx.x");
  auto ramp = [&](int lanes, int offset = 0) {
    Expr base = tx.var() * lanes;
    return Ramp::make(offset ? base + offset : base, 1, lanes);
  };
  Stmt streamed = AttrStmt::make(
      A, attr::stream_loads, Expr(1),
      Seq::make({store(C, ramp(4), load(A, ramp(4))), store(E, ramp(4), load(H, ramp(4))),
                 store(E, ramp(2, 512), load(H, ramp(2))),
                 store(W, ramp(4), load(W, ramp(4)))}));
  Stmt plain = store(C, ramp(4, 512), load(A, ramp(4)));
  Stmt body = launch_thread(tx, 128, Seq::make({streamed, plain}));
  std::string src = codegen(kernel("stream", {A, H, C, E, W}, body, {1, 1, 1}, {128, 1, 1}));
  expect_filecheck(src, R"(
CHECK: __device__ __forceinline__ T tessel_ld_stream(const void *p) {
CHECK: stream(const float* __restrict__ A, const half* __restrict__ H, float* __restrict__ C, half* __restrict__ E, float* __restrict__ W) {
CHECK-NEXT:   *(float4*)(C + ((int)threadIdx.x) * 4) = tessel_ld_stream<float4>(A + ((int)threadIdx.x) * 4);
CHECK-NEXT:   *(uint2*)(E + ((int)threadIdx.x) * 4) = tessel_ld_stream<uint2>(H + ((int)threadIdx.x) * 4);
CHECK-NEXT:   *(unsigned int*)(E + ((int)threadIdx.x) * 2 + 512) = tessel_ld_stream<unsigned int>(H + ((int)threadIdx.x) * 2);
CHECK-NEXT:   *(float4*)(W + ((int)threadIdx.x) * 4) = *(const float4*)(W + ((int)threadIdx.x) * 4);
CHECK-NEXT:   *(float4*)(C + ((int)threadIdx.x) * 4 + 512) = *(const float4*)(A + ((int)threadIdx.x) * 4);
CHECK-NEXT: }
)");
  expect_compiles(src);
}

TEST(CodeGenCUDA, VectorAccessFallsBackToLanesWhenUnaligned) {
  Buffer A = flat_buffer("A", Float(32), 1028), B = flat_buffer("B", Float(32), 1028);
  IterVar tx = thread_axis("threadIdx.x");
  Expr aligned = Ramp::make(tx.var() * 4, 1, 4);
  Expr unaligned = Ramp::make(tx.var() * 4 + 1, 1, 4);
  Expr strided = Ramp::make(tx.var(), 256, 4);
  Stmt body = Seq::make({store(B, aligned, load(A, aligned) * Broadcast::make(Expr(2.0f), 4)),
                         store(B, unaligned, load(A, aligned)), store(B, aligned, load(A, strided))});
  body = launch_thread(tx, 256, body);
  std::string src = codegen(kernel("lanes", {A, B}, body, {1, 1, 1}, {256, 1, 1}));

  expect_filecheck(src, R"(
CHECK: lanes(
CHECK-NEXT:   alignas(16) float A_vec[4];
CHECK-NEXT:   *(float4*)A_vec = *(const float4*)(A + ((int)threadIdx.x) * 4);
CHECK-NEXT:   alignas(16) float B_vec[4];
CHECK-NEXT:   B_vec[0] = A_vec[0] * 2.0f;
CHECK:        *(float4*)(B + ((int)threadIdx.x) * 4) = *(float4*)B_vec;
CHECK:        B[((int)threadIdx.x) * 4 + 1] = A_vec_1[0];
CHECK-NEXT:   B[((int)threadIdx.x) * 4 + 2] = A_vec_1[1];
CHECK:        B_vec_1[1] = A[((int)threadIdx.x) + 256];
CHECK:        *(float4*)(B + ((int)threadIdx.x) * 4) = *(float4*)B_vec_1;
)");
  expect_compiles(src);
}

TEST(CodeGenCUDA, FloorDivAndFloorMod) {
  Buffer A = flat_buffer("A", Int(32), 1024), B = flat_buffer("B", Int(64), 1024);
  IterVar tx = thread_axis("threadIdx.x");
  Var i("i");
  Expr x = tx.var();
  // Non-negative dividend, positive divisor: C's / and % are floor division.
  Expr plain = FloorDiv::make(i * 256 + x, Expr(32)) * 100 + FloorMod::make(x, Expr(16));
  // Possibly negative dividend: the helpers.
  Expr signed_ = FloorDiv::make(x - 128, Expr(16)) + FloorMod::make(x - 128, Expr(16));
  Expr wide = cast(Int(64), x) - make_const(Int(64), 100);
  Stmt body = Seq::make(
      {For::make(i, 0, 4, ForKind::Serial, store(A, i * 256 + x, plain)),
       store(A, x, signed_ + FloorMod::make(FloorDiv::make(x - 7, Expr(2)), Expr(3))),
       store(B, x, FloorDiv::make(wide, make_const(Int(64), 3)) + FloorMod::make(wide, make_const(Int(64), 3)))});
  body = launch_thread(tx, 256, body);
  std::string src = codegen(kernel("floor_ops", {A, B}, body, {1, 1, 1}, {256, 1, 1}));

  expect_filecheck(src, R"(
CHECK: __device__ __forceinline__ int tessel_floordiv(int a, int b) {
CHECK: floor_ops(int* __restrict__ A, long long* __restrict__ B) {
CHECK-NEXT:   for (int i = 0; i < 4; ++i) {
CHECK-NEXT:     A[i * 256 + ((int)threadIdx.x)] = (i * 256 + ((int)threadIdx.x)) / 32 * 100 + ((int)threadIdx.x) % 16;
CHECK-NEXT:   }
CHECK-NEXT:   A[((int)threadIdx.x)] = tessel_floordiv(((int)threadIdx.x) - 128, 16) + tessel_floormod(((int)threadIdx.x) - 128, 16) + tessel_floormod(tessel_floordiv(((int)threadIdx.x) - 7, 2), 3);
CHECK-NEXT:   B[((int)threadIdx.x)] = tessel_floordiv(((long long)((int)threadIdx.x)) - 100LL, 3LL) + tessel_floormod(((long long)((int)threadIdx.x)) - 100LL, 3LL);
)");
  expect_compiles(src);
}

TEST(CodeGenCUDA, ExpressionsAndStatements) {
  Buffer A = flat_buffer("A", Float(32), 256), B = flat_buffer("B", Int(32), 256);
  Buffer L = flat_buffer("acc.local", Float(32), 4, "local");
  IterVar tx = thread_axis("threadIdx.x");
  Expr x = tx.var();
  Var i("i"), j("i"), keyword("int"), t("t"), u("u");
  // Two distinct loops named i, a variable named like a C keyword, lets in and out of branches.
  Expr guarded = if_then_else(x > 0, Let::make(t, x - 1, cast(Float(32), load(B, t))), Expr(0.0f));
  Expr lets = Let::make(u, x * 2, cast(Float(32), u + u));
  Stmt init = For::make(i, 0, 4, ForKind::Unrolled, store(L, i, make_const(Float(32), -INFINITY)));
  Stmt update = For::make(j, 0, 4, ForKind::Serial,
                          store(L, j, max(load(L, j), guarded + lets)));
  Stmt fin = LetStmt::make(
      keyword, min(x, 3),
      AssertStmt::make(keyword >= 0, "min is\nnon-negative",
                       IfThenElse::make(x < 128 && !(x == 5), store(A, x, load(L, keyword)),
                                        IfThenElse::make(x < 200, store(A, x, Expr(1.5f)),
                                                         store(A, x, select(x > 220, Expr(2.0f), Expr(3.0f)))))));
  Stmt body = launch_thread(tx, 256, allocate(L, Seq::make({init, update, fin})));
  std::string src = codegen(kernel("misc", {A, B}, body, {1, 1, 1}, {256, 1, 1}));

  expect_filecheck(src, R"(
CHECK: misc(float* __restrict__ A, const int* __restrict__ B) {
CHECK-NEXT:   alignas(16) float acc_local[4];
CHECK-NEXT:   #pragma unroll
CHECK-NEXT:   for (int i = 0; i < 4; ++i) {
CHECK-NEXT:     acc_local[i] = __int_as_float(0xff800000);
CHECK:        for (int i_1 = 0; i_1 < 4; ++i_1) {
CHECK-NEXT:     const int u = ((int)threadIdx.x) * 2;
CHECK-NEXT:     acc_local[i_1] = max(acc_local[i_1], (((int)threadIdx.x) > 0 ? [&]() { const int t = ((int)threadIdx.x) - 1; return ((float)B[t]); }() : 0.0f) + ((float)(u + u)));
CHECK:        const int int_1 = min(((int)threadIdx.x), 3);
CHECK-NEXT:   if (!(int_1 >= 0)) __trap();  // assert: min is non-negative
CHECK-NEXT:   if (((int)threadIdx.x) < 128 && !(((int)threadIdx.x) == 5)) {
CHECK-NEXT:     A[((int)threadIdx.x)] = acc_local[int_1];
CHECK-NEXT:   } else if (((int)threadIdx.x) < 200) {
CHECK-NEXT:     A[((int)threadIdx.x)] = 1.5f;
CHECK-NEXT:   } else {
CHECK-NEXT:     A[((int)threadIdx.x)] = (((int)threadIdx.x) > 220 ? 2.0f : 3.0f);
CHECK-NEXT:   }
)");
  expect_compiles(src);
}

// cp_async / commit / wait: helpers emitted once, the zero-fill form for a predicate, and clear
// errors for a size cp.async cannot copy or a wait count that is not a constant.
TEST(CodeGenCUDA, AsyncCopies) {
  Buffer A = flat_buffer("A", Float(16), 1024), B = flat_buffer("B", Float(16), 1024);
  Buffer As = flat_buffer("A.shared", Float(16), 128, "shared");
  IterVar tx = thread_axis("threadIdx.x");
  auto call = [](const char *name, std::vector<Expr> args) {
    return Evaluate::make(Call::make(Void(), name, std::move(args), Call::Intrinsic));
  };
  Expr t = tx.var();
  auto kernel_with = [&](Expr bytes, Expr pred, Expr wait) {
    Stmt body = Seq::make({call(intrinsic::cp_async, {address_of(As, t * 8), address_of(A, t * 8),
                                                      bytes, pred}),
                           call(intrinsic::cp_async_commit, {}),
                           call(intrinsic::cp_async_wait, {wait}), sync_threads(),
                           store(B, t, load(As, 127 - t))});
    return kernel("copy_async", {A, B}, launch_thread(tx, 16, allocate(As, body)), {1, 1, 1},
                  {16, 1, 1});
  };
  std::string src = codegen(kernel_with(16, const_true(), 0));
  expect_filecheck(src, R"(
CHECK: __device__ __forceinline__ void tessel_cp_async_zfill(void *dst, const void *src, bool pred) {
CHECK: cp.async.cg.shared.global
CHECK: copy_async(
CHECK: tessel_cp_async<16>(&A_shared[((int)threadIdx.x) * 8], &A[((int)threadIdx.x) * 8]);
CHECK-NEXT: tessel_cp_async_commit();
CHECK-NEXT: tessel_cp_async_wait<0>();
CHECK-NEXT: __syncthreads();
)");
  expect_compiles(src);
  std::string zfill = codegen(kernel_with(8, t < 8, 1));
  EXPECT_NE(zfill.find("tessel_cp_async_zfill<8>(&A_shared[((int)threadIdx.x) * 8], "
                       "&A[((int)threadIdx.x) * 8], ((int)threadIdx.x) < 8);"),
            std::string::npos)
      << zfill;
  EXPECT_NE(zfill.find("tessel_cp_async_wait<1>();"), std::string::npos) << zfill;
  expect_compiles(zfill);

  tessel::test::expect_error([&] { codegen(kernel_with(12, const_true(), 0)); },
                             {"cp_async", "copies 4, 8 or 16 bytes"});
  tessel::test::expect_error([&] { codegen(kernel_with(16, const_true(), t)); },
                             {"cp_async_wait takes one non-negative constant"});
}

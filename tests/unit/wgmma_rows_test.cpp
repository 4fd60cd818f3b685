// Work along the rows of a wgmma accumulator, in registers: Y = softmax over the rows of A B^T
// in one kernel, the scores a wgmma accumulator, their row max and row sum in scope wgmma.rows
// (wgmma_row_reduce: a thread's registers of its two rows, then the quad's shuffles), the
// exponentials and the division register by register (wgmma_rowwise). The pieces of a fused
// attention on Hopper (docs/ATTENTION.md "What is left"), as general stages: the lowered IR, the
// executor against float64, the CUDA compiled for sm_90a without local memory, the GPU, and the
// errors.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "runtime/Device.h"
#include "runtime/Nvrtc.h"
#include "runtime/interp/Executor.h"
#include "schedules/WgmmaIntrinsics.h"

#include "SassUtil.h"

#include <gtest/gtest.h>

#include <regex>

using namespace tessel;
using tessel::test::expect_error;

namespace {

// `t`'s tile of `reader` in shared memory, interleaved in chunks of 8 (the layout wgmma reads
// unswizzled) or, `swizzled`, in 128-byte swizzled rows, computed at `at` of `stage`, copied 16
// bytes a thread by 128 threads.
void shared_tile(Schedule &s, const Tensor &t, const Tensor &reader, const Tensor &stage,
                 const IterVar &at, bool swizzled = false) {
  Tensor sh = s.cache_read(t, "shared", {reader});
  s[sh].compute_at(s[stage], at);
  if (swizzled)
    s[sh].swizzle(128);
  else
    s[sh].storage_interleave(8);
  auto [r, c] = s[sh].axes<2>();
  auto [c1, vec] = s[sh].split(c, 16 / t.dtype().bytes());
  auto [f, tx] = s[sh].split(s[sh].fuse(r, c1), 128);
  (void)f;
  s[sh].bind(tx, thread_axis("threadIdx.x")).vectorize(vec);
}

struct RowSoftmax {
  Tensor A, B, Y;
  Schedule s;
};

const WgmmaRowFunction kExpMinusRow{"exp(x - row)",
                                    [](const Expr &x, const Expr &row) { return exp(x - row); }};
const WgmmaRowFunction kDivideByRow{"x / row",
                                    [](const Expr &x, const Expr &row) { return x / row; }};

// Y(i, j) = exp(S(i, j) - max_j S(i, j)) / sum_j exp(...), S = A B^T scaled, for A (M x K) and B
// (N x K) in float16: a block per 64 rows (one warpgroup), K in one step of shared tiles, every
// accumulator in 64 x n tiles (n = N: one), a row reduced over them in turn (the reduction split
// around the intrinsic: its reset, then an update per tile).
RowSoftmax row_softmax(int64_t M, int64_t N, int64_t K, int64_t n = 0) {
  if (n == 0)
    n = N;
  const DataType F32 = Float(32);
  const float scale = 0.25f;
  Tensor A = placeholder({M, K}, Float(16), "A"), B = placeholder({N, K}, Float(16), "B");
  IterVar k = reduce_axis({0, K}, "k");
  Tensor S = compute(
      {M, N},
      [&](Var i, Var j) { return sum(A(i, k).astype(F32) * B(j, k).astype(F32), {k}); }, "S");
  IterVar j1 = reduce_axis({0, N}, "j1"), j2 = reduce_axis({0, N}, "j2");
  WgmmaRowFunction scaled{"x * 0.25", [=](const Expr &x, const Expr &) { return x * scale; }};
  Tensor mx = compute({M}, [&](Var i) { return max(scaled.f(S(i, j1), Expr()), {j1}); }, "mx");
  WgmmaRowFunction exp_scaled{"exp(x * 0.25 - row)", [=](const Expr &x, const Expr &row) {
                                return exp(x * scale - row);
                              }};
  Tensor E = compute({M, N}, [&](Var i, Var j) { return exp_scaled.f(S(i, j), mx(i)); }, "E");
  Tensor sm = compute({M}, [&](Var i) { return sum(E(i, j2), {j2}); }, "sm");
  Tensor Y = compute({M, N}, [&](Var i, Var j) { return kDivideByRow.f(E(i, j), sm(i)); }, "Y");

  Schedule s = create_schedule({Y});
  Tensor YF = s.cache_write(Y, "wgmma.accumulator");
  // A stage's columns (or the reduction over them) in tiles of n, the tiles' loop outermost and
  // unrolled (register indices are constants); returns the rows' axis, where it is tensorized.
  auto column_tiles = [&](const Tensor &t, const IterVar &columns) {
    auto [jo, ji] = s[t].split(columns, n);
    IterVar rows = s[t].op_axis(0);
    s[t].reorder({jo, rows, ji});
    s[t].unroll(jo);
    return rows;
  };
  auto [i, j] = s[Y].axes<2>();
  auto [bi, ii] = s[Y].split(i, 64);
  auto [jo, ji] = s[Y].split(j, n);
  s[Y].reorder({bi, jo, ii, ji}).unroll(jo);
  s[Y].bind(bi, thread_axis("blockIdx.x"));
  s[Y].env_threads({thread_axis(Range(0, 128), "threadIdx.x")});
  s[Y].tensorize(ii, wgmma_store_matrix(n, "global", F32));
  // The scores: K in 16-wide slices, the tiles of A and B in shared memory.
  s[S].compute_at(s[Y], bi).set_scope("wgmma.accumulator");
  {
    auto [ko, ki] = s[S].split(s[S].reduce_axis()[0], 16);
    auto [sjo, sji] = s[S].split(s[S].op_axis(1), n);
    IterVar si = s[S].op_axis(0);
    s[S].reorder({ko, sjo, si, sji, ki}).unroll(sjo);
    s[S].tensorize(si, wgmma_gemm(n, "col_major", 0));
  }
  for (const Tensor &t : {A, B})
    shared_tile(s, t, S, Y, bi);
  // The row stages at the block.
  for (auto [rows, kind, f] : {std::tuple{mx, RowReduce::Max, scaled},
                               std::tuple{sm, RowReduce::Sum, WgmmaRowFunction{}}}) {
    s[rows].compute_at(s[Y], bi).set_scope("wgmma.rows");
    s[rows].tensorize(column_tiles(rows, s[rows].reduce_axis()[0]),
                      wgmma_row_reduce(n, kind, f));
  }
  s[E].compute_at(s[Y], bi).set_scope("wgmma.accumulator");
  s[E].tensorize(column_tiles(E, s[E].op_axis(1)), wgmma_rowwise(n, exp_scaled));
  s[YF].compute_at(s[Y], bi);
  s[YF].tensorize(column_tiles(YF, s[YF].op_axis(1)), wgmma_rowwise(n, kDivideByRow));
  return {A, B, Y, s};
}

// Two contractions chained through registers: Y = softmax over the rows of A B^T, times V (N x
// D), as one block of attention: the probabilities P (an accumulator) rounded to float16 into
// wgmma's A operand in registers (wgmma_acc_to_a), P V on wgmma with A from registers
// (wgmma_gemm_rs) and V's tile in shared memory, divided by the row sums at the end.
struct SoftmaxTimesV {
  Tensor A, B, V, Y;
  Schedule s;
};

struct ChainOptions {
  // The elementwise stages (the exponentials, the division) left untensorized, distributed over
  // the threads by the accumulator's layout (distribute_fragment_loops), with a causal mask
  // (key j visible to row i when j <= i) among them.
  bool distributed = false;
  // float8 (e4m3, N = K = 128): S = A B^T on wgmma's k32, P rounded to e4m3 into the A registers
  // with each k32 slice's columns in the order a thread holds them (wgmma_fp8_a_column), so
  // P V reads V's keys in that order too: V is given transposed (D x N, K-major as float8 wgmma
  // takes B) and the contraction runs over P(i, j) VT(d, j), P(i, j) = E(i,
  // wgmma_fp8_a_column(j)) (for the reference any D x N input: the definition says what is
  // computed); the tiles swizzled, rows of 128 bytes.
  bool fp8 = false;
  // false: no softmax, P = S (its columns, rounded) and Y = P V; in float8 random inputs make it
  // exact but for float32's last bits (the rounding of P sees the same S on the executor as in
  // the reference), so a column in the wrong place shows far outside them.
  bool softmax = true;
};

SoftmaxTimesV softmax_times_v(int64_t M, int64_t N, int64_t K, int64_t D, ChainOptions c = {}) {
  const DataType F32 = Float(32), T = c.fp8 ? Float8E4M3() : Float(16);
  Tensor A = placeholder({M, K}, T, "A"), B = placeholder({N, K}, T, "B");
  Tensor V = c.fp8 ? placeholder({D, N}, T, "VT") : placeholder({N, D}, T, "V");
  IterVar k = reduce_axis({0, K}, "k");
  Tensor S = compute(
      {M, N},
      [&](Var i, Var j) { return sum(A(i, k).astype(F32) * B(j, k).astype(F32), {k}); }, "S");
  IterVar j1 = reduce_axis({0, N}, "j1"), j2 = reduce_axis({0, N}, "j2"),
          j3 = reduce_axis({0, N}, "j3");
  Tensor mx, E = S, sm;
  if (c.softmax) {
    mx = compute({M}, [&](Var i) { return max(S(i, j1), {j1}); }, "mx");
    E = compute(
        {M, N},
        [&](Var i, Var j) {
          Expr e = kExpMinusRow.f(S(i, j), mx(i));
          return c.distributed ? if_then_else(j <= i, e, 0.0f) : e;
        },
        "E");
    sm = compute({M}, [&](Var i) { return sum(E(i, j2), {j2}); }, "sm");
  }
  Tensor P = compute(
      {M, N}, [&](Var i, Var j) { return E(i, c.fp8 ? wgmma_fp8_a_column(j) : Expr(j)).astype(T); },
      "P");
  Tensor O = compute(
      {M, D},
      [&](Var i, Var d) {
        Expr v = c.fp8 ? V(d, j3) : V(j3, d);
        return sum(P(i, j3).astype(F32) * v.astype(F32), {j3});
      },
      "O");
  Tensor Y = compute(
      {M, D},
      [&](Var i, Var d) { return c.softmax ? kDivideByRow.f(O(i, d), sm(i)) : O(i, d) * 1.0f; },
      "Y");

  Schedule s = create_schedule({Y});
  Tensor YF = s.cache_write(Y, "wgmma.accumulator");
  auto [i, d] = s[Y].axes<2>();
  auto [bi, ii] = s[Y].split(i, 64);
  (void)d;
  const IterVar tx = thread_axis(Range(0, 128), "threadIdx.x");
  s[Y].bind(bi, thread_axis("blockIdx.x"));
  s[Y].env_threads({tx});
  s[Y].tensorize(ii, wgmma_store_matrix(D, "global", F32));
  // The two contractions: K (and then the keys, N) in slices of one wgmma's K.
  auto contraction = [&](const Tensor &t, const std::shared_ptr<const TensorIntrin> &intrin) {
    s[t].compute_at(s[Y], bi).set_scope("wgmma.accumulator");
    auto [ko, ki] = s[t].split(s[t].reduce_axis()[0], c.fp8 ? 32 : 16);
    IterVar rows = s[t].op_axis(0);
    s[t].reorder({ko, rows, s[t].op_axis(1), ki}).unroll(ko);
    s[t].tensorize(rows, intrin);
  };
  // The operands' tiles: interleaved (16-bit), or swizzled rows of 128 bytes (float8).
  const int swizzle = c.fp8 ? 128 : 0;
  contraction(S, wgmma_gemm(N, "col_major", swizzle, T));
  shared_tile(s, A, S, Y, bi, c.fp8);
  shared_tile(s, B, S, Y, bi, c.fp8);
  if (c.softmax) {
    for (auto [rows, kind] : {std::pair{mx, RowReduce::Max}, std::pair{sm, RowReduce::Sum}}) {
      s[rows].compute_at(s[Y], bi).set_scope("wgmma.rows");
      s[rows].tensorize(s[rows].op_axis(0), wgmma_row_reduce(N, kind));
    }
    s[E].compute_at(s[Y], bi).set_scope("wgmma.accumulator");
  }
  s[P].compute_at(s[Y], bi).set_scope("wgmma.matrix_a");
  s[P].tensorize(s[P].op_axis(0), wgmma_acc_to_a(N, T));
  contraction(O, wgmma_gemm_rs(D, c.fp8 ? "col_major" : "row_major", swizzle, T));
  shared_tile(s, V, O, Y, bi, c.fp8);
  s[YF].compute_at(s[Y], bi);
  if (c.softmax && !c.distributed) {
    s[E].tensorize(s[E].op_axis(0), wgmma_rowwise(N, kExpMinusRow));
    s[YF].tensorize(s[YF].op_axis(0), wgmma_rowwise(D, kDivideByRow));
  }
  return {A, B, V, Y, s};
}

// The float8 chain at M rows, head dim D (N = K = 128).
SoftmaxTimesV softmax_times_v_fp8(int64_t M, int64_t D, bool softmax = true) {
  return softmax_times_v(M, 128, 128, D, {.fp8 = true, .softmax = softmax});
}

// NVRTC's sm_90a cubin of `m` (compiled), checked to use no stack.
CompiledKernel compile_sm90a(const LoweredModule &m, const char *name) {
  CompileOptions o;
  o.arch = "sm_90a";
  CompiledKernel k = nvrtc_compile(codegen_cuda(m), nvrtc_options(o), name);
  EXPECT_FALSE(k.cubin.empty()) << k.log;
  EXPECT_EQ(k.kernels.at(0).stack_bytes, 0) << k.log;
  return k;
}

} // namespace

TEST(WgmmaRows, RowSoftmaxLowersToRegistersAndShuffles) {
  RowSoftmax r = row_softmax(128, 64, 32);
  const std::string ir = to_string(lower(r.s, {r.A, r.B, r.Y}));
  // The rows: 64 a warpgroup, 2 registers a thread.
  EXPECT_NE(ir.find("allocate(mx, float32, [64]), storage_scope = wgmma.rows;"), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("allocate(sm, float32, [64]), storage_scope = wgmma.rows;"), std::string::npos)
      << ir;
  // The row max: the thread's registers of each row, then two shuffles across the quad.
  EXPECT_NE(ir.find("@wgmma_row_set(mx, 0, 0, -inff32)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let p1: float32 = max(p0, shfl_xor(p0, 1))"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let p2: float32 = max(p1, shfl_xor(p1, 2))"), std::string::npos) << ir;
  EXPECT_NE(ir.find("@wgmma_row_set(mx, 0, 0, max(@wgmma_row(mx, 0, 0), p2))"), std::string::npos)
      << ir;
  // The exponentials in E's registers, the row's value read once for its n / 4 registers.
  EXPECT_NE(ir.find("let row: float32 = @wgmma_row(mx, 0, 0)"), std::string::npos) << ir;
  EXPECT_NE(
      ir.find("@wgmma_reg_set(E, 0, 64, 5, exp(@wgmma_reg(S, 0, 64, 5) * 0.25f32 - row))"),
      std::string::npos)
      << ir;
}

TEST(WgmmaRows, RowSoftmaxOnTheExecutor) {
  // One and two blocks of rows, N in one tile, in 4 tiles and in 2 (rows reduced over them).
  struct Case {
    int64_t M, N, K, n;
  };
  for (const Case &c : {Case{64, 64, 32, 64}, Case{128, 128, 64, 32}, Case{64, 256, 16, 128}}) {
    SCOPED_TRACE("M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) +
                 " K=" + std::to_string(c.K) + " tiles of " + std::to_string(c.n));
    RowSoftmax r = row_softmax(c.M, c.N, c.K, c.n);
    CheckResult res = check_on_cpu(r.s, {r.A, r.B, r.Y}, 2);
    EXPECT_TRUE(res.compare.ok) << res.str();
  }
}

// A wrong layout gives wrong numbers: the row sums taken without the quad's shuffles (each lane's
// own quarter of the row) make the executor's check fail.
TEST(WgmmaRows, TheQuadsShufflesAreNeeded) {
  RowSoftmax r = row_softmax(64, 64, 16);
  LoweredModule m = lower(r.s, {r.A, r.B, r.Y});
  // Every shfl_xor(v, mask) becomes 0 (the identity of the sums; the max of a lane's quarter is
  // at least the row's max minus something, so only the sums go wrong).
  class DropShuffles : public IRMutator {
    Expr visit(const Call *op) override {
      if (op->is_intrinsic(intrinsic::shfl_xor))
        return make_zero(op->type);
      return IRMutator::visit(op);
    }
  };
  for (LoweredFunc &f : m.funcs)
    f.body = DropShuffles().mutate(f.body);
  const std::vector<Tensor> args = {r.A, r.B, r.Y};
  CheckProblem pb = make_check_problem(args, 2, 1);
  std::vector<interp::HostBuffer> bufs = input_buffers(pb);
  bufs.push_back(interp::HostBuffer::from_doubles(Float(32), std::vector<double>(64 * 64, 0.0)));
  std::vector<interp::HostBuffer *> ptrs;
  for (interp::HostBuffer &b : bufs)
    ptrs.push_back(&b);
  interp::execute(m, ptrs);
  CheckResult res = check_output(pb, bufs.back());
  EXPECT_FALSE(res.compare.ok) << res.str();
}

TEST(WgmmaRows, CompilesForSm90aWithoutLocalMemory) {
  RowSoftmax r = row_softmax(128, 128, 64);
  LoweredModule m = lower(r.s, {r.A, r.B, r.Y});
  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("float mx[2];"), std::string::npos) << src;
  EXPECT_NE(src.find("__shfl_xor_sync(0xffffffffu, "), std::string::npos) << src;
  CompiledKernel k = compile_sm90a(m, "row_softmax.cu");
  ASSERT_FALSE(k.cubin.empty());
  EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
  std::optional<std::string> sass = tessel::test::sass_of(k.cubin, k.kernels.at(0).name);
  if (!sass)
    GTEST_SKIP() << "NVRTC compiled for sm_90a, but there is no cuobjdump to check the SASS";
  EXPECT_NE(sass->find("HGMMA.64x128x16.F32"), std::string::npos);
  EXPECT_NE(sass->find("SHFL.BFLY"), std::string::npos);
  for (const char *local : {"LDL", "STL"})
    EXPECT_EQ(sass->find(local), std::string::npos) << local;
}

TEST(WgmmaRows, GpuRowSoftmaxMatchesTheReference) {
  if (!Device::available())
    GTEST_SKIP() << Device::unavailable_reason();
  if (Device::get().arch() != "sm_90")
    GTEST_SKIP() << "wgmma needs a Hopper GPU (sm_90), this one is " << Device::get().arch();
  for (int64_t n : {128, 64}) {
    RowSoftmax r = row_softmax(256, 128, 64, n);
    CheckResult res = check_on_gpu(r.s, {r.A, r.B, r.Y}, 2);
    EXPECT_TRUE(res.compare.ok) << res.str();
  }
}

// P = softmax(A B^T) stays in registers as P V's A operand: no shared P, a wgmma_mma_rs per k16
// slice of the keys reading P's registers.
TEST(WgmmaRows, ChainedContractionsKeepTheIntermediateInRegisters) {
  SoftmaxTimesV t = softmax_times_v(64, 64, 32, 64);
  const std::vector<Tensor> args = {t.A, t.B, t.V, t.Y};
  const std::string ir = to_string(lower(t.s, args));
  EXPECT_NE(ir.find("allocate(P, float16, [4096]), storage_scope = wgmma.matrix_a;"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("@wgmma_acc_to_a(P, 0, E, 0, 64)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("@wgmma_mma_rs(O, 0, 64, P, 3, address_of(V.shared[384]), 64, 512, 1, 0)"),
            std::string::npos)
      << ir;
  // On the executor against float64: one and two blocks, head dims 64 and 128, 128 keys.
  for (auto [M, N, K, D] : {std::array<int64_t, 4>{64, 64, 32, 64}, {128, 128, 64, 128}}) {
    SCOPED_TRACE("M=" + std::to_string(M) + " N=" + std::to_string(N) + " D=" + std::to_string(D));
    SoftmaxTimesV c = softmax_times_v(M, N, K, D);
    CheckResult res = check_on_cpu(c.s, {c.A, c.B, c.V, c.Y}, 3);
    EXPECT_TRUE(res.compare.ok) << res.str();
  }
  // Its CUDA: wgmma with A from 4 registers, no local memory.
  LoweredModule m = lower(t.s, args);
  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("unsigned P[16];"), std::string::npos) << src;
  EXPECT_NE(src.find("tessel_pack_f16x2("), std::string::npos) << src;
  CompiledKernel k = compile_sm90a(m, "softmax_times_v.cu");
  ASSERT_FALSE(k.cubin.empty());
  if (std::optional<std::string> sass = tessel::test::sass_of(k.cubin, k.kernels.at(0).name)) {
    EXPECT_NE(sass->find("HGMMA.64x64x16.F32 R"), std::string::npos) << *sass;
    for (const char *local : {"LDL", "STL"})
      EXPECT_EQ(sass->find(local), std::string::npos) << local;
  }
}

// The float8 chain: P in e4m3 registers packed four columns a register from the accumulator
// (no shuffles), P V on wgmma k32 with A from registers; the executor against float64 (which
// rounds P to e4m3 as the definition says); the CUDA for sm_90a without local memory.
TEST(WgmmaRows, Float8ChainTakesTheColumnsInTheRegistersOrder) {
  SoftmaxTimesV t = softmax_times_v_fp8(64, 64);
  const std::vector<Tensor> args = {t.A, t.B, t.V, t.Y};
  const std::string ir = to_string(lower(t.s, args));
  EXPECT_NE(ir.find("allocate(P, float8_e4m3, [8192]), storage_scope = wgmma.matrix_a;"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("@wgmma_acc_to_a(P, 0, E, 0, 128)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("@wgmma_mma_rs(O, 0, 64, P, 3, "), std::string::npos) << ir;
  for (auto [M, D] : {std::pair<int64_t, int64_t>{64, 64}, {128, 128}}) {
    SCOPED_TRACE("M=" + std::to_string(M) + " D=" + std::to_string(D));
    SoftmaxTimesV c = softmax_times_v_fp8(M, D);
    CheckResult res = check_on_cpu(c.s, {c.A, c.B, c.V, c.Y}, 3);
    EXPECT_TRUE(res.compare.ok) << res.str();
    // Without the softmax, exact but for float32's last bits: P's rounding to e4m3's 4 bits
    // bounds the check's tolerance, not the columns' order, which this holds to (|Y| ~ 25).
    SoftmaxTimesV plain = softmax_times_v_fp8(M, D, false);
    CheckResult exact = check_on_cpu(plain.s, {plain.A, plain.B, plain.V, plain.Y}, 3);
    EXPECT_TRUE(exact.compare.ok) << exact.str();
    EXPECT_LT(exact.compare.max_abs_error, 1e-3) << exact.str();
  }
  LoweredModule m = lower(t.s, args);
  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("unsigned P[16];"), std::string::npos) << src;
  EXPECT_NE(src.find("tessel_pack_e4m3x4("), std::string::npos) << src;
  EXPECT_NE(src.find("wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"), std::string::npos)
      << src;
  CompiledKernel k = compile_sm90a(m, "softmax_times_v_fp8.cu");
  ASSERT_FALSE(k.cubin.empty());
  if (std::optional<std::string> sass = tessel::test::sass_of(k.cubin, k.kernels.at(0).name)) {
    // P V's A from registers (`D, A, gdesc[B]`), S's A from shared memory (`D, gdesc[..]`);
    // P packed by the converts, four values a register.
    EXPECT_TRUE(std::regex_search(
        *sass, std::regex(R"(QGMMA\.64x64x32\.F32\.E4M3\.E4M3 R\d+, R\d+, gdesc)")))
        << *sass;
    EXPECT_TRUE(std::regex_search(
        *sass, std::regex(R"(QGMMA\.64x128x32\.F32\.E4M3\.E4M3 R\d+, gdesc)")))
        << *sass;
    EXPECT_NE(sass->find("F2FP.SATFINITE.E4M3.F32.PACK_AB"), std::string::npos) << *sass;
    for (const char *local : {"LDL", "STL"})
      EXPECT_EQ(sass->find(local), std::string::npos) << local;
  }
}

// The elementwise stages distributed by the layout instead of tensorized: the same registers,
// the causal mask evaluated per register from its row and column.
TEST(WgmmaRows, ElementwiseStagesAreDistributedByTheLayout) {
  SoftmaxTimesV t = softmax_times_v(128, 64, 32, 64, {.distributed = true});
  const std::vector<Tensor> args = {t.A, t.B, t.V, t.Y};
  const std::string ir = to_string(lower(t.s, args));
  EXPECT_NE(ir.find("@wgmma_reg_set(E, 0, 64, 0, if_then_else("), std::string::npos) << ir;
  EXPECT_EQ(ir.find("E["), std::string::npos) << ir;
  for (auto [M, N, D] : {std::array<int64_t, 3>{128, 64, 64}, {64, 128, 128}}) {
    SCOPED_TRACE("M=" + std::to_string(M) + " N=" + std::to_string(N) + " D=" + std::to_string(D));
    SoftmaxTimesV c = softmax_times_v(M, N, 32, D, {.distributed = true});
    CheckResult res = check_on_cpu(c.s, {c.A, c.B, c.V, c.Y}, 3);
    EXPECT_TRUE(res.compare.ok) << res.str();
  }
  compile_sm90a(lower(t.s, args), "distributed.cu");
}

TEST(WgmmaRows, GpuChainedContractionsMatchTheReference) {
  if (!Device::available())
    GTEST_SKIP() << Device::unavailable_reason();
  if (Device::get().arch() != "sm_90")
    GTEST_SKIP() << "wgmma needs a Hopper GPU (sm_90), this one is " << Device::get().arch();
  for (bool distributed : {false, true})
    for (auto [M, N, K, D] : {std::array<int64_t, 4>{256, 128, 64, 128}, {128, 64, 128, 64}}) {
      SoftmaxTimesV c = softmax_times_v(M, N, K, D, {.distributed = distributed});
      CheckResult res = check_on_gpu(c.s, {c.A, c.B, c.V, c.Y}, 3);
      EXPECT_TRUE(res.compare.ok) << res.str();
    }
  // In float8 (e4m3), the A operand's columns in the registers' order.
  for (auto [M, D] : {std::pair<int64_t, int64_t>{256, 128}, {128, 64}}) {
    SCOPED_TRACE("float8 M=" + std::to_string(M) + " D=" + std::to_string(D));
    SoftmaxTimesV c = softmax_times_v_fp8(M, D);
    CheckResult res = check_on_gpu(c.s, {c.A, c.B, c.V, c.Y}, 3);
    EXPECT_TRUE(res.compare.ok) << res.str();
  }
}

TEST(WgmmaRows, Errors) {
  expect_error([] { wgmma_row_reduce(12, RowReduce::Max); }, {"n=12", "multiple of 8"});
  expect_error([] { wgmma_rowwise(64, {"nothing", nullptr}); }, {"'nothing' is undefined"});
  const WgmmaRowFunction to_int{"to_int",
                                [](const Expr &x, const Expr &) { return x.astype(Int(32)); }};
  expect_error([&] { wgmma_row_reduce(64, RowReduce::Sum, to_int); },
               {"'to_int' must give float32", "int32"});
  // A scope for one output is for a fold's states.
  expect_error(
      [] {
        RowSoftmax r = row_softmax(64, 64, 16);
        r.s[r.Y].set_scope("wgmma.rows", r.Y);
      },
      {"'Y' is not a fold", "set the stage's scope instead"});
  expect_error(
      [] {
        Tensor X = placeholder({4}, Float(32), "X");
        IterVar t = fold_axis({0, 2}, "t");
        Tensor m = fold_state({4}, Float(32), "m");
        std::vector<Tensor> f =
            fold(t, {{m, Expr(0.0f), [&](auto &v) { return m(v[0]) + X(v[0]); }}}, "f");
        Tensor out = compute({4}, [&](Var i) { return f[0](i) * 2.0f; }, "out");
        Schedule s = create_schedule({out});
        s[f[0]].set_scope("wgmma.rows", X);
      },
      {"'X' is not an output of fold 'f'"});
  // A stage whose body is not the function's.
  expect_error(
      [] {
        Tensor X = placeholder({64, 64}, Float(32), "X");
        Tensor Z = compute({64, 64}, [&](Var i, Var j) { return X(i, j) * 2.0f; }, "Z");
        Schedule s = create_schedule({Z});
        s[Z].tensorize(s[Z].op_axis(0), wgmma_rowwise(64, kExpMinusRow));
        lower(s, {X, Z});
      },
      {"wgmma_rowwise(64, exp(x - row))"});
}

// gemm_fp8: e4m3 / e5m2 GEMMs on Hopper wgmma (k32) with per-tensor and block-wise scales and
// the float32 promotion every 128 of K. The CPU executor against the float64 reference (which
// dequantizes exactly), the CUDA compiled by NVRTC for sm_90a with the fp8 HGMMA in the SASS, the
// lowered IR's structure (one promotion per K block, the wgmma groups waited for before it), and
// the errors for shapes and tiles it cannot take.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "runtime/Check.h"
#include "runtime/Device.h"
#include "runtime/Float8.h"
#include "runtime/interp/Magnitude.h"
#include "schedules/GemmFp8.h"
#include "schedules/Registry.h"

#include "SassUtil.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>

using namespace tessel;
using tessel::test::count_of;
using tessel::test::expect_error;

namespace {

// Random values of an fp8 format over several binades, never zero: uniform in [-hi, hi]
// rounded to the format, redrawn when they round to zero.
HostTensor fp8_values(const Tensor &t, uint64_t seed, double hi) {
  HostTensor h{t.dtype(), constant_shape(t), {}};
  h.values.resize(size_t(h.num_elements()));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(-hi, hi);
  const Float8Format &f = t.dtype() == Float8E4M3() ? kE4M3 : kE5M2;
  for (double &v : h.values)
    do
      v = round_to_float8(d(rng), f);
    while (v == 0);
  return h;
}

// Random positive float32 scales: half powers of two (2^-4 .. 2^1), half not (in [2^-4, 4)),
// small enough that float16 outputs stay finite.
HostTensor scale_values(const Tensor &t, uint64_t seed) {
  HostTensor h{Float(32), constant_shape(t), {}};
  h.values.resize(size_t(h.num_elements()));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> e(-4, 1);
  std::uniform_real_distribution<double> m(1.0, 2.0);
  for (size_t i = 0; i < h.values.size(); ++i)
    h.values[i] = i % 2 ? std::ldexp(1.0, e(rng)) : double(float(std::ldexp(m(rng), e(rng))));
  return h;
}

struct Fp8Run {
  CompareResult result;
  double max_abs_ref = 0;
};

// Runs gemm_fp8 on the executor with fresh random inputs and compares it with the float64
// reference. The tolerance, element by element (output_tolerance):
//   |got - ref| <= 2 u_out |ref| + 2 sqrt(steps) 2^-24 M + (the output's subnormal spacing)
// u_out = 2^-8 (bfloat16), 2^-11 (float16), 2^-24 (float32): the output's one rounding, which may
// cross a rounding boundary (2 u). The executor accumulates each wgmma's 32 exact products
// into float32 (one rounding) and each promotion rounds the scales' product, the scaled partial
// and the sum to float32: a few roundings per 128 of K, each within 2^-24 of M = sum_k
// |A[i, k] B[j, k]| scale_a scale_b (magnitude_of(C)); steps (the definition's chain of
// roundings, 128 + K / 128 + 4 here) bounds how many.
// Fast accumulation: one float32 rounding per wgmma (K / 32 of them) and the epilogue's scaling.
Fp8Run run_fp8(int64_t M, int64_t N, int64_t K, DataType in, Fp8Scales scales, DataType out,
               uint64_t seed, DataType b_type = DataType(),
               std::optional<GemmWgmmaTiles> tiles = std::nullopt,
               Fp8Accumulation accumulation = Fp8Accumulation::Promoted) {
  ScheduledProgram p =
      gemm_fp8(M, N, K, tiles ? *tiles : gemm_fp8_tiles(M, N, K, scales, accumulation), in,
               scales, out, b_type, accumulation);
  LoweredModule m = lower(p.schedule, p.args);
  const Tensor &A = p.args[0], &B = p.args[1], &SA = p.args[2], &SB = p.args[3], &C = p.args[4];
  HostTensor a = fp8_values(A, seed, 16.0), b = fp8_values(B, seed + 1, 4.0);
  HostTensor sa = scale_values(SA, seed + 2), sb = scale_values(SB, seed + 3);
  std::vector<TensorBinding> in_bindings = {{A, a}, {B, b}, {SA, sa}, {SB, sb}};
  std::vector<double> ref = evaluate_reference(C, in_bindings);
  std::vector<double> mag = evaluate_reference(magnitude_of(C), in_bindings);
  std::vector<interp::HostBuffer> bufs;
  for (const HostTensor *h : {&a, &b, &sa, &sb})
    bufs.push_back(interp::HostBuffer::from_doubles(h->dtype, h->values));
  bufs.push_back(interp::HostBuffer::from_doubles(out, std::vector<double>(M * N, NAN)));
  std::vector<interp::HostBuffer *> args;
  for (auto &b : bufs)
    args.push_back(&b);
  interp::execute(m, args);
  const interp::HostBuffer &c = bufs.back();
  Fp8Run r;
  r.result = compare(ref, [&](size_t i) { return c.get(i); }, ref.size(), output_tolerance(C), mag);
  for (double v : ref)
    r.max_abs_ref = std::max(r.max_abs_ref, std::fabs(v));
  return r;
}

std::string name_of(Fp8Scales s) { return s == Fp8Scales::BlockWise ? "block-wise" : "per-tensor"; }

} // namespace

// Every input type, scale kind and output type at 128 x 128 x 256 (two K blocks), and the
// larger 128 x 256 x 512 (two blocks of columns, four K blocks, a pipeline that wraps).
TEST(GemmFp8, ExecutorMatchesFloat64Reference) {
  uint64_t seed = 100;
  for (auto [M, N, K] : {std::array<int64_t, 3>{128, 128, 256}, {128, 256, 512}})
    for (DataType in : {Float8E4M3(), Float8E5M2()})
      for (Fp8Scales scales : {Fp8Scales::PerTensor, Fp8Scales::BlockWise})
        for (DataType out : {BFloat(16), Float(16), Float(32)}) {
          SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                       " " + in.str() + " " + name_of(scales) + " -> " + out.str());
          Fp8Run r = run_fp8(M, N, K, in, scales, out, seed += 10);
          EXPECT_TRUE(r.result.ok) << r.result.str();
          EXPECT_GT(r.max_abs_ref, 1.0); // the data is not degenerate
        }
}

// Persistent (knob P=1): 3 blocks walk 6 tiles of 128 x 128 in groups of 2 rows, the ring
// running across the tiles (5 per block at most), both scale kinds, float32 and bfloat16 out.
TEST(GemmFp8, PersistentExecutorMatchesFloat64Reference) {
  uint64_t seed = 300;
  for (Fp8Scales scales : {Fp8Scales::PerTensor, Fp8Scales::BlockWise})
    for (DataType out : {BFloat(16), Float(32)}) {
      SCOPED_TRACE(name_of(scales) + " -> " + out.str());
      GemmWgmmaTiles t = gemm_fp8_tiles(384, 256, 384, scales);
      t.persistent = true;
      t.persistent_blocks = 4;
      t.raster_group = 2;
      Fp8Run r = run_fp8(384, 256, 384, Float8E4M3(), scales, out, seed += 10, DataType(), t);
      EXPECT_TRUE(r.result.ok) << r.result.str();
    }
  GemmWgmmaTiles no_roles = gemm_fp8_tiles(384, 256, 384, Fp8Scales::BlockWise);
  no_roles.persistent = true;
  no_roles.warp_specialized = false;
  tessel::test::expect_error(
      [&] { (void)gemm_fp8(384, 256, 384, no_roles, Float8E4M3()); },
      {"gemm_fp8", "persistent", "warp roles (WS=1)"});
}

// Fast accumulation (FAST=1, per-tensor scales): gemm_wgmma's schedule on 8-bit operands, one
// accumulator over K, the scales applied as C is stored. The default 128 x 256 blocks (K blocks
// walked through a ring that wraps), 128 x 128 where N is less than 256, a 2x1 cluster sharing
// B's tile by multicast, a persistent kernel with TMA stores of C, and e4m3 x e5m2.
TEST(GemmFp8, FastAccumulationExecutorMatchesFloat64Reference) {
  struct Case {
    int64_t M, N, K;
    DataType a, b, out;
    int cluster = 0;
    bool persistent_tma_store = false;
  };
  uint64_t seed = 500;
  for (const Case &c :
       {Case{128, 256, 640, Float8E4M3(), Float8E4M3(), BFloat(16)},
        Case{128, 128, 256, Float8E5M2(), Float8E5M2(), Float(32)},
        Case{256, 256, 256, Float8E4M3(), Float8E4M3(), Float(16), 1},
        Case{384, 512, 256, Float8E4M3(), Float8E4M3(), BFloat(16), 0, true},
        Case{128, 256, 256, Float8E4M3(), Float8E5M2(), Float(32)}}) {
    SCOPED_TRACE(std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) +
                 " " + c.a.str() + " x " + c.b.str() + " -> " + c.out.str() +
                 " cluster " + std::to_string(c.cluster) +
                 (c.persistent_tma_store ? " persistent, TMA store" : ""));
    GemmWgmmaTiles t = gemm_fp8_tiles(c.M, c.N, c.K, Fp8Scales::PerTensor, Fp8Accumulation::Fast);
    EXPECT_EQ(t.block_n, c.N >= 256 ? 256 : 128);
    t.cluster = c.cluster;
    if (c.persistent_tma_store) {
      t.persistent = true;
      t.persistent_blocks = 3; // 6 tiles of 128 x 256
      t.tma_store = true;
      t.stages = 3;
    }
    Fp8Run r = run_fp8(c.M, c.N, c.K, c.a, Fp8Scales::PerTensor, c.out, seed += 10, c.b, t,
                       Fp8Accumulation::Fast);
    EXPECT_TRUE(r.result.ok) << r.result.str();
    EXPECT_GT(r.max_abs_ref, 1.0);
  }
  // Ping-pong consumers (knob PP=1): two warpgroups take 12 tiles of 128 x 128 in turn on 3
  // blocks.
  GemmWgmmaTiles pp = gemm_fp8_tiles(384, 512, 256, Fp8Scales::PerTensor, Fp8Accumulation::Fast);
  pp.block_n = 128;
  pp.warpgroups_m = 1;
  pp.ping_pong = pp.persistent = true;
  pp.persistent_blocks = 3;
  Fp8Run r = run_fp8(384, 512, 256, Float8E4M3(), Fp8Scales::PerTensor, Float(32), seed + 10,
                     DataType(), pp, Fp8Accumulation::Fast);
  EXPECT_TRUE(r.result.ok) << r.result.str();
  expect_error([&] { gemm_fp8(384, 512, 256, pp, Float8E4M3(), Fp8Scales::PerTensor); },
               {"ping-pong consumers (knob PP)", "fast accumulation (FAST=1) only"});
  pp.tma_store = true;
  expect_error(
      [&] {
        gemm_fp8(384, 512, 256, pp, Float8E4M3(), Fp8Scales::PerTensor, BFloat(16), DataType(),
                 Fp8Accumulation::Fast);
      },
      {"TMA store of C (knob TS=1)", "ping-pong consumers (knob PP=1)"});
}

// Fast accumulation's lowered K loop keeps a wgmma group in flight (wait_group 1, as
// gemm_wgmma's), promotes nothing, and scales each register once in the store.
TEST(GemmFp8, FastAccumulationLoweredIrHasNoPromotion) {
  ScheduledProgram p = gemm_fp8(128, 256, 512, gemm_fp8_tiles(128, 256, 512, Fp8Scales::PerTensor,
                                                               Fp8Accumulation::Fast),
                                Float8E4M3(), Fp8Scales::PerTensor, BFloat(16), DataType(),
                                Fp8Accumulation::Fast);
  LoweredModule m = lower(p.schedule, p.args);
  std::ostringstream os;
  os << m.funcs.back().body;
  const std::string ir = os.str();
  EXPECT_EQ(count_of(ir, "wgmma_mma("), 4) << ir; // 4 K steps of 32, one 64 x 256 tile
  EXPECT_EQ(count_of(ir, "wgmma_wait(1)"), 1) << ir;
  EXPECT_EQ(count_of(ir, "wgmma_fill("), 1) << ir; // one accumulator
  EXPECT_EQ(count_of(ir, "wgmma_reg_set("), 128) << ir; // the epilogue: a thread's registers
  EXPECT_EQ(count_of(ir, "scale_a[0]"), 1) << ir;
  EXPECT_EQ(count_of(ir, "wgmma_store("), 1) << ir;
  // The default tiles: 128 x 256, persistent from one wave on blocks balanced over the rounds
  // (4096^3: 512 tiles, 4 rounds of 128 blocks; 4096x11008: 1376 tiles, 11 rounds of 126).
  GemmWgmmaTiles t =
      gemm_fp8_tiles(4096, 4096, 4096, Fp8Scales::PerTensor, Fp8Accumulation::Fast);
  EXPECT_EQ(t.block_n, 256);
  EXPECT_TRUE(t.persistent);
  EXPECT_EQ(t.persistent_blocks, 128);
  EXPECT_EQ(gemm_fp8_tiles(4096, 11008, 4096, Fp8Scales::PerTensor, Fp8Accumulation::Fast)
                .persistent_blocks,
            126);
  EXPECT_FALSE(gemm_fp8_tiles(256, 512, 4096, Fp8Scales::PerTensor, Fp8Accumulation::Fast)
                   .persistent); // 4 tiles
}

// A of e4m3 times B of e5m2 (wgmma's mixed .e4m3.e5m2 form).
TEST(GemmFp8, MixedInputTypes) {
  Fp8Run r = run_fp8(128, 128, 256, Float8E4M3(), Fp8Scales::BlockWise, Float(32), 7,
                     Float8E5M2());
  EXPECT_TRUE(r.result.ok) << r.result.str();
}

// A dropped K block or a scale applied to the wrong block is far outside the tolerance: the
// check is not vacuous. (The reference with one K block's scale_b doubled.)
TEST(GemmFp8, ToleranceCatchesAWrongScale) {
  ScheduledProgram p = gemm_fp8(128, 128, 256, Float8E4M3());
  const Tensor &A = p.args[0], &B = p.args[1], &SA = p.args[2], &SB = p.args[3], &C = p.args[4];
  HostTensor a = fp8_values(A, 1, 16.0), b = fp8_values(B, 2, 4.0);
  HostTensor sa = scale_values(SA, 3), sb = scale_values(SB, 4), sb2 = sb;
  sb2.values[1] *= 2; // block (0, kb 1)
  std::vector<double> ref = evaluate_reference(C, {{A, a}, {B, b}, {SA, sa}, {SB, sb}});
  std::vector<double> wrong = evaluate_reference(C, {{A, a}, {B, b}, {SA, sa}, {SB, sb2}});
  std::vector<double> mag = evaluate_reference(magnitude_of(C), {{A, a}, {B, b}, {SA, sa}, {SB, sb}});
  CompareResult r =
      compare(ref, [&](size_t i) { return wrong[i]; }, ref.size(), output_tolerance(C), mag);
  EXPECT_FALSE(r.ok);
  EXPECT_GT(r.num_mismatches, ref.size() / 2) << r.str();
}

// The CUDA: wgmma's k32 fp8 form on K-major descriptors, the promotion as register FMAs, compiled
// by NVRTC for sm_90a. In the SASS the fp8 Tensor Core instruction is QGMMA (HGMMA is fp16 /
// bf16's): 4 per K block of a 64 x 128 tile, the promotion's 64 FFMA per thread, TMA loads and no
// local memory.
TEST(GemmFp8, CompilesForSm90aWithFp8Qgmma) {
  struct Case {
    DataType a, b;
    Fp8Scales scales;
    DataType out;
    const char *ptx, *sass;
  };
  for (const Case &c :
       {Case{Float8E4M3(), Float8E4M3(), Fp8Scales::BlockWise, BFloat(16),
             "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3", "QGMMA.64x128x32.F32.E4M3.E4M3"},
        Case{Float8E5M2(), Float8E5M2(), Fp8Scales::PerTensor, Float(32),
             "wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e5m2", "QGMMA.64x128x32.F32.E5M2.E5M2"},
        Case{Float8E4M3(), Float8E5M2(), Fp8Scales::BlockWise, Float(16),
             "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2", "QGMMA.64x128x32.F32.E4M3.E5M2"}}) {
    SCOPED_TRACE(std::string(c.ptx));
    const int64_t M = 256, N = 256, K = 1024;
    ScheduledProgram p = gemm_fp8(M, N, K, gemm_fp8_tiles(M, N, K, c.scales), c.a, c.scales,
                                  c.out, c.b);
    LoweredModule m = lower(p.schedule, p.args);
    std::string src = codegen_cuda(m);
    EXPECT_NE(src.find(c.ptx), std::string::npos) << src;
    EXPECT_EQ(src.find("k16"), std::string::npos);
    CompiledKernel k = tessel::test::compile_for_sm90(m, src, "gemm_fp8.cu");
    ASSERT_FALSE(k.cubin.empty());
    std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "gemm_fp8");
    if (!sass)
      continue;
    EXPECT_EQ(count_of(*sass, c.sass), 4) << sass->substr(0, 4000);
    EXPECT_GE(count_of(*sass, " FFMA "), 64);
    EXPECT_NE(sass->find("UTMALDG.2D"), std::string::npos);
    for (const char *local : {"LDL", "STL"})
      EXPECT_EQ(sass->find(local), std::string::npos) << local << ":\n" << sass->substr(0, 4000);
  }
}

// Fast accumulation compiled by NVRTC for sm_90a: 4 QGMMA.64x256x32 per K block (one 64 x 256
// tile a warpgroup), TMA loads, no local memory (128 accumulators a thread).
TEST(GemmFp8, FastAccumulationCompilesForSm90aWithWideQgmma) {
  const int64_t M = 256, N = 512, K = 1024;
  ScheduledProgram p = gemm_fp8(
      M, N, K, gemm_fp8_tiles(M, N, K, Fp8Scales::PerTensor, Fp8Accumulation::Fast),
      Float8E4M3(), Fp8Scales::PerTensor, BFloat(16), DataType(), Fp8Accumulation::Fast);
  LoweredModule m = lower(p.schedule, p.args);
  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"), std::string::npos);
  EXPECT_NE(src.find("setmaxnreg"), std::string::npos); // warp roles
  CompiledKernel k = tessel::test::compile_for_sm90(m, src, "gemm_fp8_fast.cu");
  ASSERT_FALSE(k.cubin.empty());
  std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "gemm_fp8");
  if (!sass)
    GTEST_SKIP() << "no cuobjdump: the SASS is not checked";
  EXPECT_EQ(count_of(*sass, "QGMMA.64x256x32.F32.E4M3.E4M3"), 4) << sass->substr(0, 4000);
  EXPECT_NE(sass->find("UTMALDG.2D"), std::string::npos);
  for (const char *local : {"LDL", "STL"})
    EXPECT_EQ(sass->find(local), std::string::npos) << local << ":\n" << sass->substr(0, 4000);
}

// The lowered loop over K blocks: the A and B tiles on an mbarrier ring, per block a reset of
// the partial sums, 4 x 32 of K through wgmma (one group, waited for to 0: the promotion reads
// the registers), then the promotion; the promoted sums are stored once.
TEST(GemmFp8, LoweredIrPromotesEachKBlock) {
  ScheduledProgram p = gemm_fp8(128, 128, 512, Float8E4M3());
  LoweredModule m = lower(p.schedule, p.args);
  std::ostringstream os;
  os << m.funcs.back().body;
  const std::string ir = os.str();
  EXPECT_EQ(count_of(ir, "wgmma_mma("), 4) << ir;   // 4 K steps of 32, one 64 x 128 tile
  EXPECT_EQ(count_of(ir, "wgmma_wait(0)"), 1) << ir; // after them, before the promotion
  EXPECT_EQ(count_of(ir, "wgmma_wait(1)"), 0) << ir;
  EXPECT_EQ(count_of(ir, "wgmma_reg_set("), 64) << ir; // a thread's 64 registers, unrolled
  EXPECT_EQ(count_of(ir, "let scale"), 2) << ir;       // its two rows' scales
  EXPECT_EQ(count_of(ir, "wgmma_store("), 1) << ir;
  EXPECT_EQ(count_of(ir, "wgmma_fill("), 2) << ir; // partial sums per block, promoted sums once
  EXPECT_NE(ir.find("mbarrier_wait"), std::string::npos) << ir;
}

TEST(GemmFp8, Errors) {
  expect_error([] { gemm_fp8(128, 128, 200, Float8E4M3()); },
               {"K=200", "multiple of 128", "pad A and B"});
  expect_error([] { gemm_fp8(128, 192, 256, Float8E4M3()); },
               {"N=192", "multiple of 128", "block-wise", "per-tensor"});
  expect_error([] { gemm_fp8(128, 128, 256, Float(16)); }, {"float8_e4m3 or float8_e5m2", "float16"});
  expect_error([] { gemm_fp8(128, 128, 256, Float8E4M3(), Fp8Scales::PerTensor, Int(32)); },
               {"bfloat16, float16 or float32", "int32"});
  GemmWgmmaTiles t = gemm_fp8_tiles(128, 256, 256, Fp8Scales::BlockWise);
  t.block_n = 256; // one warpgroup column of 256: two tiles of n = 256 would straddle scale blocks
  t.wgmma_n = 256;
  expect_error([&] { gemm_fp8(128, 256, 256, t, Float8E4M3()); }, {"wgmma_n=256", "n must be 128"});
  t = gemm_fp8_tiles(128, 128, 256, Fp8Scales::BlockWise);
  t.block_k = 64;
  expect_error([&] { gemm_fp8(128, 128, 256, t, Float8E4M3()); }, {"block_k=64", "use block_k 128"});
  t = gemm_fp8_tiles(128, 128, 256, Fp8Scales::BlockWise);
  t.tma = false;
  expect_error([&] { gemm_fp8(128, 128, 256, t, Float8E4M3()); }, {"TMA", "swizzle 128"});
  expect_error([] { wgmma_gemm(128, "row_major", 128, Float8E4M3()); },
               {"K-major", "col_major"});
  expect_error([] { wgmma_promote(64, Fp8Scales::BlockWise); }, {"n=64", "n must be 128"});
  t = gemm_fp8_tiles(128, 256, 256, Fp8Scales::PerTensor, Fp8Accumulation::Fast);
  expect_error(
      [&] {
        gemm_fp8(128, 256, 256, t, Float8E4M3(), Fp8Scales::BlockWise, BFloat(16), DataType(),
                 Fp8Accumulation::Fast);
      },
      {"fast accumulation (knob FAST=1)", "per-tensor scales (SCALE=0)"});
  t = gemm_fp8_tiles(256, 128, 256, Fp8Scales::PerTensor);
  t.cluster = 1;
  expect_error([&] { gemm_fp8(256, 128, 256, t, Float8E4M3(), Fp8Scales::PerTensor); },
               {"clusters (knob CL)", "fast accumulation (FAST=1) only"});
  t = gemm_fp8_tiles(128, 256, 256, Fp8Scales::PerTensor, Fp8Accumulation::Fast);
  t.cluster = 1; // one block of rows: nothing to pair with
  expect_error(
      [&] {
        gemm_fp8(128, 256, 256, t, Float8E4M3(), Fp8Scales::PerTensor, BFloat(16), DataType(),
                 Fp8Accumulation::Fast);
      },
      {"clusters of 2 blocks along M", "a multiple of 2 blocks"});
}

TEST(GemmFp8, Registered) {
  const ScheduleEntry &e = find_schedule("gemm_fp8");
  EXPECT_NE(e.name.find("fp8"), std::string::npos);
  EXPECT_EQ(e.dtypes, (std::vector<DataType>{Float8E4M3(), Float8E5M2()}));
  ShapeParams p = resolve_shape(e, {{"M", 128}, {"N", 128}, {"K", 256}, {"OUT", 2}, {"SCALE", 0}});
  ScheduledProgram prog = e.build(p, Float8E5M2());
  EXPECT_EQ(prog.args.size(), 5u);
  EXPECT_EQ(prog.num_inputs, 4u);
  EXPECT_EQ(prog.args.back().dtype(), Float(32));
  EXPECT_EQ(prog.args[2].ndim(), 1); // per-tensor scale_a
}

// On a Hopper GPU (skipped elsewhere): both scale kinds, both formats, each output type, against
// the float64 reference with output_tolerance (check_on_gpu's random inputs in [-1, 1]). Not yet
// run on a GPU: fp8 wgmma's ~14-bit accumulation inside each block of 128 is not in the
// tolerance's float32 model, which float32 outputs may show (see docs/WGMMA.md, fp8).
TEST(GemmFp8, GpuMatchesReference) {
  if (!Device::available())
    GTEST_SKIP() << Device::unavailable_reason();
  if (Device::get().arch() != "sm_90")
    GTEST_SKIP() << "wgmma needs a Hopper GPU (sm_90); this one is " << Device::get().arch();
  for (DataType in : {Float8E4M3(), Float8E5M2()})
    for (Fp8Scales scales : {Fp8Scales::PerTensor, Fp8Scales::BlockWise})
      for (DataType out : {BFloat(16), Float(16), Float(32)}) {
        SCOPED_TRACE(in.str() + " " + name_of(scales) + " -> " + out.str());
        ScheduledProgram p = gemm_fp8(256, 384, 1024, in, scales, out);
        CheckResult r = check_on_gpu(p.schedule, p.args, p.num_inputs);
        EXPECT_TRUE(r.compare.ok) << r.str();
        // Persistent: 6 tiles over 4 blocks.
        GemmWgmmaTiles t = gemm_fp8_tiles(256, 384, 1024, scales);
        t.persistent = true;
        t.persistent_blocks = 4;
        ScheduledProgram q = gemm_fp8(256, 384, 1024, t, in, scales, out);
        CheckResult rq = check_on_gpu(q.schedule, q.args, q.num_inputs);
        EXPECT_TRUE(rq.compare.ok) << "persistent: " << rq.str();
        if (scales != Fp8Scales::PerTensor)
          continue;
        // Fast accumulation over K = 1024 (the tolerance's unit for fp8 sums is 2^-13), and
        // with a 2x1 cluster multicasting B's tile.
        GemmWgmmaTiles f = gemm_fp8_tiles(256, 384, 1024, scales, Fp8Accumulation::Fast);
        for (int cluster : out == Float(32) ? std::vector<int>{0, 1} : std::vector<int>{0}) {
          f.cluster = cluster;
          ScheduledProgram fast =
              gemm_fp8(256, 384, 1024, f, in, scales, out, DataType(), Fp8Accumulation::Fast);
          CheckResult rf = check_on_gpu(fast.schedule, fast.args, fast.num_inputs);
          EXPECT_TRUE(rf.compare.ok) << "fast, cluster " << cluster << ": " << rf.str();
        }
      }
}

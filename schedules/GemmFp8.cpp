#include "schedules/GemmFp8.h"

#include "compiler/lower/LaunchLimits.h"
#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"
#include "schedules/GemmTiling.h"

namespace tessel {

namespace {

constexpr int kRows = 64;      // rows of one wgmma accumulator tile
constexpr int kK = 32;         // K of one fp8 wgmma
constexpr int kSwizzle = 128;  // the tiles' swizzle: a row of 128 fp8 values
constexpr int kScaleBlock = 128; // scale_b's blocks are 128 x 128 (N x K), scale_a's 1 x 128

// The GEMM's tensors: the arguments and the stages the schedule places.
struct Fp8Gemm {
  Tensor A, B, scale_a, scale_b; ///< arguments
  Tensor P;                      ///< [K / 128, M, N]: each K block's partial sum (wgmma)
  Tensor D;                      ///< [M, N]: the promoted float32 sum
  Tensor C;                      ///< D rounded to the output type
};

Fp8Gemm fp8_gemm_definition(int64_t M, int64_t N, int64_t K, DataType a, DataType b,
                            Fp8Scales scales, DataType out) {
  const int64_t blocks = K / kFp8BlockK;
  const bool block_wise = scales == Fp8Scales::BlockWise;
  Fp8Gemm g;
  g.A = placeholder({M, K}, a, "A");
  g.B = placeholder({N, K}, b, "B");
  g.scale_a = block_wise ? placeholder({M, blocks}, Float(32), "scale_a")
                         : placeholder({1}, Float(32), "scale_a");
  g.scale_b = block_wise ? placeholder({N / kScaleBlock, blocks}, Float(32), "scale_b")
                         : placeholder({1}, Float(32), "scale_b");
  IterVar k = reduce_axis({0, kFp8BlockK}, "k");
  g.P = compute(
      {blocks, M, N},
      [&](Var kb, Var i, Var j) {
        Expr at = kb * kFp8BlockK + k.var();
        return sum(g.A(i, at).astype(Float(32)) * g.B(j, at).astype(Float(32)), {k});
      },
      "C_block", {"kb", "i", "j"});
  IterVar kb = reduce_axis({0, blocks}, "kb");
  g.D = compute(
      {M, N},
      [&](Var i, Var j) {
        Expr sa = block_wise ? g.scale_a(i, kb.var()) : g.scale_a(0);
        Expr sb = block_wise ? g.scale_b(floordiv(j, kScaleBlock), kb.var()) : g.scale_b(0);
        return sum(fp8_scaled_partial(g.P(kb.var(), i, j), sa, sb), {kb});
      },
      "C_acc", {"i", "j"});
  g.C = compute(
      {M, N}, [&](Var i, Var j) { return g.D(i, j).astype(out); }, "C", {"i", "j"});
  return g;
}

} // namespace

void check_gemm_fp8_tiles(const std::string &context, int64_t M, int64_t N, int64_t K,
                          const GemmWgmmaTiles &t, Fp8Scales scales,
                          Fp8Accumulation accumulation) {
  const bool fast = accumulation == Fp8Accumulation::Fast;
  user_check(!fast || scales == Fp8Scales::PerTensor, context)
      << "fast accumulation (knob FAST=1) sums the whole of K in one accumulator and scales it "
         "once: it takes per-tensor scales (SCALE=0); block-wise scales need the promotion "
         "every 128 of K (FAST=0)";
  // Clusters and ping-pong consumers come with gemm_wgmma's schedule, which fast accumulation
  // runs on.
  user_check(fast || !t.cluster, context)
      << "clusters (knob CL) come with fast accumulation (FAST=1) only; use CL=0";
  user_check(fast || !t.ping_pong, context)
      << "ping-pong consumers (knob PP) come with fast accumulation (FAST=1) only; use PP=0";
  user_check(fast || t.split_last_wave < 2, context)
      << "splitting the last round's tiles (knob LW) comes with fast accumulation (FAST=1) "
         "only; use LW=0";
  user_check(!t.ping_pong || (t.persistent && t.warpgroups_m == 1 && t.warpgroups_n == 1),
             context)
      << "ping-pong consumers (knob PP=1) take alternate tiles of a persistent kernel, each a "
         "whole tile: they need persistent (P=1) and one warpgroup a tile, got persistent="
      << t.persistent << " and " << t.warpgroups_m << "x" << t.warpgroups_n << " warpgroups";
  user_check(!t.tma_store || !t.ping_pong, context)
      << "a TMA store of C (knob TS=1) stages the tile in one shared buffer, which ping-pong "
         "consumers (knob PP=1) would fill with two tiles at once: use one of them";
  user_check(t.block_m > 0 && t.block_n > 0 && t.warpgroups_m > 0 && t.warpgroups_n > 0 &&
                 t.wgmma_n >= 0,
             context)
      << "tile parameters must be positive";
  user_check(!t.persistent || (t.roles() && t.persistent_blocks >= 1), context)
      << "a persistent fp8 GEMM (knob P=1) needs warp roles (WS=1), whose producer loads the "
         "next tile during this tile's epilogue, and 1 or more blocks (PB), got WS="
      << t.roles() << ", PB=" << t.persistent_blocks;
  user_check(t.block_k == kFp8BlockK, context)
      << "block_k=" << t.block_k << ": an fp8 GEMM steps K by its promotion block, "
      << kFp8BlockK << " (one 128-byte swizzled row of A and B); use block_k " << kFp8BlockK;
  user_check(t.swizzle == kSwizzle && t.tma && t.stages >= 2, context)
      << "the fp8 tiles are filled by TMA (tma) into 128-byte swizzled tiles (swizzle 128, "
         "which 8-bit wgmma needs) through a ring of 2 or more stages; got swizzle "
      << t.swizzle << ", tma " << t.tma << ", " << t.stages << " stage(s)";
  user_check(t.split_k == 1, context)
      << "split_k=" << t.split_k << ": gemm_fp8 does not split K; use split_k 1";
  check_last_wave_split(context, t);
  user_check(K > 0 && K % kFp8BlockK == 0, context)
      << "K=" << K << " must be a positive multiple of " << kFp8BlockK
      << " (the promotion block and the scales' K blocks); pad A and B with zeros along K";
  const bool block_wise = scales == Fp8Scales::BlockWise;
  user_check(!block_wise || N % kScaleBlock == 0, context)
      << "N=" << N << " must be a multiple of " << kScaleBlock
      << " with block-wise scales (scale_b has one scale per 128 x 128 block of B); pad B's "
         "rows or use per-tensor scales";
  user_check(t.threads() <= 1024, context)
      << t.warpgroups_m << " x " << t.warpgroups_n << " warpgroups make " << t.threads()
      << " threads; a block has at most 1024";
  user_check(t.block_m % (kRows * t.warpgroups_m) == 0, context)
      << "block_m=" << t.block_m << " must be a multiple of 64 x warpgroups_m = "
      << kRows * t.warpgroups_m << ": each warpgroup's rows are whole 64-row wgmma tiles";
  const int n = t.instruction_n();
  user_check(t.block_n % t.warpgroups_n == 0 && is_wgmma_n(n) && t.group_n() % n == 0, context)
      << "block_n=" << t.block_n << " over " << t.warpgroups_n << " warpgroups gives "
      << t.block_n / t.warpgroups_n << " columns each, which must be whole wgmma tiles of n=" << n
      << " (n a multiple of 8 up to 256)";
  user_check(!block_wise || n == kScaleBlock, context)
      << "wgmma_n=" << n << ": with block-wise scales each wgmma tile is one 128-column block of "
      << "B (one scale_b per tile), so n must be 128 (block_n a multiple of 128 per warpgroup)";
  // Two accumulators per thread, the block's partial sums and the promoted sums (one with fast
  // accumulation), and about 30 registers more (addresses, counters, the scales).
  const int64_t accumulators = (fast ? 1 : 2) * int64_t(t.group_m()) * t.group_n() / 128;
  const int64_t registers = std::min<int64_t>(255, 65536 / std::max(1, t.threads()));
  user_check(accumulators + 30 <= registers, context)
      << t.block_m << "x" << t.block_n << " blocks of " << t.warpgroups_m * t.warpgroups_n
      << " warpgroups hold " << accumulators << " float32 accumulators per thread"
      << (fast ? "" : " (partial and promoted sums)") << ", and with " << t.threads()
      << " threads a thread has at most " << registers
      << " registers (about 30 go to addresses and counters): use smaller tiles";
  check_cluster_fits(context, M, N, t);
  // The last block of rows and of columns shifts inwards: it must fit.
  user_check(M >= t.block_m && N >= t.block_n, context)
      << M << "x" << N << " is smaller than a " << t.block_m << "x" << t.block_n
      << " block (the last block shifts inwards, so it must fit); choose smaller block_m / "
         "block_n";
  const int64_t bytes = int64_t(t.stages) * (t.block_m + t.block_n) * kFp8BlockK;
  user_check(bytes <= max_shared_bytes_per_block("sm_90"), context)
      << t.stages << " stages of " << t.block_m << "x128 and " << t.block_n
      << "x128 fp8 tiles take " << bytes
      << " bytes of shared memory; a block has at most 227 KiB: use fewer stages or smaller "
         "tiles";
}

GemmWgmmaTiles gemm_fp8_tiles(int64_t M, int64_t N, int64_t K, Fp8Scales scales,
                              Fp8Accumulation accumulation) {
  (void)K, (void)scales;
  // Fast accumulation holds one accumulator: a warpgroup's 64 x 256 fits where N does.
  const bool wide = accumulation == Fp8Accumulation::Fast && N >= 256;
  GemmWgmmaTiles t{.block_m = 128,
                   .block_n = wide ? 256 : 128,
                   .block_k = kFp8BlockK,
                   .warpgroups_m = 2,
                   .stages = 4,
                   .swizzle = kSwizzle,
                   .raster_group = 8,
                   .tma = true,
                   .warp_specialized = true};
  if (M < 128)
    t.block_m = 64, t.warpgroups_m = 1;
  // Persistent where the tiles make 1 to 8 waves of 132 blocks, as gemm_wgmma: on the H100
  // 4096^3 (1024 tiles) 0.1286 -> 0.1190 ms per tensor, 0.1424 -> 0.1355 block-wise
  // (bench/RESULTS.md, 2026-11-26 15:20).
  t.persistent = persistent_by_default(M, N, t);
  // Fast accumulation: persistent from one wave up (H100, non-persistent -> persistent:
  // 4096x11008x4096 0.2955 -> 0.2628 and 0.2715 -> 0.2592 ms in two runs, 8192^3 0.7823 ->
  // 0.7524 and 0.8207 -> 0.7800; 4096^3 level), in groups of 16 block rows (8 and 16 within the
  // runs' noise: 3-6% on these fp8 rows; bench/RESULTS.md 2026-11-26 evening).
  // And on as few blocks as take the tiles in as many rounds as 132 would, each block the same
  // number of tiles give or take one (4096^3: 512 tiles, 4 rounds, 128 blocks: 0.0959 ->
  // 0.0946 ms in three alternated rounds; fp16 gemm_wgmma measured no gain from it).
  if (accumulation == Fp8Accumulation::Fast) {
    const int64_t tiles = output_tiles(M, N, t);
    t.persistent = tiles >= 132;
    t.raster_group = 16;
    const int64_t rounds = (tiles + 131) / 132;
    t.persistent_blocks = int(std::min<int64_t>(132, (tiles + rounds - 1) / rounds));
  }
  return t;
}

ScheduledProgram gemm_fp8(int64_t M, int64_t N, int64_t K, DataType a, Fp8Scales scales,
                          DataType out) {
  return gemm_fp8(M, N, K, gemm_fp8_tiles(M, N, K, scales), a, scales, out);
}

namespace {

// Fast accumulation: gemm_wgmma's schedule on 8-bit operands (B K-major), the per-tensor scales
// applied by the store's epilogue.
ScheduledProgram gemm_fp8_fast(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &t,
                               DataType a, DataType b, DataType out) {
  const Tensor A = placeholder({M, K}, a, "A"), B = placeholder({N, K}, b, "B");
  const Tensor scale_a = placeholder({1}, Float(32), "scale_a"),
               scale_b = placeholder({1}, Float(32), "scale_b");
  IterVar k = reduce_axis({0, K}, "k");
  const Tensor acc = compute(
      {M, N},
      [&](Var i, Var j) {
        return sum(A(i, k.var()).astype(Float(32)) * B(j, k.var()).astype(Float(32)), {k});
      },
      "C_acc", {"i", "j"});
  WgmmaEpilogue scaled{"per_tensor_scales", {},
                       [](Expr sum, const std::vector<Expr> &s) {
                         return fp8_scaled_partial(sum, s[0], s[1]);
                       },
                       {Float(32), Float(32)}};
  const Tensor C = compute(
      {M, N},
      [&](Var i, Var j) {
        Expr v = scaled.f(acc(i, j), {scale_a(0), scale_b(0)});
        return out == Float(32) ? v : v.astype(out);
      },
      "C", {"i", "j"});
  Schedule s = create_schedule({C});
  WgmmaGemmStages st;
  st.C = C;
  st.AS = s.cache_read(A, "shared", {acc});
  st.BS = s.cache_read(B, "shared", {acc});
  s[acc].set_scope("wgmma.accumulator");
  st.CF = acc;
  st.in = a;
  st.b_in = b;
  st.b_layout = "col_major";
  st.epilogue = scaled;
  schedule_wgmma_gemm(s, st, t);

  ScheduledProgram p;
  p.schedule = s;
  p.args = {A, B, scale_a, scale_b, C};
  p.num_inputs = 4;
  p.flops = 2.0 * double(M) * double(N) * double(K);
  return p;
}

} // namespace

ScheduledProgram gemm_fp8(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &t, DataType a,
                          Fp8Scales scales, DataType out, DataType b,
                          Fp8Accumulation accumulation) {
  if (b.is_void())
    b = a;
  user_check(a.is_scalar() && a.is_float8() && b.is_scalar() && b.is_float8(), "gemm_fp8")
      << "A and B must be float8_e4m3 or float8_e5m2, got " << a << " and " << b;
  user_check(out == BFloat(16) || out == Float(16) || out == Float(32), "gemm_fp8")
      << "C must be bfloat16, float16 or float32, got " << out;
  check_gemm_fp8_tiles("gemm_fp8", M, N, K, t, scales, accumulation);
  if (t.tma_store) {
    user_check(N * out.bytes() % 16 == 0, "gemm_fp8")
        << "a TMA store of C (tma_store, knob TS=1) needs C's rows to be whole 16-byte units, "
        << "but N=" << N << " " << out << " elements are " << N * out.bytes()
        << " bytes; store from registers (TS=0)";
    const int64_t ring = int64_t(t.stages) * (t.block_m + t.block_n) * kFp8BlockK,
                  staging = t.staging_bytes(out.bytes());
    user_check(ring + staging <= max_shared_bytes_per_block("sm_90"), "gemm_fp8")
        << "a TMA store of C (tma_store, knob TS=1) stages the " << t.block_m << "x"
        << t.block_n << " block in shared memory (" << staging << " bytes of " << out
        << "), which with " << t.stages << " stages of A and B tiles (" << ring
        << " bytes) makes " << ring + staging
        << "; a block has at most 227 KiB: use fewer stages (knob S) or store from registers "
           "(TS=0)";
  }
  if (accumulation == Fp8Accumulation::Fast)
    return gemm_fp8_fast(M, N, K, t, a, b, out);
  const Fp8Gemm g = fp8_gemm_definition(M, N, K, a, b, scales, out);
  const int n = t.instruction_n();

  Schedule s = create_schedule({g.C});
  const Tensor AS = s.cache_read(g.A, "shared", {g.P});
  const Tensor BS = s.cache_read(g.B, "shared", {g.P});
  s[g.P].set_scope("wgmma.accumulator");
  s[g.D].set_scope("wgmma.accumulator");
  GemmThreadAxes idx;

  // C: blocks, warpgroups on threadIdx.y / z, each warpgroup's 64 x n tiles (its 128 threads
  // on threadIdx.x, run by the intrinsics as a whole).
  // (With tma_store: through a shared staging tile, stored by TMA; its stage takes C's place.)
  Stage sc = s[g.C];
  GemmOutputLoops c;
  // Persistent: the blocks walk the tiles, the ring running across them (as gemm_wgmma's).
  const int64_t persistent = t.persistent ? t.persistent_blocks : 0;
  if (t.tma_store) {
    StagedGemmOutput staged = tile_gemm_output_staged(
        s, g.C, idx, t.block_m, t.block_n, t.warpgroups_m, t.warpgroups_n, kRows, n,
        t.raster_group, TailStrategy::ShiftInwards, TailStrategy::ShiftInwards, persistent);
    sc = s[staged.staged];
    c = staged.loops;
  } else {
    c = tile_gemm_output(sc, idx, t.block_m, t.block_n, t.warpgroups_m, t.warpgroups_n, kRows, n,
                         t.raster_group, TailStrategy::ShiftInwards, TailStrategy::ShiftInwards,
                         persistent);
  }
  sc.env_threads({thread_axis(Range(0, 128), "threadIdx.x")});

  // D, the promoted sums: a warpgroup's tiles, the K blocks outermost (the outer reduction).
  Stage sd = s[g.D];
  sd.compute_at(sc, c.group_j);
  const IterVar kb = sd.reduce_axis()[0];
  auto [dfi, dii] = sd.split(sd.op_axis(0), kRows);
  auto [dfj, djj] = sd.split(sd.op_axis(1), n);
  sd.reorder({kb, dfi, dfj, dii, djj});

  // P, one K block's partial sums, in every K block (its reduction is whole inside): 4 wgmma
  // K steps of 32 over the warpgroup's tiles.
  Stage sp = s[g.P];
  sp.compute_at(sd, kb);
  auto [ki, kk] = sp.split(sp.reduce_axis()[0], kK);
  auto [pfi, pii] = sp.split(sp.op_axis(1), kRows);
  auto [pfj, pjj] = sp.split(sp.op_axis(2), n);
  sp.reorder({ki, pfi, pfj, pii, pjj, kk});

  // The K block's tiles of A and B: one thread copies each with TMA into the swizzled layout,
  // pipelined over the K blocks on a ring of mbarriers.
  for (const Tensor &sh : {AS, BS}) {
    Stage ss = s[sh];
    ss.compute_at(sd, kb);
    ss.swizzle(kSwizzle);
    ss.bulk_copy();
    ss.pipeline(t.stages);
  }

  // Register indices must be constants.
  sc.unroll(c.tile_i);
  sc.unroll(c.tile_j);
  sd.unroll(dfi);
  sd.unroll(dfj);
  sp.unroll(ki);
  sp.unroll(pfi);
  sp.unroll(pfj);
  // A producer warpgroup issues the ring's copies (warp roles), the consumers compute.
  if (t.roles())
    sd.warp_specialize();
  sp.tensorize(pii, wgmma_gemm(n, "col_major", kSwizzle, a, b));
  sd.tensorize(dii, wgmma_promote(n, scales));
  sc.tensorize(c.inner_i, wgmma_store_matrix(n, t.tma_store ? "shared" : "global", out));

  ScheduledProgram p;
  p.schedule = s;
  p.args = {g.A, g.B, g.scale_a, g.scale_b, g.C};
  p.num_inputs = 4;
  p.flops = 2.0 * double(M) * double(N) * double(K);
  return p;
}

ScheduleEntry gemm_fp8_entry() {
  ScheduleEntry e;
  e.name = "gemm_fp8";
  e.description =
      "fp8 GEMM C = A B^T on Hopper Tensor Cores (wgmma k32, sm_90a), A (M x K) and B (N x K) "
      "float8_e4m3 or float8_e5m2, K contiguous; float32 scales, SCALE=1 (the default) "
      "block-wise (scale_a M x K/128: 1x128 blocks of A, scale_b N/128 x K/128: 128x128 blocks "
      "of B; N a multiple of 128), SCALE=0 per tensor (one each); each 128 of K is summed by "
      "wgmma and promoted into a float32 register accumulator with its scales (DeepSeek-V3 "
      "style); K a multiple of 128; C bfloat16 (OUT=0, the default), float16 (OUT=1) or float32 "
      "(OUT=2). 128x128 blocks of 2 warpgroups, K step 128 through 4 TMA stages of 128-byte "
      "swizzled tiles filled by a producer warpgroup (WS=1, the default; WS=0: by a consumer "
      "thread); BM (64 or 128), BN, S (stages), G (rasterization group; 0: 8, 16 with FAST=1) "
      "override them; TS=1 "
      "stores C by TMA through a shared staging tile (TS=0, the default: from registers); P=1 "
      "makes it persistent: PB blocks (0: 132) walk the tiles in the grouped order of G rows "
      "(P=0, the default: where the tiles make 1 to 8 waves, 1 or more with FAST=1; P=2: "
      "never). FAST=1 (SCALE=0): "
      "fast accumulation, one wgmma accumulator over the whole of K scaled once as C is stored "
      "(cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM), 128x256 blocks; CL=1 / 2 then clusters "
      "blocks 2x1 / 1x2 multicasting B's / A's tile, PP=1 makes two consumer warpgroups take "
      "the tiles in turn (ping-pong, 128x128 each unless BM / BN say), LW=2..8 (with P=1) "
      "splits each tile of the persistent kernel's last, partial round into up to that many "
      "parts of K on the blocks it leaves idle (Stage::split_last_wave; 0, the default: not)";
  e.default_shape = {{"M", 1024}, {"N", 1024}, {"K", 1024}, {"BM", 0},   {"BN", 0},
                     {"S", 0},    {"G", 0},    {"SCALE", 1}, {"OUT", 0}, {"WS", 1},
                     {"TS", 0},   {"P", 0},    {"PB", 0},    {"FAST", 0}, {"CL", 0},
                     {"PP", 0},   {"LW", 0}};
  e.nonnegative = {"BM", "BN", "S",  "G",    "SCALE", "OUT", "WS",
                   "TS", "P",  "PB", "FAST", "CL",    "PP",  "LW"};
  e.choices = {{"SCALE", {0, 1}}, {"OUT", {0, 1, 2}}, {"WS", {0, 1}}, {"TS", {0, 1}},
               {"P", {0, 1, 2}},  {"FAST", {0, 1}},   {"CL", {0, 1, 2}},
               {"PP", {0, 1}}};
  e.knobs = {{"BM", {64, 128}}, {"BN", {128, 256}}, {"S", {3, 4, 5, 6}}, {"G", {8, 16}}};
  e.dtypes = {Float8E4M3(), Float8E5M2()};
  e.build = [](const ShapeParams &p, DataType in) {
    const int64_t M = p.at("M"), N = p.at("N"), K = p.at("K");
    const Fp8Scales scales = p.at("SCALE") ? Fp8Scales::BlockWise : Fp8Scales::PerTensor;
    const Fp8Accumulation accumulation =
        p.at("FAST") ? Fp8Accumulation::Fast : Fp8Accumulation::Promoted;
    GemmWgmmaTiles t = gemm_fp8_tiles(M, N, K, scales, accumulation);
    if (p.at("BM")) {
      t.block_m = int(p.at("BM"));
      t.warpgroups_m = std::max(1, t.block_m / kRows);
    }
    if (p.at("BN")) {
      t.block_n = int(p.at("BN"));
      // Block-wise scales: one warpgroup column per 128 columns (n = 128).
      if (scales == Fp8Scales::BlockWise)
        t.warpgroups_n = std::max(1, t.block_n / kScaleBlock);
    }
    if (p.at("S"))
      t.stages = int(p.at("S"));
    if (p.at("G"))
      t.raster_group = p.at("G");
    // Warp roles (WS=1, the default) where the warpgroups are on threadIdx.y alone.
    t.warp_specialized = p.at("WS") && t.warpgroups_n == 1;
    const DataType outs[] = {BFloat(16), Float(16), Float(32)};
    // TS=1: C stored by TMA through a shared staging tile, the ring made shallower where the
    // staging tile would not fit beside it (unless S says).
    t.tma_store = p.at("TS") != 0;
    // P=0: the tiles' choice (with warp roles), 1: persistent on PB blocks (0: 132), 2: not.
    if (p.at("P"))
      t.persistent = p.at("P") == 1;
    t.persistent = t.persistent && t.roles();
    if (p.at("PB"))
      t.persistent_blocks = int(p.at("PB"));
    const DataType out = outs[p.at("OUT")];
    while (t.tma_store && !p.at("S") && t.stages > 2 &&
           int64_t(t.stages) * (t.block_m + t.block_n) * kFp8BlockK +
                   t.staging_bytes(out.bytes()) >
               max_shared_bytes_per_block("sm_90"))
      --t.stages;
    t.cluster = int(p.at("CL"));
    // PP=1 (with FAST=1): ping-pong consumers, persistent, each warpgroup a whole tile (128 x
    // 128 unless BM / BN say).
    if (p.at("PP")) {
      t.ping_pong = t.persistent = true;
      t.block_m = p.at("BM") ? int(p.at("BM")) : 128;
      t.block_n = p.at("BN") ? int(p.at("BN")) : 128;
      t.warpgroups_m = t.warpgroups_n = 1;
    }
    if (p.at("LW") > 1)
      t.split_last_wave = int(p.at("LW"));
    return gemm_fp8(M, N, K, t, in, scales, out, DataType(), accumulation);
  };
  return e;
}

} // namespace tessel

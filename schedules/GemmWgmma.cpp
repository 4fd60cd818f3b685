#include "schedules/GemmWgmma.h"

#include "compiler/lower/LaunchLimits.h"
#include "compiler/lower/TileScheduler.h"
#include "compiler/passes/SplitWarpRoles.h"
#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"
#include "runtime/Device.h"
#include "schedules/Gemm.h"
#include "schedules/GemmPadding.h"
#include "schedules/GemmTiling.h"
#include "schedules/WgmmaIntrinsics.h"

#include <tuple>

namespace tessel {

namespace {

constexpr int kRows = 64; // rows of one wgmma accumulator tile
constexpr int kK = 16;    // K of one fp16 wgmma
constexpr int kChunk = 8; // halves per 16-byte copy and per interleave chunk
// A warp fills 8 rows x 4 chunks of a shared tile: each row's 4 chunks are 64 contiguous bytes
// of global memory, each chunk column 128 contiguous bytes of shared memory (a core matrix).
constexpr int kCopyRows = 8, kCopyChunks = 4;
// The swizzled layout the tiles default to: rows of 128 bytes (64 halves).
constexpr int kSwizzle = 128;

int64_t round_up(int64_t v, int64_t multiple) { return (v + multiple - 1) / multiple * multiple; }

// How the last block of columns covers N: shifted inwards where it can start on a 16-byte
// boundary of B, else in place, storing the columns inside.
TailStrategy column_tail(int64_t N) {
  return N % kChunk == 0 ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf;
}

bool fits(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &t, bool partial_blocks) {
  try {
    check_gemm_wgmma_tiles("gemm_wgmma", M, N, K, t, partial_blocks);
    return true;
  } catch (const Error &) {
    return false;
  }
}

} // namespace

GemmWgmmaTiles deepest_ring(GemmWgmmaTiles t, int max_stages) {
  while (t.stages < max_stages) {
    GemmWgmmaTiles deeper = t;
    ++deeper.stages;
    if (deeper.shared_bytes() > max_shared_bytes_per_block("sm_90") - 1024)
      break;
    t = deeper;
  }
  return t;
}

namespace {

} // namespace

// On the H100 4096^3 (512 tiles) 0.2130 -> 0.1961 ms and 4096x4096x1024 0.0702 -> 0.0644, but
// 8192^3 (2048 tiles) 1.6542 -> 1.6770; the seed conv (784 tiles) 0.1682 -> 0.1564 ms
// (bench/RESULTS.md, 2026-11-26).
int64_t output_tiles(int64_t M, int64_t N, const GemmWgmmaTiles &t) {
  return ((M + t.block_m - 1) / t.block_m) * ((N + t.block_n - 1) / t.block_n);
}

bool persistent_by_default(int64_t M, int64_t N, const GemmWgmmaTiles &t) {
  const int64_t tiles = output_tiles(M, N, t);
  return t.roles() && t.split_k == 1 && tiles >= 132 && tiles <= 8 * 132;
}

// The time of a round of tiles that splitting the last round saves, as a fraction of the
// whole: the last round then takes 1 / parts of a round. Measured on the H200 (bench/RESULTS.md,
// 2026-11-28, sustained_ab in turns, ms): 4096x11008x4096 (11 rounds, the last 42% full: 2
// parts, 4.5% predicted) default 0.6324, P=1 0.6368, P=1,LW=8 0.6234, P=1,LW=2 0.6189;
// 8192^3 (32 rounds, the last 3% full: 8 parts, 2.7%) default 1.7819, P=1 1.8185, P=1,LW=8
// 1.8097: about half of the prediction is won, against a persistent grid's 1-2% at long K.
bool last_wave_split_by_default(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &t) {
  if (!t.roles() || t.split_k != 1 || t.ping_pong || t.cluster || t.tma_store)
    return false;
  const int64_t tiles = output_tiles(M, N, t), grid = t.persistent_blocks;
  const int64_t rounds = (tiles + grid - 1) / grid;
  const int64_t parts = last_wave_parts(tiles, grid, (K + t.block_k - 1) / t.block_k, 8);
  return parts >= 2 && (1.0 - 1.0 / double(parts)) / double(rounds) >= 0.04;
}

// Measured on the H100 (bench/RESULTS.md, 2026-11-27, default -> ping-pong at 7 stages, ms):
// at the clocks a loaded GPU sustains (bench/sustained_ab) 4096x4096x1024 0.0741 -> 0.0620; on
// a cool GPU 4096x4096x1024 0.0591 -> 0.0550, 8192x8192x1024 0.2474 -> 0.2195, 4096x4096x512
// 0.0385 -> 0.0379, 4096x4096x768 0.0487 -> 0.0479, 3000x5000x700 0.0571 -> 0.0564,
// 8192x4096x1024 0.1148 -> 0.1169; with longer K the single warpgroup's main loop is the
// slower one: 4096x4096x1536 0.0805 -> 0.0867, 4096^3 0.1886 -> 0.2141, 8192^3 1.6043 -> 1.8006.
bool ping_pong_by_default(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &t,
                          DataType out) {
  GemmWgmmaTiles narrow = t;
  narrow.block_m = narrow.block_n = 128;
  return t.roles() && t.split_k == 1 && out == Float(32) && K <= 1024 &&
         output_tiles(M, N, narrow) >= 2 * 132;
}

GemmWgmmaTiles as_ping_pong(GemmWgmmaTiles t, bool deepest) {
  t.ping_pong = t.persistent = true;
  t.block_m = t.block_n = 128;
  t.warpgroups_m = t.warpgroups_n = 1;
  t.wgmma_n = 0;
  if (deepest)
    return deepest_ring(t);
  // The ring kept, as deep as a block's shared memory holds 128 x 128 tiles (a small grid's
  // 8 stages of narrower tiles do not fit).
  while (t.stages > 2 && t.shared_bytes() > max_shared_bytes_per_block("sm_90") - 1024)
    --t.stages;
  return t;
}

// Measured on the H200 (bench/RESULTS.md, 2026-11-27, default -> in place, blocks of 64 x 128, ms;
// ping-pong consumers of such tiles measured the same): 1000^3 0.0106 -> 0.0098 (cuBLAS 0.0088),
// 1024x1000x1000 0.0105 -> 0.0100, 1000x1024x1000 0.0103 -> 0.0094, 600x1000x1000 0.0102 -> 0.0086,
// 512x1000x1000 0.0100 -> 0.0084, 256x1000x1000 0.0100 -> 0.0080, 100x1000x1000 0.0091 -> 0.0079,
// 800x1000x1200 (13 blocks of rows: no cluster) 0.0122 -> 0.0103, 1000x1000x2000 0.0168 -> 0.0136;
// against split-K 64x1000x1000 0.0113-0.0130 -> 0.0079, 64x4096x1000 0.0091-0.0113 -> 0.0072. Where
// N is large and B's rows whole sectors it loses a little (256x4096x1000 0.0092 -> 0.0095,
// 128x4096x1000 0.0069-0.0082 -> 0.0082). Where the 64 x 128 tiles make more than a wave they gain
// little or lose (1500x1000x1000 0.0151 -> 0.0145, 2000x1000x1000 0.0139 -> 0.0163), and they lose
// where K has no tail (1000x1000x1024 0.0085 -> 0.0090) or A cannot be read in place (1000x1000x500
// 0.0076 -> 0.0085). Rows of A or B that are not whole 32-byte sectors (K or N of 1000 halves) slow
// TMA's boxes (on the H100 1024x1024x1000 in place 0.0105 against 1024^3 0.0074 and 1024x1024x1008
// 0.0075), which sharing B's tile across a cluster and 64-row tiles offset.
bool small_ragged_by_default(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &t,
                             DataType out) {
  GemmWgmmaTiles small = t;
  small.block_m = 64;
  small.block_n = 128;
  return t.roles() && out == Float(32) && K % t.block_k != 0 && K <= 2048 &&
         tma_reads_in_place(K, Float(16)) && tma_reads_in_place(N, Float(16)) && M >= 64 &&
         N >= 128 && output_tiles(M, N, small) <= 132;
}

GemmWgmmaTiles as_small_ragged(int64_t M, GemmWgmmaTiles t) {
  t.block_m = 64;
  t.block_n = 128;
  t.warpgroups_m = t.warpgroups_n = 1;
  t.wgmma_n = 0;
  t.split_k = 1;
  t.persistent = t.ping_pong = false;
  t.ragged_operands = GemmWgmmaTiles::RaggedOperands::InPlace;
  t.cluster = (M + 63) / 64 % 2 == 0 ? 1 : 0;
  return t;
}

void check_cluster_fits(const std::string &context, int64_t M, int64_t N,
                        const GemmWgmmaTiles &t) {
  user_check(t.cluster >= 0 && t.cluster <= 2, context)
      << "cluster (knob CL) must be 0 (none), 1 (2x1: two blocks along M share B's tile) or 2 "
         "(1x2: two along N share A's), got " << t.cluster;
  user_check(!t.cluster || t.tma, context)
      << "clusters with multicast (cluster, knob CL) share a TMA tile among the blocks of a "
         "cluster: they need TMA fills (tma, knob TMA=1)";
  if (!t.cluster)
    return;
  user_check(t.cluster_size == 2 || t.cluster_size == 4 || t.cluster_size == 8, context)
      << "a cluster (knob CS) has 2, 4 or 8 blocks, got " << t.cluster_size;
  // The clustered axis' blocks make whole clusters (a persistent grid rounds down to them).
  const bool along_m = t.cluster == 1;
  const int64_t blocks = along_m ? (std::max(M, int64_t(t.block_m)) + t.block_m - 1) / t.block_m
                                 : (N + t.block_n - 1) / t.block_n;
  user_check(blocks % t.cluster_size == 0, context)
      << "clusters of " << t.cluster_size << " blocks along " << (along_m ? "M" : "N")
      << " (knob CL=" << t.cluster
      << (t.cluster_size != 2 ? ", CS=" + std::to_string(t.cluster_size) : std::string())
      << ") need a multiple of "
      << t.cluster_size << " blocks there, but " << (along_m ? "M=" : "N=") << (along_m ? M : N)
      << " makes " << blocks << " of " << (along_m ? t.block_m : t.block_n)
      << "; choose another block size, cluster axis or size, or CL=0";
}

void check_gemm_wgmma_tiles(const std::string &context, int64_t M, int64_t N, int64_t K,
                            const GemmWgmmaTiles &t, bool partial_blocks) {
  user_check(t.block_m > 0 && t.block_n > 0 && t.block_k > 0 && t.warpgroups_m > 0 &&
                 t.warpgroups_n > 0 && t.stages > 0 && t.wgmma_n >= 0,
             context)
      << "tile parameters must be positive";
  user_check(t.threads() <= 1024, context)
      << t.warpgroups_m << " x " << t.warpgroups_n << " warpgroups make " << t.threads()
      << " threads; a block has at most 1024";
  // A thread holds group_m x group_n / 128 float32 accumulators in registers, and needs about
  // 30 more (addresses, loop counters, descriptors: ptxas asked for 154 where 256x256 blocks of
  // 4 warpgroups left 128). A block's threads share 64K registers, at most 255 each.
  // With warp roles the consumers take what the producer warpgroup leaves (setmaxnreg).
  const int64_t accumulators = int64_t(t.group_m()) * t.group_n() / 128;
  const int64_t registers =
      t.roles() ? warp_role_registers(t.consumer_warpgroups()).second
                         : std::min<int64_t>(255, 65536 / std::max(1, t.threads()));
  user_check(accumulators + 30 <= registers, context)
      << t.block_m << "x" << t.block_n << " blocks of " << t.warpgroups_m * t.warpgroups_n
      << " warpgroups hold " << accumulators << " float32 accumulators per thread, and with "
      << t.threads() << " threads a thread has at most " << registers
      << " registers (about 30 go to addresses and counters): use smaller tiles";
  user_check(t.block_m % (kRows * t.warpgroups_m) == 0, context)
      << "block_m=" << t.block_m
      << " must be a multiple of 64 x warpgroups_m = " << kRows * t.warpgroups_m
      << ": each warpgroup's rows are whole 64-row wgmma tiles";
  user_check(t.block_n % t.warpgroups_n == 0 && is_wgmma_n(t.instruction_n()) &&
                 t.group_n() % t.instruction_n() == 0,
             context)
      << "block_n=" << t.block_n << " over " << t.warpgroups_n << " warpgroups gives "
      << t.block_n / t.warpgroups_n
      << " columns each, which must be whole wgmma tiles of n=" << t.instruction_n()
      << " (n a multiple of 8 up to 256)";
  user_check(t.swizzle == 0 || t.swizzle == 32 || t.swizzle == 64 || t.swizzle == 128, context)
      << "swizzle must be 128, 64, 32 or 0, got " << t.swizzle;
  user_check(!t.roles() || t.warpgroups_n == 1, context)
      << "warp roles (warp_specialized) need the warpgroups on threadIdx.y alone "
         "(warpgroups_n = 1; the producer is one more there), got warpgroups_n="
      << t.warpgroups_n;
  user_check(!t.persistent || t.roles(), context)
      << "a persistent kernel (persistent) needs TMA fills with warp roles (tma and "
         "warp_specialized; knobs TMA=1 WS=1), whose producer loads the next tile during this "
         "tile's epilogue";
  user_check(!t.ping_pong || (t.persistent && t.warpgroups_m == 1 && t.warpgroups_n == 1),
             context)
      << "ping-pong consumers (ping_pong, knob PP=1) take alternate tiles of a persistent kernel, "
         "each a whole tile: they need persistent (P=1) and one warpgroup a tile "
         "(warpgroups_m = warpgroups_n = 1), got persistent=" << t.persistent << " and "
      << t.warpgroups_m << "x" << t.warpgroups_n << " warpgroups";
  user_check(!t.persistent || t.split_k == 1, context)
      << "a persistent kernel (persistent) walks whole output tiles; use split_k = 1 (knob "
         "SK=1), got split_k=" << t.split_k;
  user_check(!t.tma_store || !t.ping_pong, context)
      << "a TMA store of C (tma_store, knob TS=1) stages the tile in one shared buffer, which "
         "ping-pong consumers (ping_pong, knob PP=1) would fill with two tiles at once: use "
         "one of them";
  check_last_wave_split(context, t);
  user_check(!t.tma_store || t.split_k == 1, context)
      << "a TMA store of C (tma_store, knob TS=1) stores whole output tiles; use split_k = 1 "
         "(knob SK=1), got split_k=" << t.split_k;
  user_check(!t.persistent || t.persistent_blocks >= 1, context)
      << "a persistent kernel needs 1 or more blocks (persistent_blocks, knob PB; 132 is one "
         "per SM of an H100), got " << t.persistent_blocks;
  user_check(!t.tma || (t.swizzle && t.stages >= 2), context)
      << "TMA bulk copies (tma) fill swizzled tiles through a ring of 2 or more stages; got "
         "swizzle "
      << t.swizzle << " and " << t.stages << " stage(s)";
  const int multiple = t.swizzle ? t.swizzle / 2 : kChunk * kCopyChunks;
  user_check(t.block_k % multiple == 0 && t.block_n % multiple == 0 &&
                 (t.swizzle == 0 || t.instruction_n() % multiple == 0),
             context)
      << "block_k=" << t.block_k << ", block_n=" << t.block_n
      << " and wgmma_n=" << t.instruction_n() << " must be multiples of " << multiple
      << (t.swizzle ? ": the swizzled tiles are read in rows of " +
                          std::to_string(t.swizzle / 2) + " halves (" +
                          std::to_string(t.swizzle) + " bytes); use a narrower swizzle or none "
                          "for narrower tiles"
                    : ": a warp copies 4 chunks of 8 halves of each of 8 rows");
  auto divides = [&](const char *name, int64_t v, int block, const char *knob) {
    user_check(v % block == 0, context)
        << name << "=" << v << " must be a multiple of " << knob << "=" << block
        << "; pad it or choose tiles that divide it";
  };
  // M and N need not divide: the last block shifts inwards (tile_gemm_output), so it must fit.
  // With partial_blocks M may be less than a block: gemm_wgmma then computes a block of rows
  // (PaddedGemm, which also pads K to whole steps and B's rows to whole 16-byte units).
  auto at_least = [&](const char *name, int64_t v, int block, const char *knob) {
    user_check(v >= block, context)
        << name << "=" << v << " is smaller than " << knob << "=" << block
        << "; choose a smaller " << knob << " (the last block shifts inwards, so it must fit)";
  };
  if (!partial_blocks)
    at_least("M", M, t.block_m, "block_m");
  at_least("N", N, t.block_n, "block_n");
  check_cluster_fits(context, M, N, t);
  user_check(t.split_k >= 1, context) << "split_k must be at least 1, got " << t.split_k;
  divides("K", K, t.block_k * t.split_k, "block_k x split_k");
  int64_t per_step = int64_t(kChunk) * t.threads();
  user_check((int64_t(t.block_m) * t.block_k) % per_step == 0 &&
                 (int64_t(t.block_k) * t.block_n) % per_step == 0,
             context)
      << "the shared tiles (" << t.block_m << "x" << t.block_k << " of A, " << t.block_k << "x"
      << t.block_n << " of B) must be multiples of " << per_step << " halves (" << t.threads()
      << " threads x 8) so every thread copies whole 16-byte chunks; use fewer warpgroups or "
         "larger tiles";
  user_check(t.shared_bytes() <= max_shared_bytes_per_block("sm_90"), context)
      << t.stages << " stages of " << t.block_m << "x" << t.block_k << " and " << t.block_k << "x"
      << t.block_n << " fp16 tiles take " << t.shared_bytes()
      << " bytes of shared memory; a block has at most 227 KiB: use fewer stages or smaller tiles";
}

void check_last_wave_split(const std::string &context, const GemmWgmmaTiles &t) {
  user_check(t.split_last_wave < 2 || (t.persistent && !t.ping_pong && !t.cluster && !t.tma_store),
             context)
      << "splitting the last wave's tiles (split_last_wave, knob LW=" << t.split_last_wave
      << ") needs a persistent kernel (P=1) of cooperative consumers whose tiles are stored "
         "from registers, without clusters: got persistent=" << t.persistent
      << ", ping_pong=" << t.ping_pong << ", cluster=" << t.cluster
      << ", tma_store=" << t.tma_store << "; drop LW or those knobs";
}

void check_tma_store_fits(const std::string &context, int64_t M, int64_t N,
                          const GemmWgmmaTiles &t, DataType out) {
  if (!t.tma_store)
    return;
  // The staging tile is a cache of C, whose region bound inference keeps within C's rows.
  user_check(M >= t.block_m, context)
      << "a TMA store of C (tma_store, knob TS=1) stages whole blocks of C's rows, but M=" << M
      << " is less than block_m=" << t.block_m
      << "; store from registers (TS=0), where the block stores its " << M << " rows";
  const int bytes = out.bytes();
  user_check(N * bytes % 16 == 0, context)
      << "a TMA store of C (tma_store, knob TS=1) needs C's rows to be whole 16-byte units, but "
      << "N=" << N << " " << out << " elements are " << N * bytes
      << " bytes; store from registers (TS=0) or pad N to a multiple of " << 16 / bytes;
  const int64_t total = t.shared_bytes() + t.staging_bytes(bytes);
  user_check(total <= max_shared_bytes_per_block("sm_90"), context)
      << "a TMA store of C (tma_store, knob TS=1) stages the " << t.block_m << "x" << t.block_n
      << " block in shared memory (" << t.staging_bytes(bytes) << " bytes of " << out
      << "), which with " << t.stages << " stages of A and B tiles (" << t.shared_bytes()
      << " bytes) makes " << total
      << "; a block has at most 227 KiB: use fewer stages (knob S), smaller blocks, or "
         "store from registers (TS=0)";
}

int tma_store_stages(const GemmWgmmaTiles &t, int out_bytes) {
  int stages = t.stages;
  GemmWgmmaTiles f = t;
  while (stages > 2) {
    f.stages = stages;
    if (f.shared_bytes() + f.staging_bytes(out_bytes) <= max_shared_bytes_per_block("sm_90"))
      break;
    --stages;
  }
  return stages;
}

GemmWgmmaTiles gemm_wgmma_tiles(int64_t M, int64_t N, int64_t K, const std::string &context,
                                bool partial_blocks) {
  auto fits = [&](int64_t m, int64_t n, int64_t k, const GemmWgmmaTiles &t) {
    return ::tessel::fits(m, n, k, t, partial_blocks);
  };
  // A K that no K step divides is padded to whole steps of 64 (PaddedGemm).
  if (K % 32 != 0)
    K = round_up(K, 64);
  // TMA fills and blocks rasterized in groups of 8 rows: measured the fastest on the H100
  // (bench/RESULTS.md), wherever the tiles are swizzled and pipelined.
  auto with_tma = [](GemmWgmmaTiles t) {
    t.tma = t.swizzle != 0 && t.stages >= 2;
    t.raster_group = t.tma ? 8 : 0;
    t.warp_specialized = t.tma && t.warpgroups_n == 1;
    return t;
  };
  GemmWgmmaTiles best;
  // 128 x 128 blocks instead of 128 x 256 where they fill the GPU's waves clearly better (one
  // block per SM; an H100's 132 SMs): the ResNet res5 conv (196 or 392 blocks) measured 9%
  // faster (bench/RESULTS.md).
  GemmWgmmaTiles narrow = best;
  narrow.block_n = 128;
  auto blocks = [&](const GemmWgmmaTiles &t) { return output_tiles(M, N, t); };
  auto wave_use = [&](const GemmWgmmaTiles &t) {
    const int64_t sms = 132, b = blocks(t);
    return double(b) / double((b + sms - 1) / sms * sms);
  };
  // The share of the blocks' work that is the GEMM's: below 1 where the last block row or
  // column shifts inwards over its neighbour (M or N not a multiple of the block).
  auto useful = [&](const GemmWgmmaTiles &t) {
    auto part = [](int64_t v, int b) { return double(v) / double((v + b - 1) / b * b); };
    return part(M, t.block_m) * part(N, t.block_n);
  };
  const bool big = blocks(best) >= 132; // the default blocks fill a wave
  // Persistent (132 blocks walking the tiles, the ring running across them) for grids of 1 to
  // 8 waves (persistent_by_default).
  auto with_persistence = [&](GemmWgmmaTiles t) {
    t = with_tma(t);
    t.persistent = persistent_by_default(M, N, t);
    return t;
  };
  if (big && fits(M, N, K, with_tma(best)) && fits(M, N, K, with_tma(narrow)) &&
      useful(narrow) >= 0.9 && wave_use(narrow) > wave_use(best) + 0.1)
    return with_persistence(narrow);
  if (big && fits(M, N, K, with_tma(best)) && useful(best) >= 0.9)
    return with_persistence(best);
  // Otherwise the tiles that waste least (in steps of 5%), swizzled, then, for grids of less
  // than a wave, those that keep most SMs busy (in steps of 10%; a batch-1 conv measured 2x
  // faster in 64 x 64 blocks than in 256 x 128), then the largest (128 x 256 before 256 x 128).
  std::tuple<int64_t, bool, int, int64_t, int64_t, int> best_score{-1, false, 0, 0, 0, 0};
  // 256 x 128 blocks (two warpgroups of 128 rows) where N is 128 keep the 128 x 256 blocks'
  // work per block (the ResNet res3 conv measured 5% faster than 128 x 128); between equal
  // areas 128 x 256 comes first.
  for (int bm : {128, 256, 64})
    for (int bn : {256, 128, 64, 32})
      for (int bk : {64, 32})
        for (int swizzle : {kSwizzle, 0}) {
          if (bm == 256 && bn != 128)
            continue;
          GemmWgmmaTiles t{.block_m = bm,
                           .block_n = bn,
                           .block_k = bk,
                           .warpgroups_m = std::min(2, bm / 64),
                           .swizzle = swizzle};
          if (!fits(M, N, K, with_tma(t)))
            continue;
          int64_t busy = big ? 0 : int64_t(wave_use(t) * 10 + 1e-9);
          // Swizzled tiles (TMA fills, wgmma reading 128-byte rows) are worth 10% of waste: on
          // the H200 unswizzled 32-column blocks (N of 600 in 19 blocks, 1% wasted) took
          // 3.6-7x as long as swizzled ones: 1000x600x1024 0.0314 -> 0.0076 ms, 4096x600x4096
          // 0.3450 -> 0.0954, 4096x200x4096 0.1380 -> 0.0257, 800x2000x1024 0.0701 -> 0.0100
          // (bench/RESULTS.md, 2026-11-27).
          const int64_t worth = int64_t(useful(t) * 20 + 1e-9) + (swizzle ? 2 : 0);
          // Blocks of more rows than M compute rows past it (and, without TMA, copy A padded).
          std::tuple<int64_t, bool, int, int64_t, int64_t, int> score{
              worth, M >= bm, swizzle, busy, int64_t(bm) * bn, bk};
          if (score > best_score) {
            best_score = score;
            best = t;
          }
        }
  user_check(std::get<4>(best_score) > 0, context)
      << M << "x" << N << "x" << K
      << " has no wgmma tiling: M must be at least 64 and N at least 32 (use gemm_tc / "
         "gemm_mma for smaller ones)";
  // Grids under half a wave (a few rows of C: 16 x 4096 x 4096 makes 64 blocks) split K into
  // parts filling up to two waves, each of 8 K steps or more (gemm_wgmma, whose operands and
  // stores allow it). On the H100 16 x 4096 x 4096 took 0.0266 ms whole, 0.0169 in 2 parts,
  // 0.0150 in 4.
  const int64_t steps = K / best.block_k;
  if (partial_blocks)
    best.split_k = split_k_for_small_grid(blocks(best), steps, {4, 2},
                                          [&](int parts) { return steps % parts == 0; });
  best = with_tma(best);
  // A grid of a wave or less whose blocks walk 32 K steps or more reads its operands once, at
  // the memory's speed (a few hundred rows of C against large weights): a deeper ring keeps
  // more of them in flight. On the H100 128x4096x4096 (128 blocks of 64 x 64) took 0.0189 ms
  // through 4 stages and 0.0129 through 8, 256x4096x4096 0.0242 -> 0.0181; grids of 16 K steps
  // (1024^3, split-K parts) gained nothing or lost (bench/RESULTS.md, 2026-11-26 16:00).
  if (best.tma && blocks(best) * best.split_k <= 132 && steps / best.split_k >= 32)
    best = deepest_ring(best);
  return best;
}

int split_k_for_small_grid(int64_t blocks, int64_t steps, std::initializer_list<int> parts,
                           const std::function<bool(int)> &divides) {
  constexpr int64_t sms = 132;
  if (2 * blocks <= sms)
    for (int p : parts)
      if (divides(p) && blocks * p <= 2 * sms && steps / p >= 8)
        return p;
  return 1;
}

std::vector<GemmWgmmaTiles> gemm_wgmma_candidates(int64_t M, int64_t N, int64_t K) {
  std::vector<GemmWgmmaTiles> out;
  const int blocks[][3] = {{128, 256, 2}, {256, 128, 4}, {128, 128, 2}, {64, 256, 1}};
  for (const auto &[bm, bn, groups] : blocks)
    for (int stages : {4, 3})
      for (int64_t raster : {0, 8})
        for (int fill : {2, 1, 0}) { // TMA with warp roles, TMA, cp.async
          GemmWgmmaTiles t{.block_m = bm, .block_n = bn, .block_k = 64, .warpgroups_m = groups,
                           .stages = stages, .raster_group = raster, .tma = fill > 0,
                           .warp_specialized = fill == 2};
          if (fits(M, N, K, t, /*partial_blocks=*/M < 64))
            out.push_back(t);
          if (t.roles()) { // the same tiles walked by one block per SM
            t.persistent = true;
            if (fits(M, N, K, t, /*partial_blocks=*/M < 64))
              out.push_back(t);
          }
          // Clusters of 2 multicasting the shared operand, persistent and not, along M (B's
          // tile) and along N (A's), at the default ring depth and rasterization.
          for (int cl : {1, 2}) {
            if (!t.roles() || stages != 4 || raster != 8)
              break;
            for (bool persistent : {false, true}) {
              GemmWgmmaTiles c = t;
              c.persistent = persistent;
              c.cluster = cl;
              if (fits(M, N, K, c, /*partial_blocks=*/M < 64))
                out.push_back(c);
            }
          }
        }
  return out;
}

std::string to_string(const GemmWgmmaTiles &t) {
  return "wgmma bm=" + std::to_string(t.block_m) + " bn=" + std::to_string(t.block_n) +
         " bk=" + std::to_string(t.block_k) + " wg=" + std::to_string(t.warpgroups_m) + "x" +
         std::to_string(t.warpgroups_n) + " n=" + std::to_string(t.instruction_n()) +
         " stages=" + std::to_string(t.stages) + " raster=" + std::to_string(t.raster_group) +
         " swizzle=" + std::to_string(t.swizzle) + (t.tma ? " tma" : "") +
         (t.roles() ? " ws" : "") +
         (t.split_k > 1 ? " split_k=" + std::to_string(t.split_k) : "") +
         (t.persistent ? " persistent=" + std::to_string(t.persistent_blocks) : "") +
         (t.persistent && t.split_last_wave > 1
              ? " last_wave_parts=" + std::to_string(t.split_last_wave)
              : "") +
         (t.ping_pong ? " ping_pong" : "") + (t.tma_store ? " tma_store" : "") +
         (t.cluster ? " cluster=" + (t.cluster == 1 ? std::to_string(t.cluster_size) + "x1"
                                                   : "1x" + std::to_string(t.cluster_size))
                    : "");
}

bool hopper_gpu() { return Device::available() && Device::get().arch() == "sm_90"; }

ScheduledProgram gemm_wgmma(int64_t M, int64_t N, int64_t K, DataType in, DataType out) {
  return gemm_wgmma(M, N, K, gemm_wgmma_default_tiles(M, N, K, out), in, out);
}

namespace {

// The GEMM as the wgmma kernel reads it. TMA and 16-byte copies need rows of whole 16-byte
// units, and the K loop whole steps of block_k: where A's or B's rows fall short, the kernel
// reads copies padded with zeros (AP: Mp x Kp, BP: Kp x Np; Kp = K rounded up to a whole step,
// Np = N up to a whole block_n where N is not a multiple of 8, then to whole 128-byte lines,
// Mp = a whole block of rows where M is less). Each copy is a stage in global memory, so a
// workspace written by a kernel of its own before the GEMM's (LoweredModule); or, where TMA
// fills the tiles and the operand's rows are whole 16-byte units, computed inline into the
// shared tile, which then reads the operand in place, TMA zeroing what lies past its edges
// (tma_reads_in_place). C is the sum over Mp x N: where Mp > M the caller stores its first M
// rows (a stage of M rows reading it, whose one block schedule_wgmma_gemm keeps whole). Without
// padding AP and BP are A and B: gemm_definition exactly.
struct PaddedGemm {
  GemmTensors g; ///< the arguments A, B and the sum C (Mp x N, over Kp)
  Tensor AP, BP; ///< what C reads
  int64_t K = 0; ///< Kp
  bool a_in_place = false, b_in_place = false; ///< AP / BP computed inline into a TMA fill

  /// The padded copies' kernels, or nothing where they are read in place.
  void schedule_copies(Schedule &s) const {
    schedule_padded_copy(s, AP, a_in_place);
    schedule_padded_copy(s, BP, b_in_place);
  }
};

PaddedGemm padded_gemm_definition(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &t,
                                  DataType in, const std::string &c_name) {
  user_check(t.split_k >= 1, "gemm_wgmma") << "split_k must be at least 1, got " << t.split_k;
  const int64_t steps = (K + t.block_k - 1) / t.block_k;
  user_check(t.split_k <= steps, "gemm_wgmma")
      << "split_k (knob SK) = " << t.split_k << " parts of K=" << K << ", which has only "
      << steps << " steps of block_k=" << t.block_k << "; give at most " << steps
      << " parts (SK=0: the tiles' choice)";
  // Where N is not a multiple of 8 the last block of columns stays in place (schedule_wgmma_gemm)
  // and reads B up to the next whole block.
  const int64_t Kp = round_up(K, int64_t(t.block_k) * t.split_k),
                Mp = std::max<int64_t>(M, t.block_m);
  int64_t Np = column_tail(N) == TailStrategy::ShiftInwards ? N : round_up(N, t.block_n);
  // TMA fills read an operand of whole 16-byte rows in place: no copy for K's tail or A's
  // missing rows. By size, from 2^21 elements: the copies of small operands cost less than
  // reading them in place (H100, copied / in place, ms: 1000^3 0.0120 / 0.0132, 16x4096x4096
  // 0.0118 / 0.0161, 1024x1000x1000 0.0118 / 0.0130; 100x4096x4096, 1024x1024x1000, 512x512x500
  // level; 16x14336x4096 0.0455 / 0.0430 the exception), large ones' more (2000^3, 4M elements
  // each: 0.0432 / 0.0299; 3000x5000x700, 4000^3 level; bench/RESULTS.md 2026-11-26 evening).
  // Fewer rows of A than a block, K whole: TMA's boxes stop at A's last row and the tiles'
  // other rows are zeroed once (lower_bulk_copy, inject_pipeline): in place at any size
  // (16x4096x4096 on the H100: 0.0091 ms against 0.0121 copied, bench/RESULTS.md 2026-11-27).
  // Not in a persistent kernel's tile loop, where the boxes are not clipped; not for one row,
  // whose index the tile's copy no longer names (A[0, k]: no box dimension for the rows).
  const bool a_rows_clipped = M > 1 && M < t.block_m && Kp == K && !t.persistent;
  using Ragged = GemmWgmmaTiles::RaggedOperands;
  auto in_place = [&](int64_t rows, int64_t cols, bool clipped) {
    return t.tma && tma_reads_in_place(cols, in) &&
           (t.ragged_operands == Ragged::InPlace ||
            (t.ragged_operands == Ragged::BySize &&
             (clipped || rows * cols >= (int64_t(1) << 21))));
  };
  const bool a_in_place = in_place(M, K, a_rows_clipped), b_aligned = in_place(K, N, false);
  const bool a_copied = (Mp != M || Kp != K) && !a_in_place;
  // Rows of B that are not whole 128-byte lines cost TMA's and the copies' sectors: padded to
  // them wherever B is copied anyway (3000x5000x700: 0.0812 -> 0.0694 ms on the H100; also
  // where only A's copy must run, whose kernel then copies B too at the cost of its bytes), and
  // for a large B (4096x4088x4096: 0.2901 -> 0.2389 ms), but not for a small one, whose copy
  // costs more than it saves (2048x2040x2048: 0.0365 -> 0.0383, 1024x1000x1024: 0.0095 ->
  // 0.0122).
  if (Np % 64 != 0 &&
      (Np != N || (Kp != K && (!b_aligned || a_copied)) || K * N >= (int64_t(1) << 23)))
    Np = round_up(Np, 64);
  if (Kp == K && Np == N && Mp == M && t.split_k == 1) {
    GemmTensors g = gemm_definition(M, N, K, in, c_name);
    return {g, g.A, g.B, K};
  }
  PaddedGemm p;
  p.K = Kp;
  p.g.A = placeholder({M, K}, in, "A");
  p.g.B = placeholder({K, N}, in, "B");
  p.AP = padded_copy(p.g.A, Mp, Kp, "A_pad");
  p.BP = padded_copy(p.g.B, Kp, Np, "B_pad");
  p.a_in_place = a_in_place;
  p.b_in_place = b_aligned && Np == N; // B's columns padded to lines are a copy of their own
  // Split-K: part s sums K's s-th run of Kp / split_k.
  const int64_t run = Kp / t.split_k;
  IterVar k = reduce_axis({0, run}, "k");
  auto product = [&](const Expr &i, const Expr &kk, const Expr &j) {
    return sum(p.AP(i, kk).astype(Float(32)) * p.BP(kk, j).astype(Float(32)), {k});
  };
  if (t.split_k == 1)
    p.g.C = compute(
        {Mp, N}, [&](Var i, Var j) { return product(i, k.var(), j); }, c_name, {"i", "j"});
  else
    p.g.C = compute(
        {int64_t(t.split_k), Mp, N},
        [&](Var s, Var i, Var j) { return product(i, s * int(run) + k.var(), j); }, c_name,
        {"s", "i", "j"});
  return p;
}

} // namespace

ScheduledProgram gemm_wgmma(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &t,
                            DataType in, DataType out) {
  user_check(in == Float(16) || in == BFloat(16), "gemm_wgmma")
      << "A and B must be float16 or bfloat16, got " << in;
  user_check(out == Float(32) || out == Float(16) || out == BFloat(16), "gemm_wgmma")
      << "C must be float32, float16 or bfloat16, got " << out;
  user_check(K > 0 && t.block_k > 0, "gemm_wgmma") << "K and block_k must be positive";
  // What the wgmma kernel stores: partial sums (float32, added by a second kernel) or C. Where
  // that is not the float32 sum over whole blocks (a narrower C, the sum rounded as it is
  // stored; fewer rows than a block, M of the block's rows), the sum in the accumulators is a
  // stage of its own, which the stored stage reads.
  const bool parts = t.split_k > 1, narrow = out != Float(32) && !parts;
  const bool own_acc = narrow || M < t.block_m;
  const std::string stored_name = parts ? "C_part" : "C";
  PaddedGemm p = padded_gemm_definition(M, N, K, t, in, own_acc ? "C_acc" : stored_name);
  check_gemm_wgmma_tiles("gemm_wgmma", M, N, p.K, t);
  check_tma_store_fits("gemm_wgmma", M, N, t, out);
  const Tensor acc = p.g.C;
  Tensor stored = acc;
  auto rounded = [&](const Expr &v) { return narrow ? v.astype(out) : v; };
  if (own_acc && parts)
    stored = compute(
        {int64_t(t.split_k), M, N}, [&](Var s, Var i, Var j) { return acc(s, i, j); },
        stored_name, {"s", "i", "j"});
  else if (own_acc)
    stored = compute(
        {M, N}, [&](Var i, Var j) { return rounded(acc(i, j)); }, stored_name, {"i", "j"});
  Tensor total; // split-K into a narrow C: the parts' float32 sum, then rounded
  const Tensor C = parts ? leading_block(stored, M, N, "C", out, &total) : stored;
  Schedule s = create_schedule({C});
  p.schedule_copies(s);
  if (C != stored)
    schedule_leading_block(s, C, total);
  // Memory hierarchy: global -> shared (swizzled) -> wgmma, accumulating in registers.
  WgmmaGemmStages st;
  st.C = stored;
  st.AS = s.cache_read(p.AP, "shared", {acc});
  st.BS = s.cache_read(p.BP, "shared", {acc});
  if (stored == acc) {
    st.CF = s.cache_write(acc, "wgmma.accumulator");
  } else {
    s[acc].set_scope("wgmma.accumulator");
    st.CF = acc;
  }
  st.in = in;
  schedule_wgmma_gemm(s, st, t);

  return gemm_program({p.g.A, p.g.B, C}, s, M, N, K);
}

void schedule_wgmma_gemm(Schedule &s, const WgmmaGemmStages &st, const GemmWgmmaTiles &t) {
  const int n = t.instruction_n();
  GemmThreadAxes idx;

  // C: blocks, warpgroups on threadIdx.y / z, then each warpgroup's 64 x n tiles. threadIdx.x
  // (the warpgroup's 128 threads) is bound only in the shared copies: the tiles' loops run on
  // the whole warpgroup, as a wgmma does.
  // Columns whose last block cannot start on a 16-byte boundary of B (N not a multiple of 8)
  // keep that block in place and store only the columns inside (wgmma_store's limit; a TMA
  // store's box is clipped at C's edge instead). Fewer rows than a block: the one block of
  // rows stores those inside the same way (its operand tiles read zeros past them).
  const TailStrategy n_tail = column_tail(*as_const_int(st.C.shape().back()));
  const TailStrategy m_tail = *as_const_int(st.C.shape().end()[-2]) < t.block_m
                                  ? TailStrategy::GuardWithIf
                                  : TailStrategy::ShiftInwards;
  const int64_t persistent = t.persistent ? t.persistent_blocks : 0;
  Stage sc = s[st.C];
  GemmOutputLoops c;
  if (t.tma_store) {
    // C through a shared staging tile, stored by TMA: the consumers write their tiles of the
    // staging tile (the stage tiled and tensorized below in C's place).
    StagedGemmOutput staged =
        tile_gemm_output_staged(s, st.C, idx, t.block_m, t.block_n, t.warpgroups_m,
                                t.warpgroups_n, kRows, n, t.raster_group, n_tail, m_tail,
                                persistent);
    sc = s[staged.staged];
    c = staged.loops;
  } else {
    c = tile_gemm_output(sc, idx, t.block_m, t.block_n, t.warpgroups_m, t.warpgroups_n, kRows, n,
                         t.raster_group, n_tail, m_tail, persistent);
  }
  const std::string store_scope = t.tma_store ? "shared" : "global";

  // The accumulator: a warpgroup's tiles, K in shared-tile steps (ko), then 16-wide slices.
  Stage sf = s[st.CF];
  sf.compute_at(sc, c.group_j);
  // The last two axes (a leading one is split-K's part, one per block).
  IterVar ci = sf.op_axis(-2), cj = sf.op_axis(-1);
  auto [ko, k1] = split_gemm_reduction(sf, t.block_k, st.k_period);
  auto [ki, kk] = sf.split(k1, st.in.bits() == 8 ? 2 * kK : kK); // one wgmma's K
  auto [cfi, cii] = sf.split(ci, kRows);
  auto [cfj, cjj] = sf.split(cj, n);
  sf.reorder({ko, ki, cfi, cfj, cii, cjj, kk});

  // Shared tiles of one K step, copied 16 bytes a thread. Swizzled: consecutive lanes take the
  // 8 units of a 128-byte row (128 contiguous bytes of global memory, all 32 banks of shared
  // memory once permuted). Interleaved: lanes take 8 rows of 4 chunks (see kCopyRows). Warps
  // and warpgroups take the rest.
  for (const Tensor &sh : {st.AS, st.BS}) {
    Stage ss = s[sh];
    ss.compute_at(sf, ko);
    if (t.tma) {
      // One thread copies each tile in boxes of the swizzle's width; the block's threads are
      // launched by the output stage (nothing else is split over threadIdx.x).
      ss.swizzle(t.swizzle);
      if (sh == st.AS && st.a_im2col)
        ss.bulk_copy_im2col(*st.a_im2col);
      else
        ss.bulk_copy();
      ss.pipeline(t.stages);
      continue;
    }
    auto [r, c] = ss.axes<2>();
    auto [c1, vec] = ss.split(c, kChunk);
    IterVar f;
    if (t.swizzle) {
      ss.swizzle(t.swizzle);
      auto [block, unit] = ss.split(c1, t.swizzle / 2 / kChunk);
      ss.reorder({block, r, unit, vec});
      f = ss.fuse(ss.fuse(block, r), unit);
    } else {
      ss.storage_interleave(kChunk);
      auto [rh, rl] = ss.split(r, kCopyRows);
      auto [ch, cl] = ss.split(c1, kCopyChunks);
      ss.reorder({rh, ch, cl, rl, vec});
      f = ss.fuse(ss.fuse(ss.fuse(rh, ch), cl), rl);
    }
    auto [f1, tx] = ss.split(f, 128);
    auto [f2, ty] = ss.split(f1, t.warpgroups_m);
    auto [f3, tz] = ss.split(f2, t.warpgroups_n);
    ss.bind(tx, idx.thread_x);
    ss.bind(ty, idx.thread_y);
    ss.bind(tz, idx.thread_z);
    ss.vectorize(vec);
    if (t.stages > 1)
      ss.pipeline(t.stages);
  }

  // The block's threads around the output stage: one of them issues the TMA boxes, of the
  // operands' fills or of C's store (whose copy is C's own loops, around which they must be
  // bound even where cp.async fills bind them inside their copies).
  if (t.tma || t.tma_store)
    sc.env_threads({thread_axis(Range(0, 128), "threadIdx.x")});
  // Clusters along M share B's tile, along N A's: each block multicasts its share of it.
  if (t.cluster) {
    s[st.C].cluster(t.cluster == 1 ? c.block_i : c.block_j, t.cluster_size); // (TS: not sc's)
    s[t.cluster == 1 ? st.BS : st.AS].multicast();
  }
  if (t.roles())
    sf.warp_specialize(t.ping_pong ? ConsumerRoles::ping_pong : ConsumerRoles::cooperative);
  if (t.persistent && t.split_last_wave > 1)
    sf.split_last_wave(ko, t.split_last_wave);

  // Register indices must be constants.
  sc.unroll(c.tile_i);
  sc.unroll(c.tile_j);
  sf.unroll(ki);
  sf.unroll(cfi);
  sf.unroll(cfj);
  sf.tensorize(cii, wgmma_gemm(n, st.b_layout, t.swizzle, st.in, st.b_in));
  sc.tensorize(c.inner_i, st.epilogue
                              ? wgmma_store_matrix(n, store_scope, st.C.dtype(), *st.epilogue)
                              : wgmma_store_matrix(n, store_scope, st.C.dtype()));
}

ScheduledProgram gemm_wgmma_fused(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &t,
                                  DataType in, DataType out, const WgmmaEpilogue &epilogue) {
  user_check(in == Float(16) || in == BFloat(16), "gemm_wgmma_fused")
      << "A and B must be float16 or bfloat16, got " << in;
  user_check(epilogue.f && epilogue.column_inputs.size() == 1, "gemm_wgmma_fused")
      << "the epilogue '" << epilogue.name << "' must take one column vector (the bias)";
  user_check(K > 0 && t.block_k > 0, "gemm_wgmma_fused") << "K and block_k must be positive";
  user_check(t.split_k == 1, "gemm_wgmma_fused")
      << "the fused epilogue is applied in the wgmma kernel's store, so K cannot be split "
         "(split_k=" << t.split_k << "); use split_k = 1";
  PaddedGemm pg = padded_gemm_definition(M, N, K, t, in, "C_acc");
  check_gemm_wgmma_tiles("gemm_wgmma_fused", M, N, pg.K, t);
  check_tma_store_fits("gemm_wgmma_fused", M, N, t, out);
  const GemmTensors &g = pg.g;
  Tensor bias = placeholder({N}, epilogue.column_inputs[0], "bias");
  Tensor acc = g.C; // Mp x N: where M is less than a block, C stores its first M rows
  Tensor C = compute(
      {M, N},
      [&](Var i, Var j) {
        Expr v = epilogue.f(acc(i, j), {bias(j)});
        return out == Float(32) ? v : v.astype(out);
      },
      "C", {"i", "j"});
  Schedule s = create_schedule({C});
  pg.schedule_copies(s);
  WgmmaGemmStages st;
  st.C = C;
  st.AS = s.cache_read(pg.AP, "shared", {acc});
  st.BS = s.cache_read(pg.BP, "shared", {acc});
  s[acc].set_scope("wgmma.accumulator");
  st.CF = acc;
  st.in = in;
  st.epilogue = epilogue;
  schedule_wgmma_gemm(s, st, t);

  ScheduledProgram p;
  p.schedule = s;
  p.args = {g.A, g.B, bias, C};
  p.num_inputs = 3;
  p.flops = 2.0 * double(M) * double(N) * double(K);
  return p;
}

} // namespace tessel

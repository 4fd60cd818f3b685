// GEMM on Hopper's warpgroup Tensor Core instructions (wgmma.mma_async, sm_90a): fp16 A (M x K)
// and B (K x N, row major), fp32 C.
//
// A block of warpgroups_m x warpgroups_n warpgroups (128 threads each, on threadIdx.x; the
// groups on threadIdx.y / z) computes a block_m x block_n tile of C. K advances in steps of
// block_k through `stages` shared tiles of A and B, stored in wgmma's 128-byte swizzled layout
// (or, with swizzle 0, interleaved in chunks of 8 halves: its no-swizzle layout) and filled by
// one thread with TMA bulk copies completing on a ring of mbarriers (tiles.tma; the default
// tiles) or by every thread with 16-byte cp.async copies. Each warpgroup multiplies straight from those
// tiles into its register accumulators, 64 x wgmma_n per instruction, and stores them from
// registers to C.
//
//   ScheduledProgram p = gemm_wgmma(4096, 4096, 4096);                    // default tiles
//   ScheduledProgram q = gemm_wgmma(128, 128, 64, {.block_n = 128, .stages = 2});
#pragma once

#include "schedules/Registry.h"
#include "schedules/WgmmaIntrinsics.h"

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

struct GemmWgmmaTiles {
  int block_m = 128;
  int block_n = 256;
  int block_k = 64;
  int warpgroups_m = 2; ///< warpgroups along M, on threadIdx.y
  int warpgroups_n = 1; ///< warpgroups along N, on threadIdx.z
  /// N of one wgmma instruction (8..256, a multiple of 8); 0: a warpgroup's whole width, up to
  /// 256.
  int wgmma_n = 0;
  int stages = 4; ///< shared-memory stages of the K loop (Stage::pipeline); 1: no pipeline
  /// The shared tiles' layout: 128 (Stage::swizzle(128); block_k, block_n and wgmma_n multiples
  /// of 64), 64 or 32 (rows of 32 or 16 halves; correct on the H100, slower), or 0
  /// (storage_interleave(8), 3.3x slower on the H100 for its bank conflicts).
  int swizzle = 128;
  /// Thread-block rasterization (Stage::rasterize on the block axes); 0: off.
  int64_t raster_group = 0;
  /// Fill the shared tiles with TMA bulk copies (Stage::bulk_copy) issued by one thread and
  /// completing on a ring of mbarriers, instead of 16-byte cp.async by every thread. Needs
  /// swizzle 128, 64 or 32 and 2+ stages.
  bool tma = false;
  /// With tma: warp roles (Stage::warp_specialize): a producer warpgroup of its own issues the
  /// copies, the warpgroups above only wait, compute and release. Needs warpgroups_n = 1.
  /// Without tma it has no effect.
  bool warp_specialized = false;
  /// Split-K: the reduction cut into this many parts, each block summing one part of K into a
  /// float32 workspace of partial sums (the grid's z), which a second kernel adds in a fixed
  /// order (deterministic) into C. For grids too small to fill the GPU (a few rows of C).
  int split_k = 1;
  /// A persistent kernel (Stage::persistent): `persistent_blocks` blocks (132: one per SM of
  /// an H100 / H200) each walk the output tiles in the grouped order of raster_group rows (1
  /// when 0), the TMA ring running across their tiles, so that the producer loads the next
  /// tile while the consumers store this one. Needs warp roles (roles()) and split_k = 1.
  bool persistent = false;
  int persistent_blocks = 132;
  /// With persistent: the tiles of the last, partial round of the tile loop are each split
  /// into up to this many parts of K on otherwise idle blocks (Stage::split_last_wave), the
  /// first part adding the others' sums before it stores the tile; 0 or 1: not split. Not with
  /// ping_pong or cluster.
  int split_last_wave = 0;
  /// With persistent and one warpgroup (warpgroups_m = warpgroups_n = 1): ping-pong consumers
  /// (ConsumerRoles::ping_pong): two consumer warpgroups take the block's tiles in turn, one
  /// storing its tile while the other runs its main loop.
  bool ping_pong = false;
  /// Store C by TMA through shared memory (Stage::bulk_copy on C after cache_write(C,
  /// "shared")): the consumers write the block's tile, rounded and with its epilogue, into a
  /// staging tile of block_m x block_n elements of C's type, and one thread stores it with
  /// cp.async.bulk.tensor, which drains while a persistent kernel's next tile computes. Needs
  /// tma, warpgroups_n = 1, split_k = 1 and rows of C that are whole 16-byte units.
  bool tma_store = false;
  /// Thread-block clusters of 2 (Stage::cluster) with the shared operand's tile multicast by TMA
  /// (Stage::multicast): 0 none; 1: "2x1", two blocks along M (adjacent block rows) share B's
  /// tile; 2: "1x2", two along N share A's. Needs tma; the blocks along that axis must be even.
  int cluster = 0;
  /// The blocks of a cluster (2, 4 or 8) along its axis: each multicasts 1/cluster_size of the
  /// shared tile. The blocks along the axis (and a persistent grid) must be a multiple of it.
  int cluster_size = 2;
  /// How ragged operands (a K tail, rows past M) are read where TMA fills could read them in
  /// place, zeroing what lies past their edges: by size (in place from 2^21 elements, through
  /// padded copies, kernels of their own, below: what measured faster on the H100), always
  /// copied, or always in place.
  enum class RaggedOperands { BySize, Copied, InPlace };
  RaggedOperands ragged_operands = RaggedOperands::BySize;

  /// Whether the kernel has warp roles: TMA fills with warp_specialized.
  bool roles() const { return tma && warp_specialized; }
  /// The threads of the stage's warpgroups (ping_pong doubles them; the producer warpgroup of
  /// roles() comes on top).
  int threads() const { return 128 * warpgroups_m * warpgroups_n; }
  /// The consumer warpgroups of the block: ping_pong's two, otherwise the stage's.
  int consumer_warpgroups() const { return ping_pong ? 2 : warpgroups_m * warpgroups_n; }
  int group_m() const { return block_m / warpgroups_m; } ///< rows of C per warpgroup
  int group_n() const { return block_n / warpgroups_n; } ///< columns of C per warpgroup
  int instruction_n() const { return wgmma_n ? wgmma_n : std::min(group_n(), 256); }
  /// Bytes of shared memory the A and B tiles take over all stages.
  int64_t shared_bytes() const {
    return int64_t(std::max(1, stages)) * (int64_t(block_m) + block_n) * block_k * 2;
  }
  /// Bytes of the staging tile of tma_store for outputs of `out_bytes` bytes an element (0
  /// without tma_store).
  int64_t staging_bytes(int out_bytes) const {
    return tma_store ? int64_t(block_m) * block_n * out_bytes : 0;
  }
};

/// tessel::Error (naming `context`) unless `tiles` can compute an M x N x K GEMM; the message
/// says which dimension or knob to change. With `partial_blocks` M and N may be smaller than a
/// block (its operands' copies cover whole blocks and its stores take limits, as gemm_wgmma's
/// do); without, a block must fit (conv2d_wgmma reads its operands in place).
void check_gemm_wgmma_tiles(const std::string &context, int64_t M, int64_t N, int64_t K,
                            const GemmWgmmaTiles &tiles, bool partial_blocks = true);

/// tessel::Error (naming `context`) unless the tiles' cluster (tiles.cluster) is none, or 2x1 /
/// 1x2 with TMA fills over an even number of blocks along its axis.
void check_cluster_fits(const std::string &context, int64_t M, int64_t N,
                        const GemmWgmmaTiles &tiles);

/// tessel::Error (naming `context`) unless the tiles' split of the last round
/// (tiles.split_last_wave, knob LW) is off, or on a persistent kernel of cooperative
/// consumers storing from registers, without clusters.
void check_last_wave_split(const std::string &context, const GemmWgmmaTiles &t);

/// tessel::Error (naming `context`) unless C (M x N of `out`) can be stored by TMA through
/// the staging tile of `tiles` (when tiles.tma_store): a block of rows at least, rows of whole
/// 16-byte units, and the staging tile beside the ring within a block's shared memory. Nothing
/// without tma_store.
void check_tma_store_fits(const std::string &context, int64_t M, int64_t N,
                          const GemmWgmmaTiles &tiles, DataType out);
/// `tiles` with as many stages, up to `max_stages`, as a block's shared memory holds beside
/// 1 KiB (barriers); never fewer than it has.
GemmWgmmaTiles deepest_ring(GemmWgmmaTiles tiles, int max_stages = 8);
/// The most stages (from tiles.stages down to 2) whose ring fits in a block's shared memory
/// beside the staging tile of tma_store, for outputs of `out_bytes` bytes an element.
int tma_store_stages(const GemmWgmmaTiles &tiles, int out_bytes);

/// The default tiles when they divide the shape, otherwise the largest block tile that does;
/// filled by TMA and rasterized in groups of 8 wherever the tiles are swizzled and pipelined.
/// tessel::Error if none does (M not a multiple of 64, N or K not of 32).
GemmWgmmaTiles gemm_wgmma_tiles(int64_t M, int64_t N, int64_t K,
                                const std::string &context = "gemm_wgmma",
                                bool partial_blocks = true);

/// The blocks of tiles `t` over an M x N output (partial blocks at the edges counted whole).
int64_t output_tiles(int64_t M, int64_t N, const GemmWgmmaTiles &t);

/// Whether tiles `t` of an M x N output are best persistent: with warp roles and whole K, where
/// they make 1 to 8 waves of 132 blocks (measured on the H100; the default of gemm_wgmma,
/// gemm_fp8 and conv2d_wgmma).
bool persistent_by_default(int64_t M, int64_t N, const GemmWgmmaTiles &t);

/// Whether gemm_wgmma's tiles `t` (its choice) are best persistent with the last round's
/// tiles split (split_last_wave = 8): cooperative consumers with warp roles and whole K, where
/// the split would save 4% or more of the kernel's rounds (a partial last round of half the
/// grid or less, over few rounds; 4096x11008x4096 on 132 blocks), of which about half was
/// measured (H200).
bool last_wave_split_by_default(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &t);
/// Whether gemm_wgmma's tiles `t` (its choice) are best as ping-pong consumers: with warp roles
/// and whole K, a float32 output, K of 1024 or less and 2 waves or more of 128 x 128 tiles,
/// where the store of one warpgroup's tile beside the other's main loop outweighs a single
/// warpgroup's slower main loop (measured on the H100).
bool ping_pong_by_default(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &t,
                          DataType out);
/// Tiles `t` as ping-pong consumers: persistent, one warpgroup a 128 x 128 tile; with
/// `deepest`, as many stages (up to 8) as shared memory holds, otherwise t's stages or as many
/// as fit.
GemmWgmmaTiles as_ping_pong(GemmWgmmaTiles t, bool deepest);
/// Whether gemm_wgmma's tiles `t` (its choice) are best replaced by as_small_ragged: a float32
/// C whose K (up to 2048) has a tail past the last whole K step, A and B read in place by TMA
/// (rows of whole 16-byte units), and 64 x 128 tiles that make a wave or less (measured on the
/// H200: the padded copies' kernel, or boxes of rows that are not whole 32-byte sectors, cost
/// these small GEMMs 5-20%).
bool small_ragged_by_default(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &t,
                             DataType out);
/// Tiles `t` for small_ragged_by_default: A and B read in place by blocks of 64 x 128 (one
/// consumer warpgroup), whole K, in clusters of 2 along M sharing B's tile where M makes an
/// even number of blocks.
GemmWgmmaTiles as_small_ragged(int64_t M, GemmWgmmaTiles t);

/// Split-K for grids under half a wave of an H100's 132 SMs: the first of `parts` that
/// `divides` the reduction as the caller needs, whose blocks fill at most two waves and whose
/// parts are 8 K steps or more; 1 (no split) where none is or the grid is larger.
int split_k_for_small_grid(int64_t blocks, int64_t steps, std::initializer_list<int> parts,
                           const std::function<bool(int)> &divides);

/// A and B of type `in`: float16 or bfloat16; C of type `out`: float32, or float16 / bfloat16
/// (the float32 sum rounded once as it is stored).
ScheduledProgram gemm_wgmma(int64_t M, int64_t N, int64_t K, DataType in = Float(16),
                            DataType out = Float(32));
ScheduledProgram gemm_wgmma(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &tiles,
                            DataType in = Float(16), DataType out = Float(32));

/// The tilings the tuner tries for M x N x K: blocks of 128x256, 256x128 (4 warpgroups), 128x128
/// and 64x256, K step 64, 3 or 4 stages, rasterization off or in groups of 8, TMA or cp.async
/// fills, and persistent variants (132 blocks) of the TMA ones with warp roles; only those that
/// pass check_gemm_wgmma_tiles.
std::vector<GemmWgmmaTiles> gemm_wgmma_candidates(int64_t M, int64_t N, int64_t K);
/// "wgmma bm=128 bn=256 bk=64 wg=2x1 n=256 stages=4 raster=8 swizzle=128": as the tuner logs it.
std::string to_string(const GemmWgmmaTiles &t);

ScheduleEntry gemm_wgmma_entry();

/// gemm_wgmma with `epilogue` fused into its store: C[i, j] = epilogue(sum_k A[i, k] B[k, j],
/// {bias[j]}) in `out` (float16, bfloat16 or float32), one kernel. Arguments A, B, bias (N),
/// C. E.g. gemm_wgmma_fused(M, N, K, tiles, Float(16), Float(16), bias_gelu_epilogue(Float(16))).
ScheduledProgram gemm_wgmma_fused(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &tiles,
                                  DataType in, DataType out, const WgmmaEpilogue &epilogue);
/// "gemm_bias_gelu": C = GELU(A B + bias) in float16 (A, B, bias float16), on wgmma (sm_90a).
ScheduleEntry gemm_bias_gelu_entry();

/// Whether the GPU in use is a Hopper (sm_90), whose wgmma the *_wgmma schedules need: there
/// gemm_tc and conv2d_tc take their wgmma path. False without a GPU.
bool hopper_gpu();

/// gemm_wgmma's tiles from the registry's knobs in `p` (M, N, K; BM, BN, BK, S, SW, TMA, G, SK:
/// 0 or absent is gemm_wgmma_tiles' choice; P=1 persistent on PB blocks, 0: 132; PP=1
/// ping-pong consumers, persistent, one warpgroup a tile of BM x BN, 128 x 128 unless given;
/// PP=0 where ping_pong_by_default says for an output of type `out`, PP=2 never; the blocks of
/// as_small_ragged where small_ragged_by_default says), as gemm_wgmma, gemm_bias_gelu and
/// gemm_tc on Hopper take them.
GemmWgmmaTiles gemm_wgmma_tiles_from_knobs(const ShapeParams &p, DataType out = Float(32));
/// The registry's gemm_wgmma at M x N x K with its knobs at their defaults (its tiles, forms
/// and ping-pong rules), for an output of type `out`: what gemm_wgmma(M, N, K, in, out) and
/// gemm_tc on Hopper run.
GemmWgmmaTiles gemm_wgmma_default_tiles(int64_t M, int64_t N, int64_t K,
                                        DataType out = Float(32));
/// The values `tessel tune` tries for those knobs.
const std::map<std::string, std::vector<int64_t>> &gemm_wgmma_knobs();

// ---- The same schedule for other GEMM-shaped computations (conv2d_wgmma) -------------------

/// The stages of C (M x N) = sum over its one reduction axis of A (M x K) x B, with AS (A's
/// shared tile, M x K) and BS (B's: K x N "row_major", or N x K "col_major", the reduction
/// innermost as in a K x R x S x C filter) read by C's accumulator CF (wgmma.accumulator).
struct WgmmaGemmStages {
  Tensor C, CF, AS, BS;
  DataType in = Float(16); ///< of A and B: float16, bfloat16, or an 8-bit float (K step 32)
  DataType b_in;           ///< of B where it differs from A (8-bit floats; void: in)
  std::string b_layout = "row_major";
  /// When nonzero, the reduction is walked in runs of this length (a multiple of the K step),
  /// as in schedule_wmma_gemm (conv's channels within one filter tap).
  int64_t k_period = 0;
  /// With tiles.tma: AS is a convolution's input tile, filled by TMA's im2col mode.
  std::optional<Im2colCopy> a_im2col;
  /// C = epilogue(CF, column vectors) rounded to C's type, in the store (C's compute must be
  /// written with the same function: see Epilogues.h).
  std::optional<WgmmaEpilogue> epilogue;
};

/// gemm_wgmma's schedule on `stages`; the tiles must have passed check_gemm_wgmma_tiles for
/// the computation's extents.
void schedule_wgmma_gemm(Schedule &s, const WgmmaGemmStages &stages, const GemmWgmmaTiles &tiles);

} // namespace tessel

// GEMM on Tensor Cores: fp16 A (M x K) and B (K x N), fp32 C, through WMMA fragments.
//
// The schedule follows TVM's TensorCore tutorial (the seed): each block computes a
// block_m x block_n tile of C with block_row_warps x block_col_warps warps (threadIdx.y / z),
// each warp warp_row_tiles x warp_col_tiles 16x16 accumulator fragments. K advances in steps of
// 16 * chunk through shared-memory tiles of A and B, loaded by the whole block with 16-byte
// vector loads and padded against bank conflicts; fragments are loaded from them one 16-wide
// K slice at a time.
//
//   ScheduledProgram p = gemm_wmma(1024, 1024, 1024);            // tiles chosen for the shape
//   ScheduledProgram q = gemm_wmma(256, 256, 64, {.chunk = 1});  // explicit tiles
//   GemmWmmaTiles t = gemm_wmma_tiles(4096, 4096, 4096);
//   t.raster_group = 8;                                          // blocks in groups of 8 rows
#pragma once

#include "schedules/Registry.h"

namespace tessel {

struct GemmWmmaTiles {
  int block_row_warps = 2; ///< warps along M, bound to threadIdx.y
  int block_col_warps = 4; ///< warps along N, bound to threadIdx.z
  int warp_row_tiles = 4;  ///< 16x16 fragments per warp along M
  int warp_col_tiles = 2;  ///< 16x16 fragments per warp along N
  int chunk = 2;           ///< K step of the shared tiles, in units of 16
  /// Shared-memory stages of the K loop: 1 loads a step's tiles, then computes on them; N >= 2
  /// pipelines them (Stage::pipeline): the tiles of step k + N - 1 are copied with cp.async
  /// while step k computes.
  int stages = 1;
  /// Replace the fragment loops by WMMA calls. Without it the schedule lowers to plain loops
  /// over fragment-scoped buffers (what the tutorial prints before tensorize); such IR runs on
  /// the CPU executor but cannot be compiled to CUDA.
  bool tensorize = true;
  /// Thread-block rasterization (Stage::rasterize on the block axes): blocks launched one after
  /// another walk down this many rows of block tiles before moving one column right, so they
  /// share tiles of A and B in L2. 0: off (the row-major order, as is 1).
  int64_t raster_group = 0;

  int block_m() const { return 16 * block_row_warps * warp_row_tiles; }
  int block_n() const { return 16 * block_col_warps * warp_col_tiles; }
  int block_k() const { return 16 * chunk; }
  int warps() const { return block_row_warps * block_col_warps; }
};

/// Tiles for an M x N x K problem (each rounded up to whole 16x16x16 fragments, as the padded
/// copies of tensor_core_gemm are): the defaults (128 x 128 blocks of 2 x 4 warps, K step 32)
/// when they divide the shape, otherwise the largest smaller tiles that do. tessel::Error (with
/// `context`) if M, N or K is not positive.
GemmWmmaTiles gemm_wmma_tiles(int64_t M, int64_t N, int64_t K,
                              const std::string &context = "gemm_wmma");

/// The Tensor Core GEMM with tiles chosen by gemm_wmma_tiles.
ScheduledProgram gemm_wmma(int64_t M, int64_t N, int64_t K);

/// Bytes of shared memory the (pipelined, padded) A and B tiles of `tiles` take: what lowering
/// allocates for gemm_wmma and gemm_mma.
int64_t gemm_wmma_shared_bytes(const GemmWmmaTiles &tiles);
/// The Tensor Core GEMM with the given tiles; tessel::Error up front if they do not divide the
/// shape.
ScheduledProgram gemm_wmma(int64_t M, int64_t N, int64_t K, const GemmWmmaTiles &tiles);
/// gemm_wmma on A and B of type `in`: float16, or bfloat16 (sm_80 and later).
ScheduledProgram gemm_wmma(int64_t M, int64_t N, int64_t K, const GemmWmmaTiles &tiles,
                           DataType in);

ScheduleEntry gemm_wmma_entry();

/// gemm_wmma's whole program (definition, memory hierarchy, schedule, shape checks naming
/// `context`) on WMMA fragments, or with `ptx_mma` on the register fragments of PTX ldmatrix /
/// mma.sync (gemm_mma). A and B of type `in` (float16 or bfloat16); C of type `out`: float32,
/// or, on the mma.sync path, float16 / bfloat16 (the float32 sum rounded as it is stored; WMMA
/// stores float32 fragments only).
ScheduledProgram tensor_core_gemm(const std::string &context, int64_t M, int64_t N, int64_t K,
                                  const GemmWmmaTiles &tiles, bool ptx_mma,
                                  DataType in = Float(16), DataType out = Float(32));
/// The registry entry of tensor_core_gemm: shape M, N, K and the rasterization group G.
ScheduleEntry tensor_core_gemm_entry(const std::string &name, const std::string &description,
                                     bool ptx_mma);

// ---- The same schedule for other GEMM-shaped computations (e.g. conv2d_tc) ----------------

/// The stages of a computation C (M x N) = sum over its one reduction axis of A (M x K) x
/// B (K x N), with the memory hierarchy made by cache_read / cache_write: AS and BS (shared,
/// 2-D, rows contiguous), AF (wmma.matrix_a, m x k) and BF (wmma.matrix_b, k x n) read from
/// them, CF (wmma.accumulator) copied to C (global).
struct WmmaGemmStages {
  Tensor C, CF, AS, BS, AF, BF;
  /// How BS holds B, and so how BF is loaded from it: "row_major" (k x n) or "col_major"
  /// (n x k, the reduction innermost, as in a K x R x S x C filter; BF(k, n) = BS(n, k)).
  std::string b_layout = "row_major";
  /// When nonzero, the reduction is walked in runs of this length (a multiple of the K step),
  /// so that floordiv / floormod of the reduction index by it (conv2d_tc's channels within one
  /// filter tap) stay affine in the shared loads and vectorize.
  int64_t k_period = 0;
  /// AF, BF and CF are per-thread register fragments (mma.* scopes) loaded with ldmatrix and
  /// multiplied with mma.sync.m16n8k16 (MmaIntrinsics.h) instead of WMMA fragments. The loops
  /// over fragments are then unrolled: register arrays must be indexed by constants.
  bool ptx_mma = false;
  /// A's and B's type: float16, or bfloat16 (WMMA only, sm_80 and later).
  DataType in = Float(16);
};

/// A dimension of the GEMM as the caller's user knows it, for errors: {"N*P*Q", 72}.
struct WmmaGemmDim {
  std::string name;
  int64_t value;
  /// The last block may shift inwards to end at the edge (the output's rows, read in place):
  /// the dimension need only hold one block, not a whole number of them.
  bool shifts = false;
};

/// tessel::Error (with `context`) unless the tiles divide M x N x K (or fit in it, for a
/// dimension that shifts) and the shared tiles split into whole 16-byte loads of every thread;
/// the messages name the dimensions as given.
void check_wmma_gemm_tiles(const std::string &context, const WmmaGemmDim &M, const WmmaGemmDim &N,
                           const WmmaGemmDim &K, const GemmWmmaTiles &tiles);

/// gemm_wmma's schedule on `stages`: block tiles, warps on threadIdx.y / z, padded shared tiles
/// loaded with 16-byte vectors, fragments per 16-wide K slice, tensorize. The tiles must have
/// passed check_wmma_gemm_tiles.
void schedule_wmma_gemm(Schedule &s, const WmmaGemmStages &stages, const GemmWmmaTiles &tiles);

} // namespace tessel

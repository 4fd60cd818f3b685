// Fused attention, one kernel: O = softmax(scale Q K^T) V per head, the online softmax carried
// over blocks of keys by a fold (compiler/te/Compute.h, docs/ATTENTION.md).
//
// Q, K and V are read through their strides as (batch, heads, seq, dim) views of the buffers
// PyTorch and FlashAttention pass, (batch, seq, heads, dim), or of compact (batch, heads, seq,
// dim) ones; grouped-query and multi-query heads read K and V of head h / (H / Hkv); causal
// attention lets query i see keys j <= i + Sk - Sq, the fold skipping the key blocks above the
// diagonal. A block per (batch, head, block_queries queries), a thread per query, its running
// max, sum and output row in registers; the step's two contractions (the block's scores, stored
// key-major, K Q^T, and the probabilities times V's block) on WMMA Tensor Cores by the block's
// warps (a warp per 32 queries), K's and V's tiles of the next block fetched during this one,
// or on CUDA cores.
#pragma once

#include "compiler/ir/IROperator.h"
#include "schedules/Registry.h"

#include <functional>
#include <string>
#include <vector>

namespace tessel {

struct AttentionParams {
  int64_t B = 1, Sq = 128, Sk = 128, H = 1, Hkv = 1, D = 64;
  bool causal = false;
  bool bshd = true;            ///< Q, K, V as (B, S, H, D) buffers; false: (B, H, S, D)
  int64_t block_keys = 16;     ///< keys per step of the fold (it must divide Sk)
  int64_t block_queries = 64;  ///< queries per thread block, a thread each (a warp per 32)
  /// The step's contractions (Q K^T and P V) on WMMA Tensor Cores by the block's warp: needs
  /// block_queries 32, Sq a multiple of 32, D and block_keys multiples of 16. false: CUDA cores.
  bool tensor_cores = true;
  /// The step on Hopper's wgmma instead (block_queries 64 or 128: a warpgroup per 64, sharing
  /// K's and V's tiles; tensor_cores too):
  /// S = Q K^T into a warpgroup's registers, the softmax there (rows in wgmma.rows, the
  /// elementwise stages distributed by the accumulator's layout), P as P V's A operand from
  /// registers, the fold's states m, l, o in registers. Causal or not.
  bool wgmma = false;
  /// wgmma: K's and V's tiles in a ring of this many (the next blocks' during this one's); 1:
  /// copied at each step.
  int64_t stages = 2;
  /// wgmma with stages > 1: the ring filled by TMA (one thread issues each tile's boxes, full
  /// and empty mbarriers a slot, no block-wide barrier a key block); false: cp.async by every
  /// thread and a syncthreads a key block.
  bool tma = false;
  /// The TMA ring's slack (Stage::pipeline): a slot refilled this many key blocks after both
  /// warpgroups released it, so that they may drift apart (with ping_pong). stages >= 2 + slack.
  int64_t slack = 0;
  /// wgmma with two warpgroups a block (block_queries 128): they issue their GEMMs in turns
  /// (Stage::ping_pong), one's softmax beside the other's GEMMs.
  bool ping_pong = false;
  /// wgmma with the TMA ring: a producer warpgroup of its own issues K's and V's fills
  /// (Stage::warp_specialize on the fold), so that the consumer warpgroups only wait for full
  /// slots and release them (FlashAttention-3's roles).
  bool warp_roles = false;
  /// A second output LSE (B, H, Sq), float32: each query's logsumexp of its scaled scores
  /// (natural log), what a backward pass recomputes the probabilities from.
  bool lse = false;
  /// > 0: packed sequences, as serving engines pass them: Q, K and V (tokens, heads, D) buffers
  /// of this many tokens, the B sequences one after another, an input `offsets` (B + 1, int32:
  /// where each starts, then the total) after them, O (tokens, H, D) packed likewise; Sq = Sk is
  /// the longest sequence. Each sequence attends to its own keys (causal: those up to its
  /// query). The fold over a padded (sequence, head, query) grid whose tiles are read from each
  /// sequence's first token (by TMA on wgmma, else cp.async; the keys past its end masked), then
  /// a kernel gathering each token's row of O.
  int64_t packed_tokens = 0;
  /// wgmma: P V's accumulator starts from o rescaled (a reduction from an initial value) and
  /// becomes o, instead of a separate accumulator added to o (64 registers fewer at D = 128).
  bool accumulate_o = false;
  /// wgmma, with accumulate_o: FlashAttention-3's overlap inside a warpgroup
  /// (Stage::overlap_steps on the fold's loop): the next key block's S = Q K^T issued with this
  /// block's P V, the next block's softmax while P V runs. Wants a ring of 3 stages.
  bool overlap = false;
  /// The blocks in reverse (Stage::reverse on the block axis): each head's query blocks, whose
  /// causal work grows with their index, longest first (FlashAttention's order). H200, causal,
  /// 2026-11-28: level at D = 128 (1.26-1.27 ms either way), 29% slower at D = 64 (0.624
  /// against 0.484 ms, not understood): off by default.
  bool reverse_blocks = false;
  /// wgmma with warp roles, not causal: a persistent grid of this many blocks (Stage::persistent
  /// on the (b h, query block) tiles; 0: a block a tile), its producer filling the next tile's
  /// first slots while the consumers finish this one.
  int64_t persistent_blocks = 0;
  /// With persistent_blocks: the last round's tiles (fewer than the grid) split by their key
  /// blocks into up to this many parts on the blocks the round leaves idle
  /// (Stage::split_last_wave on the fold axis; the parts' (m, l, o) merged by the online
  /// softmax's merge); 0 or 1: not split.
  int64_t last_wave_parts = 0;
};

/// The online softmax's fold over the key blocks of `t`: the running max `m`, sum `l` (fold
/// states over the rows) and output `o` (over the rows and the head dim, its last axis) take,
/// at block t, m_new(t, row), l exp(m - m_new) + rowsum(t, row) and o exp(m - m_new) +
/// PV(t, row, d): tensors of the step over the same rows. Returns the final m, l, o. `where`
/// (over the rows) skips blocks, as fold's. `exponential` is the step's: exp, or 2^x (exp2,
/// fast_exp2) where m and the scores are in base 2 (scaled by log2 e). `pv_holds_o`: PV already
/// is o exp(m - m_new) + P V (a reduction from that initial value), which o takes as it is.
std::vector<Tensor> online_softmax(const IterVar &t, const Tensor &m, const Tensor &l,
                                   const Tensor &o, const Tensor &m_new, const Tensor &rowsum,
                                   const Tensor &PV, const std::string &name,
                                   std::function<Expr(const std::vector<Var> &)> where = nullptr,
                                   Expr (*exponential)(Expr) = tessel::exp,
                                   bool pv_holds_o = false);

/// The program: arguments Q, K, V (inputs of `dtype`, float16 or bfloat16) and O (B, H, Sq, D)
/// of `dtype`; float32 arithmetic. With `dtype` float8_e4m3 (the wgmma schedule, D and the key
/// blocks multiples of 128): Q, K, V, then q_descale, k_descale, v_descale (1-element float32
/// inputs: the scores are (Q K^T) q_descale k_descale / sqrt(D), O is (P V) v_descale, as
/// FlashAttention-3's fp8 forward takes them) and O in float16; P is rounded to e4m3 for P V.
ScheduledProgram attention(const AttentionParams &p, DataType dtype);

/// How decoding's first kernel walks its chunk of keys (the registered knobs SPLIT, RING, LANES,
/// ROWS).
struct DecodeSchedule {
  int64_t split_keys = 512; ///< keys a block (a chunk); a multiple of 128 dividing Sk
  int ring = 0;             ///< 2 or 3: K's and V's rows through that many shared tiles (cp.async)
  int64_t lanes = 16;       ///< threads along threadIdx.x: those that share a key row (4, 8, 16)
  /// Rows of K (and V) a thread loads in one unrolled stretch; 0: the choice, 16 straight to
  /// registers (H200: 1% faster than 8), 8 through a ring or prefetched (their copies grow
  /// with it: a ring of 16-row tiles at D = 256 overflows shared memory).
  int64_t rows = 0;
  /// ring 0: each thread's rows contiguous and a stretch's rows one register copy, pipelined
  /// over 2 copies (the next stretch's loads issued before this one's arithmetic).
  bool prefetch = false;
  /// P V's layout. true (where it applies: ring 0, no prefetch, the block's g x Sq x D outputs
  /// a multiple of its 128 threads): V's rows read as K's, `lanes` threads a row (D / lanes
  /// contiguous columns each), threadIdx.y and the stretch walking the keys; each thread's
  /// partial sums into shared memory, added across threadIdx.y by the threads of the outputs.
  /// false: a key a thread along x (D / (128 / lanes) columns along y), summed by shuffles.
  bool v_rows = true;
};

/// Decoding: a few queries against a long key/value cache, the keys split into chunks of
/// `k.split_keys` (a block each: its chunk's softmax, the group's query heads sharing each K and
/// V row, read once, 16 bytes a thread a load), the chunks' partial states merged by a second
/// kernel. Arguments Q, K, V, O as attention's; `p.causal` aligns the last query with the last
/// key.
ScheduledProgram attention_decode(const AttentionParams &p, DataType dtype,
                                  const DecodeSchedule &k = {});

/// Decoding on attention's wgmma fold (Hopper): a key/value head's g query heads and Sq
/// queries as the rows of one warpgroup's 64 (g x Sq <= 64, zero past them), each chunk of
/// `split_keys` keys a batch of the fold (its key blocks through a ring of shared tiles, the
/// softmax in registers, the chunk's rows of O in float32 and their logsumexp written), then
/// attention_decode's merge. Not causal, or causal with one query (which sees every key).
/// Zeros are the choice measured fastest on an H200 (bench/RESULTS.md 2026-11-29, ninth
/// session): the ring by cp.async with 2 slots of 64 keys (two blocks an SM), chunks of 16384
/// keys or fewer as the grid needs (decode_split_keys).
struct DecodeWgmma {
  int64_t split_keys = 0; ///< keys a chunk, a multiple of block_keys dividing Sk (0: the choice)
  /// keys a step of the fold (0: 64, 128 at D = 64; with TMA 128, 64 at D = 256)
  int64_t block_keys = 0;
  int64_t stages = 0;     ///< the ring's slots (0: 2; 3 with TMA)
  /// the ring filled by TMA boxes on mbarriers (false: by the block's cp.async, 16 bytes a
  /// thread, the tiles' 16-byte units swizzled as wgmma reads them)
  bool tma = false;
  bool warp_roles = true; ///< with TMA: a producer warpgroup fills the ring
  /// > 0 (TMA, with the producer): a persistent grid of this many blocks walks the chunks
  int64_t persistent_blocks = 0;
  /// > 1 (with persistent_blocks): the last round's chunks split by their key blocks into up to
  /// this many parts on the blocks it leaves idle (attention's last_wave_parts)
  int64_t last_wave_parts = 0;
  /// attention's overlap of steps (AttentionParams::overlap, with P V onto o; TMA): the next
  /// key block's S = Q K^T issued with this one's P V and its softmax beside them
  bool overlap = false;
};
ScheduledProgram attention_decode_wgmma(const AttentionParams &p, DataType dtype,
                                        const DecodeWgmma &k = {});

/// Whether FlashAttention-3's overlap inside a warpgroup (AttentionParams::overlap) is the
/// path's choice for `a`: where it measured faster, the wgmma step with its ring by TMA, at
/// D = 128 with two warpgroups (128 queries a block), causal only with key blocks of 128 too
/// (the mask then one branch on the diagonal block) (H200, B=8 H=16 S=4096: 1.88 against 1.98
/// ms, causal 1.05 against 1.23; at D = 64 slower), and at D = 256 with one (64 queries a
/// block: causal 1.11 against 1.15 ms). Callers then take_overlap(a).
bool overlap_pays(const AttentionParams &a);

/// `a` with the overlap inside a warpgroup and what measured fastest with it (H200, bench/
/// RESULTS.md 2026-11-28 20:15): P V onto o, a ring of 3, a producer warpgroup issuing the
/// ring's TMA boxes (warp_roles: 1.81 against 1.88 ms, causal 1.02 against 1.07), and, not
/// causal and with two warpgroups a block, the consumers' turns (ping_pong: 1.79; causal
/// 1.03, so off).
AttentionParams take_overlap(AttentionParams a);

/// Whether two consumer warpgroups in turns with a producer warpgroup, P V onto o
/// (take_turns), is the path's choice for `a` where the overlap is not: the wgmma step with
/// its ring by TMA at D = 256, 128 queries a block, not causal (H200, B=4 H=16 S=4096: 1.70
/// ms against 3.44 with neither; the overlap's ring of 3 overflows shared memory there).
bool turns_pay(const AttentionParams &a);

/// `a` with P V onto o, a producer warpgroup and the consumers' turns.
AttentionParams take_turns(AttentionParams a);

/// The registry's choice of kernel for `a` (its shape; the block sizes and path are filled in):
/// tc 0 CUDA cores, 1 WMMA, 2 wgmma, 3 the best for the GPU: wgmma on Hopper (`hopper`) where
/// its schedule takes the shape, else WMMA. Block sizes of 0 take the path's: wgmma 128 queries
/// at D = 128 and at D = 256 not causal (64 otherwise or where Sq is no multiple of 128) and
/// 128 keys at D <= 128 (64 at D = 256 or where Sk is no multiple of 128), the fastest
/// measured (docs/ATTENTION.md); WMMA and CUDA cores 64 and 16. wgmma's ring (with
/// `a.stages` > 1) by TMA.
AttentionParams attention_path(AttentionParams a, int64_t tc, int64_t block_queries,
                               int64_t block_keys, bool hopper);

/// The registered `attention`'s kernel for the shape and knobs `p` (every key of its default
/// shape): attention_path's, then the knobs left at 2 (ACC, OVL, PP, WS, REV) filled in as the
/// overlap (overlap_pays) or the turns (turns_pay) measured fastest. `hopper`: TC 3 takes the
/// wgmma step.
AttentionParams attention_choice(const ShapeParams &p, bool hopper);

ScheduleEntry attention_entry();
/// Packed sequences' lengths as `attention_varlen` makes them: from `longest` (the first) down
/// to `shortest` (the last), evenly.
std::vector<int64_t> packed_lengths(int64_t sequences, int64_t longest, int64_t shortest);
ScheduleEntry attention_varlen_entry();
ScheduleEntry attention_decode_entry();

} // namespace tessel

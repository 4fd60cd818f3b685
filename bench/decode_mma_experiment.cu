// Decoding on Tensor Cores, written by hand to measure it before building it (2026-11-29;
// docs/ATTENTION.md "What is left" 2, bench/RESULTS.md 2026-11-28/29 23:50 and 2026-11-29 00:25).
// On an H200, in one call, 0.538 ms against the generated CUDA-core kernel's 0.549, and 0.525
// once that one's loads skip L1; filled by TMA (BULK=1) 0.544 ms with 3 slots a warp, 0.882 with
// 6, against the generated 0.528-0.532: the instructions are not the limit, nor are the bytes in
// flight that registers or a ring of shared memory can hold.
//
// attention_decode's first kernel at B=16, H=32, HKV=8, SQ=1, D=128, SPLIT=512 (the launch stays
// the generated one: a block of 16 x 8 threads per (chunk, batch, key/value head)): each warp
// takes 128 of the chunk's keys, 16 at a time through its own ring of NS slots (rows padded to
// 272 bytes: ldmatrix without bank conflicts), filled by cp.async, 16 bytes a lane (BULK=0, the
// ring static: NS=2), or by cp.async.bulk, one 256-byte row a lane, completing on an mbarrier a
// slot (BULK=1, the ring in the dynamic shared memory of a RING=2 launch: RING=2,ROWS=4 64 KiB,
// NS=3; RING=2 112 KiB, NS=6). Scores transposed, S^T = K Q^T on mma.sync m16n8k16 (the keys as
// M from ldmatrix, the group's 4 queries padded to 8 as N); the warp's softmax down the
// fragments' rows; P to P^T's B fragments by movmatrix.trans; O^T = V^T P^T (V's tile by
// ldmatrix.trans); the 4 warps' states merged in shared memory into the chunk's lse and
// normalized op, as the generated kernel writes them. The second kernel (the merge) is appended
// from `tessel cuda`:
//
//   tessel cuda attention_decode --shape B=16,H=32,HKV=8,SQ=1,SK=32768,D=128 > g.cu
//   (cat bench/decode_mma_experiment.cu; sed -n '/void __launch_bounds__(128) attention_decode(/,$p' g.cu) > t.cu
//   tessel run attention_decode --shape B=16,H=32,HKV=8,SQ=1,SK=32768,D=128 --cuda t.cu --no-check
//
// BULK=1: `#define BULK 1` and `#define NS 3` first, and RING=2,ROWS=4 in both shapes. With
// NB=2 and SK=2048 defined first it checks against float64 at that shape.
//
// STREAM=1 (written 2026-11-29, fifth session; run in the sixth, bench/RESULTS.md 2026-11-29
// 13:30-14:10): long chunks, each warp streaming its quarter through a ring in the launch's
// dynamic shared memory with an online softmax (below). SPLIT=4096 launches 1024 blocks with
// 144 KiB each (one an SM, NS=8: 139 KiB), SPLIT=2048 2048 blocks with 80 KiB (two an SM,
// NS=4); the merge kernel is the generated one for that SPLIT. PARTS=n: only a head's first n
// chunks work, each over SK / n keys (PARTS=1 with SPLIT=4096: cuDNN's 128 blocks, one a
// (batch, key/value head)); INTERLEAVE=1: the warps' 16-key tiles interleaved, so that a block
// reads its keys front to back. On an H200 all correct against float64 and all slower than the
// generated kernel (0.524-0.548 ms against 0.518-0.522): under ncu this form's cp.async makes
// 2.6 times the L2 requests (44 M against 16.9 M, a third of its sectors hits) for the same
// 2.15 GB from DRAM. cuDNN's decoder issues the same instruction (LDGSTS.E.BYPASS.128, 512
// bytes a warp) at 4 L2 requests and 16 sectors each; ours lands rows padded to 272 bytes, so
// a row's 128-byte pieces straddle shared memory's 128-byte lines. SWZ=1 keeps rows of 256
// bytes with their 16-byte chunks swizzled instead, every chunk at its global alignment: run in
// the seventh session (bench/RESULTS.md 2026-11-29 16:40), PARTS=1 0.528 -> 0.511 ms, and with
// every block working (PARTS=0) 0.481-0.486 ms against the generated kernel's 0.513-0.515 in
// the same call, 1.01-1.04x cuDNN: the form to build (docs/ATTENTION.md "What is left" 2).
//
//   S=B=16,H=32,HKV=8,SQ=1,SK=32768,D=128
//   tessel cuda attention_decode --shape $S,SPLIT=4096 > g.cu
//   (printf '#define STREAM 1\n#define CHUNK 4096\n#define NS 8\n'; cat bench/decode_mma_experiment.cu;
//    sed -n '/void __launch_bounds__(128) attention_decode(/,$p' g.cu) > s.cu
//   tessel run attention_decode --shape $S,SPLIT=4096 --cuda s.cu        # checked against float64
//   (SPLIT=2048: CHUNK 2048, NS 4. `#define KT 2`: one softmax step a 32 keys. `#define
//   PARTS 1`, `#define INTERLEAVE 1`, `#define SWZ 1`: as above.)
//   bench/gpu_session.sh run decode_stream   # all three, checked, then beside torch
#include <cuda_fp16.h>
#ifndef NB
#define NB 16
#endif
#ifndef SK
#define SK 32768
#endif
#ifndef BULK
#define BULK 0
#endif
#ifndef NS
#define NS 2
#endif
#define HKV 8
#define G 4
#define HQ (HKV * G)
#define D 128
#ifndef CHUNK
#define CHUNK 512
#endif
#ifndef STREAM
#define STREAM 0
#endif
#ifndef PARTS
#define PARTS 0 /* STREAM=1: n > 0 - a head's first n chunks stream SK / n keys each, the rest idle */
#endif
#ifndef INTERLEAVE
#define INTERLEAVE 0 /* STREAM=1: 1 - the warps' tiles interleaved, 0 - each warp a quarter */
#endif
#ifndef KT
#define KT 1 /* STREAM=1: 16-key tiles a softmax step (the running max and O^T rescaled once) */
#endif
#define KSTR (HKV * D)
#ifndef SWZ
#define SWZ 0
#endif
#if SWZ
// SWZ=1: rows of 256 bytes, their 16-byte chunks XOR-swizzled by the row (chunk c of row r at
// c ^ (r % 8)): every chunk keeps its global alignment in shared memory, and ldmatrix's 8 rows
// of one chunk fall in 8 different bank groups. cp.async only (BULK=1 copies whole rows).
#if BULK
#error "SWZ=1 takes cp.async (BULK=0)"
#endif
#define RSTR 128
#else
#define RSTR 136  /* a slot's row stride in halves: 256 + 16 bytes (padded against conflicts) */
#endif
#define SLOT (16 * RSTR)
// Where 16-byte chunk c (0-15) of a slot's row r lies, in halves from the slot's start.
__device__ __forceinline__ int chunk_at(int r, int c) { return r * RSTR + (SWZ ? c ^ (r % 8) : c) * 8; }
// Chunk c + 2k of a row from chunk_at(r, c), c 0 or 1: an XOR of the offset's bits 4-6 when
// swizzled (so no offset a k is kept live), else a sum.
__device__ __forceinline__ int chunk_step(int at, int k) { return SWZ ? at ^ (16 * k) : at + 16 * k; }

__device__ __forceinline__ void mma16816(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ unsigned movtrans(unsigned x) {
  unsigned y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *(unsigned *)&h;
}
__device__ __forceinline__ void ldsm4(unsigned a[4], const half *p) {
  unsigned s = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(s));
}
__device__ __forceinline__ void ldsm4t(unsigned a[4], const half *p) {
  unsigned s = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(s));
}
// A tile of 16 rows (256 bytes each, KSTR apart) into a slot: 8 x 16 bytes a lane.
__device__ __forceinline__ void copy_tile(half *slot, const half *src, int lane) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int chunk = i * 32 + lane, r = chunk / 16, cc = chunk % 16;
    unsigned s = (unsigned)__cvta_generic_to_shared(slot + chunk_at(r, cc));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(s), "l"(src + r * KSTR + cc * 8) : "memory");
  }
}


// S^T of a slot's 16 keys: s (keys lane / 4 and + 8, queries 2 (lane % 4) and + 1) = K Q^T.
__device__ __forceinline__ void scores(float (&s)[4], const half *slot, const unsigned (&qb)[8][2],
                                       int lane) {
  s[0] = s[1] = s[2] = s[3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    unsigned a[4];
    ldsm4(a, slot + chunk_step(chunk_at(lane % 16, lane / 16), ks));
    mma16816(s, a, qb[ks][0], qb[ks][1]);
  }
}
// O^T += V^T P^T over a slot's 16 keys (m-tile mt: head-dim rows 16 mt + lane / 4 and + 8),
// P^T's B fragment (p0, p1).
__device__ __forceinline__ void add_pv(float (&oc)[8][4], const half *slot, unsigned p0,
                                       unsigned p1, int lane) {
#pragma unroll
  for (int mt = 0; mt < 8; ++mt) {
    unsigned a[4];
    ldsm4t(a, slot + chunk_step(chunk_at((lane % 8) + 8 * (lane / 16), (lane / 8) % 2), mt));
    mma16816(oc[mt], a, p0, p1);
  }
}
// The max of queries 2 (lane % 4) and + 1 over the keys of n S^T tiles, onto m0 and m1: each
// lane's two keys a tile, then the 8 lanes of its column.
template <int N>
__device__ __forceinline__ void max_over_keys(float &m0, float &m1, const float (&s)[N][4]) {
#pragma unroll
  for (int t = 0; t < N; ++t) {
    m0 = fmaxf(m0, fmaxf(s[t][0], s[t][2]));
    m1 = fmaxf(m1, fmaxf(s[t][1], s[t][3]));
  }
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) {
    m0 = fmaxf(m0, __shfl_xor_sync(0xffffffffu, m0, o));
    m1 = fmaxf(m1, __shfl_xor_sync(0xffffffffu, m1, o));
  }
}
// The group's queries as Q^T's B fragments (k-step ks: head-dim elements 16 ks + 2c, +1, +8, +9
// of query lane / 4; the queries past G zero).
__device__ __forceinline__ void load_q(unsigned (&qb)[8][2], const half *Q, int b, int hkv,
                                       int lane) {
  const int grp = lane >> 2, c = lane & 3;
  const unsigned *Qw = (const unsigned *)(Q + (size_t)b * HQ * D + (hkv * G + (grp < G ? grp : 0)) * D);
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    qb[ks][0] = grp < G ? Qw[ks * 8 + c] : 0u;
    qb[ks][1] = grp < G ? Qw[ks * 8 + 4 + c] : 0u;
  }
}
// The block's 4 warps' states merged: each warp's max of the raw scores of queries 2c and 2c + 1
// (m0, m1; c = lane % 4), this lane's part of their sums of exponentials (l0, l1) and its
// unnormalized O^T in oc (m-tile mt: head-dim rows 16 mt + lane / 4 and + 8), through red_m,
// red_l and ored in shared memory, into the chunk's logsumexp (lse_g: the group's G queries)
// and its normalized output (op_g: G x D).
__device__ __forceinline__ void store_chunk(float m0, float m1, float l0, float l1,
                                            float (*red_m)[8], float (*red_l)[8],
                                            float (*ored)[D], const float (&oc)[8][4], int warp,
                                            int lane, float *lse_g, float *op_g) {
  const int grp = lane >> 2, c = lane & 3, tid = warp * 32 + lane;
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, o);
    l1 += __shfl_xor_sync(0xffffffffu, l1, o);
  }
  if (grp == 0) {
    red_m[warp][2 * c] = m0 * 0.088388346f; red_m[warp][2 * c + 1] = m1 * 0.088388346f;
    red_l[warp][2 * c] = l0; red_l[warp][2 * c + 1] = l1;
  }
  __syncthreads();
  float sc[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int q = 2 * c + j;
    float mm = __int_as_float(0xff800000);
    for (int w2 = 0; w2 < 4; ++w2) mm = fmaxf(mm, red_m[w2][q]);
    float L = 0.f;
    for (int w2 = 0; w2 < 4; ++w2) L += red_l[w2][q] * __expf(red_m[w2][q] - mm);
    sc[j] = __expf(red_m[warp][q] - mm) / L;
    if (q < G && warp == 0 && grp == 0)
      lse_g[q] = mm + logf(L);
  }
  for (int w2 = 0; w2 < 4; ++w2) {
    if (warp == w2 && c < G / 2) {
#pragma unroll
      for (int mt = 0; mt < 8; ++mt) {
        const int d0 = 16 * mt + grp, d1 = d0 + 8;
        if (w2 == 0) {
          ored[2 * c][d0] = oc[mt][0] * sc[0]; ored[2 * c + 1][d0] = oc[mt][1] * sc[1];
          ored[2 * c][d1] = oc[mt][2] * sc[0]; ored[2 * c + 1][d1] = oc[mt][3] * sc[1];
        } else {
          ored[2 * c][d0] += oc[mt][0] * sc[0]; ored[2 * c + 1][d0] += oc[mt][1] * sc[1];
          ored[2 * c][d1] += oc[mt][2] * sc[0]; ored[2 * c + 1][d1] += oc[mt][3] * sc[1];
        }
      }
    }
    __syncthreads();
  }
  for (int e = tid; e < G * D; e += 128) op_g[e] = ored[e / D][e % D];
}

#if STREAM
// STREAM=1: each warp streams its quarter of the block's chunk (CHUNK keys) through its own ring
// of NS 16-row tiles, a step's KT tiles of K then its KT of V, with an online softmax (its
// running max, sum and O^T rescaled every 16 KT keys) instead of a pass over K then one over V;
// the 4 warps' states merged at the end into the chunk's lse and normalized op, as above. Meant for long chunks
// (few blocks, each loading without a pause, as cuDNN's decoding kernel does: one block of 4
// warps an SM streaming a (batch, head)'s keys, 4.63 TB/s on an H200 under ncu).
extern "C" __global__ void __launch_bounds__(128) attention_decode_lse(const half* __restrict__ Q, const half* __restrict__ K, const half* __restrict__ V, const half* __restrict__ O, float* __restrict__ lse, float* __restrict__ op) {
  extern __shared__ __align__(128) unsigned char dyn_smem[];
  half (*ring)[NS][SLOT] = reinterpret_cast<half (*)[NS][SLOT]>(dyn_smem);
  __shared__ float red_m[4][8], red_l[4][8];
  __shared__ float ored[G][D];
  const int tid = threadIdx.y * 16 + threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int bid = blockIdx.x, hkv = bid % HKV, b = bid / HKV % NB, p = bid / (HKV * NB);
#if PARTS
  // Only the first PARTS chunks of a head work, each streaming SK / PARTS keys; the others
  // leave an empty state (lse -inf, op 0), which the merge weighs by exp(-inf) = 0.
  if (p >= PARTS) {
    if (tid < G) lse[(size_t)p * NB * HQ + b * HQ + hkv * G + tid] = __int_as_float(0xff800000);
    for (int e = tid; e < G * D; e += 128) op[(size_t)p * NB * HQ * D + (size_t)b * HQ * D + hkv * G * D + e] = 0.f;
    return;
  }
  constexpr int SPAN = SK / PARTS;
#else
  constexpr int SPAN = CHUNK;
#endif
  constexpr int KEYS = SPAN / 4, STEPS = KEYS / (16 * KT);
#if INTERLEAVE
  // The warps' 16-key tiles interleaved (warp w the block's tiles w, w + 4, ...): the block
  // reads its span front to back, as one stream of K's rows and one of V's.
  const size_t first = (size_t)b * SK * KSTR + (size_t)(p * SPAN + warp * 16) * KSTR + hkv * D;
  constexpr int TSTRIDE = 64;
#else
  const size_t first = (size_t)b * SK * KSTR + (size_t)(p * SPAN + warp * KEYS) * KSTR + hkv * D;
  constexpr int TSTRIDE = 16;
#endif
  const half *Kb = K + first, *Vb = V + first;
  half (*my)[SLOT] = ring[warp];
  // Tile i, in the order they are consumed: a step's KT tiles of K's rows, then its KT of V's.
  auto issue = [&](int i) {
    const int step = i / (2 * KT), r = i % (2 * KT), t = step * KT + r % KT;
    if (step < STEPS) copy_tile(my[i % NS], (r >= KT ? Vb : Kb) + (size_t)t * TSTRIDE * KSTR, lane);
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  auto wait = [&]() {
    asm volatile("cp.async.wait_group %0;" :: "n"(NS - 1) : "memory");
    __syncwarp();
  };
#pragma unroll
  for (int i = 0; i < NS; ++i) issue(i);
  unsigned qb[8][2];
  load_q(qb, Q, b, hkv, lane);
  const float sl2 = 0.088388346f * 1.44269504f;
  // The running max of queries 2c and 2c + 1 (raw scores), this lane's part of their sums.
  float m0 = __int_as_float(0xff800000), m1 = m0, l0 = 0.f, l1 = 0.f;
  float oc[8][4];
#pragma unroll
  for (int mt = 0; mt < 8; ++mt) oc[mt][0] = oc[mt][1] = oc[mt][2] = oc[mt][3] = 0.f;
  for (int st = 0; st < STEPS; ++st) {
    const int i0 = 2 * KT * st;
    float s[KT][4];
#pragma unroll
    for (int u = 0; u < KT; ++u) {
      wait();
      const half *kl = my[(i0 + u) % NS];
      scores(s[u], kl, qb, lane);
      __syncwarp();
      issue(i0 + u + NS);
    }
    float t0 = m0, t1 = m1;
    max_over_keys(t0, t1, s);
    const float a0 = exp2f((m0 - t0) * sl2), a1 = exp2f((m1 - t1) * sl2);
    m0 = t0;
    m1 = t1;
    l0 *= a0;
    l1 *= a1;
    unsigned pf[KT][2];
#pragma unroll
    for (int u = 0; u < KT; ++u) {
      const float e0 = exp2f((s[u][0] - t0) * sl2), e1 = exp2f((s[u][1] - t1) * sl2);
      const float e2 = exp2f((s[u][2] - t0) * sl2), e3 = exp2f((s[u][3] - t1) * sl2);
      l0 += e0 + e2;
      l1 += e1 + e3;
      pf[u][0] = movtrans(pack2(e0, e1));
      pf[u][1] = movtrans(pack2(e2, e3));
    }
#pragma unroll
    for (int mt = 0; mt < 8; ++mt) {
      oc[mt][0] *= a0; oc[mt][1] *= a1; oc[mt][2] *= a0; oc[mt][3] *= a1;
    }
#pragma unroll
    for (int u = 0; u < KT; ++u) {
      wait();
      const half *vl = my[(i0 + KT + u) % NS];
      add_pv(oc, vl, pf[u][0], pf[u][1], lane);
      __syncwarp();
      issue(i0 + KT + u + NS);
    }
  }
  store_chunk(m0, m1, l0, l1, red_m, red_l, ored, oc, warp, lane, lse + (size_t)p * NB * HQ + b * HQ + hkv * G,
              op + (size_t)p * NB * HQ * D + (size_t)b * HQ * D + hkv * G * D);
}
#else
extern "C" __global__ void __launch_bounds__(128) attention_decode_lse(const half* __restrict__ Q, const half* __restrict__ K, const half* __restrict__ V, const half* __restrict__ O, float* __restrict__ lse, float* __restrict__ op) {
#if BULK
  extern __shared__ __align__(128) unsigned char dyn_smem[];
  half (*ring)[NS][SLOT] = reinterpret_cast<half (*)[NS][SLOT]>(dyn_smem);
  __shared__ __align__(8) unsigned long long bars[4][NS];
#else
  __shared__ __align__(128) half ring[4][NS][SLOT];
#endif
  __shared__ float red_m[4][8], red_l[4][8];
  __shared__ float ored[G][D];
  const int tid = threadIdx.y * 16 + threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int grp = lane >> 2, c = lane & 3;
  const int bid = blockIdx.x, hkv = bid % HKV, b = bid / HKV % NB, p = bid / (HKV * NB);
  const half *Kb = K + (size_t)b * SK * KSTR + (size_t)(p * CHUNK + warp * 128) * KSTR + hkv * D;
  const half *Vb = V + (size_t)b * SK * KSTR + (size_t)(p * CHUNK + warp * 128) * KSTR + hkv * D;
  half (*my)[SLOT] = ring[warp];
  // Tiles 0-7 are K's, 8-15 V's, 16 keys each.
#if BULK
  unsigned long long *mybar = bars[warp];
  if (lane == 0)
    for (int i = 0; i < NS; ++i)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((unsigned)__cvta_generic_to_shared(&mybar[i])) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncwarp();
  auto issue = [&](int i) {
    if (i >= 16) return;
    const unsigned bar = (unsigned)__cvta_generic_to_shared(&mybar[i % NS]);
    if (lane == 0)
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 4096;" :: "r"(bar) : "memory");
    __syncwarp();
    if (lane < 16) {
      const half *src = (i < 8 ? Kb : Vb) + ((i % 8) * 16 + lane) * KSTR;
      const unsigned dst = (unsigned)__cvta_generic_to_shared(my[i % NS] + lane * RSTR);
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 256, [%2];"
                   :: "r"(dst), "l"(src), "r"(bar) : "memory");
    }
  };
  auto wait = [&](int i) {
    const unsigned bar = (unsigned)__cvta_generic_to_shared(&mybar[i % NS]);
    const unsigned parity = (i / NS) & 1;
    unsigned done = 0;
    while (!done)
      asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                   : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  };
#else
  auto issue = [&](int i) {
    if (i < 16) copy_tile(my[i % NS], (i < 8 ? Kb : Vb) + (i % 8) * 16 * KSTR, lane);
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  auto wait = [&](int) {
    asm volatile("cp.async.wait_group %0;" :: "n"(NS - 1) : "memory");
    __syncwarp();
  };
#endif
#pragma unroll
  for (int i = 0; i < NS; ++i) issue(i);
  unsigned qb[8][2];
  load_q(qb, Q, b, hkv, lane);
  float s[8][4];
#pragma unroll
  for (int t = 0; t < 8; ++t) {
    wait(t);
    const half *sl = my[t % NS];
    scores(s[t], sl, qb, lane);
    __syncwarp();
    issue(t + NS);
  }
  const float sl2 = 0.088388346f * 1.44269504f;
  float mx0 = __int_as_float(0xff800000), mx1 = mx0;
  max_over_keys(mx0, mx1, s);
  float l0 = 0.f, l1 = 0.f;
  unsigned pb[8][2];
#pragma unroll
  for (int t = 0; t < 8; ++t) {
    float e0 = exp2f((s[t][0] - mx0) * sl2), e1 = exp2f((s[t][1] - mx1) * sl2);
    float e2 = exp2f((s[t][2] - mx0) * sl2), e3 = exp2f((s[t][3] - mx1) * sl2);
    l0 += e0 + e2;
    l1 += e1 + e3;
    pb[t][0] = movtrans(pack2(e0, e1));
    pb[t][1] = movtrans(pack2(e2, e3));
  }
  // O^T = V^T P^T: m-tile mt holds head-dim rows 16mt + grp and 16mt + grp + 8.
  float oc[8][4];
#pragma unroll
  for (int mt = 0; mt < 8; ++mt) oc[mt][0] = oc[mt][1] = oc[mt][2] = oc[mt][3] = 0.f;
#pragma unroll
  for (int t = 0; t < 8; ++t) {
    wait(t + 8);
    const half *sl = my[(t + 8) % NS];
    add_pv(oc, sl, pb[t][0], pb[t][1], lane);
    __syncwarp();
    issue(t + 8 + NS);
  }
  store_chunk(mx0, mx1, l0, l1, red_m, red_l, ored, oc, warp, lane, lse + (size_t)p * NB * HQ + b * HQ + hkv * G,
              op + (size_t)p * NB * HQ * D + (size_t)b * HQ * D + hkv * G * D);
}
#endif

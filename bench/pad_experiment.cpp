// Experiment (issue 13): where the 4095^3 GEMM's time over 4096^3 goes, and whether L2 cache
// hints on the padded copies (reads evict-first, writes evict-last, so the copies' writes are
// still in L2 when the GEMM reads them and are written back while it computes) or 16-byte
// window loads shorten them. Runs a hand-written padded copy in variants (the same operands
// from each, compared), the GEMM on the padded operands, both in sequence, and tessel's own
// 4095^3 / 4096^3 / 4096x4095x4096 / 4095x4096x4096 modules, all timed alike; whether the copy
// can run beside the GEMM (--overlap); and the ragged / aligned ratio timed in pairs (--paired).
// Results and what they decided: bench/RESULTS.md, 2026-11-25 04:00 and 17:00.
//
//   pad_experiment            (on a GPU; prints one line per measurement)
//   pad_experiment --compile-only   (here: the copy variants and --overlap's module through NVRTC)
//   ncu -k regex:^default_function$ pad_experiment --profile   (odd against aligned C rows)
//   pad_experiment --split    (copy and GEMM timed apart inside the sequence)
//   pad_experiment --overlap [BLOCKS_PER_SM]   (the copy beside the GEMM, against in sequence)
//   pad_experiment --paired [PAIRS]   (4095^3 / 4096^3, each pair timed back to back)
#include "runtime/Build.h"
#include "runtime/CudaDriver.h"
#include "runtime/CudaModule.h"
#include "runtime/Device.h"
#include "runtime/DeviceArray.h"
#include "runtime/Nvrtc.h"
#include "runtime/Half.h"
#include "runtime/TensorView.h"
#include "runtime/Timer.h"
#include "schedules/GemmWgmma.h"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace tessel;

namespace {

// Elements d .. d + 7 (d in 0 .. 7) of the 16 halves in two consecutive 16-byte windows: what
// both copies below make of loads from aligned addresses.
const char *kShiftSource = R"(
__device__ __forceinline__ uint4 tessel_shift8(uint4 w0, uint4 w1, int d) {
  unsigned w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
  unsigned o[4];
  #pragma unroll
  for (int j = 0; j < 4; ++j) {
    unsigned lo, hi;
    switch (d >> 1) {
      case 0: lo = w[j]; hi = w[j + 1]; break;
      case 1: lo = w[j + 1]; hi = w[j + 2]; break;
      case 2: lo = w[j + 2]; hi = w[j + 3]; break;
      default: lo = w[j + 3]; hi = w[j + 4]; break;
    }
    o[j] = (d & 1) ? __byte_perm(lo, hi, 0x5432) : lo;
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}
)";

const char *kCopySource = R"(
#include <cuda_fp16.h>
__device__ __forceinline__ unsigned long long policy_first() {
  unsigned long long p; asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ unsigned long long policy_last() {
  unsigned long long p; asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ unsigned short load16(const half *p, unsigned long long pol) {
#if LOAD_FIRST
  unsigned short v;
  asm("ld.global.L1::no_allocate.L2::cache_hint.b16 %0, [%1], %2;" : "=h"(v) : "l"(p), "l"(pol));
  return v;
#else
  return __half_as_ushort(*p);
#endif
}
__device__ __forceinline__ uint4 load128(const half *p, unsigned long long pol) {
#if LOAD_FIRST
  uint4 v;
  asm("ld.global.L1::no_allocate.L2::cache_hint.v4.b32 {%0,%1,%2,%3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(pol));
  return v;
#else
  return *reinterpret_cast<const uint4 *>(p);
#endif
}
__device__ __forceinline__ void store128(half *p, uint4 v, unsigned long long pol) {
#if STORE_LAST
  asm volatile("st.global.L2::cache_hint.v4.b32 [%0], {%1,%2,%3,%4}, %5;"
               :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(pol) : "memory");
#else
  *reinterpret_cast<uint4 *>(p) = v;
#endif
}
// 8 halves from src[0..8) with src[i] for i < valid and 0 after; src is 2-byte aligned.
__device__ __forceinline__ uint4 gather8(const half *src, int valid, unsigned long long pol) {
#if WINDOW
  if (valid == 8) {
    // The two aligned 16-byte windows covering src[0..8), then the 8 halves at offset d.
    unsigned long long a = reinterpret_cast<unsigned long long>(src);
    int d = int(a & 15) >> 1;
    const half *base = reinterpret_cast<const half *>(a & ~15ull);
    uint4 w0 = load128(base, pol);
    if (d == 0) return w0;
    uint4 w1 = load128(base + 8, pol);
    return tessel_shift8(w0, w1, d);
  }
#endif
  alignas(16) unsigned short v[8];
  #pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = i < valid ? load16(src + i, pol) : 0;
  return *reinterpret_cast<const uint4 *>(v);
}
// A (M x K) -> Ap (M x Kp), B (K x N) -> Bp (Kp x Np), zero outside; 2048 columns a block.
extern "C" __global__ void __launch_bounds__(256) pad(const half *__restrict__ A,
    const half *__restrict__ B, half *__restrict__ Ap, half *__restrict__ Bp,
    int M, int N, int K, int Kp, int Np) {
  unsigned long long first = policy_first(), last = policy_last();
  int blocks_per_row = Kp / 2048;
  int row = blockIdx.x / blocks_per_row;
  int col = blockIdx.x % blocks_per_row * 2048 + threadIdx.x * 8;
  if (row < M) {
    int valid = min(8, max(0, K - col));
    store128(Ap + (long long)row * Kp + col, gather8(A + (long long)row * K + col, valid, first), last);
  }
  if (row < Kp && col < Np) {
    int valid = row < K ? min(8, max(0, N - col)) : 0;
    store128(Bp + (long long)row * Np + col, gather8(B + (long long)row * N + col, valid, first), last);
  }
}
)";


// --overlap: the copy signals each 64 padded rows it finishes (of A and B alike: a task copies
// two rows of each) in counters of this module, and the GEMM, launched as a programmatic
// dependent of the copy (its blocks start while the copy runs, beside the copy's blocks), waits
// for the rows each TMA box reads instead of for the whole copy (the leader thread, before the
// box; one check of the copy's total once it is done). The copy is a persistent grid, one block
// an SM: every block must be resident before the GEMM is launched (programmatic launch waits
// for each of them to trigger), which is what makes the waits safe, and a block of the GEMM
// (171 registers x 256 threads, 194 KiB shared memory) must fit beside it (the copy is held to
// 72 registers and takes the largest shared-memory carveout). The GEMM's last block zeroes the
// counters for the next launch. A copy on a second stream beside the GEMM (no programmatic
// launch, its 8192 blocks at full occupancy) hung: nothing makes the GPU schedule the copy's
// blocks while the GEMM's wait.
const char *kOverlapSource = R"(
// tessel_flags[g]: tasks done of rows 64g .. 64g + 63 (32 when complete); [64]: GEMM blocks
// done; [65]: copy tasks done (2048 when all are).
__device__ unsigned tessel_flags[66];
__device__ __forceinline__ unsigned tessel_ld_acquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void tessel_wait_group(int g) {
  while (tessel_ld_acquire(&tessel_flags[g]) < 32u) __nanosleep(32);
}
// Whether the whole copy is done (then every group is).
__device__ __forceinline__ bool tessel_copy_done(int &upto) {
  if (tessel_ld_acquire(&tessel_flags[65]) < 2048u) return false;
  upto = 63;
  return true;
}
// B's boxes: rows c1 .. c1 + 63 of B_pad (group c1 / 64); `upto`: every group <= upto is done.
__device__ __forceinline__ void tessel_tma_load_2d_B(int &upto, void *dst, const tessel_tensor_map *map,
                                                     void *bar, int c0, int c1) {
  int g = c1 >> 6;
  if (g > upto) {
    if (!tessel_copy_done(upto)) {
      tessel_wait_group(g);
      upto = g;
      unsigned v[16];
      #pragma unroll
      for (int j = 0; j < 16; ++j) v[j] = g + 1 + j < 64 ? tessel_ld_acquire(&tessel_flags[g + 1 + j]) : 0u;
      #pragma unroll
      for (int j = 0; j < 16; ++j) if (v[j] >= 32u && upto == g + j) upto = g + 1 + j;
    }
    asm volatile("fence.proxy.async.global;" ::: "memory");
  }
  tessel_tma_load_2d(dst, map, bar, c0, c1);
}
// A's boxes: rows c1 .. c1 + 127 of A_pad, the same for every K step of a block.
__device__ __forceinline__ void tessel_tma_load_2d_A(int upto, bool &ok, void *dst, const tessel_tensor_map *map,
                                                     void *bar, int c0, int c1) {
  if (!ok) {
    if (!tessel_copy_done(upto))
      for (int g = c1 >> 6; g <= (c1 + 127) >> 6; ++g) if (g > upto) tessel_wait_group(g);
    asm volatile("fence.proxy.async.global;" ::: "memory");
    ok = true;
  }
  tessel_tma_load_2d(dst, map, bar, c0, c1);
}
__device__ __forceinline__ void tessel_gemm_done() {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    __threadfence();
    if (atomicAdd(&tessel_flags[64], 1u) == gridDim.x * gridDim.y - 1) {
      for (int g = 0; g < 66; ++g) tessel_flags[g] = 0u;
      __threadfence();
    }
  }
}
// Elements d .. d + 7 of the 16 halves in w0, w1 (d in 0 .. 7), zero from element `valid` on.
__device__ __forceinline__ uint4 tessel_window(uint4 w0, uint4 w1, int d, int valid) {
  uint4 v = tessel_shift8(w0, w1, d);
  unsigned o[4] = {v.x, v.y, v.z, v.w};
  #pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (2 * j >= valid) o[j] = 0;
    else if (2 * j + 1 >= valid) o[j] &= 0xffffu;
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}
// 4095 x 4095 A and B into 4096 x 4096 A_pad and B_pad, task t = rows 2t, 2t + 1 of each:
// every load of a task is issued before any is used (aligned 16-byte windows, the last ones
// reading up to 16 elements past a row: the arrays have that slack), then shifted and stored.
// The 32 tasks of 64 rows make a group.
extern "C" __global__ void __maxnreg__(72) pad_flagged(const half *__restrict__ A,
    const half *__restrict__ B, half *__restrict__ Ap, half *__restrict__ Bp) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  for (int t = blockIdx.x; t < 2048; t += gridDim.x) {
    uint4 w[2][4][2];
    int d[4], valid[4];
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      int row = 2 * t + (i >> 1), col = (i & 1) * 2048 + threadIdx.x * 8;
      valid[i] = row < 4095 ? min(8, max(0, 4095 - col)) : 0;
      long long at = (long long)min(row, 4094) * 4095 + col;
      d[i] = int(at & 7);
      const uint4 *pa = reinterpret_cast<const uint4 *>(A + (at & ~7ll));
      const uint4 *pb = reinterpret_cast<const uint4 *>(B + (at & ~7ll));
      w[0][i][0] = __ldg(pa); w[0][i][1] = __ldg(pa + 1);
      w[1][i][0] = __ldg(pb); w[1][i][1] = __ldg(pb + 1);
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      int row = 2 * t + (i >> 1), col = (i & 1) * 2048 + threadIdx.x * 8;
      if (row < 4095)
        *reinterpret_cast<uint4 *>(Ap + (long long)row * 4096 + col) = tessel_window(w[0][i][0], w[0][i][1], d[i], valid[i]);
      *reinterpret_cast<uint4 *>(Bp + (long long)row * 4096 + col) = tessel_window(w[1][i][0], w[1][i][1], d[i], valid[i]);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      // The total first: once every group is complete, so is the total (the GEMM's last block
      // zeroes both).
      atomicAdd(&tessel_flags[65], 1u);
      atomicAdd(&tessel_flags[t >> 5], 1u);
    }
  }
}
)";

// Replaces every `from` in `s` by `to`; tessel::Error-free: the count is checked by the caller.
int replace_all(std::string &s, const std::string &from, const std::string &to) {
  int n = 0;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()), ++n)
    s.replace(at, from.size(), to);
  return n;
}

// The padded GEMM's source with the waits and the flag helpers and copy kernel above.
std::string overlapped_gemm_source(const std::string &gemm) {
  std::string s = gemm;
  size_t kernel = s.find("extern \"C\" __global__");
  size_t end = s.rfind('}');
  if (kernel == std::string::npos || end == std::string::npos) {
    std::printf("overlap: unexpected GEMM source\n");
    std::exit(1);
  }
  s.insert(end, "  tessel_gemm_done();\n");
  s.insert(kernel, std::string(kShiftSource) + kOverlapSource);
  int acc = replace_all(s, "  float C_wgmma_accumulator[128];",
                        "  int tessel_upto = -1; bool tessel_a_ok = false;\n  float C_wgmma_accumulator[128];");
  int a = replace_all(s, "tessel_tma_load_2d(&A_shared[",
                      "tessel_tma_load_2d_A(tessel_upto, tessel_a_ok, &A_shared[");
  int b = replace_all(s, "tessel_tma_load_2d(&B_shared[", "tessel_tma_load_2d_B(tessel_upto, &B_shared[");
  if (acc != 1 || a == 0 || b == 0) {
    std::printf("overlap: patched %d accumulators, %d A loads, %d B loads\n", acc, a, b);
    std::exit(1);
  }
  return s;
}

DeviceArray random_half(std::vector<int64_t> shape, int64_t slack, std::mt19937 &rng) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<uint16_t> v = random_halves(size_t(n + slack), rng());
  return DeviceArray::from_vector(Float(16), {n + slack}, v);
}

void report(const char *what, const TimeResult &t) {
  std::printf("%-48s median %.4f ms  min %.4f  max %.4f\n", what, t.median_ms, t.min_ms,
              t.max_ms);
}

// The copy kernel's source in one variant.
std::string copy_source(bool load_first, bool store_last, bool window) {
  return "#define LOAD_FIRST " + std::to_string(load_first) + "\n#define STORE_LAST " +
         std::to_string(store_last) + "\n#define WINDOW " + std::to_string(window) + "\n" +
         kShiftSource + kCopySource;
}

const TimeOptions kTiming{.number = 10, .repeat = 40, .warmup = 5};

// 4095^3 as tessel pads it: the operands, their padded copies, the copy's launch and the GEMM
// on the padded operands (aligned rows; C2 has whole rows too).
struct Padded {
  static constexpr int64_t M = 4095, N = 4095, K = 4095, Kp = 4096, Np = 4096;
  // 16 elements of slack: the window loads of the last row's last chunk read past K.
  DeviceArray A, B, Ap{Float(16), {M, Kp}}, Bp{Float(16), {Kp, Np}}, C2{Float(32), {M, Np}};
  Module gemm;
  std::vector<TensorView> gemm_args;
  LaunchConfig copy;
  std::vector<KernelArg> copy_args;

  explicit Padded(std::mt19937 &rng)
      : A(random_half({M, K}, 16, rng)), B(random_half({K, N}, 16, rng)) {
    ScheduledProgram g = gemm_wgmma(M, Np, Kp);
    gemm = build(g.schedule, g.args);
    gemm_args = {TensorView::of(Ap), TensorView::of(Bp), TensorView::of(C2)};
    copy.grid = {Kp * (Kp / 2048), 1, 1};
    copy.block = {256, 1, 1};
    copy_args = {KernelArg(A),      KernelArg(B),      KernelArg(Ap),
                 KernelArg(Bp),     KernelArg(int(M)), KernelArg(int(N)),
                 KernelArg(int(K)), KernelArg(int(Kp)), KernelArg(int(Np))};
  }
};

// Without a GPU: each copy variant through NVRTC for sm_90, with ptxas's report.
void compile_only() {
  {
    std::mt19937 rng(1);
    ScheduledProgram g = gemm_wgmma(Padded::M, Padded::Np, Padded::Kp);
    Module gemm = build(g.schedule, g.args, Target::cuda("sm_90a"));
    CompiledKernel k = nvrtc_compile(overlapped_gemm_source(gemm.source()),
                                     nvrtc_options({.arch = "sm_90a", .extra = {}}), "overlap.cu");
    for (const KernelStats &s : k.kernels)
      std::printf("overlap: %s %d registers\n", s.name.c_str(), s.registers);
  }
  for (bool hints : {false, true})
    for (bool window : {false, true}) {
      CompiledKernel k = nvrtc_compile(copy_source(hints, hints, window),
                                       nvrtc_options({.arch = "sm_90", .extra = {}}), "pad.cu");
      for (const KernelStats &s : k.kernels)
        std::printf("hints %d window %d: %s %d registers\n", hints, window, s.name.c_str(),
                    s.registers);
    }
}

// One launch each of the odd-C and the aligned-C GEMM modules, for ncu.
void profile(std::mt19937 &rng) {
  for (auto [m, n, k] : {std::array<int64_t, 3>{4096, 4095, 4096}, {4095, 4096, 4096}}) {
    ScheduledProgram p = gemm_wgmma(m, n, k);
    Module mod = build(p.schedule, p.args);
    DeviceArray a = random_half({m, k}, 0, rng), b = random_half({k, n}, 0, rng);
    DeviceArray c(Float(32), {m, n});
    mod.launch({TensorView(a.data(), Float(16), {m, k}), TensorView(b.data(), Float(16), {k, n}),
                TensorView::of(c)});
  }
}

// Copy, then GEMM, 200 times, with events between: whether either is slower in sequence than
// alone.
void split(const Padded &p) {
  CudaModule m = CudaModule::build(copy_source(false, false, false));
  CudaFunction pad = m.function("pad");
  const int n = 200;
  std::vector<CUevent> ev(2 * n + 1);
  for (CUevent &e : ev)
    TESSEL_CU(cuEventCreate, &e, CU_EVENT_DEFAULT);
  for (int w = 0; w < 5; ++w) {
    pad.launch(p.copy, p.copy_args);
    p.gemm.launch(p.gemm_args);
  }
  TESSEL_CU(cuEventRecord, ev[0], nullptr);
  for (int i = 0; i < n; ++i) {
    pad.launch(p.copy, p.copy_args);
    TESSEL_CU(cuEventRecord, ev[2 * i + 1], nullptr);
    p.gemm.launch(p.gemm_args);
    TESSEL_CU(cuEventRecord, ev[2 * i + 2], nullptr);
  }
  TESSEL_CU(cuEventSynchronize, ev.back());
  std::vector<double> copy_ms, gemm_ms;
  for (int i = 0; i < n; ++i) {
    float a = 0, b = 0;
    TESSEL_CU(cuEventElapsedTime_v2, &a, ev[2 * i], ev[2 * i + 1]);
    TESSEL_CU(cuEventElapsedTime_v2, &b, ev[2 * i + 1], ev[2 * i + 2]);
    copy_ms.push_back(a);
    gemm_ms.push_back(b);
  }
  for (CUevent &e : ev)
    CudaDriver::instance().cuEventDestroy_v2(e);
  report("copy after the GEMM (in sequence)", summarize_times(copy_ms));
  report("GEMM after the copy (in sequence)", summarize_times(gemm_ms));
  report("copy alone", pad.time(p.copy, p.copy_args, kTiming));
  report("GEMM alone", p.gemm.time(p.gemm_args, kTiming));
}

// Every copy variant alone and followed by the GEMM, three rounds (so that the GPU's drift
// shows; compare minima: clocks move the medians), then tessel's own modules.
void variants(Padded &p, std::mt19937 &rng) {
  struct Variant {
    const char *name;
    bool load_first, store_last, window;
  };
  const Variant variants[] = {
      {"copy: scalar loads", false, false, false},
      {"copy: scalar, evict-first loads", true, false, false},
      {"copy: scalar, evict-last stores", false, true, false},
      {"copy: scalar, both hints", true, true, false},
      {"copy: windows", false, false, true},
      {"copy: windows, evict-last stores", false, true, true},
  };
  std::vector<uint16_t> reference;
  for (int round = 0; round < 3; ++round)
    for (const Variant &v : variants) {
      CudaModule m = CudaModule::build(copy_source(v.load_first, v.store_last, v.window));
      CudaFunction pad = m.function("pad");
      // Every variant must write the same padded operands.
      pad.launch(p.copy, p.copy_args);
      std::vector<uint16_t> out(p.Ap.numel() + p.Bp.numel());
      p.Ap.copy_to_host(out.data(), p.Ap.bytes());
      p.Bp.copy_to_host(out.data() + p.Ap.numel(), p.Bp.bytes());
      if (reference.empty())
        reference = out;
      else if (out != reference)
        std::printf("%s: WRONG padded operands\n", v.name);
      // The GEMM alone on the padded operands once they hold data (on zeros it runs cooler and
      // faster: 0.19 against 0.20 ms).
      if (&v == &variants[0])
        report("gemm on the padded operands alone", p.gemm.time(p.gemm_args, kTiming));
      report(v.name, pad.time(p.copy, p.copy_args, kTiming));
      std::string both = std::string(v.name) + " + gemm";
      report(both.c_str(), time_launches(
                               [&] {
                                 pad.launch(p.copy, p.copy_args);
                                 p.gemm.launch(p.gemm_args);
                               },
                               kTiming));
    }
  for (int round = 0; round < 3; ++round)
    for (auto [m, n, k] : {std::array<int64_t, 3>{4095, 4095, 4095}, {4096, 4096, 4096},
                           {4096, 4095, 4096}, {4095, 4096, 4096}}) {
      ScheduledProgram prog = gemm_wgmma(m, n, k);
      Module mod = build(prog.schedule, prog.args);
      DeviceArray a = random_half({m, k}, 0, rng), b = random_half({k, n}, 0, rng);
      DeviceArray c(Float(32), {m, n});
      std::string what = "tessel gemm_wgmma " + std::to_string(m) + "x" + std::to_string(n) +
                         "x" + std::to_string(k);
      report(what.c_str(), mod.time({TensorView(a.data(), Float(16), {m, k}),
                                     TensorView(b.data(), Float(16), {k, n}), TensorView::of(c)},
                                    kTiming));
    }
}


// The copy overlapped with the GEMM (kOverlapSource) against the copy then the GEMM, and
// tessel's own 4095^3 and 4096^3 modules, three rounds; the overlapped result must equal the
// sequential one bit for bit (same GEMM arithmetic).
void overlap(Padded &p, std::mt19937 &rng, int ctas_per_sm) {
  CudaModule plain = CudaModule::build(copy_source(false, false, true));
  CudaFunction pad = plain.function("pad");
  CudaModule m = CudaModule::build(overlapped_gemm_source(p.gemm.source()),
                                   {.arch = "sm_90a", .extra = {}});
  CudaFunction copy = m.function("pad_flagged"), gemm = m.function(p.gemm.lowered().funcs[0].name);
  // All shared memory: an SM running the copy's blocks keeps the GEMM's shared memory free.
  TESSEL_CU(cuFuncSetAttribute, copy.handle(), CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            100);
  std::printf("overlap: pad_flagged %d registers\n", copy.attribute(CU_FUNC_ATTRIBUTE_NUM_REGS));
  const LoweredFunc &f = p.gemm.lowered().funcs[0];
  std::vector<KernelArg> gemm_args = {KernelArg(p.Ap), KernelArg(p.Bp), KernelArg(p.C2)};
  for (const TensorMapParam &t : f.tensor_maps)
    gemm_args.push_back(KernelArg(encode_tensor_map(t, t.arg == 0 ? p.Ap : p.Bp)));
  LaunchConfig copy_cfg;
  copy_cfg.grid = {int64_t(Device::get().sm_count()) * ctas_per_sm, 1, 1};
  copy_cfg.block = {256, 1, 1};
  std::vector<KernelArg> copy_args = {KernelArg(p.A), KernelArg(p.B), KernelArg(p.Ap),
                                      KernelArg(p.Bp)};
  LaunchConfig dependent = f.launch, sequential = f.launch;
  dependent.after_previous = true;
  sequential.after_previous = false;
  std::printf("overlap: copy grid %lld x 256, GEMM grid %lld x %lld\n",
              (long long)copy_cfg.grid[0], (long long)f.launch.grid[0], (long long)f.launch.grid[1]);

  auto result = [&] {
    std::vector<float> c(size_t(p.C2.numel()));
    TESSEL_CU(cuCtxSynchronize);
    p.C2.copy_to_host(c.data(), p.C2.bytes());
    return c;
  };
  pad.launch(p.copy, p.copy_args);
  p.gemm.launch(p.gemm_args);
  std::vector<float> reference = result();
  for (int i = 0; i < 3; ++i) {
    TESSEL_CU(cuMemsetD8_v2, p.C2.data(), 0, size_t(p.C2.bytes()));
    TESSEL_CU(cuMemsetD8_v2, p.Ap.data(), 0xff, size_t(p.Ap.bytes()));
    TESSEL_CU(cuMemsetD8_v2, p.Bp.data(), 0xff, size_t(p.Bp.bytes()));
    copy.launch(copy_cfg, copy_args);
    gemm.launch(dependent, gemm_args);
    std::printf("overlap: result %s the sequential one\n",
                result() == reference ? "equals" : "DIFFERS FROM");
  }
  for (int round = 0; round < 3; ++round) {
    report("copy (windows) then GEMM", time_launches([&] {
             pad.launch(p.copy, p.copy_args);
             p.gemm.launch(p.gemm_args);
           }, kTiming));
    report("flagged copy alone", copy.time(copy_cfg, copy_args, kTiming));
    report("flagged copy then waiting GEMM", time_launches([&] {
             copy.launch(copy_cfg, copy_args);
             gemm.launch(sequential, gemm_args);
           }, kTiming));
    report("flagged copy overlapped with the GEMM", time_launches([&] {
             copy.launch(copy_cfg, copy_args);
             gemm.launch(dependent, gemm_args);
           }, kTiming));
    report("GEMM on the padded operands alone", p.gemm.time(p.gemm_args, kTiming));
    for (int64_t n : {4095, 4096}) {
      ScheduledProgram prog = gemm_wgmma(n, n, n);
      Module mod = build(prog.schedule, prog.args);
      DeviceArray a = random_half({n, n}, 0, rng), b = random_half({n, n}, 0, rng);
      DeviceArray c(Float(32), {n, n});
      std::string what = "tessel gemm_wgmma " + std::to_string(n) + "^3";
      report(what.c_str(), mod.time({TensorView(a.data(), Float(16), {n, n}),
                                     TensorView(b.data(), Float(16), {n, n}), TensorView::of(c)},
                                    kTiming));
    }
  }
}

// tessel's 4095^3 and 4096^3 modules timed in pairs (events around 10 launches of one, then 10
// of the other, the order alternating from pair to pair), so that both of a pair see the same
// clocks: the median, minimum and maximum of the pairs' ratios, and each one's median.
void paired(std::mt19937 &rng, int pairs) {
  struct Gemm {
    Module module;
    DeviceArray a, b, c;
    std::vector<TensorView> args;
  };
  auto make = [&](int64_t n) {
    ScheduledProgram prog = gemm_wgmma(n, n, n);
    Gemm g{build(prog.schedule, prog.args), random_half({n, n}, 0, rng),
           random_half({n, n}, 0, rng), DeviceArray(Float(32), {n, n}), {}};
    g.args = {TensorView(g.a.data(), Float(16), {n, n}), TensorView(g.b.data(), Float(16), {n, n}),
              TensorView::of(g.c)};
    return g;
  };
  Gemm ragged = make(4095), aligned = make(4096);
  constexpr int kLaunches = 10;
  CUevent ev[3];
  for (CUevent &e : ev)
    TESSEL_CU(cuEventCreate, &e, CU_EVENT_DEFAULT);
  std::vector<double> ratios, ragged_ms, aligned_ms;
  for (int i = 0; i < pairs + 5; ++i) {
    const Gemm *order[2] = {&ragged, &aligned};
    if (i % 2)
      std::swap(order[0], order[1]);
    TESSEL_CU(cuEventRecord, ev[0], nullptr);
    for (int j = 0; j < 2; ++j) {
      for (int l = 0; l < kLaunches; ++l)
        order[j]->module.launch(order[j]->args);
      TESSEL_CU(cuEventRecord, ev[j + 1], nullptr);
    }
    TESSEL_CU(cuEventSynchronize, ev[2]);
    float first = 0, second = 0;
    TESSEL_CU(cuEventElapsedTime_v2, &first, ev[0], ev[1]);
    TESSEL_CU(cuEventElapsedTime_v2, &second, ev[1], ev[2]);
    if (i < 5) // warm-up pairs
      continue;
    double r = (i % 2 ? second : first) / kLaunches, a = (i % 2 ? first : second) / kLaunches;
    ragged_ms.push_back(r);
    aligned_ms.push_back(a);
    ratios.push_back(r / a);
  }
  for (CUevent &e : ev)
    CudaDriver::instance().cuEventDestroy_v2(e);
  TimeResult rt = summarize_times(ratios);
  std::printf("%d pairs of %d launches: 4095^3 / 4096^3 median %.3f  min %.3f  max %.3f\n", pairs,
              kLaunches, rt.median_ms, rt.min_ms, rt.max_ms);
  report("tessel gemm_wgmma 4095^3 (in the pairs)", summarize_times(ragged_ms));
  report("tessel gemm_wgmma 4096^3 (in the pairs)", summarize_times(aligned_ms));
}

} // namespace

int main(int argc, char **argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "--compile-only") {
    compile_only();
    return 0;
  }
  std::mt19937 rng(13);
  if (mode == "--paired") {
    paired(rng, argc > 2 ? std::atoi(argv[2]) : 200);
    return 0;
  }
  if (mode == "--profile") {
    profile(rng);
    return 0;
  }
  Padded p(rng);
  if (mode == "--split")
    split(p);
  else if (mode == "--overlap")
    overlap(p, rng, argc > 2 ? std::atoi(argv[2]) : 1);
  else
    variants(p, rng);
  return 0;
}

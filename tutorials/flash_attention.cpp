// Fused attention in tessel: the seed conv tutorial's sibling for the kernel of today's models.
//
// The definition and schedule are schedules/Attention.cpp (the registered `attention`, so that
// `tessel lower attention`, the tests and this program use the same one): Q, K, V read through
// their strides as PyTorch passes them, the scores of a block of keys, and the online softmax
// as a fold (fold_axis / fold_state / fold) whose running max m, sum l and output o are
// carried over the key blocks, rescaled by exp(m_old - m_new) at each. This program prints the
// IR after schedule_ops and after the whole pipeline and the CUDA source, checks the kernel
// against a float64 reference on the CPU executor and, on a GPU, on the GPU, and times it.
//
// The step's two contractions run on Tensor Cores: on a Hopper GPU on wgmma, a warpgroup per 64
// queries with the scores, the softmax, P and the fold's states in its registers (P as the A
// operand of P V from registers); elsewhere (and with --wgmma=false) on WMMA, the scores stored
// key-major as K Q^T, a warp per 32 queries and a thread per query for the softmax
// (--tensor-cores=false: all on CUDA cores). Causal, the key blocks below the diagonal run
// without the mask (Stage::specialize). At D = 128 non-causal on Hopper the fold's steps overlap
// (Stage::overlap_steps: the next key block's S = Q K^T issued with this block's P V, its
// softmax beside it). docs/ATTENTION.md says what each path measured.
//
//   ./build/tutorials/flash_attention                  # B=2 H=8 (2 KV heads) S=512 D=64, causal
//   ./build/tutorials/flash_attention --quiet          # only the checks and the time
//   ./build/tutorials/flash_attention --seq 1024 --head-dim 128 --causal=false
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "runtime/Check.h"
#include "runtime/Device.h"
#include "schedules/Attention.h"
#include "schedules/GemmWgmma.h"

#include <llvm/Support/CommandLine.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <iostream>

using namespace tessel;

int main(int argc, char **argv) {
  llvm::cl::OptionCategory options("tutorial options");
  llvm::cl::opt<bool> quiet("quiet", llvm::cl::desc("print only the checks and the time"),
                            llvm::cl::cat(options));
  llvm::cl::opt<int> batch("batch", llvm::cl::init(2), llvm::cl::cat(options));
  llvm::cl::opt<int> heads("heads", llvm::cl::desc("query heads"), llvm::cl::init(8),
                           llvm::cl::cat(options));
  llvm::cl::opt<int> kv_heads("kv-heads", llvm::cl::desc("key/value heads"), llvm::cl::init(2),
                              llvm::cl::cat(options));
  llvm::cl::opt<int> seq("seq", llvm::cl::desc("queries and keys"), llvm::cl::init(512),
                         llvm::cl::cat(options));
  llvm::cl::opt<int> head_dim("head-dim", llvm::cl::init(64), llvm::cl::cat(options));
  llvm::cl::opt<bool> causal("causal", llvm::cl::init(true), llvm::cl::cat(options));
  llvm::cl::opt<bool> tensor_cores("tensor-cores", llvm::cl::init(true), llvm::cl::cat(options));
  llvm::cl::opt<bool> wgmma("wgmma", llvm::cl::desc("wgmma where the GPU is a Hopper (default)"),
                            llvm::cl::init(true), llvm::cl::cat(options));
  llvm::cl::HideUnrelatedOptions(options);
  llvm::cl::ParseCommandLineOptions(argc, argv, "fused attention in tessel\n");
  try {
    AttentionParams shape;
    shape.B = batch;
    shape.H = heads;
    shape.Hkv = kv_heads;
    shape.Sq = shape.Sk = seq;
    shape.D = head_dim;
    shape.causal = causal;
    // The registry's path: wgmma on a Hopper GPU where it takes the shape, else WMMA.
    const int64_t path = !tensor_cores ? 0 : wgmma ? 3 : 1;
    AttentionParams a = attention_path(shape, path, 0, 0, hopper_gpu());
    if (overlap_pays(a)) // the next key block's Q K^T issued with this block's P V, a
      a = take_overlap(a); // producer warpgroup, the consumers' turns when not causal
    else if (turns_pay(a)) // D = 256 not causal: a producer warpgroup, the consumers' turns,
      a = take_turns(a);   // P V onto o
    // (`tessel run attention` also walks causal blocks longest first, then in turns, and
    // puts a non-causal fold on a persistent grid whose last round is split: REV, PB, LW.)
    std::cout << "// path: " << (a.wgmma ? "wgmma" : a.tensor_cores ? "WMMA" : "CUDA cores")
              << ", " << a.block_queries << " queries and " << a.block_keys
              << " keys a block\n";
    ScheduledProgram p = attention(a, Float(16));
    LowerOptions lo;
    if (!quiet)
      lo.print_after = {"schedule_ops"};
    lo.print_stream = &llvm::outs();
    LoweredModule lowered = lower(p.schedule, p.args, lo);
    llvm::outs().flush();
    if (!quiet)
      std::cout << "// ---- lowered IR ----\n" << lowered << "\n";

    // The executor runs the same lowered kernel at a small shape (every output checked).
    // (wgmma: two blocks of its 64 or 128 queries, one key/value head's group of query heads.)
    AttentionParams small = a;
    small.B = 1;
    small.Sq = small.Sk = a.wgmma ? 2 * a.block_queries : 64;
    if (a.wgmma) {
      small.H = a.H / a.Hkv;
      small.Hkv = 1;
      small.block_keys = std::min<int64_t>(a.block_keys, small.Sk);
    }
    ScheduledProgram ps = attention(small, Float(16));
    CheckResult cpu = check_on_cpu(ps.schedule, ps.args, ps.num_inputs);
    std::cout << "check on the CPU executor (B=1, H=" << small.H << ", S=" << small.Sq
              << "): " << cpu.str() << "\n";
    if (!cpu.compare.ok)
      return 1;

    if (!Device::available()) {
      std::cout << "no GPU (" << Device::unavailable_reason()
                << "): compiling for sm_90 to show the CUDA source\n";
      Module m = build(lowered, Target::cuda("sm_90"));
      if (!quiet)
        std::cout << m.source();
      return 0;
    }
    Module m = build(lowered, Target::cuda());
    if (!quiet)
      std::cout << "// ---- CUDA source ----\n" << m.source() << "\n";
    for (const KernelStats &k : m.compiled().kernels)
      std::cout << "kernel " << k.name << ": " << k.registers << " registers, spills "
                << k.spill_store_bytes << "/" << k.spill_load_bytes << " bytes\n";
    CheckResult gpu =
        check_on_gpu(p.schedule, p.args, p.num_inputs, TimeOptions{.number = 5, .repeat = 10});
    std::cout << "check on the GPU against float64: " << gpu.str() << "\n";
    if (gpu.time)
      std::cout << "attention B=" << a.B << " H=" << a.H << " HKV=" << a.Hkv << " S=" << a.Sq
                << " D=" << a.D << (a.causal ? " causal" : "") << ": " << gpu.time->median_ms
                << " ms (median), " << p.flops / (gpu.time->median_ms * 1e9) << " TFLOP/s\n";
    return gpu.compare.ok ? 0 : 1;
  } catch (const Error &e) {
    std::cerr << "tessel: error: " << e.what() << "\n";
    return 1;
  }
}

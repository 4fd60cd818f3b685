// A first tessel program: a GEMM from definition to kernel IR.
//
// C[i, j] = sum_k A[i, k] * B[k, j], fp16 inputs accumulated in fp32. The program prints the
// compute definition, then schedules it the simplest GPU way (one thread per output element,
// 16 x 16 threads per block), and prints the loop IR after the first lowering step and at the
// end of lowering, then the CUDA source. No GPU is needed.
//
//   ./build/tutorials/gemm_definition
//   TESSEL_PRINT_AFTER=all ./build/tutorials/gemm_definition    # the IR after every step
#include <tessel/tessel.h>

#include "compiler/codegen/CodeGenCUDA.h"

#include <llvm/Support/raw_ostream.h>

#include <iostream>

using namespace tessel;

int main() {
  try {
    const int M = 1024, N = 1024, K = 1024;

    // 1. The algorithm: what is computed, with no word about loops or threads.
    Tensor A = placeholder({M, K}, Float(16), "A");
    Tensor B = placeholder({K, N}, Float(16), "B");
    IterVar k = reduce_axis({0, K}, "k");
    Tensor C = compute(
        {M, N},
        [&](Var i, Var j) { return sum(A(i, k).astype(Float(32)) * B(k, j).astype(Float(32)), {k}); },
        "C", {"i", "j"});
    std::cout << "// ---- compute definition ----\n" << A << "\n" << B << "\n" << C << "\n\n";

    // 2. The schedule: how it is computed. Split both output axes into 16-wide tiles, put the
    //    tile loops outside, and map tiles to blocks and elements to threads.
    Schedule s = create_schedule({C});
    auto [i, j] = s[C].axes<2>();
    auto [bi, ti] = s[C].split(i, 16);
    auto [bj, tj] = s[C].split(j, 16);
    s[C].reorder({bi, bj, ti, tj});
    s[C].bind(bi, thread_axis("blockIdx.y"));
    s[C].bind(bj, thread_axis("blockIdx.x"));
    s[C].bind(ti, thread_axis("threadIdx.y"));
    s[C].bind(tj, thread_axis("threadIdx.x"));

    // 3. Lowering: the loop nest the schedule describes (after schedule_ops, the first step),
    //    then the kernel after all passes, with its launch configuration.
    LowerOptions options;
    options.name = "gemm";
    options.print_after = {"schedule_ops"};
    std::string steps;
    llvm::raw_string_ostream steps_os(steps);
    options.print_stream = &steps_os;
    LoweredModule lowered = lower(s, {A, B, C}, options);
    std::cout << steps_os.str() << "\n// ---- lowered kernel ----\n" << lowered << "\n";

    // 4. The CUDA C++ that build() would hand to NVRTC.
    std::cout << "// ---- CUDA source ----\n" << codegen_cuda(lowered);
  } catch (const Error &e) {
    std::cerr << "tessel::Error: " << e.what() << "\n";
    return 1;
  }
}

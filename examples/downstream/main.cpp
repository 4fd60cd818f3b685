// A GEMM written, scheduled, lowered, turned into CUDA C++ and compiled by NVRTC for sm_80 from a
// project that uses an installed tessel (find_package(tessel), tessel::tessel). No GPU needed.
#include <tessel/tessel.h>

#include <compiler/codegen/CodeGenCUDA.h>
#include <runtime/Nvrtc.h>

#include <iostream>

using namespace tessel;

int main() {
  try {
    // What: C = A x B, 256 x 256 float32.
    const int n = 256;
    Tensor A = placeholder({n, n}, Float(32), "A"), B = placeholder({n, n}, Float(32), "B");
    IterVar k = reduce_axis({0, n}, "k");
    Tensor C = compute({n, n}, [&](Var i, Var j) { return sum(A(i, k) * B(k, j), {k}); }, "C");

    // How: a block per 16 x 16 tile, a thread per element.
    Schedule s = create_schedule({C});
    auto [i, j] = s[C].axes<2>();
    auto [bi, ti] = s[C].split(i, 16);
    auto [bj, tj] = s[C].split(j, 16);
    s[C].reorder({bi, bj, ti, tj});
    s[C].bind(bi, thread_axis("blockIdx.y")).bind(bj, thread_axis("blockIdx.x"));
    s[C].bind(ti, thread_axis("threadIdx.y")).bind(tj, thread_axis("threadIdx.x"));

    LowerOptions options;
    options.name = "downstream_gemm";
    LoweredModule lowered = lower(s, {A, B, C}, options);
    std::cout << "// ---- lowered ----\n" << lowered << "\n";

    std::string source = codegen_cuda(lowered);
    std::cout << "// ---- CUDA ----\n" << source << "\n";

    // NVRTC for sm_80: the architecture is given, so no device is asked for.
    CompileOptions compile;
    compile.arch = "sm_80";
    CompiledKernel kernel = nvrtc_compile(source, nvrtc_options(compile), "downstream_gemm.cu");
    if (kernel.cubin.size() < 4 || kernel.cubin.compare(0, 4, "\x7f" "ELF") != 0) {
      std::cerr << "tessel_downstream: NVRTC returned no ELF cubin\n";
      return 1;
    }
    std::cout << "// ---- NVRTC " << nvrtc_version() / 1000 << "." << nvrtc_version() % 1000 / 10
              << " ----\ncubin for " << kernel.arch << ": " << kernel.cubin.size() << " bytes\n";
    for (const KernelStats &ks : kernel.kernels)
      std::cout << "kernel " << ks.name << ": " << ks.registers << " registers, "
                << ks.static_shared_bytes << " bytes of shared memory\n";
  } catch (const Error &e) {
    std::cerr << "tessel_downstream: tessel::Error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

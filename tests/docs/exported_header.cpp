// Harness of README.md's fragment on calling a header written by `tessel export gemm_mma`: the
// two functions of that header it calls, declared as the header declares them
// (runtime/Export.cpp; tests/export builds real headers), and the device pointers and stream.
// Compiled, not run (tests/docs/doc_blocks.sh).
#include <cuda.h>

#include <cstdio>

CUresult gemm_mma_launch(CUdeviceptr A, CUdeviceptr B, CUdeviceptr C, CUstream stream);
const char *gemm_mma_last_error();

void doc_fragment([[maybe_unused]] CUdeviceptr A, [[maybe_unused]] CUdeviceptr B,
                  [[maybe_unused]] CUdeviceptr C, [[maybe_unused]] CUstream stream) {
#include TESSEL_DOC_FRAGMENT
}

// Harness of README.md's fragment on launching a Module on the caller's memory and stream: a
// built module, device pointers, shapes, a stream, views and a workspace. Compiled, not run
// (tests/docs/doc_blocks.sh).
#include <tessel/tessel.h>
using namespace tessel;

void doc_fragment([[maybe_unused]] const Module &m, [[maybe_unused]] CUdeviceptr a_ptr,
                  [[maybe_unused]] CUdeviceptr b_ptr, [[maybe_unused]] CUdeviceptr c_ptr,
                  [[maybe_unused]] int64_t M, [[maybe_unused]] int64_t N,
                  [[maybe_unused]] int64_t K, [[maybe_unused]] CUstream stream,
                  [[maybe_unused]] const std::vector<TensorView> &views,
                  [[maybe_unused]] CUdeviceptr workspace) {
#include TESSEL_DOC_FRAGMENT
}

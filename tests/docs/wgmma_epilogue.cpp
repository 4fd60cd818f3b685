// Harness of docs/WGMMA.md's epilogue fragment: the GEMM's sizes, its float32 sum acc, the
// bias, C's tile loop ii and the wgmma width n. Compiled, not run (tests/docs/doc_blocks.sh).
#include <tessel/tessel.h>
using namespace tessel;

void doc_fragment([[maybe_unused]] int M, [[maybe_unused]] int N, [[maybe_unused]] Tensor acc,
                  [[maybe_unused]] Tensor bias, [[maybe_unused]] IterVar ii,
                  [[maybe_unused]] int n) {
#include TESSEL_DOC_FRAGMENT
}

// Harness of docs/WGMMA.md's narrow-output fragment: the GEMM's sizes, inputs and reduction
// axis, C's tile loop ii and the wgmma width n. Compiled, not run (tests/docs/doc_blocks.sh).
#include <tessel/tessel.h>
using namespace tessel;

void doc_fragment([[maybe_unused]] int M, [[maybe_unused]] int N, [[maybe_unused]] Tensor A,
                  [[maybe_unused]] Tensor B, [[maybe_unused]] IterVar k,
                  [[maybe_unused]] IterVar ii, [[maybe_unused]] int n) {
#include TESSEL_DOC_FRAGMENT
}

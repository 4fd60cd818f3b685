// Harness of docs/WGMMA.md's TMA fragment: the names of the wgmma program it goes into
// (doc_wgmma_gemm, the same document). Compiled, not run (tests/docs/doc_blocks.sh).
#include <tessel/tessel.h>
using namespace tessel;

void doc_fragment([[maybe_unused]] Schedule s, [[maybe_unused]] Tensor AS,
                  [[maybe_unused]] Tensor BS, [[maybe_unused]] Tensor CF,
                  [[maybe_unused]] Tensor C, [[maybe_unused]] IterVar ko,
                  [[maybe_unused]] IterVar tx, [[maybe_unused]] IterVar bj) {
#include TESSEL_DOC_FRAGMENT
}

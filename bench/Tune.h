// The parameter search behind gemm_tc and conv2d_tc: every candidate tiling of a shape is
// compiled (NVRTC, in parallel), run once and checked against the vendor's result on the same
// random inputs, then timed; every candidate is logged (stdout and CSV) so the search can be
// read and repeated, and the fastest correct one is printed as the line to keep in the
// schedule's table.
#pragma once

#include "bench/VendorLibraries.h"

#include <cstdint>
#include <ostream>

namespace tessel::bench {

void tune_gemm(int64_t M, int64_t N, int64_t K, CublasGemm &cublas, std::ostream &csv);
void tune_conv(const ConvShape &shape, std::ostream &csv);

} // namespace tessel::bench

// The vendor-checked parameter search behind gemm_tc's and conv2d_tc's Ampere paths: every
// candidate tiling of a shape is compiled (NVRTC, in parallel), run once and checked against the
// vendor's result on the same random inputs, then timed; every candidate is logged (stdout and
// CSV). Its GEMM winners on the H100 ship as tuning records (runtime/TuningDefaults.cpp).
// `tessel tune` (runtime/Tuner.h) is the user's search: no vendor library, any registered
// schedule's knobs, a database that run / bench / build_tuned() read.
#pragma once

#include "bench/VendorLibraries.h"

#include <cstdint>
#include <ostream>

namespace tessel::bench {

void tune_gemm(int64_t M, int64_t N, int64_t K, CublasGemm &cublas, std::ostream &csv);
void tune_conv(const ConvShape &shape, std::ostream &csv);

} // namespace tessel::bench

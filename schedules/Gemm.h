// GEMM, C[i, j] = sum_k A[i, k] * B[k, j], and its CUDA-core schedules.
//
// Inputs are float32 or float16; the product is accumulated and stored in float32.
#pragma once

#include "schedules/Registry.h"

namespace tessel {

struct GemmTensors {
  Tensor A, B, C;
};

/// The GEMM definition for M x K times K x N inputs of type `dtype`; C named `c_name`.
GemmTensors gemm_definition(int64_t M, int64_t N, int64_t K, DataType dtype,
                            const std::string &c_name = "C");

/// A GEMM's schedule as a program: arguments A, B (inputs) and C, 2 M N K flops.
ScheduledProgram gemm_program(const GemmTensors &g, Schedule s, int64_t M, int64_t N, int64_t K);

/// One thread per output element, 16 x 16 threads per block.
ScheduledProgram gemm_naive(int64_t M, int64_t N, int64_t K, DataType dtype);
/// 64 x 64 tiles per block of 16 x 16 threads, 4 x 4 outputs per thread accumulated in
/// registers, K in steps of 16 through double-buffered shared-memory tiles.
ScheduledProgram gemm_shared(int64_t M, int64_t N, int64_t K, DataType dtype);

ScheduleEntry gemm_naive_entry();
ScheduleEntry gemm_shared_entry();

} // namespace tessel

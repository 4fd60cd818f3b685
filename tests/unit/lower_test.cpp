#include "compiler/tessel.h"
#include "schedules/Conv2dTensorCoreTutorial.h"
#include "schedules/Gemm.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace tessel;

namespace {

std::string printed(const ScheduledProgram &p) {
  std::ostringstream os;
  os << lower(p.schedule, p.args);
  return os.str();
}

bool has(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

} // namespace

// The printed programs of the basic schedules: one kernel each, with its launch, and the
// constructs each schedule exists for.
TEST(Lower, PrintsEachScheduleAsOneKernelWithItsConstructs) {
  std::string naive = printed(gemm_naive(64, 64, 32, Float(32)));
  EXPECT_TRUE(has(naive, "kernel default_function(A: float32[64, 32], B: float32[32, 64], C: "
                         "float32[64, 64])\n  // grid (4, 4, 1), block (16, 16, 1)"))
      << naive;
  EXPECT_TRUE(has(naive, "for (k: int32, 0, 32) {")) << naive;
  EXPECT_FALSE(has(naive, "shared")) << naive;

  std::string tiled = printed(gemm_shared(128, 128, 64, Float(32)));
  EXPECT_TRUE(has(tiled, "@cp_async(")) << tiled;
  EXPECT_TRUE(has(tiled, "@syncthreads()")) << tiled;
  EXPECT_TRUE(has(tiled, "if (k.outer < 3) {")) << tiled; // the next tile's prefetch
  EXPECT_FALSE(has(tiled, "threadIdx.x < ")) << tiled;    // the blocks divide 128: no guard

  // 1000 = 62.5 blocks of 16: the last block's threads past the edge are guarded.
  std::string ragged = printed(gemm_shared(1000, 1000, 1000, Float(32)));
  EXPECT_TRUE(has(ragged, "if (blockIdx.y * 16 + threadIdx.y < 250 && blockIdx.x * 16 + "
                          "threadIdx.x < 250) {"))
      << ragged;

  std::string conv = printed(conv2d_tensorcore_tutorial({}, {.tensorize = true}));
  EXPECT_TRUE(has(conv, "@wmma_mma_sync(Conv.wmma.accumulator")) << conv;
  EXPECT_TRUE(has(conv, "storage_scope = wmma.accumulator;")) << conv;
  for (const std::string *text : {&naive, &tiled, &ragged, &conv}) {
    size_t kernels = 0;
    for (size_t at = text->find("kernel "); at != std::string::npos;
         at = text->find("kernel ", at + 1))
      kernels += at == 0 || (*text)[at - 1] == '\n';
    EXPECT_EQ(kernels, 1u) << *text;
  }
}

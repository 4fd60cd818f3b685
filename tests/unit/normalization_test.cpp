// softmax and layernorm (schedules/Normalization.h): one kernel, one block per row, the row's
// reductions across threads; on the executor against float64, compiled by NVRTC.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "runtime/Check.h"
#include "runtime/Nvrtc.h"
#include "schedules/Normalization.h"

#include <gtest/gtest.h>

using namespace tessel;

namespace {

struct Case {
  int64_t rows, cols;
  RowTiles tiles;
  DataType dtype;
};

std::string describe(const Case &c) {
  return std::to_string(c.rows) + "x" + std::to_string(c.cols) + " T=" +
         std::to_string(c.tiles.threads) + " V=" + std::to_string(c.tiles.vector) + " " +
         c.dtype.str();
}

const std::vector<Case> &cases() {
  static const std::vector<Case> c = {
      {4, 1024, {}, Float(16)},         {3, 2048, {64, 8}, BFloat(16)},
      {5, 100, {16, 4}, Float(16)},     {2, 777, {128, 1}, Float(16)},
      {2, 8192, {1024, 8}, BFloat(16)}, {6, 64, {32, 2}, Float(16)}};
  return c;
}

} // namespace

TEST(Normalization, SoftmaxMatchesTheReference) {
  for (const Case &c : cases()) {
    SCOPED_TRACE(describe(c));
    ScheduledProgram p = softmax(c.rows, c.cols, c.dtype, c.tiles);
    CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs, 11);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

TEST(Normalization, LayernormMatchesTheReference) {
  for (const Case &c : cases()) {
    SCOPED_TRACE(describe(c));
    ScheduledProgram p = layernorm(c.rows, c.cols, c.dtype, c.tiles);
    CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs, 12);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

// One kernel: each row's two reductions go through thread_allreduce, the results stay in
// registers; the CUDA compiles for Ampere and Hopper.
TEST(Normalization, OneKernelWithTwoCrossThreadReductions) {
  for (bool soft : {true, false}) {
    SCOPED_TRACE(soft ? "softmax" : "layernorm");
    ScheduledProgram p = soft ? softmax(4096, 4096, Float(16)) : layernorm(4096, 4096, Float(16));
    LoweredModule m = lower(p.schedule, p.args);
    ASSERT_EQ(m.funcs.size(), 1u);
    EXPECT_EQ(m.funcs[0].launch.grid[0], 4096);
    EXPECT_EQ(m.funcs[0].launch.block[0], 128);
    std::string ir = to_string(m);
    EXPECT_EQ(test::count_of(ir, "@thread_allreduce("), 2) << ir;
    EXPECT_EQ(ir.find("@syncthreads"), std::string::npos) << ir;
    std::string src = codegen_cuda(m);
    for (const char *arch : {"sm_80", "sm_90"}) {
      CompileOptions o;
      o.arch = arch;
      EXPECT_FALSE(nvrtc_compile(src, nvrtc_options(o), "norm.cu").cubin.empty()) << arch;
    }
  }
}

TEST(Normalization, Errors) {
  test::expect_error([] { softmax(4, 100, Float(16), {32, 8}); },
                     {"softmax", "100 elements are not whole vectors of 8"});
  test::expect_error([] { layernorm(4, 128, Float(16), {48, 1}); },
                     {"layernorm", "power of two up to 1024", "48"});
  test::expect_error([] { softmax(4, 100, Float(16), {32, 4}); },
                     {"32 threads for rows of 25 vectors", "T=0 chooses"});
  test::expect_error([] { softmax(4, 128, Float(32)); }, {"float16 or bfloat16", "float32"});
}

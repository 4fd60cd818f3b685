// A fused layer: y = ReLU(conv2d(x, w) + bias) in float16, one Hopper kernel.
//
// The convolution is conv2d_tc's implicit GEMM (x NHWC, w KRSC); the bias and ReLU are an
// ordinary elementwise compute stage after the reduction. The schedule keeps the float32 sum in
// the warpgroups' registers (set_scope("wgmma.accumulator") instead of cache_write) and
// tensorizes the elementwise stage with wgmma_store_matrix(n, "global", Float(16), epilogue):
// the bias is added and the ReLU applied register by register (wgmma_reg / wgmma_reg_set), then
// each value is rounded to float16 and stored. This program prints the definition, the lowered
// epilogue and its CUDA, checks the kernel on the CPU executor against float64 and, on a Hopper
// GPU, runs and times it.
//
//   ./build/tutorials/conv_bias_relu
#include <tessel/tessel.h>

#include "compiler/codegen/CodeGenCUDA.h"
#include "runtime/Check.h"
#include "schedules/Conv2dTc.h"
#include "schedules/Epilogues.h"

#include <iostream>
#include <sstream>
#include <string>

using namespace tessel;

namespace {

// Up to `count` lines of `text` from the first that contains `from`.
std::string excerpt(const std::string &text, const std::string &from, int count) {
  std::istringstream in(text);
  std::string line, out;
  bool on = false;
  while (count > 0 && std::getline(in, line)) {
    on = on || line.find(from) != std::string::npos;
    if (on) {
      out += line + "\n";
      --count;
    }
  }
  return out;
}

} // namespace

int main() {
  try {
    Conv2dTcShape shape{.batch = 2, .height = 8, .width = 8, .in_channels = 64,
                        .out_channels = 64, .kernel = 3, .pad = 1, .out_dtype = Float(16)};

    // 1. The epilogue is a function of the float32 sum and the column's bias; the definition
    //    applies it in a compute stage after the reduction (conv2d_tc_definition does exactly
    //    this with it).
    WgmmaEpilogue bias_relu = bias_relu_epilogue(Float(16));
    Conv2dTcTensors d = conv2d_tc_definition(shape, &bias_relu);
    std::cout << "// ---- definition ----\n" << d.acc << "\n" << d.y << "\n\n";

    // 2. The schedule: conv2d_wgmma's (TMA im2col copies on an mbarrier ring, wgmma), with
    //    s[y_acc].set_scope("wgmma.accumulator") and the store tensorized with the epilogue.
    ScheduledProgram p = conv2d_bias_relu(shape);
    LoweredModule m = lower(p.schedule, p.args);
    std::ostringstream ir;
    ir << m;
    // Register r of a thread holds column 8 (r / 4) + 2 (t % 4) + r % 2 of rows + 0 and + 8:
    // each column's bias is loaded once for its two registers. (32 registers a tile; the first
    // 6 lines, then the store.)
    std::string lowered = ir.str();
    std::cout << "// ---- the lowered epilogue (after the last wgmma_wait) ----\n"
              << excerpt(lowered, "let v0", 6) << "  ...\n"
              << excerpt(lowered, "@wgmma_store", 1) << "\n";
    std::cout << "// ---- its CUDA ----\n" << excerpt(codegen_cuda(m), "const half v0", 6)
              << "  ...\n\n";

    // 3. Checked on the CPU executor (GPU semantics) against the float64 reference.
    CheckResult cpu = check_on_cpu(p.schedule, p.args, p.num_inputs);
    std::cout << "CPU executor: " << cpu.str() << "\n";
    if (!cpu.compare.ok)
      return 1;

    // 4. On a Hopper GPU, a larger layer, checked and timed.
    if (hopper_gpu()) {
      Conv2dTcShape big{.batch = 64, .height = 14, .width = 14, .in_channels = 256,
                        .out_channels = 256, .kernel = 3, .pad = 1, .out_dtype = Float(16)};
      ScheduledProgram q = conv2d_bias_relu(big);
      CheckResult gpu = check_on_gpu(q.schedule, q.args, q.num_inputs, TimeOptions{});
      std::cout << "GPU, N=64 14x14 256->256: " << gpu.str() << "\n";
      return gpu.compare.ok ? 0 : 1;
    }
    std::cout << "(no Hopper GPU: the kernel was checked on the CPU executor only)\n";
  } catch (const Error &e) {
    std::cerr << "tessel::Error: " << e.what() << "\n";
    return 1;
  }
}

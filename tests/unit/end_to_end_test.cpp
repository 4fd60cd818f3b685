// Registered schedules lowered through the whole pipeline, run by the CPU executor with GPU
// semantics against a float64 reference, and compiled by NVRTC for sm_80 and sm_90.
#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "runtime/Check.h"
#include "runtime/Nvrtc.h"
#include "runtime/interp/Executor.h"
#include "schedules/Conv2dTensorCoreTutorial.h"
#include "schedules/Gemm.h"

#include "ExactGemm.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace tessel;

namespace {

// Values exactly representable in float16, so fp16 and fp32 inputs hold the same numbers.
using tessel::test::exact_gemm_values;

void check_gemm(ScheduledProgram (*schedule)(int64_t, int64_t, int64_t, DataType), int64_t M,
                int64_t N, int64_t K, DataType dtype) {
  ScheduledProgram p = schedule(M, N, K, dtype);
  LoweredModule m = lower(p.schedule, p.args);
  std::vector<double> a = exact_gemm_values(M * K, 1), b = exact_gemm_values(K * N, 2);
  interp::HostBuffer A = interp::HostBuffer::from_doubles(dtype, a);
  interp::HostBuffer B = interp::HostBuffer::from_doubles(dtype, b);
  // Poisoned output: every element must be written.
  interp::HostBuffer C = interp::HostBuffer::from_doubles(Float(32), std::vector<double>(M * N, NAN));
  interp::execute(m.funcs[0], {&A, &B, &C});
  std::vector<double> c = C.to_doubles();
  // Products of these inputs are exact in fp32 and sums of K of them stay exact below 2^24
  // units of 2^-10, so the result must match the float64 reference exactly.
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k)
        ref += a[i * K + k] * b[k * N + j];
      ASSERT_EQ(c[i * N + j], ref) << "C[" << i << ", " << j << "] with M=" << M << " N=" << N
                                   << " K=" << K << " " << dtype;
    }
}

// For sm_80 and sm_90; a kernel that uses wgmma compiles for sm_90a only, and asking for
// sm_80 is an error that says so.
void check_compiles(const LoweredModule &m, bool hopper_only) {
  std::string src = codegen_cuda(m);
  for (const char *arch : {"sm_80", "sm_90"}) {
    if (hopper_only && std::string(arch) == "sm_80") {
      tessel::test::expect_error([&] { target_arch(m, arch); }, {"uses wgmma", "sm_90a"});
      continue;
    }
    CompileOptions o;
    o.arch = target_arch(m, arch);
    CompiledKernel k = nvrtc_compile(src, nvrtc_options(o), m.funcs[0].name + ".cu");
    EXPECT_FALSE(k.cubin.empty()) << arch;
  }
}

} // namespace

TEST(EndToEnd, GemmNaiveOnCpuExecutor) {
  check_gemm(gemm_naive, 64, 48, 32, Float(32));
  check_gemm(gemm_naive, 50, 37, 29, Float(32));
  check_gemm(gemm_naive, 33, 20, 17, Float(16));
}

TEST(EndToEnd, GemmSharedOnCpuExecutor) {
  check_gemm(gemm_shared, 128, 128, 128, Float(32));
  check_gemm(gemm_shared, 100, 70, 40, Float(32));
  check_gemm(gemm_shared, 64, 64, 48, Float(16));
  check_gemm(gemm_shared, 65, 63, 17, Float(16));
}

TEST(EndToEnd, RegisteredSchedulesCompileWithNvrtc) {
  for (const auto &[name, entry] : schedule_registry()) {
    SCOPED_TRACE(name);
    ScheduledProgram p = entry.build(entry.default_shape, entry.dtypes[0]);
    LoweredModule m = lower(p.schedule, p.args);
    // Kernels that use wgmma (gemm_wgmma, conv2d_wgmma and the fused ones built on them) are
    // refused for sm_80.
    check_compiles(m, codegen_cuda(m).find("wgmma.mma_async") != std::string::npos);
  }
}

// Every registered schedule at a small shape (non-divisible where the schedule allows it) on the
// CPU executor, against the float64 reference of its definition.
TEST(EndToEnd, RegisteredSchedulesMatchReferenceOnCpu) {
  const std::map<std::string, std::vector<ShapeParams>> shapes = {
      {"gemm_naive", {{{"M", 48}, {"N", 40}, {"K", 24}}, {{"M", 37}, {"N", 21}, {"K", 19}}}},
      {"gemm_shared", {{{"M", 128}, {"N", 64}, {"K", 32}}, {{"M", 70}, {"N", 66}, {"K", 33}}}},
      {"gemm_wmma", {{{"M", 64}, {"N", 64}, {"K", 32}}, {{"M", 48}, {"N", 32}, {"K", 80}}}},
      {"gemm_mma", {{{"M", 64}, {"N", 64}, {"K", 32}}, {{"M", 96}, {"N", 128}, {"K", 48}}}},
      {"gemm_tc", {{{"M", 128}, {"N", 128}, {"K", 128}}, {{"M", 64}, {"N", 96}, {"K", 48}}}},
      {"conv2d_tensorcore_tutorial",
       {{{"batch", 128}, {"height", 2}, {"width", 2}, {"in_channels", 32}, {"out_channels", 128}}}},
      {"gemm_wgmma", {{{"M", 128}, {"N", 256}, {"K", 128}}, {{"M", 192}, {"N", 96}, {"K", 64}}}},
      {"conv2d_wgmma",
       {{{"N", 2}, {"H", 8}, {"W", 8}, {"C", 64}, {"K", 64}},
        {{"N", 1}, {"H", 8}, {"W", 8}, {"C", 32}, {"K", 32}, {"R", 1}, {"pad", 0}}}},
      {"gemm_bias_gelu", {{{"M", 128}, {"N", 256}, {"K", 64}}, {{"M", 64}, {"N", 128}, {"K", 64}}}},
      {"gemm_fp8",
       {{{"M", 128}, {"N", 128}, {"K", 256}},
        {{"M", 192}, {"N", 160}, {"K", 128}, {"SCALE", 0}, {"OUT", 2}}}},
      {"conv2d_bias_relu",
       {{{"N", 2}, {"H", 8}, {"W", 8}, {"C", 64}, {"K", 128}},
        {{"N", 1}, {"H", 8}, {"W", 8}, {"C", 32}, {"K", 32}, {"R", 1}, {"pad", 0}, {"Y16", 0}}}},
      {"conv2d_tc",
       {{{"N", 2}, {"H", 8}, {"W", 8}, {"C", 32}, {"K", 32}},
        {{"N", 1}, {"H", 12}, {"W", 12}, {"C", 16}, {"K", 48}, {"R", 1}, {"pad", 0}}}},
      {"conv2d_grouped",
       {{{"N", 2}, {"H", 6}, {"W", 6}, {"C", 16}, {"K", 16}, {"G", 16}},
        {{"N", 1}, {"H", 9}, {"W", 9}, {"C", 16}, {"K", 32}, {"G", 4}, {"stride", 2}}}},
      {"softmax", {{{"R", 3}, {"C", 512}}, {{"R", 2}, {"C", 100}, {"V", 2}}}},
      {"layernorm", {{{"R", 3}, {"C", 512}}, {{"R", 2}, {"C", 100}, {"V", 2}}}},
      // Tensor Cores: causal with grouped-query heads; CUDA cores: queries not a multiple of
      // the block's 32, multi-query over (B, H, S, D) buffers.
      {"attention",
       {{{"B", 1}, {"H", 4}, {"HKV", 2}, {"SQ", 64}, {"SK", 80}, {"D", 16}, {"CAUSAL", 1}},
        {{"B", 1}, {"H", 2}, {"HKV", 2}, {"SQ", 40}, {"SK", 48}, {"D", 16}, {"TC", 0}},
        {{"B", 2}, {"H", 4}, {"HKV", 1}, {"SQ", 24}, {"SK", 32}, {"D", 8}, {"CAUSAL", 1},
         {"BSHD", 0}, {"BK", 32}, {"TC", 0}}}},
      // One query over grouped heads; two queries, causal, over (B, H, S, D) buffers.
      {"attention_decode",
       {{{"B", 1}, {"H", 4}, {"HKV", 2}, {"SQ", 1}, {"SK", 256}, {"D", 64}, {"SPLIT", 128}},
        {{"B", 1}, {"H", 2}, {"HKV", 1}, {"SQ", 2}, {"SK", 256}, {"D", 64}, {"SPLIT", 128},
         {"CAUSAL", 1}, {"BSHD", 0}}}},
      // Packed sequences of 64 down to 17 tokens on WMMA, causal; on CUDA cores.
      {"attention_varlen",
       {{{"B", 3}, {"H", 2}, {"HKV", 1}, {"LMAX", 64}, {"MINLEN", 17}, {"D", 16}, {"CAUSAL", 1}},
        {{"B", 2}, {"H", 2}, {"HKV", 2}, {"LMAX", 32}, {"MINLEN", 5}, {"D", 8}, {"TC", 0}}}},
  };
  // Types whose schedules take other shapes: float8 attention (wgmma, rows of 128 bytes).
  const std::map<std::pair<std::string, std::string>, std::vector<ShapeParams>> typed_shapes = {
      {{"attention", "float8_e4m3"},
       {{{"B", 1}, {"H", 2}, {"HKV", 1}, {"SQ", 64}, {"SK", 256}, {"D", 128}, {"TC", 2}}}}};
  for (const auto &[name, entry] : schedule_registry()) {
    auto it = shapes.find(name);
    ASSERT_NE(it, shapes.end()) << "no small shape for registered schedule " << name;
    for (DataType t : entry.dtypes) {
      auto typed = typed_shapes.find({name, t.str()});
      for (const ShapeParams &sh : typed != typed_shapes.end() ? typed->second : it->second) {
        SCOPED_TRACE(name + " " + t.str());
        ScheduledProgram p = entry.build(resolve_shape(entry, sh), t);
        CheckResult r = check_on_cpu(
            p.schedule, p.args, make_check_problem(p.args, p.num_inputs, 1, 0, p.given_inputs));
        EXPECT_TRUE(r.compare.ok) << r.str();
      }
    }
  }
}

namespace {

// Removes every barrier: what a lowering without insert_thread_syncs would produce.
class DropSyncs : public IRMutator {
protected:
  Stmt visit(const Evaluate *op) override {
    if (const auto *c = op->value.as<Call>(); c && c->is_intrinsic(intrinsic::syncthreads))
      return Evaluate::make(0);
    return IRMutator::visit(op);
  }
};

// Removes every cp_async_wait: the tiles are read before their copies are known to be done.
class DropAsyncWaits : public IRMutator {
protected:
  Stmt visit(const Evaluate *op) override {
    if (const auto *c = op->value.as<Call>(); c && c->is_intrinsic(intrinsic::cp_async_wait))
      return Evaluate::make(0);
    return IRMutator::visit(op);
  }
};

// Shifts every store (or asynchronous copy) into shared memory by one tile row: an
// out-of-bounds tile.
class ShiftSharedStores : public IRMutator {
protected:
  Stmt visit(const BufferStore *op) override {
    if (op->buffer.scope() != "shared")
      return IRMutator::visit(op);
    Expr idx = op->indices[0];
    return BufferStore::make(op->buffer, op->value, {idx + make_const(idx.type(), 64)});
  }
  Stmt visit(const Evaluate *op) override {
    const auto *c = op->value.as<Call>();
    if (!c || !c->is_intrinsic(intrinsic::cp_async))
      return IRMutator::visit(op);
    const auto *dst = c->args[0].as<Call>()->args[0].as<BufferLoad>();
    Expr idx = dst->indices[0];
    std::vector<Expr> args = c->args;
    args[0] = Call::make(Handle(), intrinsic::address_of,
                         {BufferLoad::make(dst->buffer, {idx + make_const(idx.type(), 64)})},
                         Call::Intrinsic);
    return Evaluate::make(Call::make(Void(), c->name, args, Call::Intrinsic));
  }
};

std::string error_of(const LoweredFunc &f, DataType dtype) {
  int64_t n = 64 * 64;
  interp::HostBuffer A = interp::HostBuffer::from_doubles(dtype, exact_gemm_values(n, 1));
  interp::HostBuffer B = interp::HostBuffer::from_doubles(dtype, exact_gemm_values(n, 2));
  interp::HostBuffer C(Float(32), n);
  try {
    interp::execute(f, {&A, &B, &C});
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(EndToEnd, BrokenLoweringsAreCaughtByTheExecutor) {
  ScheduledProgram p = gemm_shared(64, 64, 64, Float(32));
  LoweredFunc f = lower(p.schedule, p.args).funcs[0];
  EXPECT_EQ(error_of(f, Float(32)), "");

  LoweredFunc no_sync = f;
  no_sync.body = DropSyncs().mutate(f.body);
  std::string race = error_of(no_sync, Float(32));
  EXPECT_NE(race.find("race"), std::string::npos) << race;
  EXPECT_NE(race.find("shared"), std::string::npos) << race;

  // gemm_shared's tiles are double-buffered with cp.async; without the waits the executor, which
  // lands a copy only when a wait completes it, sees tiles read that were never written.
  LoweredFunc no_wait = f;
  no_wait.body = DropAsyncWaits().mutate(f.body);
  std::string early = error_of(no_wait, Float(32));
  EXPECT_NE(early.find("A.shared"), std::string::npos) << early;
  EXPECT_NE(early.find("uninitialized shared memory"), std::string::npos) << early;

  LoweredFunc oob = f;
  oob.body = ShiftSharedStores().mutate(f.body);
  std::string bounds = error_of(oob, Float(32));
  EXPECT_NE(bounds.find("out-of-bounds write to shared buffer 'A.shared'"), std::string::npos) << bounds;
  EXPECT_NE(bounds.find("thread"), std::string::npos) << bounds;
}

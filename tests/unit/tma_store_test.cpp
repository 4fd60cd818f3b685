// TMA stores of the output through shared memory (Stage::bulk_copy on C after cache_write(C,
// "shared"); gemm_wgmma / gemm_fp8 knob TS): exact against float64 on the CPU executor with
// and without warp roles, persistent with several tiles per block, ragged M (shifted) and N
// (the box clipped at C's edge), narrow and fp8 outputs; the executor catching a missing fence,
// barrier or wait; NVRTC for sm_90a with UTMASTG in the SASS; the errors.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "schedules/Epilogues.h"
#include "schedules/Gemm.h"
#include "schedules/GemmFp8.h"
#include "schedules/GemmWgmma.h"

#include "ExactGemm.h"
#include "SassUtil.h"

#include <gtest/gtest.h>

#include <functional>

using namespace tessel;
using tessel::test::count_of;
using tessel::test::expect_error;

namespace {

// 128 x 128 blocks of two consumer warpgroups, TMA fills, C stored by TMA.
GemmWgmmaTiles store_tiles(bool roles, int persistent_blocks = 0) {
  GemmWgmmaTiles t{.block_m = 128, .block_n = 128, .block_k = 64, .warpgroups_m = 2,
                   .stages = 3, .raster_group = 2, .tma = true, .warp_specialized = roles};
  t.persistent = persistent_blocks > 0;
  t.persistent_blocks = std::max(1, persistent_blocks);
  t.tma_store = true;
  return t;
}

std::string exact(const GemmWgmmaTiles &t, int64_t M, int64_t N, int64_t K) {
  ScheduledProgram p = gemm_wgmma(M, N, K, t);
  return tessel::test::exact_gemm_mismatch(lower(p.schedule, p.args), M, N, K);
}

// The kernel of `m` that stores C by TMA, with `drop` applied to its body.
LoweredModule edited(LoweredModule m, const std::function<Stmt(const Stmt &)> &drop) {
  for (LoweredFunc &f : m.funcs)
    f.body = drop(f.body);
  return m;
}

// Removes every statement calling intrinsic `name` (for which `keep` is false).
class DropCalls : public IRMutator {
public:
  DropCalls(const char *name, std::function<bool(const Seq *, size_t)> where = nullptr)
      : name_(name), where_(std::move(where)) {}

protected:
  Stmt visit(const Evaluate *op) override { // alone under a condition
    const auto *c = op->value.as<Call>();
    return c && c->is_intrinsic(name_) && !where_ ? Evaluate::make(Expr(0)) : Stmt(op);
  }
  Stmt visit(const Seq *op) override {
    std::vector<Stmt> out;
    for (size_t i = 0; i < op->stmts.size(); ++i) {
      const auto *e = op->stmts[i].as<Evaluate>();
      const auto *c = e ? e->value.as<Call>() : nullptr;
      if (c && c->is_intrinsic(name_) && (!where_ || where_(op, i)))
        continue;
      out.push_back(mutate(op->stmts[i]));
    }
    return Seq::make(std::move(out));
  }

private:
  const char *name_;
  std::function<bool(const Seq *, size_t)> where_;
};

bool calls(const Stmt &s, const char *name) {
  bool found = false;
  post_order_visit(s, [&](const IRNode *n) {
    const auto *c = llvm::dyn_cast<Call>(n);
    found |= c && c->is_intrinsic(name);
  });
  return found;
}

std::string run_exact(const LoweredModule &m, int64_t M, int64_t N, int64_t K) {
  return tessel::test::exact_gemm_mismatch(m, M, N, K);
}

} // namespace

// float32 C, exact against float64: warp roles on and off, one tile per block and persistent
// (3 tiles per block), ragged M (the last block shifted inwards) and N (N % 8 != 0: the last
// block in place, its box clipped at C's edge), and 128 x 256 blocks (a box 256 wide).
TEST(TmaStore, GemmWgmmaExactOnTheExecutor) {
  EXPECT_EQ(exact(store_tiles(true), 256, 256, 128), "");
  EXPECT_EQ(exact(store_tiles(false), 256, 256, 128), "");
  EXPECT_EQ(exact(store_tiles(true, 2), 256, 384, 192), "");
  EXPECT_EQ(exact(store_tiles(true, 2), 200, 196, 128), "");
  EXPECT_EQ(exact(store_tiles(false), 200, 196, 64), "");
  GemmWgmmaTiles wide = store_tiles(true, 1);
  wide.block_n = 256;
  wide.stages = 2;
  EXPECT_EQ(exact(wide, 128, 512, 128), "");
  // Operands filled by cp.async (TMA=0, and the tiles of small shapes, whose rows are too narrow
  // for a swizzle): the store still binds the block's threads around C's copy (before, a
  // tessel::Error said threadIdx.x was not bound there: `tessel interpret gemm_wgmma --shape
  // M=200,N=200,K=136,TS=1`).
  GemmWgmmaTiles cp_async = store_tiles(false);
  cp_async.tma = false;
  EXPECT_EQ(exact(cp_async, 256, 256, 128), "");
  GemmWgmmaTiles small = gemm_wgmma_tiles(200, 96, 136);
  ASSERT_FALSE(small.tma) << "the test wants the cp.async fills of a small shape";
  small.tma_store = true;
  EXPECT_EQ(exact(small, 200, 96, 136), "");
}

// bfloat16 and float16 C (the sums rounded into the staging tile) and the fused bias + GELU.
TEST(TmaStore, NarrowOutputsOnTheExecutor) {
  for (DataType out : {BFloat(16), Float(16)}) {
    ScheduledProgram p = gemm_wgmma(256, 384, 128, store_tiles(true, 2), Float(16), out);
    CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs);
    EXPECT_TRUE(r.compare.ok) << out << ": " << r.str();
  }
  ScheduledProgram f = gemm_wgmma_fused(256, 256, 128, store_tiles(true, 1), Float(16),
                                        Float(16), bias_gelu_epilogue(Float(16)));
  CheckResult r = check_on_cpu(f.schedule, f.args, f.num_inputs);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

// gemm_fp8's bfloat16 and float32 outputs stored by TMA, with and without warp roles.
TEST(TmaStore, GemmFp8OnTheExecutor) {
  for (DataType out : {BFloat(16), Float(32)})
    for (bool roles : {true, false}) {
      GemmWgmmaTiles t = gemm_fp8_tiles(256, 256, 256, Fp8Scales::BlockWise);
      t.warp_specialized = roles;
      t.tma_store = true;
      t.stages = 2;
      ScheduledProgram p =
          gemm_fp8(256, 256, 256, t, Float8E4M3(), Fp8Scales::BlockWise, out);
      std::string ir = to_string(lower(p.schedule, p.args));
      EXPECT_EQ(count_of(ir, "@tma_store("), 1) << ir;
      CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs);
      EXPECT_TRUE(r.compare.ok) << out << (roles ? " roles: " : ": ") << r.str();
    }
}

// The protocol in the IR: without a tile loop, commit and wait(0) at once; with warp roles
// the consumers' barriers are the named barrier, never a syncthreads (the producer is not
// there), and no barrier is added beyond the protocol's two per tile.
TEST(TmaStore, LoweredProtocol) {
  ScheduledProgram one = gemm_wgmma(256, 256, 128, store_tiles(true));
  std::string ir = to_string(lower(one.schedule, one.args));
  EXPECT_NE(ir.find("@tma_store_commit()\n      @tma_store_wait(0)"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("tma_store_wait_read"), std::string::npos) << ir;
  ScheduledProgram p = gemm_wgmma(256, 384, 128, store_tiles(true, 2));
  ir = to_string(lower(p.schedule, p.args));
  std::string consumers = ir.substr(ir.find("} else {"));
  EXPECT_EQ(count_of(consumers, "@named_barrier_sync(1, 256)"), 2) << ir;
  EXPECT_EQ(count_of(consumers, "@syncthreads()"), 0) << ir;
  EXPECT_EQ(count_of(ir, "@tma_store_wait_read(0)"), 1) << ir;
  EXPECT_EQ(count_of(ir, "@tma_store_wait(0)"), 1) << ir;
}

// The executor's model: each broken step of the protocol is an error naming it.
TEST(TmaStore, ExecutorCatchesABrokenProtocol) {
  const int64_t M = 256, N = 384, K = 128;
  ScheduledProgram p = gemm_wgmma(M, N, K, store_tiles(true, 2));
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(run_exact(m, M, N, K), "");
  // No proxy fence by the threads that wrote the staging tile.
  expect_error([&] { run_exact(edited(m, [](const Stmt &s) {
                       return DropCalls(intrinsic::fence_proxy_async).mutate(s);
                     }), M, N, K); },
               {"interp", "tma_store", "no fence_proxy_async since"});
  // No barrier between the writes and the issue.
  auto before_store = [](const Seq *q, size_t i) {
    return i + 1 < q->stmts.size() && calls(q->stmts[i + 1], intrinsic::tma_store);
  };
  expect_error([&] { run_exact(edited(m, [&](const Stmt &s) {
                       return DropCalls(intrinsic::named_barrier_sync, before_store).mutate(s);
                     }), M, N, K); },
               {"interp", "tma_store", "which no thread has written", "barrier"});
  // The next tile writes the staging tile while the last store may still read it.
  expect_error([&] { run_exact(edited(m, [](const Stmt &s) {
                       return DropCalls(intrinsic::tma_store_wait_read).mutate(s);
                     }), M, N, K); },
               {"interp", "while the tma_store", "may still read it", "tma_store_wait_read"});
  // The block ends with its last store not awaited.
  expect_error([&] { run_exact(edited(m, [](const Stmt &s) {
                       return DropCalls(intrinsic::tma_store_wait).mutate(s);
                     }), M, N, K); },
               {"interp", "was not awaited", "tma_store_wait(0)"});
}

// NVRTC for sm_90a: the default 4096^3 tiles, persistent, C in float16 and float32 (the ring
// made shallower to fit the staging tile), no spills; UTMASTG in the SASS when cuobjdump is
// there.
TEST(TmaStore, CompilesForSm90aWithUtmastg) {
  for (bool half : {true, false}) {
    ShapeParams knobs = {{"M", 4096}, {"N", 4096}, {"K", 4096}, {"TS", 1}, {"P", 1},
                         {"TMA", 1},  {"G", 8},    {"SW", 128}, {"C16", half ? 1 : 0}};
    GemmWgmmaTiles t = gemm_wgmma_tiles_from_knobs(knobs);
    EXPECT_EQ(t.stages, half ? 3 : 2);
    ScheduledProgram p =
        gemm_wgmma(512, 512, 512, t, Float(16), half ? Float(16) : Float(32));
    LoweredModule m = lower(p.schedule, p.args);
    std::string cuda = codegen_cuda(m);
    EXPECT_NE(cuda.find("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"),
              std::string::npos);
    CompiledKernel k = tessel::test::compile_for_sm90(m, cuda, "gemm_wgmma_tma_store.cu");
    ASSERT_FALSE(k.cubin.empty()) << k.log;
    EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
    auto sass = tessel::test::sass_of(k.cubin, "tma_store");
    if (!sass) {
      GTEST_SKIP() << "no cuobjdump (set CUOBJDUMP) to check the SASS";
    }
    EXPECT_NE(sass->find("UTMASTG"), std::string::npos) << *sass;
    EXPECT_NE(sass->find("UTMALDG"), std::string::npos);
    EXPECT_EQ(sass->find("LDL"), std::string::npos);
  }
}

TEST(TmaStore, Errors) {
  // Rows that TMA cannot address.
  expect_error([] { gemm_wgmma(256, 204, 128, store_tiles(true), Float(16), BFloat(16)); },
               {"gemm_wgmma", "TS=1", "whole 16-byte units", "N=204", "multiple of 8"});
  // A staging tile that does not fit beside the ring the tiles ask for.
  expect_error(
      [] {
        GemmWgmmaTiles t = store_tiles(true);
        t.block_n = 256;
        t.stages = 4;
        gemm_wgmma(256, 256, 128, t);
      },
      {"gemm_wgmma", "stages the 128x256 block", "131072 bytes of float32", "227 KiB",
       "knob S"});
  expect_error(
      [] {
        GemmWgmmaTiles t = store_tiles(true);
        t.split_k = 2;
        gemm_wgmma(256, 256, 256, t);
      },
      {"gemm_wgmma", "TS=1", "split_k = 1"});
  // bulk_copy on an output that does not copy a shared stage.
  expect_error(
      [] {
        Tensor A = placeholder({64, 64}, Float(32), "A");
        Tensor C = compute({64, 64}, [&](Var i, Var j) { return A(i, j) + 1.0f; }, "C");
        Schedule s = create_schedule({C});
        s[C].bulk_copy();
        lower(s, {A, C});
      },
      {"bulk_copy", "stage 'C' is stored by TMA", "not an element of a shared tile",
       "cache_write(C, \"shared\")"});
  expect_error(
      [] {
        Tensor A = placeholder({64, 64}, Float(32), "A");
        Tensor C = compute({64, 64}, [&](Var i, Var j) { return A(i, j) + 1.0f; }, "C");
        Schedule s = create_schedule({C});
        s[A].bulk_copy();
      },
      {"bulk_copy", "placeholder"});
}

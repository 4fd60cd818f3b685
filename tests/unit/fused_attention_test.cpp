// Attention fused into one kernel with a fold (schedules/Attention.cpp, the registered
// `attention`): the online softmax carried over blocks of keys, its running max m, sum l and
// output o (states of different shapes: per row, and per row and head dimension) updated once a
// block with the rescale exp(m_old - m_new); a thread per query, the states in registers, the
// block's tensors computed at the fold's axis. Checked on the executor against float64 and,
// where there is a GPU, on it. Causal attention skips the blocks above the diagonal through the
// fold's `where` (ReduceBounds bounds the fold loop), the diagonal block masked in the scores.
#include "AttentionReference.h"
#include "SassUtil.h"
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "runtime/Device.h"
#include "runtime/Nvrtc.h"
#include "runtime/interp/Executor.h"
#include "schedules/GemmWgmma.h"
#include "schedules/Registry.h"

#include <gtest/gtest.h>

#include <regex>

#include <cmath>

using namespace tessel;
using tessel::test::expect_error;

namespace {

struct FusedAttention {
  Tensor Q, K, V, O;
  Schedule s;

  FusedAttention(AttentionParams a, int64_t Bk, DataType dtype = Float(16),
                 bool tensor_cores = false, int64_t block_queries = 32) {
    a.block_keys = Bk;
    a.tensor_cores = tensor_cores;
    a.block_queries = block_queries;
    ScheduledProgram p = attention(a, dtype);
    s = p.schedule;
    Q = p.args[0];
    K = p.args[1];
    V = p.args[2];
    O = p.args[3];
  }
};

std::string describe(const AttentionShape &a, int64_t Bk) {
  return "B=" + std::to_string(a.B) + " Sq=" + std::to_string(a.Sq) +
         " Sk=" + std::to_string(a.Sk) + " H=" + std::to_string(a.H) +
         " Hkv=" + std::to_string(a.Hkv) + " D=" + std::to_string(a.D) +
         " Bk=" + std::to_string(Bk) + (a.causal ? " causal" : "");
}

// Each head dim the issue names (64, 128, 256) among them, at sizes the executor runs quickly.
const AttentionShape kShapes[] = {{1, 32, 32, 2, 2, 16, false}, {2, 32, 32, 4, 2, 8, true},
                                  {1, 16, 48, 4, 1, 16, true},  {1, 16, 16, 2, 2, 64, false},
                                  {1, 16, 32, 2, 1, 128, true}, {1, 16, 16, 1, 1, 256, true}};

// attention's wgmma schedule (TC=2): the step and the fold in a warpgroup's registers.
// K's and V's ring by TMA or cp.async; two warpgroups in turns (ping_pong) or not; the TMA
// ring's slack; a producer warpgroup filling the ring (warp_roles).
struct WgmmaOptions {
  bool tma = false, ping_pong = false;
  int64_t slack = 0;
  bool warp_roles = false;
  bool accumulate_o = false;
  bool overlap = false; // implies accumulate_o
};
ScheduledProgram wgmma_attention(AttentionParams a, int64_t Bk, int64_t stages = 2,
                                 DataType dtype = Float(16), int64_t block_queries = 64,
                                 WgmmaOptions o = {}) {
  a.block_keys = Bk;
  a.block_queries = block_queries;
  a.tensor_cores = a.wgmma = true;
  a.stages = stages;
  a.tma = o.tma;
  a.ping_pong = o.ping_pong;
  a.slack = o.slack;
  a.warp_roles = o.warp_roles;
  a.accumulate_o = o.accumulate_o || o.overlap;
  a.overlap = o.overlap;
  return attention(a, dtype);
}

// The largest |got - want| / (1 + |want|) of `got`, O of packed sequences (token, head,
// column), against attention computed per sequence in float64 from packed Q (token, H, D), K
// and V (token, Hkv, D) and the sequences' offsets (B + 1); causal: each query sees its
// sequence's keys up to itself. `lse`: also each row's natural logsumexp (H, tokens).
double packed_attention_error(const std::vector<double> &offsets, int64_t H, int64_t Hkv,
                              int64_t D, bool causal, const std::vector<double> &q,
                              const std::vector<double> &k, const std::vector<double> &v,
                              const std::vector<double> &got,
                              const std::vector<double> *lse = nullptr) {
  auto at = [&](const std::vector<double> &x, int64_t heads, int64_t tok, int64_t hh,
                int64_t e) { return x[size_t((tok * heads + hh) * D + e)]; };
  const int64_t g = H / Hkv;
  const double scale = 1.0 / std::sqrt(double(D));
  double worst = 0;
  for (size_t b = 0; b + 1 < offsets.size(); ++b) {
    const int64_t begin = int64_t(offsets[b]), len = int64_t(offsets[b + 1]) - begin;
    for (int64_t hh = 0; hh < H; ++hh)
      for (int64_t i = 0; i < len; ++i) {
        const int64_t seen = causal ? i + 1 : len;
        std::vector<double> w(static_cast<size_t>(seen));
        double mx = -INFINITY, sum_w = 0;
        for (int64_t j = 0; j < seen; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < D; ++e)
            dot += at(q, H, begin + i, hh, e) * at(k, Hkv, begin + j, hh / g, e);
          mx = std::max(mx, w[size_t(j)] = dot * scale);
        }
        for (double &x : w)
          sum_w += (x = std::exp(x - mx));
        if (lse) {
          const double want = mx + std::log(sum_w);
          const double x = (*lse)[size_t(hh * int64_t(offsets.back()) + begin + i)];
          worst = std::max(worst, std::abs(x - want) / (1 + std::abs(want)));
        }
        for (int64_t e = 0; e < D; ++e) {
          double want = 0;
          for (int64_t j = 0; j < seen; ++j)
            want += w[size_t(j)] / sum_w * at(v, Hkv, begin + j, hh / g, e);
          double x = got[size_t(((begin + i) * H + hh) * D + e)];
          worst = std::max(worst, std::abs(x - want) / (1 + std::abs(want)));
        }
      }
  }
  return worst;
}

} // namespace

// The fold's float64 reference is attention's (the textbook's, computed here), and the fused
// kernel computes it on the executor: non-causal, causal with grouped-query heads, and
// multi-query with more keys than queries, at head dims 8 to 256.
TEST(FusedAttention, MatchesTheTextbookOnTheExecutor) {
  for (const AttentionShape &a : kShapes) {
    SCOPED_TRACE(describe(a, 8));
    FusedAttention att(a, 8);
    CheckProblem p = make_check_problem({att.Q, att.K, att.V, att.O}, 3, 7);
    std::vector<double> want =
        textbook_attention(a, p.inputs[0].values, p.inputs[1].values, p.inputs[2].values);
    ASSERT_EQ(p.reference.size(), want.size());
    double worst = 0;
    for (size_t e = 0; e < want.size(); ++e) // O is rounded to float16 by the definition
      worst = std::max(worst, std::abs(p.reference[e] - want[e]) / (1 + std::abs(want[e])));
    EXPECT_LT(worst, 1.0 / 1024);
    CheckResult r = check_on_cpu(att.s, {att.Q, att.K, att.V, att.O}, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

// The step's two contractions on WMMA (the registry's default): the same checks, at shapes whose
// queries come in blocks of 32 and head dims and key blocks in 16s.
TEST(FusedAttention, TensorCoreStepMatchesOnTheExecutor) {
  for (const AttentionShape &a :
       {AttentionShape{1, 32, 32, 2, 2, 16, false}, AttentionShape{2, 32, 64, 4, 2, 32, true},
        AttentionShape{1, 32, 48, 4, 1, 64, true}, AttentionShape{1, 32, 32, 1, 1, 128, false}}) {
    SCOPED_TRACE(describe(a, 16) + " WMMA");
    FusedAttention att(a, 16, Float(16), /*tensor_cores=*/true);
    CheckResult r = check_on_cpu(att.s, {att.Q, att.K, att.V, att.O}, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  // Blocks of 64 and 128 queries: a warp per 32 of them, sharing the tiles of K and V.
  for (int64_t bq : {64, 128}) {
    AttentionShape a{1, 128, 160, 2, 1, 32, true};
    SCOPED_TRACE(describe(a, 16) + " WMMA, " + std::to_string(bq) + " queries a block");
    FusedAttention att(a, 16, Float(16), /*tensor_cores=*/true, bq);
    CheckResult r = check_on_cpu(att.s, {att.Q, att.K, att.V, att.O}, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  expect_error([] { attention({1, 40, 48, 2, 2, 16, false, true, 16, 32, true}, Float(16)); },
               {"a multiple of it", "Sq = 40", "TC=0"});
}

// One kernel: the fold's states are registers of each thread, its key loop carries them, and
// the block's tensors are computed inside it; causal, the loop stops at the block's diagonal.
// The step on wgmma (TC=2), a warpgroup per 64 queries (one or two a block): S = Q K^T, the
// softmax and the fold's
// states in its registers, P as P V's A operand from registers. On the executor against
// float64: head dims 64, 128 and 256, grouped and multi-query heads, causal (the mask per
// register, the row max and sum over the visible keys reduced by the layout), (B, H, S, D)
// buffers, bfloat16, key blocks of 32 to 128, K's and V's tiles copied at each step or in rings
// of 2 and 3.
TEST(FusedAttention, WgmmaStepMatchesOnTheExecutor) {
  struct Case {
    AttentionShape shape;
    int64_t Bk, stages;
    DataType dtype;
    bool tma;
  };
  AttentionShape bhsd{1, 64, 128, 2, 1, 64, false};
  bhsd.bshd = false;
  for (const Case &c : {Case{{1, 128, 128, 2, 2, 64, false}, 64, 2, Float(16), false},
                        Case{{1, 64, 256, 4, 2, 128, false}, 128, 1, Float(16), false},
                        Case{{1, 64, 128, 2, 1, 256, false}, 32, 3, BFloat(16), false},
                        Case{{1, 64, 128, 2, 1, 256, false}, 32, 3, BFloat(16), true},
                        Case{{2, 128, 192, 2, 1, 64, true}, 64, 2, Float(16), false},
                        Case{{2, 128, 192, 2, 1, 64, true}, 64, 2, Float(16), true},
                        Case{{1, 128, 128, 2, 2, 128, true}, 32, 2, BFloat(16), true},
                        Case{bhsd, 64, 2, Float(16), false},
                        Case{bhsd, 64, 2, Float(16), true}}) {
    SCOPED_TRACE(describe(c.shape, c.Bk) + " wgmma, " + std::to_string(c.stages) + " stages" +
                 (c.tma ? " by TMA" : "") + (c.dtype == BFloat(16) ? ", bfloat16" : "") +
                 (c.shape.bshd ? "" : ", BHSD"));
    ScheduledProgram p = wgmma_attention(c.shape, c.Bk, c.stages, c.dtype, 64, {c.tma});
    CheckResult r = check_on_cpu(p.schedule, p.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  // Two warpgroups a block (128 queries) sharing K's and V's tiles, each its own fold; causal
  // with key blocks of 128 too (a query block's first block is its diagonal: the next block's
  // prefetch, not taken there, binds threadIdx.y inside its branch); the ring by cp.async or
  // TMA, the warpgroups' GEMMs in turns (ping-pong) or not.
  struct Block128 {
    bool causal;
    int64_t bk;
    WgmmaOptions o;
  };
  // A producer warpgroup of its own filling the TMA ring (warp_roles), with and without the
  // turns.
  for (const Block128 &c : {Block128{false, 64, {}}, Block128{false, 64, {true, false}},
                            Block128{true, 64, {}}, Block128{true, 64, {true, true}},
                            Block128{true, 128, {}}, Block128{true, 128, {true, false}},
                            Block128{true, 128, {false, true}},
                            Block128{true, 128, {true, false, 0, true}},
                            Block128{false, 64, {true, true, 0, true}}}) {
    AttentionShape a{1, 256, 256, 2, 1, 64, c.causal};
    SCOPED_TRACE(describe(a, c.bk) + " wgmma, 128 queries a block" +
                 (c.o.tma ? ", TMA" : "") + (c.o.ping_pong ? ", ping-pong" : "") +
                 (c.o.warp_roles ? ", producer warpgroup" : ""));
    ScheduledProgram p = wgmma_attention(a, c.bk, 2, Float(16), 128, c.o);
    CheckResult r = check_on_cpu(p.schedule, p.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  // A ring of 3 with a slack of 1: a slot refilled a key block after both warpgroups released
  // it, the warpgroups in turns; causal with 4 key blocks a block.
  {
    AttentionShape a{1, 256, 512, 2, 1, 64, true};
    SCOPED_TRACE(describe(a, 64) + " wgmma, 128 queries a block, TMA ring of 3, slack 1");
    ScheduledProgram p = wgmma_attention(a, 64, 3, Float(16), 128, {true, true, 1});
    CheckResult r = check_on_cpu(p.schedule, p.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  // One consumer warpgroup (64 queries a block) and its producer.
  {
    AttentionShape a{1, 128, 192, 2, 1, 128, true};
    SCOPED_TRACE(describe(a, 64) + " wgmma, TMA, producer warpgroup");
    ScheduledProgram p = wgmma_attention(a, 64, 2, Float(16), 64, {true, false, 0, true});
    CheckResult r = check_on_cpu(p.schedule, p.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  expect_error([] { wgmma_attention({1, 96, 96, 1, 1, 64, false}, 32); },
               {"a multiple of it", "Sq = 96", "TC=1"});
  expect_error([] { wgmma_attention({1, 64, 64, 1, 1, 96, false}, 32); },
               {"head dim that is a multiple of 64 up to 256", "D = 96"});
  expect_error([] { wgmma_attention({1, 64, 64, 1, 1, 64, false}, 32, 1, Float(16), 64, {true}); },
               {"TMA fills", "2 or more stages", "1 stage"});
  expect_error(
      [] { wgmma_attention({1, 64, 64, 1, 1, 64, false}, 32, 2, Float(16), 64, {false, true}); },
      {"ping-pong (PP=1)", "BQ=128", "64 queries a block"});
  expect_error(
      [] {
        wgmma_attention({1, 64, 64, 1, 1, 64, false}, 32, 2, Float(16), 64, {true, false, 1});
      },
      {"slack of 1", "needs 3 stages", "2 stage(s)"});
  expect_error(
      [] {
        wgmma_attention({1, 64, 64, 1, 1, 64, false}, 32, 2, Float(16), 64,
                        {false, false, 0, true});
      },
      {"warp roles (WS=1", "TMA ring"});
}

// The registry's path (TC=3, its default): wgmma on Hopper where its schedule takes the shape,
// with the blocks measured fastest there (128 queries, 128 keys at D <= 128); WMMA elsewhere and
// for shapes wgmma does not take; blocks given are kept.
// The rows' logsumexp (LSE, natural log, float32) beside O, for a backward pass: on CUDA cores
// and WMMA (a thread per query) and on wgmma (a warpgroup's rows; two warpgroups a block),
// causal, grouped-query; both outputs checked against float64.
TEST(FusedAttention, RowLogsumexpForTheBackwardPass) {
  auto with_lse = [](AttentionParams a) {
    a.lse = true;
    return a;
  };
  for (bool tensor_cores : {false, true}) {
    AttentionParams a = with_lse({1, 64, 96, 4, 2, 32, true});
    a.block_keys = 16;
    a.tensor_cores = tensor_cores;
    a.block_queries = 64;
    SCOPED_TRACE(describe(a, 16) + (tensor_cores ? " WMMA" : " CUDA cores"));
    ScheduledProgram p = attention(a, Float(16));
    ASSERT_EQ(p.args.size(), 5u);
    EXPECT_EQ(p.args.back().name(), "LSE");
    CheckResult r = check_on_cpu(p.schedule, p.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
    EXPECT_EQ(r.outputs.size(), 2u) << r.str();
  }
  for (int64_t bq : {64, 128}) {
    AttentionShape a = with_lse({1, 128, 192, 4, 2, 64, true});
    SCOPED_TRACE(describe(a, 64) + " wgmma, " + std::to_string(bq) + " queries a block");
    ScheduledProgram p = wgmma_attention(a, 64, 2, Float(16), bq, {true});
    CheckResult r = check_on_cpu(p.schedule, p.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
    EXPECT_NE(r.str().find("LSE: ok"), std::string::npos) << r.str();
  }
}

TEST(FusedAttention, RegistryPathByGpu) {
  AttentionParams a;
  a.B = 8, a.H = 16, a.Hkv = 16, a.Sq = 4096, a.Sk = 4096, a.D = 128;
  AttentionParams h = attention_path(a, 3, 0, 0, /*hopper=*/true);
  EXPECT_TRUE(h.wgmma && h.tensor_cores && h.tma);
  EXPECT_EQ(h.block_queries, 128);
  EXPECT_EQ(h.block_keys, 128);
  AttentionParams w = attention_path(a, 3, 0, 0, /*hopper=*/false);
  EXPECT_TRUE(w.tensor_cores && !w.wgmma && !w.tma);
  EXPECT_EQ(w.block_queries, 64);
  EXPECT_EQ(w.block_keys, 16);
  a.D = 256;
  EXPECT_EQ(attention_path(a, 3, 0, 0, true).block_keys, 64);
  EXPECT_EQ(attention_path(a, 3, 0, 0, true).block_queries, 128);
  a.causal = true; // 128 queries a block spill registers there
  EXPECT_EQ(attention_path(a, 3, 0, 0, true).block_queries, 64);
  a.causal = false;
  a.D = 16;
  EXPECT_FALSE(attention_path(a, 3, 0, 0, true).wgmma);
  a.D = 64;
  EXPECT_EQ(attention_path(a, 3, 0, 0, true).block_queries, 64);
  EXPECT_EQ(attention_path(a, 3, 0, 0, true).block_keys, 128);
  a.D = 128, a.Sq = 192;
  EXPECT_EQ(attention_path(a, 3, 0, 0, true).block_queries, 64);
  EXPECT_EQ(attention_path(a, 2, 64, 32, true).block_keys, 32);
  EXPECT_FALSE(attention_path(a, 0, 0, 0, true).tensor_cores);
  // The registry builds the wgmma kernel on a Hopper GPU, the WMMA kernel elsewhere and without
  // a GPU.
  const ScheduleEntry &e = find_schedule("attention");
  ScheduledProgram p = e.build(resolve_shape(e, {}), Float(16));
  EXPECT_NE(to_string(lower(p.schedule, p.args)).find(hopper_gpu() ? "@wgmma_mma(" : "wmma_mma_sync"),
            std::string::npos);
}

// The registry's kernel at D = 256 on Hopper: not causal, two warpgroups in turns (128 queries
// a block) with a producer warpgroup, P V onto o; causal, 64 queries a block with the overlap
// inside the warpgroup and the producer, in order. The knobs given are kept. Both compile for
// sm_90a without spills (a separate P V accumulator spilled 572 bytes) and match float64 on
// the executor.
TEST(FusedAttention, RegistryHeadDim256) {
  const ScheduleEntry &e = find_schedule("attention");
  auto choice = [&](ShapeParams over) {
    over.insert({{"TC", 2}, {"D", 256}, {"H", 1}, {"HKV", 1}, {"SQ", 128}, {"SK", 128}});
    return attention_choice(resolve_shape(e, over), /*hopper=*/true);
  };
  AttentionParams turns = choice({});
  EXPECT_TRUE(turns.wgmma && turns.tma && turns.accumulate_o && turns.warp_roles &&
              turns.ping_pong && !turns.overlap);
  EXPECT_EQ(turns.block_queries, 128);
  EXPECT_EQ(turns.block_keys, 64);
  EXPECT_EQ(turns.stages, 2);
  AttentionParams causal = choice({{"CAUSAL", 1}});
  EXPECT_TRUE(causal.overlap && causal.accumulate_o && causal.warp_roles && !causal.ping_pong &&
              !causal.reverse_blocks);
  EXPECT_EQ(causal.block_queries, 64);
  EXPECT_EQ(causal.stages, 3);
  AttentionParams given = choice({{"ACC", 0}, {"PP", 0}});
  EXPECT_TRUE(!given.accumulate_o && !given.ping_pong && given.warp_roles);
  EXPECT_TRUE(choice({{"BQ", 64}}).overlap); // one warpgroup: the overlap, not the turns
  EXPECT_FALSE(choice({{"TC", 1}}).accumulate_o); // WMMA: no o to accumulate onto

  for (const AttentionParams &a : {turns, causal}) {
    SCOPED_TRACE(a.causal ? "causal" : "not causal");
    ScheduledProgram p = attention(a, Float(16));
    CheckResult r = check_on_cpu(p.schedule, p.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
    AttentionParams big = a;
    big.B = 4, big.H = big.Hkv = 16, big.Sq = big.Sk = 4096;
    ScheduledProgram q = attention(big, Float(16));
    CompileOptions o;
    o.arch = "sm_90a";
    CompiledKernel k = nvrtc_compile(codegen_cuda(lower(q.schedule, q.args)), nvrtc_options(o),
                                     "attention_d256.cu");
    ASSERT_FALSE(k.cubin.empty()) << k.log;
    EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
  }
}

// Its kernel: no shared memory for S or P (registers: the scores, the rows' values, P's A
// operand); NVRTC compiles it for sm_90a without spills at D = 64 and 128.
// float8 (e4m3) Q, K, V on the wgmma schedule with their descale factors: S on the k32 wgmma,
// P rounded to e4m3 into the A registers with each 32 keys in the order a thread holds them,
// P V against VT (V transposed by a first kernel, its keys in that order), O in float16. On
// the executor against float64 (which rounds P to e4m3 as the definition says): causal and
// not, grouped heads, the ring by cp.async or TMA, with a producer warpgroup and the overlap of
// steps; the definition against the textbook's; what it refuses; the CUDA for sm_90a.
TEST(FusedAttention, Float8OnWgmma) {
  struct Case {
    AttentionShape shape;
    WgmmaOptions o;
    int64_t block_queries;
  };
  for (const Case &c : {Case{{1, 128, 256, 2, 1, 128, false}, {}, 64},
                        Case{{1, 128, 256, 2, 1, 128, true}, {.tma = true}, 64},
                        Case{{1, 128, 256, 4, 2, 128, false},
                             {.tma = true, .warp_roles = true, .overlap = true}, 128}}) {
    SCOPED_TRACE(describe(c.shape, 128) + (c.o.tma ? " by TMA" : "") +
                 (c.o.overlap ? ", overlapped" : ""));
    ScheduledProgram p =
        wgmma_attention(c.shape, 128, c.o.overlap ? 3 : 2, Float8E4M3(), c.block_queries, c.o);
    LoweredModule m = lower(p.schedule, p.args);
    EXPECT_EQ(m.funcs.size(), 2u) << to_string(m); // VT's kernel, then the fold's
    // The definition's float64 reference against the textbook's attention on the same inputs,
    // apart by P's rounding to e4m3 only (with VT's keys in plain order, P's columns meeting
    // other keys' values: 0.036-0.047). Q, K, V, q_descale, k_descale, v_descale, O: the
    // textbook's scores of Q dq dk and K, its output times dv (descales chosen: random ones
    // sharpen the softmax, where P's rounding to e4m3 no longer averages out).
    ASSERT_EQ(p.num_inputs, 6u);
    CheckProblem pb =
        make_check_problem(p.args, p.num_inputs, 5, 0, {{3, {0.5}}, {4, {1.5}}, {5, {0.75}}});
    const double dqk = pb.inputs[3].values[0] * pb.inputs[4].values[0],
                 dv = pb.inputs[5].values[0];
    std::vector<double> q = pb.inputs[0].values;
    for (double &x : q)
      x *= dqk;
    std::vector<double> want =
        textbook_attention(c.shape, q, pb.inputs[1].values, pb.inputs[2].values);
    for (double &x : want)
      x *= dv;
    ASSERT_EQ(pb.reference.size(), want.size());
    double worst = 0;
    for (size_t e = 0; e < want.size(); ++e)
      worst = std::max(worst, std::abs(pb.reference[e] - want[e]) / (1 + std::abs(want[e])));
    EXPECT_LT(worst, 1.0 / 64);
    CheckResult r = check_on_cpu(p.schedule, p.args, pb);
    EXPECT_TRUE(r.compare.ok) << r.str();
    // The check's tolerance allows P's rounding to e4m3 (4 bits) a different side in the
    // reference, which the same S makes rare: the error is O's rounding (3e-5 at |O| ~ 0.05),
    // where keys out of the registers' order are off by O's own size.
    EXPECT_LT(r.compare.max_abs_error, 1e-3) << r.str();
  }
  expect_error([] { wgmma_attention({1, 128, 256, 2, 1, 64, false}, 128, 2, Float8E4M3()); },
               {"float8 attention", "multiples of 128", "D = 64"});
  expect_error([] { attention({1, 128, 256, 2, 1, 128, false}, Float8E4M3()); },
               {"float8 attention takes the wgmma schedule (TC=2)", "got another path"});
  expect_error([] { attention_decode({1, 1, 256, 2, 2, 128, false}, Float8E4M3()); },
               {"decoding takes float16 or bfloat16", "float8_e4m3"});
  expect_error([] { attention_decode_wgmma({1, 1, 256, 2, 2, 128, false}, Float8E4M3()); },
               {"float8 attention", "not packed sequences or decoding"});
  // The default's form at D = 128 (128 queries a block, the overlap, a producer warpgroup)
  // compiled for sm_90a: both GEMMs on QGMMA, P V's A from registers, no local memory.
  ScheduledProgram p = wgmma_attention({2, 256, 512, 4, 2, 128, false}, 128, 3, Float8E4M3(),
                                       128, {.tma = true, .warp_roles = true, .overlap = true});
  LoweredModule m = lower(p.schedule, p.args);
  CompiledKernel k = tessel::test::compile_for_sm90(m, codegen_cuda(m), "attention_fp8.cu");
  ASSERT_FALSE(k.cubin.empty()) << k.log;
  if (std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "attention")) {
    EXPECT_TRUE(std::regex_search(
        *sass, std::regex(R"(QGMMA\.64x128x32\.F32\.E4M3\.E4M3 R\d+, R\d+, gdesc)")))
        << *sass;
    EXPECT_TRUE(std::regex_search(
        *sass, std::regex(R"(QGMMA\.64x128x32\.F32\.E4M3\.E4M3 R\d+, gdesc)")))
        << *sass;
    for (const char *local : {"LDL", "STL"})
      EXPECT_EQ(sass->find(local), std::string::npos) << local;
  }
}

TEST(FusedAttention, WgmmaStepKeepsTheSoftmaxInRegisters) {
  ScheduledProgram p = wgmma_attention({1, 128, 256, 2, 2, 128, true}, 64);
  LoweredModule m = lower(p.schedule, p.args);
  const std::string ir = to_string(m);
  for (const char *decl : {"allocate(S, float32, [4096]), storage_scope = wgmma.accumulator;",
                           "allocate(m, float32, [64]), storage_scope = wgmma.rows;",
                           "allocate(Pq, float16, [4096]), storage_scope = wgmma.matrix_a;",
                           "allocate(o, float32, [8192]), storage_scope = wgmma.accumulator;"})
    EXPECT_NE(ir.find(decl), std::string::npos) << decl << "\n" << ir;
  EXPECT_NE(ir.find("@wgmma_mma_rs(PV, 0, 128, Pq, 3, "), std::string::npos) << ir;
  EXPECT_NE(ir.find("shfl_xor("), std::string::npos) << ir;
  for (int64_t D : {64, 128}) {
    ScheduledProgram q = wgmma_attention({8, 4096, 4096, 16, 16, D, false}, D == 64 ? 128 : 64);
    LoweredModule mq = lower(q.schedule, q.args);
    CompileOptions o;
    o.arch = "sm_90a";
    CompiledKernel k = nvrtc_compile(codegen_cuda(mq), nvrtc_options(o), "attention_wgmma.cu");
    ASSERT_FALSE(k.cubin.empty()) << k.log;
    EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << "D=" << D << "\n" << k.log;
  }
}

// The ring by TMA: one thread issues K's and V's boxes on the slot's full mbarrier, every
// thread releases the slot on its empty one, no block-wide barrier in the key loop. Ping-pong:
// each wgmma group waits for the warpgroup's turn and gives the other its turn when issued,
// warpgroup 0 first, warpgroup 1's last turn taken after the loop.
TEST(FusedAttention, TmaRingAndPingPongInTheKeyLoop) {
  ScheduledProgram p =
      wgmma_attention({1, 256, 512, 2, 2, 64, false}, 64, 2, Float(16), 128, {true, true});
  const std::string ir = to_string(lower(p.schedule, p.args));
  const size_t loop = ir.find("for (t: int32, 0, 8) {"), after = ir.rfind("@mbarrier_arrive(");
  ASSERT_NE(loop, std::string::npos) << ir;
  ASSERT_NE(after, std::string::npos) << ir;
  const std::string body = ir.substr(loop, after - loop);
  for (const char *s : {"@tma_load(K_tmap, ", "@tma_load(V_tmap, ", "@mbarrier_wait(",
                        "@named_barrier_sync(threadIdx.y + 5, 256)\n",
                        "@named_barrier_arrive(6 - threadIdx.y, 256)"})
    EXPECT_NE(body.find(s), std::string::npos) << s << "\n" << ir;
  EXPECT_EQ(body.find("@syncthreads()"), std::string::npos) << ir;
  const std::string before = ir.substr(0, loop), rest = ir.substr(after);
  EXPECT_NE(before.find("if (threadIdx.y == 1) {\n    @named_barrier_arrive(5, 256)"),
            std::string::npos) << ir;
  EXPECT_NE(rest.find("if (threadIdx.y == 0) {\n    @named_barrier_sync(5, 256)"),
            std::string::npos) << ir;
  // With a ring of 3 and a slack of 1, iteration t refills the slot of t - 2 (for t + 1): the
  // slot of t - 1 may still be read by the other warpgroup.
  ScheduledProgram q =
      wgmma_attention({1, 256, 512, 2, 2, 64, false}, 64, 3, Float(16), 128, {true, true, 1});
  const std::string slack_ir = to_string(lower(q.schedule, q.args));
  EXPECT_NE(slack_ir.find("@mbarrier_wait(@address_of(t_empty[floormod(t + 1, 3)]), "
                          "floormod(floordiv(t + 1, 3) + 1, 2))"),
            std::string::npos)
      << slack_ir;
  EXPECT_NE(slack_ir.find("@mbarrier_arrive(@address_of(t_empty[floormod(t, 3)]))"),
            std::string::npos)
      << slack_ir;
}

// Warp roles on the fold (FlashAttention-3's): a producer warpgroup (threadIdx.y 2, registers
// lowered) whose one thread waits for K's and V's empty slots and issues their boxes; the two
// consumer warpgroups copy Q (bound inside the block's work, on their own threads: their
// barrier is a named one of 256 threads), wait for full slots, compute and release them.
TEST(FusedAttention, WarpRolesSplitTheFold) {
  ScheduledProgram p = wgmma_attention({1, 256, 512, 2, 2, 128, true}, 128, 2, Float(16), 128,
                                       {true, false, 0, true});
  const std::string ir = to_string(lower(p.schedule, p.args));
  EXPECT_NE(ir.find("block (128, 3, 1)"), std::string::npos) << ir;
  const size_t producer = ir.find("if (threadIdx.y == 2) {\n    @setmaxnreg(40, 0)"),
               consumer = ir.find("} else {\n    @setmaxnreg(");
  ASSERT_NE(producer, std::string::npos) << ir;
  ASSERT_NE(consumer, std::string::npos) << ir;
  const std::string produce = ir.substr(producer, consumer - producer),
                    consume = ir.substr(consumer);
  for (const char *s : {"@mbarrier_wait(@address_of(t_empty[", "@tma_load(K_tmap, ",
                        "@tma_load(V_tmap, "})
    EXPECT_NE(produce.find(s), std::string::npos) << s << "\n" << ir;
  EXPECT_EQ(produce.find("wgmma"), std::string::npos) << ir;
  for (const char *s : {"Q.shared[", "@named_barrier_sync(1, 256)",
                        "@mbarrier_wait(@address_of(t_full[",
                        "@mbarrier_arrive(@address_of(t_empty["})
    EXPECT_NE(consume.find(s), std::string::npos) << s << "\n" << ir;
  EXPECT_EQ(consume.find("@tma_load("), std::string::npos) << ir;
  EXPECT_EQ(consume.find("@syncthreads()"), std::string::npos) << ir;
}

// P V summed onto o rescaled (ACC=1: a reduction from the initial value o alpha, alpha =
// 2^(m - m_new) a tensor of the rows): P V's accumulator starts from o alpha, element by element
// in its registers, instead of the intrinsic's fill of zeros, and o takes it as it is. Causal
// and not, one and two warpgroups, checked on the executor; at D = 128 non-causal it compiles
// to fewer registers than the separate accumulator (o and P V are not live together).
TEST(FusedAttention, PVAccumulatesOntoO) {
  WgmmaOptions acc{true, false, 0, false, true};
  ScheduledProgram p = wgmma_attention({1, 128, 256, 2, 2, 128, false}, 64, 2, Float(16), 64, acc);
  const std::string ir = to_string(lower(p.schedule, p.args));
  EXPECT_EQ(ir.find("@wgmma_fill(PV"), std::string::npos) << ir;
  EXPECT_NE(ir.find("@wgmma_reg_set(PV, 0, 128, 0, @wgmma_reg(o, 0, 128, 0) * "
                    "@wgmma_row(alpha, 0, 0))"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("@wgmma_reg_set(o, 0, 128, 0, @wgmma_reg(PV, 0, 128, 0))"), std::string::npos)
      << ir;
  struct Case {
    AttentionShape shape;
    int64_t bq;
  };
  for (const Case &c : {Case{{1, 128, 192, 2, 1, 64, true}, 64},
                        Case{{1, 256, 256, 2, 1, 64, true}, 128},
                        Case{{1, 128, 128, 2, 2, 128, false}, 64}}) {
    SCOPED_TRACE(describe(c.shape, 64) + " wgmma, P V onto o, " + std::to_string(c.bq) +
                 " queries a block");
    ScheduledProgram q = wgmma_attention(c.shape, 64, 2, Float(16), c.bq, acc);
    CheckResult r = check_on_cpu(q.schedule, q.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  expect_error(
      [] {
        AttentionParams a{1, 64, 64, 1, 1, 64, false};
        a.accumulate_o = true;
        a.block_keys = 16;
        attention(a, Float(16));
      },
      {"P V accumulated onto o (ACC=1)", "TC=2"});
  // Registers at the registry's D = 128 blocks (BQ = BK = 128), sm_90a.
  auto registers = [](bool accumulate) {
    AttentionShape a{1, 256, 256, 2, 2, 128, false};
    ScheduledProgram q = wgmma_attention(a, 128, 2, Float(16), 128, {true, false, 0, false,
                                                                      accumulate});
    LoweredModule m = lower(q.schedule, q.args);
    CompiledKernel k = tessel::test::compile_for_sm90(m, codegen_cuda(m), "attention.cu");
    EXPECT_FALSE(k.cubin.empty()) << k.log;
    EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
    return k.kernels.at(0).registers;
  };
  EXPECT_LT(registers(true), registers(false));
}

// FlashAttention-3's overlap inside a warpgroup (overlap_steps, OVL=1): the fold's loop runs a
// step fewer, each issuing the next key block's S = Q K^T with this block's P V, waiting for
// S only (wgmma_wait(1, S)), the softmax and row state there, the rows kept in shared memory
// before the wait for P V; on the executor (which lands each group at its wait and checks the
// ring's barriers: a wrong order deadlocks or reads a slot in flight) at every shape it takes:
// one and two warpgroups, causal with triangular loops of 1 to 8 steps, grouped-query and
// Sq < Sk, D = 64 and 128, the logsumexp written.
TEST(FusedAttention, OverlapStepsRotateTheFold) {
  const WgmmaOptions overlap{true, false, 0, false, false, true};
  {
    ScheduledProgram p = wgmma_attention({1, 64, 256, 1, 1, 64, false}, 64, 3, Float(16), 64,
                                         overlap);
    const std::string ir = to_string(lower(p.schedule, p.args));
    const size_t loop = ir.find("for (t: int32, 0, 3)"); // 4 key blocks: 3 steps and an epilogue
    ASSERT_NE(loop, std::string::npos) << ir;
    const size_t commit_s = ir.find("@wgmma_commit()", loop),
                 commit_pv = ir.find("@wgmma_commit()", commit_s + 1),
                 wait_s = ir.find("@wgmma_wait(1, S)", loop),
                 keep = ir.find("keep_before_wait[", loop),
                 wait_pv = ir.find("@wgmma_wait(0, ", loop);
    EXPECT_LT(commit_s, commit_pv) << ir;
    EXPECT_LT(commit_pv, wait_s) << ir; // both groups in flight, then S landed
    EXPECT_NE(ir.find("@wgmma_mma_rs(PV", commit_s), std::string::npos) << ir;
    EXPECT_LT(wait_s, keep) << ir;
    EXPECT_LT(keep, wait_pv) << ir;
    EXPECT_NE(ir.find("@wgmma_row_set(m_new", wait_s), std::string::npos) << ir;
    EXPECT_LT(ir.find("@wgmma_row_set(m_new", wait_s), keep) << ir; // the softmax beside P V
  }
  struct Case {
    AttentionShape shape;
    int64_t bk, bq;
  };
  AttentionShape with_lse{1, 128, 512, 2, 2, 128, false}, bhsd{1, 128, 256, 2, 2, 64, true};
  with_lse.lse = true;
  bhsd.bshd = false;
  for (const Case &c : {Case{{1, 128, 512, 2, 1, 64, false}, 64, 128},
                        Case{{1, 512, 512, 1, 1, 64, true}, 64, 128},
                        Case{{1, 128, 384, 4, 2, 64, true}, 64, 64},
                        Case{with_lse, 128, 128}, Case{bhsd, 64, 128}}) {
    const DataType dtype = c.shape.bshd ? Float(16) : BFloat(16);
    SCOPED_TRACE(describe(c.shape, c.bk) + " wgmma, overlapped steps, " +
                 std::to_string(c.bq) + " queries a block, " + dtype.str());
    ScheduledProgram q = wgmma_attention(c.shape, c.bk, 3, dtype, c.bq, overlap);
    CheckResult r = check_on_cpu(q.schedule, q.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  // The registry's D = 128 kernel on Hopper (OVL's default there): no spills on sm_90a.
  {
    ScheduledProgram q =
        wgmma_attention({1, 256, 512, 2, 2, 128, false}, 128, 3, Float(16), 128, overlap);
    LoweredModule m = lower(q.schedule, q.args);
    CompiledKernel k = tessel::test::compile_for_sm90(m, codegen_cuda(m), "attention.cu");
    EXPECT_FALSE(k.cubin.empty()) << k.log;
    EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
  }
  // With ping-pong: the two groups a step are one turn (order_wgmma_turns), causal and not.
  for (bool causal : {false, true}) {
    AttentionShape a{1, 512, 512, 1, 1, 64, causal};
    SCOPED_TRACE(describe(a, 64) + " wgmma, overlapped steps in turns");
    ScheduledProgram q =
        wgmma_attention(a, 64, 3, Float(16), 128, {true, true, 0, false, false, true});
    const std::string ir = to_string(lower(q.schedule, q.args));
    const size_t sync = ir.find("@named_barrier_sync(threadIdx.y + 5, 256)");
    ASSERT_NE(sync, std::string::npos) << ir;
    const size_t second = ir.find("@wgmma_commit()", ir.find("@wgmma_commit()", sync) + 1);
    EXPECT_EQ(ir.find("@named_barrier_arrive(6 - threadIdx.y, 256)", sync),
              ir.find("\n", second) + 5) // the turn given after both groups
        << ir;
    CheckResult r = check_on_cpu(q.schedule, q.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  // With a producer warpgroup (FlashAttention-3's roles; the registry's default at D = 128):
  // the consumers' loop rotated, the producer's refills in its own; not causal in turns too.
  for (bool causal : {false, true}) {
    AttentionShape a{1, 512, 512, 2, 1, 128, causal};
    SCOPED_TRACE(describe(a, 128) + " wgmma, overlapped steps, producer warpgroup" +
                 (causal ? "" : ", in turns"));
    ScheduledProgram q =
        wgmma_attention(a, 128, 3, Float(16), 128, {true, !causal, 0, true, false, true});
    const std::string ir = to_string(lower(q.schedule, q.args));
    const size_t producer = ir.find("if (threadIdx.y == 2) {\n    @setmaxnreg(40, 0)");
    ASSERT_NE(producer, std::string::npos) << ir;
    EXPECT_NE(ir.find("@wgmma_wait(1, S)", producer), std::string::npos) << ir;
    CheckResult r = check_on_cpu(q.schedule, q.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  // The registry's causal default at D = 128 (REV 2, PP 2): the query blocks longest first,
  // the consumers in turns.
  {
    const ScheduleEntry &e = find_schedule("attention");
    ScheduledProgram q = e.build(resolve_shape(e, {{"B", 1},
                                                   {"H", 2},
                                                   {"HKV", 1},
                                                   {"SQ", 512},
                                                   {"SK", 512},
                                                   {"D", 128},
                                                   {"CAUSAL", 1},
                                                   {"TC", 2}}),
                                 Float(16));
    const std::string ir = to_string(lower(q.schedule, q.args));
    EXPECT_NE(ir.find(".rev: int32 = 7 - blockIdx.x"), std::string::npos) << ir;
    EXPECT_NE(ir.find("@named_barrier_sync(threadIdx.y + 5, 256)"), std::string::npos) << ir;
    CheckResult r = check_on_cpu(q.schedule, q.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  // The overlap puts the rescale of o into P V's accumulation: without P V onto o it is
  // refused, by name.
  {
    AttentionParams a;
    a.B = 1, a.H = 1, a.Hkv = 1, a.Sq = 64, a.Sk = 256, a.D = 64;
    a.block_keys = 64, a.block_queries = 64, a.tensor_cores = a.wgmma = a.tma = true;
    a.stages = 3, a.overlap = true;
    expect_error([&] { attention(a, Float(16)); },
                 {"attention", "overlap inside a warpgroup (OVL=1)", "P V onto o (accumulate_o)"});
  }
  // K's and V's ring by cp.async (TMA=0): the next step's copies would overwrite the slot P V
  // still reads.
  ScheduledProgram c = wgmma_attention({1, 64, 256, 1, 1, 64, false}, 64, 3, Float(16), 64,
                                       {false, false, 0, false, false, true});
  expect_error([&] { lower(c.schedule, c.args); },
               {"overlap_steps", "writes memory other than by TMA", "bulk_copy"});
  // A loop whose body is not two wgmma groups (Q's copy into shared memory), and one that
  // lowering unrolls away (the output's columns).
  ScheduledProgram w = wgmma_attention({1, 64, 128, 1, 1, 64, false}, 64, 3);
  Stage q = w.schedule.stage("Q.shared");
  for (const IterVar &iv : q.leaf_iter_vars()) // the copy's loop: its fused outer axis
    if (iv.name().find(".fused.outer") != std::string::npos)
      q.overlap_steps(iv);
  expect_error([&] { lower(w.schedule, w.args); },
               {"overlap_steps", "must issue two wgmma groups (it issues 0"});
  ScheduledProgram u = wgmma_attention({1, 64, 128, 1, 1, 64, false}, 64, 3);
  Stage o = u.schedule.stage("O32");
  o.overlap_steps(o.leaf_iter_vars().back());
  expect_error([&] { lower(u.schedule, u.args); }, {"overlap_steps", "was not found"});
}

// A persistent grid (PB): fewer blocks than tiles, each walking (b h, query block) tiles in
// order; the producer's TMA ring runs across a block's tiles (its slots and parities counted
// from the block's first tile), Q's shared tile rewritten only after both warpgroups are done
// with it. The registry's default at D = 128 (overlap, producer warpgroup, turns) and D = 64
// with grouped heads and the logsumexp, on the executor; a causal fold's key loop, whose
// length varies from tile to tile, is refused by name.
TEST(FusedAttention, PersistentGridWalksTheTiles) {
  struct Case {
    AttentionShape shape;
    int64_t bk, bq;
    WgmmaOptions o;
  };
  AttentionShape gqa{1, 256, 256, 4, 1, 64, false};
  gqa.lse = true;
  for (const Case &c : {Case{{1, 512, 512, 2, 2, 128, false}, 128, 128,
                             {true, true, 0, true, false, true}},
                        Case{gqa, 64, 64, {true, false, 0, true}}}) {
    AttentionParams a = c.shape;
    a.persistent_blocks = 3;
    SCOPED_TRACE(describe(c.shape, c.bk) + " wgmma, persistent grid of 3 blocks");
    ScheduledProgram q = wgmma_attention(a, c.bk, c.o.overlap ? 3 : 2, Float(16), c.bq, c.o);
    const std::string ir = to_string(lower(q.schedule, q.args));
    EXPECT_NE(ir.find("\"thread_extent\" = 3;"), std::string::npos) << ir;
    EXPECT_NE(ir.find("let O.tile: int32 = O.tile_iter * 3 + blockIdx.x"), std::string::npos)
        << ir;
    // The ring's slots continue from tile to tile: the step is counted from the block's first
    // (4 steps a tile on 3 slots; on 2 slots a tile starts at slot 0 and parity 0 anyway).
    if (c.o.overlap) {
      EXPECT_NE(ir.find("@mbarrier_wait(@address_of(t_empty[floormod(O.tile_iter * 4 + t, 3)])"),
                std::string::npos)
          << ir;
    }
    CheckResult r = check_on_cpu(q.schedule, q.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  // The last round's tiles split by their key blocks (Stage::split_last_wave on the fold
  // axis): 8 tiles on 6 blocks leave 2 for the last round, each in 3 parts of its 4 key blocks;
  // the later parts hand their (m, l, o) registers over and stop, the first merges them in
  // order (the online softmax's merge) and stores the tile. 7 blocks: one tile in 4 parts.
  for (int64_t blocks : {6, 7}) {
    AttentionParams a = AttentionShape{1, 512, 512, 2, 2, 128, false};
    a.persistent_blocks = blocks;
    a.last_wave_parts = 8;
    SCOPED_TRACE(describe(a, 128) + " persistent grid of " + std::to_string(blocks) +
                 ", the last round split");
    ScheduledProgram q =
        wgmma_attention(a, 128, 3, Float(16), 128, {true, true, 0, true, false, true});
    const std::string ir = to_string(lower(q.schedule, q.args));
    const size_t give = ir.find("if (0 < O.part) {"), take = ir.find("@flag_wait(", give),
                 rest = ir.find("if (O.part == 0) {", take);
    ASSERT_NE(give, std::string::npos) << ir;
    EXPECT_NE(ir.find("O.last_wave_states[", give), std::string::npos) << ir;
    EXPECT_NE(ir.find("@flag_release(", give), std::string::npos) << ir;
    ASSERT_NE(take, std::string::npos) << ir;
    EXPECT_NE(ir.find("@wgmma_row_set(m, ", take), std::string::npos) << ir;
    EXPECT_NE(rest, std::string::npos) << ir; // the later parts store nothing
    CheckResult r = check_on_cpu(q.schedule, q.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  AttentionParams causal = AttentionShape{1, 256, 256, 2, 2, 128, true};
  causal.persistent_blocks = 3;
  expect_error(
      [&] { wgmma_attention(causal, 128, 3, Float(16), 128, {true, false, 0, true, false, true}); },
      {"attention", "persistent grid (PB=3)", "not causal", "got CAUSAL=1: drop PB and LW"});
  AttentionParams split = AttentionShape{1, 256, 256, 2, 2, 128, false};
  split.last_wave_parts = 8;
  expect_error(
      [&] { wgmma_attention(split, 128, 3, Float(16), 128, {true, true, 0, true, false, true}); },
      {"attention", "splitting the last round's tiles (LW=8) takes a persistent grid (PB)"});
}

// Ping-pong consumer roles take a stage computed by one warpgroup; attention's fold with two
// warpgroups bound inside the block's work is refused by split_warp_roles, naming the stage.
TEST(FusedAttention, PingPongRolesOfTwoInnerWarpgroupsIsAnError) {
  ScheduledProgram p = wgmma_attention({1, 256, 256, 2, 2, 64, false}, 64, 2, Float(16), 128,
                                       {true, false, 0, true});
  p.schedule.stage("softmax").warp_specialize(ConsumerRoles::ping_pong);
  expect_error([&] { lower(p.schedule, p.args); },
               {"warp_specialize", "threadIdx.y is bound inside the block's work",
                "compute the stage with one warpgroup"});
}

// Without the turns' arrivals, warpgroup 0 waits for a turn that never comes: the executor,
// whose warps run as fibers where named barriers are, reports the deadlock, naming the
// barrier, instead of hanging.
TEST(FusedAttention, PingPongWithoutTurnsIsADeadlock) {
  ScheduledProgram p =
      wgmma_attention({1, 128, 128, 1, 1, 64, false}, 64, 2, Float(16), 128, {true, true});
  LoweredModule m = lower(p.schedule, p.args);
  struct DropArrivals : IRMutator {
    Stmt visit(const Evaluate *op) override {
      const auto *c = op->value.as<Call>();
      if (c && c->is_intrinsic(intrinsic::named_barrier_arrive))
        return Evaluate::make(Expr(0));
      return IRMutator::visit(op);
    }
  };
  for (LoweredFunc &f : m.funcs)
    f.body = DropArrivals().mutate(f.body);
  std::vector<double> values(128 * 64, 0.5);
  interp::HostBuffer q = interp::HostBuffer::from_doubles(Float(16), values), k = q, v = q,
                     o = interp::HostBuffer::from_doubles(Float(16), values);
  expect_error([&] { interp::execute(m, {&q, &k, &v, &o}); },
               {"deadlock", "named_barrier_sync(5, 256)"});
}

// Stage::ping_pong itself on a block of one warpgroup (attention's own check bypassed): the
// lowering says what it needs.
TEST(FusedAttention, PingPongOfOneWarpgroupIsAnError) {
  ScheduledProgram p = wgmma_attention({1, 128, 128, 1, 1, 64, false}, 64);
  Stage fold = p.schedule.stage("softmax");
  for (const IterVar &iv : fold.leaf_iter_vars())
    if (iv.var().name() == "t")
      fold.ping_pong(iv);
  expect_error([&] { lower(p.schedule, p.args); },
               {"loop 't'", "two warpgroups", "no threadIdx.y"});
}

TEST(FusedAttention, OneKernelWithTheStatesInRegisters) {
  FusedAttention att({1, 64, 64, 2, 2, 16, true}, 16);
  LoweredModule m = lower(att.s, {att.Q, att.K, att.V, att.O});
  ASSERT_EQ(m.funcs.size(), 1u) << to_string(m);
  const std::string ir = to_string(m.funcs[0]);
  EXPECT_NE(ir.find("allocate(o, float32, [16]), storage_scope = local;"), std::string::npos) << ir;
  // Block x of 32 queries sees the key blocks 0 .. 2x + 1 (16 keys a block).
  EXPECT_NE(ir.find("for (t: int32, 0, floormod(blockIdx.x, 2) * 2 + 2)"), std::string::npos) << ir;
}

// Its CUDA compiles with NVRTC, the states' loops over the head dimension unrolled by the
// compiler into registers: nothing spills at D = 64 (CUDA cores) and 128 (WMMA), nor in
// decoding's kernels.
TEST(FusedAttention, CompilesWithoutSpills) {
  for (int64_t D : {64, 128}) {
    FusedAttention att({1, 128, 128, 2, 2, D, true}, 16, Float(16), /*tensor_cores=*/D == 128);
    LoweredModule m = lower(att.s, {att.Q, att.K, att.V, att.O});
    CompiledKernel k = tessel::test::compile_for_sm90(m, codegen_cuda(m), "fused_attention.cu");
    ASSERT_FALSE(k.cubin.empty()) << k.log;
    EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << "D=" << D << "\n" << k.log;
  }
  // Decoding's two kernels at the issue's shape (32 query heads over 8, D = 128): P V's 32
  // partial sums a thread stay in registers.
  ScheduledProgram p = attention_decode({16, 1, 32768, 32, 8, 128, false}, Float(16));
  LoweredModule m = lower(p.schedule, p.args);
  CompiledKernel k = tessel::test::compile_for_sm90(m, codegen_cuda(m), "attention_decode.cu");
  ASSERT_FALSE(k.cubin.empty()) << k.log;
  ASSERT_EQ(k.kernels.size(), 2u) << k.log;
  for (const auto &kernel : k.kernels)
    EXPECT_EQ(kernel.spill_store_bytes, 0) << k.log;
  // K's and V's rows (and Q's) in 16-byte loads: a stretch of 16 rows of K, 16 of V (VROWS:
  // one load a row, as K's), not allocated in L1 (stream_loads: .NA); 4 of Q, allocated.
  if (std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "attention_decode")) {
    EXPECT_EQ(tessel::test::count_of(*sass, "LDG.E.NA.128"), 32) << *sass;
    EXPECT_EQ(tessel::test::count_of(*sass, "LDG.E.128"), 4) << *sass;
  }
}

// Decoding: a few queries against many keys. The keys are split into `splits` chunks, a fold
// over each chunk's key blocks (its states stored in global memory, one kernel), and a second
// kernel merges the partial states: M = max_p m_p, L = sum_p l_p exp(m_p - M),
// O = sum_p o_p exp(m_p - M) / L. Grouped-query heads share their K and V.
TEST(FusedAttention, DecodingSplitsTheKeysAndMergesThePartialStates) {
  const int64_t B = 2, H = 4, Hkv = 2, Sq = 1, Sk = 128, D = 16, splits = 4, Bk = 8;
  const int64_t C = Sk / splits, T = C / Bk;
  const int g = int(H / Hkv), bk = int(Bk), c = int(C);
  auto view = [&](int64_t S, int64_t Hh, const char *name) {
    return placeholder({B, Hh, S, D}, Float(16), name, {S * Hh * D, D, Hh * D, 1});
  };
  Tensor Q = view(Sq, H, "Q"), K = view(Sk, Hkv, "K"), V = view(Sk, Hkv, "V");
  const float scale = 1.0f / std::sqrt(float(D));
  IterVar t = fold_axis({0, T}, "t");
  Tensor m = fold_state({splits, B, H, Sq}, Float(32), "m");
  Tensor l = fold_state({splits, B, H, Sq}, Float(32), "l");
  Tensor o = fold_state({splits, B, H, Sq, D}, Float(32), "o");
  auto key = [&](const Expr &p, const Expr &tb, const Expr &j) { return p * c + tb * bk + j; };
  IterVar d = reduce_axis({0, D}, "d");
  Tensor S = compute_from_vars(
      {T, splits, B, H, Sq, Bk},
      [&](const std::vector<Var> &v) {
        return sum(Q(v[2], v[3], v[4], d).astype(Float(32)) *
                       K(v[2], v[3] / g, key(v[1], v[0], v[5]), d).astype(Float(32)) * scale,
                   {d});
      },
      "S");
  IterVar j1 = reduce_axis({0, Bk}, "j1");
  Tensor rowmax = compute_from_vars(
      {T, splits, B, H, Sq},
      [&](const std::vector<Var> &v) { return max(S(v[0], v[1], v[2], v[3], v[4], j1), {j1}); },
      "rowmax");
  Tensor m_new = compute_from_vars(
      {T, splits, B, H, Sq},
      [&](const std::vector<Var> &v) {
        return max(m(v[1], v[2], v[3], v[4]), rowmax(v[0], v[1], v[2], v[3], v[4]));
      },
      "m_new");
  Tensor P = compute_from_vars(
      {T, splits, B, H, Sq, Bk},
      [&](const std::vector<Var> &v) {
        return exp(S(v[0], v[1], v[2], v[3], v[4], v[5]) - m_new(v[0], v[1], v[2], v[3], v[4]));
      },
      "P");
  IterVar j2 = reduce_axis({0, Bk}, "j2");
  Tensor rowsum = compute_from_vars(
      {T, splits, B, H, Sq},
      [&](const std::vector<Var> &v) { return sum(P(v[0], v[1], v[2], v[3], v[4], j2), {j2}); },
      "rowsum");
  IterVar j3 = reduce_axis({0, Bk}, "j3");
  Tensor PV = compute_from_vars(
      {T, splits, B, H, Sq, D},
      [&](const std::vector<Var> &v) {
        return sum(P(v[0], v[1], v[2], v[3], v[4], j3) *
                       V(v[2], v[3] / g, key(v[1], v[0], j3), v[5]).astype(Float(32)),
                   {j3});
      },
      "PV");
  std::vector<Tensor> part = online_softmax(t, m, l, o, m_new, rowsum, PV, "partial");
  // The merge of the splits' partial states.
  IterVar p1 = reduce_axis({0, splits}, "p1"), p2 = reduce_axis({0, splits}, "p2"),
          p3 = reduce_axis({0, splits}, "p3");
  Tensor M = compute(
      {B, H, Sq}, [&](Var b, Var h, Var i) { return max(part[0](p1, b, h, i), {p1}); }, "M");
  Tensor L = compute(
      {B, H, Sq},
      [&](Var b, Var h, Var i) {
        return sum(part[1](p2, b, h, i) * exp(part[0](p2, b, h, i) - M(b, h, i)), {p2});
      },
      "L");
  Tensor Osum = compute(
      {B, H, Sq, D},
      [&](Var b, Var h, Var i, Var dd) {
        return sum(part[2](p3, b, h, i, dd) * exp(part[0](p3, b, h, i) - M(b, h, i)), {p3});
      },
      "Osum");
  Tensor O = compute(
      {B, H, Sq, D},
      [&](Var b, Var h, Var i, Var dd) { return (Osum(b, h, i, dd) / L(b, h, i)).astype(Float(16)); },
      "O");

  // Kernel 1: a block per (split, batch), a thread per query head walking its chunk's key
  // blocks, the states in global memory (the merge's inputs). Kernel 2: the merge, a block
  // per (batch, head), a thread per head dim.
  Schedule s = create_schedule({O});
  Stage fs = s[part[0]];
  {
    auto ax = fs.op_axis(); // split, batch, head, query
    fs.bind(fs.fuse(ax[0], ax[1]), thread_axis("blockIdx.x"));
    fs.bind(ax[2], thread_axis("threadIdx.x"));
    IterVar tt = fs.reduce_axis()[0];
    for (const Tensor &x : {S, rowmax})
      s[x].compute_at(fs, tt).set_scope("local");
  }
  {
    auto [b, h, i, dd] = s[O].axes<4>();
    s[O].bind(s[O].fuse(b, h), thread_axis("blockIdx.x"));
    s[O].bind(dd, thread_axis("threadIdx.x"));
    for (const Tensor &x : {M, L})
      s[x].compute_at(s[O], i).set_scope("local");
    s[Osum].compute_at(s[O], dd).set_scope("local");
  }
  LoweredModule lm = lower(s, {Q, K, V, O});
  ASSERT_EQ(lm.funcs.size(), 2u) << to_string(lm);
  CheckProblem pb = make_check_problem({Q, K, V, O}, 3, 11);
  AttentionShape a{B, Sq, Sk, H, Hkv, D, false};
  std::vector<double> want =
      textbook_attention(a, pb.inputs[0].values, pb.inputs[1].values, pb.inputs[2].values);
  double worst = 0;
  for (size_t e = 0; e < want.size(); ++e)
    worst = std::max(worst, std::abs(pb.reference[e] - want[e]) / (1 + std::abs(want[e])));
  EXPECT_LT(worst, 1.0 / 1024);
  CheckResult r = check_on_cpu(s, {Q, K, V, O}, 3);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

namespace {

// A decoding program's float64 reference against the textbook's attention of `shape` (its own
// inputs), and its kernels on the executor against that reference.
void expect_decoding_matches(const ScheduledProgram &p, const AttentionShape &shape,
                             DataType dtype) {
  CheckProblem pb = make_check_problem(p.args, 3, 5);
  std::vector<double> want =
      textbook_attention(shape, pb.inputs[0].values, pb.inputs[1].values, pb.inputs[2].values);
  ASSERT_EQ(pb.reference.size(), want.size());
  double worst = 0;
  for (size_t e = 0; e < want.size(); ++e)
    worst = std::max(worst, std::abs(pb.reference[e] - want[e]) / (1 + std::abs(want[e])));
  EXPECT_LT(worst, dtype == BFloat(16) ? 1.0 / 128 : 1.0 / 1024);
  CheckResult r = check_on_cpu(p.schedule, p.args, 3);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

} // namespace

// The registered decoding program (attention_decode): each chunk of keys' softmax in a block,
// its logsumexp and normalized output in global memory, merged by a second kernel. Its float64
// reference against the textbook's, and the kernels on the executor: grouped-query (4:2, 4:1)
// and multi-head, causal with three queries, head dims 64, 128 and 256, (B, H, S, D) buffers,
// bfloat16. The chunk's logsumexp is written by every thread of its block and read back by each
// (no barrier; lower() allows a global stage computed at the block for that).
TEST(FusedAttention, RegisteredDecodingOnTheExecutor) {
  struct Case {
    AttentionShape shape;
    int64_t split;
    DataType dtype;
  };
  AttentionShape grouped{2, 1, 512, 4, 2, 64, false}, causal{1, 3, 384, 4, 1, 64, true},
      wide{1, 2, 256, 2, 2, 256, false}, heads{1, 1, 256, 4, 4, 128, false};
  wide.bshd = false;
  for (const Case &c : {Case{grouped, 128, Float(16)}, Case{causal, 128, Float(16)},
                        Case{wide, 128, Float(16)}, Case{heads, 256, BFloat(16)}}) {
    SCOPED_TRACE(describe(c.shape, c.split) + (c.shape.bshd ? "" : " BHSD"));
    ScheduledProgram p = attention_decode(c.shape, c.dtype, {c.split});
    LoweredModule m = lower(p.schedule, p.args);
    ASSERT_EQ(m.funcs.size(), 2u) << to_string(m);
    // P V reads V's rows as the scores read K's (VROWS=1), its partials across y in shared.
    EXPECT_NE(to_string(m).find("allocate(op.local.rf, float32"), std::string::npos);
    expect_decoding_matches(p, c.shape, c.dtype);
  }
  // P V's earlier layout (VROWS=0): a key a thread along x, the sums across x by shuffles.
  for (const Case &c : {Case{grouped, 128, Float(16)}, Case{causal, 128, Float(16)}}) {
    SCOPED_TRACE(describe(c.shape, c.split) + " VROWS=0");
    DecodeSchedule k{c.split};
    k.v_rows = false;
    ScheduledProgram p = attention_decode(c.shape, c.dtype, k);
    const std::string ir = to_string(lower(p.schedule, p.args));
    EXPECT_NE(ir.find("@thread_allreduce(\"sum\", @address_of(op.red[0])"), std::string::npos);
    CheckResult r = check_on_cpu(p.schedule, p.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  // K's and V's rows through rings of shared-memory tiles (cp.async, pipelined), 4 rows a
  // stretch (with 8, V's 128 keys are one stretch of 16 threads: nothing to pipeline).
  for (int ring : {2, 3}) {
    SCOPED_TRACE("ring of " + std::to_string(ring));
    ScheduledProgram p = attention_decode(causal, Float(16), {128, ring, 16, 4});
    std::string ir = to_string(lower(p.schedule, p.args));
    EXPECT_NE(ir.find("@cp_async(@address_of(K.shared["), std::string::npos) << ir;
    EXPECT_NE(ir.find("@cp_async(@address_of(V.shared["), std::string::npos) << ir;
    CheckResult r = check_on_cpu(p.schedule, p.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  // Fewer threads a key row (more of the head dim each, fewer shuffles), more rows a stretch.
  for (auto [lanes, rows] : {std::pair<int64_t, int64_t>{8, 4}, {4, 8}, {8, 2}}) {
    SCOPED_TRACE("lanes " + std::to_string(lanes) + ", rows " + std::to_string(rows));
    DecodeSchedule k{128, 0, lanes, rows};
    ScheduledProgram p = attention_decode(lanes == 4 ? wide : heads, Float(16), k);
    CheckResult r = check_on_cpu(p.schedule, p.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  // The register prefetch (PF=1): a thread's rows contiguous, each stretch one copy of its
  // rows (not the box between rows 8 apart), the next stretch's issued before this one's
  // arithmetic, no barrier for these registers; grouped, causal, bfloat16 at D = 128.
  for (const Case &c : {Case{grouped, 256, Float(16)}, Case{causal, 128, Float(16)},
                        Case{heads, 256, BFloat(16)}}) {
    SCOPED_TRACE(describe(c.shape, c.split) + " prefetched");
    DecodeSchedule k{c.split};
    k.prefetch = true;
    ScheduledProgram p = attention_decode(c.shape, c.dtype, k);
    LoweredModule m = lower(p.schedule, p.args);
    const std::string ir = to_string(m);
    // At most two copies of a stretch: 2 x 8 rows x the thread's D / 16 (K: 16 threads a row)
    // and D / 8 (V: 8 threads over the head dim) elements.
    auto elements = [&](const std::string &name) {
      const std::string at = "allocate(" + name + ", " + c.dtype.str() + ", [";
      const size_t i = ir.find(at);
      return i == std::string::npos ? int64_t(-1) : std::stoll(ir.substr(i + at.size()));
    };
    EXPECT_GT(elements("K.local"), 0) << ir;
    EXPECT_LE(elements("K.local"), 2 * 8 * c.shape.D / 16) << ir;
    EXPECT_GT(elements("V.local"), 0) << ir;
    EXPECT_LE(elements("V.local"), 2 * 8 * c.shape.D / 8) << ir;
    CheckResult r = check_on_cpu(p.schedule, p.args, 3);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  {
    DecodeSchedule k{128, 0, 16, 8};
    k.prefetch = true;
    ScheduledProgram p = attention_decode(grouped, Float(16), k);
    DecodeSchedule shuffled{128};
    shuffled.v_rows = false; // the layout the prefetch keeps
    ScheduledProgram q = attention_decode(grouped, Float(16), shuffled);
    LoweredModule plain = lower(q.schedule, q.args);
    auto barriers = [](const LoweredModule &m) {
      const std::string ir = to_string(m);
      size_t n = 0;
      for (size_t at = ir.find("@syncthreads()"); at != std::string::npos;
           at = ir.find("@syncthreads()", at + 1))
        ++n;
      return n;
    };
    EXPECT_EQ(barriers(lower(p.schedule, p.args)), barriers(plain));
  }
  expect_error(
      [] {
        DecodeSchedule k{128, 2};
        k.prefetch = true;
        attention_decode({1, 1, 256, 2, 2, 64, false}, Float(16), k);
      },
      {"register prefetch (PF=1)", "RING=0"});
  expect_error([] { attention_decode({1, 1, 256, 2, 2, 64, false}, Float(16), {128, 0, 4}); },
               {"multiple of 128", "got 64", "LANES=16"});
  expect_error([] { attention_decode({1, 1, 384, 2, 2, 64, false}, Float(16), {256}); },
               {"chunks of 256", "SPLIT"});
  expect_error([] { attention_decode({1, 1, 256, 2, 2, 64, false}, Float(16), {128, 1}); },
               {"RING=0", "2 or 3", "not 1"});
  expect_error([] { attention_decode({1, 1, 256, 2, 2, 80, false}, Float(16), {128}); },
               {"multiple of 64", "80"});
  expect_error([] { attention_decode({1, 200, 256, 2, 2, 64, true}, Float(16), {128}); },
               {"Sq <= SPLIT <= Sk"});
}

// Decoding on attention's wgmma fold (attention_decode TC=2): a key/value head's g query heads x
// Sq queries as the rows of a warpgroup's 64 (zero past them), each chunk of keys a batch of the
// fold through a ring of shared tiles (by cp.async, or TMA), the chunks' rows (only the group's:
// the store's row limit) and their logsumexp merged by a second kernel. Its float64 reference
// against the textbook's, and the kernels on the executor: grouped 4:2 with one query, 8:2 with
// three over (B, H, S, D) buffers, multi-query at D = 256 causal with one query (every key
// seen), bfloat16 at D = 64 on a persistent grid, one whose last round's chunks are split, and
// with the overlap of steps.
TEST(FusedAttention, DecodingOnWgmmaOnTheExecutor) {
  struct Case {
    AttentionShape shape;
    DecodeWgmma k;
    DataType dtype;
  };
  AttentionShape grouped{2, 1, 512, 4, 2, 128, false}, three{1, 3, 256, 8, 2, 64, false},
      wide{1, 1, 256, 4, 1, 256, true}, small{1, 1, 256, 2, 2, 64, false},
      split{1, 1, 768, 2, 2, 64, false};
  three.bshd = false;
  // The ring by TMA, from a producer warpgroup or not; by cp.async (the default) over 2 key
  // blocks of 128 (D = 64) in 2 slots, over 8 of 64 in 3, and with the split chosen (the 512
  // keys in 8 chunks of 64);
  // 12 chunks on 5 persistent blocks, the last round's 2 split in 2 parts each; attention's
  // overlap of steps.
  for (const Case &c :
       {Case{grouped, {.split_keys = 256, .block_keys = 128, .stages = 2, .tma = true}, Float(16)},
        Case{three, {.split_keys = 128, .block_keys = 64, .stages = 2, .tma = true,
                     .warp_roles = false}, Float(16)},
        Case{three, {.split_keys = 256}, Float(16)},
        Case{grouped, {.split_keys = 512, .stages = 3}, Float(16)},
        Case{grouped, {}, Float(16)},
        Case{wide, {.split_keys = 128, .block_keys = 64, .tma = true}, Float(16)},
        Case{small, {.split_keys = 128, .block_keys = 64, .tma = true, .persistent_blocks = 2},
             BFloat(16)},
        Case{split, {.split_keys = 128, .block_keys = 64, .tma = true, .persistent_blocks = 5,
                     .last_wave_parts = 2}, Float(16)},
        Case{grouped, {.split_keys = 256, .block_keys = 128, .tma = true, .overlap = true},
             Float(16)}}) {
    SCOPED_TRACE(describe(c.shape, c.k.split_keys) + (c.shape.bshd ? "" : " BHSD") +
                 (c.k.persistent_blocks ? " persistent" : "") +
                 (c.k.last_wave_parts ? " last round split" : "") +
                 (c.k.overlap ? " overlapped" : "") + (c.k.tma ? "" : " cp.async"));
    ScheduledProgram p = attention_decode_wgmma(c.shape, c.dtype, c.k);
    LoweredModule m = lower(p.schedule, p.args);
    ASSERT_EQ(m.funcs.size(), 2u) << to_string(m);
    const std::string ir = to_string(m);
    EXPECT_NE(ir.find("@wgmma_mma"), std::string::npos);
    AttentionShape textbook = c.shape;
    textbook.causal = false; // (one query: it sees every key)
    expect_decoding_matches(p, textbook, c.dtype);
  }
  // What it does not take, by name.
  expect_error([] { attention_decode_wgmma({1, 2, 256, 2, 2, 64, true}, Float(16)); },
               {"not causal, or causal with one query", "2 causal queries", "TC=0"});
  expect_error([] { attention_decode_wgmma({1, 17, 256, 8, 2, 64, false}, Float(16)); },
               {"4 query heads x 17 queries", "at most 64", "TC=0"});
  expect_error([] { attention_decode_wgmma({1, 1, 256, 2, 2, 80, false}, Float(16)); },
               {"head dim of 64, 128 or 256, not 80"});
  expect_error([] { attention_decode_wgmma({1, 1, 384, 2, 2, 64, false}, Float(16), {256}); },
               {"384 keys", "chunks of 256 (SPLIT)", "must divide the keys"});
  expect_error(
      [] { attention_decode_wgmma({1, 1, 256, 2, 2, 64, false}, Float(16), {.overlap = true}); },
      {"overlap of steps (OVL=1)", "take the TMA ring (TMA=1)"});
}

// Packed variable-length sequences, as serving engines pass them: Q, K, V of every sequence
// one after another, (tokens, heads, dim), and the offsets of the sequences (B + 1, cumulative).
// The fold runs over a padded grid (sequence, head, position < the longest), reading each
// token through the offsets and masking keys past its sequence's end (and, causal, after the
// query); O, packed like Q, gathers each token's row through its sequence (the number of
// offsets at or before it). Checked on the executor against attention computed per sequence.
TEST(FusedAttention, PackedVariableLengthSequences) {
  const std::vector<int> lengths = {5, 16, 11};
  const int64_t B = 3, N = 32, Lmax = 16, H = 4, Hkv = 2, D = 16, Bk = 8, T = Lmax / Bk;
  const int g = int(H / Hkv), bk = int(Bk), n = int(N);
  Tensor Q = placeholder({N, H, D}, Float(16), "Q");
  Tensor K = placeholder({N, Hkv, D}, Float(16), "K");
  Tensor V = placeholder({N, Hkv, D}, Float(16), "V");
  Tensor off = placeholder({B + 1}, Int(32), "offsets");
  const float scale = 1.0f / std::sqrt(float(D));
  auto token = [&](const Expr &b, const Expr &pos) { return max(min(off(b) + pos, n - 1), 0); };
  auto visible = [&](const Expr &b, const Expr &i, const Expr &key) {
    return key < off(b + 1) - off(b) && key <= i;
  };
  IterVar t = fold_axis({0, T}, "t");
  Tensor m = fold_state({B, H, Lmax}, Float(32), "m");
  Tensor l = fold_state({B, H, Lmax}, Float(32), "l");
  Tensor o = fold_state({B, H, Lmax, D}, Float(32), "o");
  IterVar d = reduce_axis({0, D}, "d");
  Tensor S = compute(
      {T, B, H, Lmax, Bk},
      [&](Var tb, Var b, Var h, Var i, Var j) {
        return sum(Q(token(b, i), h, d).astype(Float(32)) *
                       K(token(b, tb * bk + j), h / g, d).astype(Float(32)) * scale,
                   {d});
      },
      "S");
  IterVar j1 = reduce_axis({0, Bk}, "j1");
  Tensor rowmax = compute(
      {T, B, H, Lmax},
      [&](Var tb, Var b, Var h, Var i) {
        return max(S(tb, b, h, i, j1), {j1}, visible(b, i, tb * bk + j1));
      },
      "rowmax");
  Tensor m_new = compute(
      {T, B, H, Lmax},
      [&](Var tb, Var b, Var h, Var i) { return max(m(b, h, i), rowmax(tb, b, h, i)); }, "m_new");
  Tensor P = compute(
      {T, B, H, Lmax, Bk},
      [&](Var tb, Var b, Var h, Var i, Var j) {
        return if_then_else(visible(b, i, tb * bk + j),
                            exp(S(tb, b, h, i, j) - m_new(tb, b, h, i)), 0.0f);
      },
      "P");
  IterVar j2 = reduce_axis({0, Bk}, "j2"), j3 = reduce_axis({0, Bk}, "j3");
  Tensor rowsum = compute(
      {T, B, H, Lmax}, [&](Var tb, Var b, Var h, Var i) { return sum(P(tb, b, h, i, j2), {j2}); },
      "rowsum");
  Tensor PV = compute(
      {T, B, H, Lmax, D},
      [&](Var tb, Var b, Var h, Var i, Var dd) {
        return sum(P(tb, b, h, i, j3) * V(token(b, tb * bk + j3), h / g, dd).astype(Float(32)),
                   {j3});
      },
      "PV");
  std::vector<Tensor> st = online_softmax(t, m, l, o, m_new, rowsum, PV, "softmax");
  // Token q's sequence: the offsets after the first at or before it.
  IterVar bs = reduce_axis({0, B}, "bs");
  Tensor seq = compute(
      {N}, [&](Var q) { return sum(if_then_else(off(bs + 1) <= q, 1, 0), {bs}); }, "seq");
  Tensor O = compute(
      {N, H, D},
      [&](Var q, Var h, Var dd) {
        Expr b = min(seq(q), int(B - 1)), pos = max(min(q - off(b), int(Lmax - 1)), 0);
        return (st[2](b, h, pos, dd) / st[1](b, h, pos)).astype(Float(16));
      },
      "O");

  // Kernel 1: a block per (sequence, head), a thread per position; kernel 2: a block per token.
  Schedule s = create_schedule({O});
  Stage fs = s[st[0]];
  {
    auto ax = fs.op_axis();
    fs.bind(fs.fuse(ax[0], ax[1]), thread_axis("blockIdx.x"));
    fs.bind(ax[2], thread_axis("threadIdx.x"));
    for (const Tensor &x : {S, rowmax})
      s[x].compute_at(fs, t).set_scope("local");
  }
  auto [q, h, dd] = s[O].axes<3>();
  s[O].bind(q, thread_axis("blockIdx.x"));
  s[O].bind(s[O].fuse(h, dd), thread_axis("threadIdx.x"));
  s[seq].compute_at(s[O], q).set_scope("local");

  // Random Q, K, V; the offsets of `lengths`.
  std::vector<Tensor> args = {Q, K, V, off, O};
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < 3; ++i)
    inputs.push_back(random_tensor(args[i], 21 + i));
  HostTensor offsets{Int(32), {B + 1}, {0}};
  for (int len : lengths)
    offsets.values.push_back(offsets.values.back() + len);
  inputs.push_back(offsets);
  // Given values must be of the input's type and shape.
  std::vector<HostTensor> wrong = inputs;
  wrong[3] = HostTensor{Int(32), {B}, {0, 5, 21}};
  expect_error([&] { make_check_problem(args, wrong); },
               {"the values given for input 'offsets' are not of its type and shape"});
  CheckProblem p = make_check_problem(args, inputs);
  EXPECT_LT(packed_attention_error(offsets.values, H, Hkv, D, /*causal=*/true, inputs[0].values,
                                   inputs[1].values, inputs[2].values, p.reference),
            1.0 / 1024);
  CheckResult r = check_on_cpu(s, args, p);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

// The registered form (attention_varlen): Q, K, V packed, the offsets given by the entry (its
// lengths from LMAX down to MINLEN), O packed. Its float64 reference is attention per sequence
// (checked here against one computed from the packed inputs), and its kernels (the fold on
// wgmma with a TMA ring, WMMA or CUDA cores over the padded grid, each tile read from its
// sequence's first token on, the keys past its end masked and the key loop bounded by its
// length, then O gathered per token) match it on the executor: grouped-query heads, causal
// and not; causal with the rows' logsumexp (LSE=1, (H, tokens)) as a second output.
TEST(FusedAttention, RegisteredPackedSequences) {
  const ScheduleEntry &e = find_schedule("attention_varlen");
  EXPECT_EQ(packed_lengths(3, 48, 16), (std::vector<int64_t>{48, 32, 16}));
  EXPECT_EQ(packed_lengths(1, 48, 16), (std::vector<int64_t>{48}));
  for (int64_t tc : {3, 2, 1, 0}) // 3: wgmma with the overlap of steps (OVL=1)
    for (int64_t causal : {0, 1}) {
      // (wgmma: the smallest head dim it takes, 64 queries and keys a block: lengths 128, 72
      // and 16 tokens; else 64, 40 and 16 by 32 queries a block.)
      const bool wgmma = tc >= 2;
      const int64_t H = 4, Hkv = 2, D = wgmma ? 64 : 16, lmax = wgmma ? 128 : 64;
      const int64_t tokens = wgmma ? 216 : 120;
      ScheduledProgram p = e.build(resolve_shape(e, {{"B", 3}, {"H", H}, {"HKV", Hkv},
                                                     {"LMAX", lmax}, {"MINLEN", 16}, {"D", D},
                                                     {"CAUSAL", causal},
                                                     {"TC", wgmma ? 2 : tc},
                                                     {"BQ", wgmma ? 64 : 32},
                                                     {"BK", wgmma ? 64 : 0},
                                                     {"OVL", tc == 3 ? 1 : 0},
                                                     {"LSE", causal}}),
                                   Float(16));
      SCOPED_TRACE(std::string(tc == 3 ? "wgmma, overlapped steps" : tc == 2 ? "wgmma"
                               : tc                                       ? "WMMA"
                                                                          : "CUDA cores") +
                   (causal ? ", causal" : ""));
      ASSERT_EQ(p.num_inputs, 4u);
      const std::vector<double> offsets = wgmma ? std::vector<double>{0, 128, 200, 216}
                                                : std::vector<double>{0, 64, 104, 120};
      EXPECT_EQ(p.given_inputs.at(3), offsets);
      EXPECT_EQ(constant_shape(p.args[0]), (std::vector<int64_t>{tokens, H, D}));
      ASSERT_EQ(p.args.size(), causal ? 6u : 5u);
      EXPECT_EQ(constant_shape(p.args[4]), (std::vector<int64_t>{tokens, H, D}));
      if (causal) {
        EXPECT_EQ(constant_shape(p.args[5]), (std::vector<int64_t>{H, tokens}));
      }
      CheckProblem problem = make_check_problem(p.args, p.num_inputs, 5, 0, p.given_inputs);
      EXPECT_LT(packed_attention_error(
                    problem.inputs[3].values, H, Hkv, D, causal, problem.inputs[0].values,
                    problem.inputs[1].values, problem.inputs[2].values,
                    causal ? problem.earlier_outputs.at(0).reference : problem.reference,
                    causal ? &problem.reference : nullptr),
                1.0 / 1024);
      CheckResult r = check_on_cpu(p.schedule, p.args, problem);
      EXPECT_TRUE(r.compare.ok) << r.str();
      // The key blocks past a sequence's end are not walked: the loop's bound is read from the
      // offsets; and a block of queries wholly past its end (the third sequence's second: 16
      // tokens) walks none: the bound is 0 unless the block's first query is inside.
      const std::string ir = to_string(lower(p.schedule, p.args));
      const size_t loop = ir.find("for (t: int32, 0, ");
      ASSERT_NE(loop, std::string::npos) << ir;
      const std::string bound = ir.substr(loop, ir.find('\n', loop) - loop);
      EXPECT_NE(bound.find("floordiv(offsets["), std::string::npos) << bound;
      EXPECT_EQ(bound.rfind("for (t: int32, 0, select(", 0), 0u) << bound;
      // WMMA: that loop is uniform (its bound a load of read-only offsets at blockIdx), so its
      // body has barriers: between the fragments' stores of S and the rows' reads of it.
      if (tc == 1) {
        const size_t store = ir.find("@wmma_store_matrix_sync(S.wmma.accumulator", loop);
        ASSERT_NE(store, std::string::npos) << ir;
        const size_t read = ir.find("rowmax[0] = max(rowmax[0]", store);
        const size_t sync = ir.find("@syncthreads()", store);
        EXPECT_LT(sync, read) << ir;
      }
    }
  // What it does not take, by name.
  expect_error([] {
    AttentionParams a{2, 64, 64, 2, 2, 64, false};
    a.packed_tokens = 100;
    a.tensor_cores = a.wgmma = a.tma = a.warp_roles = true;
    a.persistent_blocks = 2;
    a.block_queries = 64;
    a.block_keys = 64;
    attention(a, Float(16));
  }, {"packed sequences (100 tokens)", "a block a tile", "PB"});
  expect_error([&] { e.build(resolve_shape(e, {{"MINLEN", 200}}), Float(16)); },
               {"1 <= MINLEN <= LMAX", "MINLEN = 200"});
  expect_error([&] { e.build(resolve_shape(e, {{"LMAX", 48}}), Float(16)); },
               {"64 queries a block, Sq = 48 (LMAX, the longest sequence)", "TC=0"});
}

// What the fold refuses, and how it says so.
TEST(FusedAttention, MistakesAreClearErrors) {
  IterVar t = fold_axis({0, 4}, "t");
  Tensor m = fold_state({8}, Float(32), "m");
  Tensor o = fold_state({8, 4}, Float(32), "o");
  Tensor X = placeholder({4, 8, 4}, Float(32), "X");
  // A state read at another index.
  expect_error(
      [&] {
        (void)fold(t, {{m, Expr(0.0f), [&](auto &v) { return m(v[0]) + m(Expr(0)); }}}, "f");
      },
      {"reads state 'm' at index 0 in dimension 0"});
  // The state with axes of its own read by another's update.
  expect_error(
      [&] {
        (void)fold(t,
                   {{m, Expr(0.0f), [&](auto &v) { return o(v[0], Expr(0)); }},
                    {o, Expr(0.0f), [&](auto &v) { return o(v[0], v[1]); }}},
                   "f");
      },
      {"which has axes of its own"});
  // A step tensor without the steps as its first axis.
  Tensor bad = compute(
      {8}, [&](Var i) { return m(i) * 2.0f; }, "bad");
  expect_error(
      [&] {
        (void)fold(t, {{m, Expr(0.0f), [&](auto &v) { return bad(v[0]); }}}, "f");
      },
      {"its first axis must be the fold's steps"});
  // A `where` reading a tensor at the fold's axis (at the shared axes it is a loop bound).
  Tensor lengths = placeholder({8}, Int(32), "lengths");
  expect_error(
      [&] {
        (void)fold(t, {{m, Expr(0.0f), [&](auto &v) { return m(v[0]); }}}, "f",
                   [&](const std::vector<Var> &) { return lengths(t.var()) > 0; });
      },
      {"`where` reads 'lengths' at t", "depends on the fold's axis 't'"});
  // Two states that read each other's old values.
  Tensor l = fold_state({8}, Float(32), "l");
  expect_error(
      [&] {
        (void)fold(t,
                   {{m, Expr(0.0f), [&](auto &v) { return l(v[0]); }},
                    {l, Expr(0.0f), [&](auto &v) { return m(v[0]); }}},
                   "f");
      },
      {"read each other's values before the step"});
  // A merge on some states only; a merge of a row state reading a state with axes of its own.
  auto keep = [](const std::vector<Expr> &a, const std::vector<Expr> &) { return a[0]; };
  expect_error(
      [&] {
        (void)fold(t,
                   {{m, Expr(0.0f), [&](auto &v) { return m(v[0]); }, keep},
                    {o, Expr(0.0f), [&](auto &v) { return o(v[0], v[1]); }}},
                   "f");
      },
      {"some states have a merge and some do not"});
  expect_error(
      [&] {
        (void)fold(t,
                   {{m, Expr(0.0f), [&](auto &v) { return m(v[0]); },
                     [](const std::vector<Expr> &a, const std::vector<Expr> &) { return a[1]; }},
                    {o, Expr(0.0f), [&](auto &v) { return o(v[0], v[1]); }, keep}},
                   "f");
      },
      {"its merge reads state 'o', which has axes of its own"});
  // The fold axis cannot be split; a step tensor left outside the fold is refused.
  Tensor step = compute(
      {4, 8}, [&](Var tb, Var i) { return m(i) + X(tb, i, 0); }, "step");
  std::vector<Tensor> r = fold(t, {{m, Expr(0.0f), [&](auto &v) { return step(t, v[0]); }}}, "f");
  Tensor out = compute(
      {8}, [&](Var i) { return r[0](i) * 1.0f; }, "out");
  Schedule s = create_schedule({out});
  expect_error([&] { (void)s[r[0]].split(t, 2); }, {"is a fold axis"});
  // Its steps split over a persistent kernel's last wave need a merge of the parts' states.
  expect_error([&] { (void)s[r[0]].split_last_wave(t); },
               {"fold 'f' has no merge of two parts' states", "FoldState::merge"});
  s[step].compute_root().set_scope("global");
  expect_error([&] { (void)lower(s, {X, out}); }, {"s[step].compute_at(s[f], t)"});
}

TEST(FusedAttention, GpuMatchesTheReference) {
  if (!Device::available())
    GTEST_SKIP() << Device::unavailable_reason();
  struct Case {
    AttentionShape shape;
    DataType dtype;
  };
  for (bool tc : {false, true})
    for (const Case &c : {Case{{2, 128, 128, 4, 2, 64, false}, Float(16)},
                          Case{{2, 128, 128, 4, 1, 64, true}, Float(16)},
                          Case{{1, 128, 256, 4, 2, 128, true}, BFloat(16)},
                          Case{{1, 64, 64, 2, 2, 256, false}, BFloat(16)}}) {
      SCOPED_TRACE(describe(c.shape, 16) + (c.dtype == BFloat(16) ? " bfloat16" : " float16") +
                   (tc ? " WMMA" : " CUDA cores"));
      FusedAttention att(c.shape, 16, c.dtype, tc);
      CheckResult r = check_on_gpu(att.s, {att.Q, att.K, att.V, att.O}, 3);
      EXPECT_TRUE(r.compare.ok) << r.str();
    }
  // Four warps a block of 128 queries.
  AttentionShape a{2, 256, 256, 4, 2, 64, true};
  SCOPED_TRACE(describe(a, 16) + " WMMA, 128 queries a block");
  FusedAttention att(a, 16, Float(16), /*tensor_cores=*/true, 128);
  CheckResult r = check_on_gpu(att.s, {att.Q, att.K, att.V, att.O}, 3);
  EXPECT_TRUE(r.compare.ok) << r.str();
  // The wgmma step (TC=2, Hopper only): head dims 64, 128, 256, causal, bfloat16.
  // (The float64 reference runs on the CPU: the shapes stay small, the GPU tests' call under
  // the device's 600 s.)
  if (Device::get().arch() == "sm_90") {
    struct Wgmma {
      Case c;
      bool tma;
    };
    for (const Wgmma &w : {Wgmma{{{2, 256, 256, 4, 2, 64, false}, Float(16)}, false},
                           Wgmma{{{1, 256, 512, 4, 4, 128, true}, Float(16)}, true},
                           Wgmma{{{1, 128, 256, 2, 1, 256, false}, BFloat(16)}, true},
                           Wgmma{{{2, 192, 192, 2, 2, 128, true}, BFloat(16)}, false}}) {
      SCOPED_TRACE(describe(w.c.shape, 64) + " wgmma" + (w.tma ? ", TMA" : ""));
      ScheduledProgram p = wgmma_attention(w.c.shape, 64, 2, w.c.dtype, 64, {w.tma});
      CheckResult r = check_on_gpu(p.schedule, p.args, 3);
      EXPECT_TRUE(r.compare.ok) << r.str();
    }
    // Two warpgroups a block, the ring by TMA (the registry's default at D = 128), their GEMMs
    // in turns or not, or a producer warpgroup filling the ring; causal.
    for (WgmmaOptions o : {WgmmaOptions{true}, WgmmaOptions{true, true},
                           WgmmaOptions{true, false, 0, true}}) {
      AttentionShape a{1, 256, 256, 4, 2, 128, true};
      SCOPED_TRACE(describe(a, 128) + " wgmma, 128 queries a block, TMA" +
                   (o.ping_pong ? ", ping-pong" : "") +
                   (o.warp_roles ? ", producer warpgroup" : ""));
      ScheduledProgram p = wgmma_attention(a, 128, 2, Float(16), 128, o);
      CheckResult w = check_on_gpu(p.schedule, p.args, 3);
      EXPECT_TRUE(w.compare.ok) << w.str();
    }
    // P V accumulated onto o (ACC=1), causal.
    {
      AttentionShape a{1, 256, 256, 4, 2, 128, true};
      SCOPED_TRACE(describe(a, 128) + " wgmma, 128 queries a block, TMA, P V onto o");
      ScheduledProgram p =
          wgmma_attention(a, 128, 2, Float(16), 128, {true, false, 0, false, true});
      CheckResult w = check_on_gpu(p.schedule, p.args, 3);
      EXPECT_TRUE(w.compare.ok) << w.str();
    }
    // The overlap inside a warpgroup (OVL=1), causal with 4 query blocks (triangular loops of
    // 1 to 4 steps), and not; with ping-pong; with a producer warpgroup (the registry's default
    // at D = 128: in turns when not causal).
    for (bool causal : {true, false})
      for (bool turns : {false, true})
        for (bool roles : {false, true}) {
          AttentionShape a{1, 512, 512, 4, 2, 128, causal};
          SCOPED_TRACE(describe(a, 128) + " wgmma, 128 queries a block, overlapped steps" +
                       (turns ? " in turns (ping-pong)" : "") +
                       (roles ? ", producer warpgroup" : ""));
          ScheduledProgram p =
              wgmma_attention(a, 128, 3, Float(16), 128, {true, turns, 0, roles, false, true});
          CheckResult w = check_on_gpu(p.schedule, p.args, 3);
          EXPECT_TRUE(w.compare.ok) << w.str();
        }
    // Causal longest first, in turns (the registry's causal default at D = 128).
    {
      AttentionParams a = AttentionShape{1, 512, 512, 2, 1, 128, true};
      a.reverse_blocks = true;
      SCOPED_TRACE(describe(a, 128) + " wgmma, overlapped steps in turns, longest first");
      ScheduledProgram p =
          wgmma_attention(a, 128, 3, Float(16), 128, {true, true, 0, true, false, true});
      CheckResult w = check_on_gpu(p.schedule, p.args, 3);
      EXPECT_TRUE(w.compare.ok) << w.str();
    }
    // A persistent grid of 3 blocks over 8 tiles, and of 6 with the last round's 2 tiles split
    // in 3 parts of their key blocks (the registry's default at D = 128 otherwise).
    for (int64_t blocks : {3, 6}) {
      AttentionParams a = AttentionShape{1, 512, 512, 2, 2, 128, false};
      a.persistent_blocks = blocks;
      a.last_wave_parts = blocks == 6 ? 4 : 0;
      SCOPED_TRACE(describe(a, 128) + " wgmma, overlapped steps in turns, persistent grid of " +
                   std::to_string(blocks) + (a.last_wave_parts ? ", last wave split" : ""));
      ScheduledProgram p =
          wgmma_attention(a, 128, 3, Float(16), 128, {true, true, 0, true, false, true});
      CheckResult w = check_on_gpu(p.schedule, p.args, 3);
      EXPECT_TRUE(w.compare.ok) << w.str();
    }
    // With the rows' logsumexp as a second output.
    {
      AttentionShape a{1, 256, 256, 4, 2, 128, true};
      a.lse = true;
      SCOPED_TRACE(describe(a, 128) + " wgmma, 128 queries a block, TMA, LSE");
      ScheduledProgram p = wgmma_attention(a, 128, 2, Float(16), 128, {true});
      CheckResult w = check_on_gpu(p.schedule, p.args, 3);
      EXPECT_TRUE(w.compare.ok) << w.str();
    }
    // The registry's kernels at D = 256 (RegistryHeadDim256): not causal, two warpgroups in
    // turns with a producer, P V onto o; causal, the overlap with 64 queries a block; bfloat16.
    for (int64_t causal : {0, 1}) {
      const ScheduleEntry &e = find_schedule("attention");
      AttentionParams a = attention_choice(
          resolve_shape(e, {{"B", 1}, {"H", 4}, {"HKV", 2}, {"SQ", 256}, {"SK", 384}, {"D", 256},
                            {"CAUSAL", causal}, {"TC", 2}}),
          true);
      SCOPED_TRACE(describe(a, a.block_keys) + " the registry's wgmma kernel at D = 256");
      ScheduledProgram p = attention(a, BFloat(16));
      CheckResult w = check_on_gpu(p.schedule, p.args, 3);
      EXPECT_TRUE(w.compare.ok) << w.str();
    }
  }
  // Packed sequences (attention_varlen: the default, wgmma on a Hopper GPU with the overlap of
  // steps; without it; WMMA): 256 down to 33 tokens, causal (with the rows' logsumexp) and not.
  for (auto [tc, overlap] : {std::pair{3, 2}, {3, 0}, {1, 0}})
    for (int64_t causal : {0, 1}) {
      if (overlap == 0 && tc == 3 && Device::get().arch() != "sm_90") // (the wgmma step's)
        continue;
      const ScheduleEntry &e = find_schedule("attention_varlen");
      ScheduledProgram p = e.build(resolve_shape(e, {{"B", 3}, {"H", 4}, {"HKV", 2}, {"LMAX", 256},
                                                     {"MINLEN", 33}, {"D", 128}, {"CAUSAL", causal},
                                                     {"TC", tc}, {"OVL", overlap},
                                                     {"LSE", causal}}),
                                   Float(16));
      SCOPED_TRACE(std::string("packed sequences") + (causal ? ", causal" : "") +
                   (tc == 1 ? ", WMMA" : overlap ? ", the default path" : ", OVL=0"));
      CheckResult w = check_on_gpu(p.schedule, p.args,
                                   make_check_problem(p.args, p.num_inputs, 1, 0, p.given_inputs));
      EXPECT_TRUE(w.compare.ok) << w.str();
    }
  // Decoding (attention_decode): grouped-query, causal with a few queries, head dim 256 in
  // bfloat16; K and V straight to registers (and prefetched a stretch ahead), and through a
  // ring of 2 shared tiles.
  for (const Case &c : {Case{{2, 1, 4096, 8, 2, 128, false}, Float(16)},
                        Case{{2, 3, 2048, 8, 2, 64, true}, Float(16)},
                        Case{{1, 1, 1024, 4, 4, 256, false}, BFloat(16)}}) {
    for (int ring : {0, 2, -1}) { // -1: straight to registers, prefetched (PF=1)
      SCOPED_TRACE(describe(c.shape, 512) + " decoding, " +
                   (ring < 0 ? std::string("prefetched") : "ring " + std::to_string(ring)));
      DecodeSchedule k{512, std::max(ring, 0)};
      k.prefetch = ring < 0;
      ScheduledProgram p = attention_decode(c.shape, c.dtype, k);
      CheckResult d = check_on_gpu(p.schedule, p.args, 3);
      EXPECT_TRUE(d.compare.ok) << d.str();
    }
  }
  // Decoding on attention's wgmma fold (TC=2), grouped 4:1 with one query and 8:2 with two;
  // its ring by cp.async (the default), and by TMA with the overlap of steps.
  if (Device::get().arch() == "sm_90")
    for (const AttentionShape &shape : {AttentionShape{2, 1, 4096, 8, 2, 128, false},
                                        AttentionShape{1, 2, 2048, 8, 2, 64, false}})
      for (bool overlap : {false, true}) {
        SCOPED_TRACE(describe(shape, 1024) + " decoding on wgmma" +
                     (overlap ? ", TMA, overlapped" : ""));
        ScheduledProgram p = attention_decode_wgmma(
            shape, Float(16), {.split_keys = 1024, .tma = overlap, .overlap = overlap});
        CheckResult d = check_on_gpu(p.schedule, p.args, 3);
        EXPECT_TRUE(d.compare.ok) << d.str();
      }
  // float8 (e4m3) on wgmma: the default's form at D = 128, and causal by cp.async. The check's
  // tolerance allows P's rounding to e4m3 a different side (2 |terms|); the error itself is
  // O's rounding and a few such sides (|O| ~ 0.05), where P's registers out of the order of
  // VT's keys would be off by O's own size.
  if (Device::get().arch() == "sm_90")
    for (bool causal : {false, true}) {
      SCOPED_TRACE(std::string("float8 attention") + (causal ? ", causal" : ""));
      WgmmaOptions o;
      if (!causal)
        o = {.tma = true, .warp_roles = true, .overlap = true};
      ScheduledProgram p = wgmma_attention({2, 256, 512, 4, 2, 128, causal}, 128,
                                           causal ? 2 : 3, Float8E4M3(), causal ? 64 : 128, o);
      CheckResult f = check_on_gpu(p.schedule, p.args, p.num_inputs);
      EXPECT_TRUE(f.compare.ok) << f.str();
      EXPECT_LT(f.compare.max_abs_error, 1e-2) << f.str();
    }
}

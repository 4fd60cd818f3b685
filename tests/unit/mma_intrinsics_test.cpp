// The PTX mma intrinsics (schedules/MmaIntrinsics.h) on a one-warp GEMM: every storage layout
// of A and B run on the CPU executor against float64, the executor's PTX fragment layouts
// shown to matter (a wrong lane mapping or a missing .trans gives wrong numbers), the
// generated inline PTX compiled by NVRTC, and the errors of misuse: in tensorize, in codegen and
// on the executor.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/tessel.h"
#include "runtime/Nvrtc.h"
#include "schedules/MmaIntrinsics.h"
#include "schedules/WmmaIntrinsics.h"

#include "ExactGemm.h"

#include <gtest/gtest.h>

#include <functional>

using namespace tessel;
using tessel::test::exact_gemm_mismatch;
using tessel::test::count_of;
using tessel::test::expect_error;

namespace {

struct Layouts {
  bool a_col = false; ///< A stored K x M (loaded with ldmatrix.trans)
  bool b_col = false; ///< B stored N x K (loaded without .trans)
};

// One warp computes C (M x N, fp32) = A * B: A and B are copied to shared memory by the 32
// lanes, read into register fragments (a compute stage per operand that reads the stored
// layout), accumulated in a fragment array of M/16 x N/16 tiles and stored from registers.
struct OneWarpMmaGemm {
  int M, N, K;
  Layouts layouts;
  Tensor A, B, AS, BS, AF, BF, C, CF;
  Schedule s;
  Stage af{nullptr}, bf{nullptr}, cf{nullptr}, sc{nullptr};
  IterVar aio, aii, bjo, bk, cio, cii, io, ii;

  OneWarpMmaGemm(int M, int N, int K, Layouts l = {}, DataType in = Float(16), bool unroll = true)
      : M(M), N(N), K(K), layouts(l) {
    A = l.a_col ? placeholder({K, M}, in, "A") : placeholder({M, K}, in, "A");
    B = l.b_col ? placeholder({N, K}, in, "B") : placeholder({K, N}, in, "B");
    AS = compute(A.shape(), [&](Var r, Var c) { return A(r, c); }, "AS");
    BS = compute(B.shape(), [&](Var r, Var c) { return B(r, c); }, "BS");
    AF = compute({M, K}, [&](Var i, Var k) { return l.a_col ? AS(k, i) : AS(i, k); }, "AF");
    BF = compute({K, N}, [&](Var k, Var j) { return l.b_col ? BS(j, k) : BS(k, j); }, "BF");
    IterVar k = reduce_axis({0, K}, "k");
    C = compute(
        {M, N},
        [&](Var i, Var j) {
          return sum(AF(i, k).astype(Float(32)) * BF(k, j).astype(Float(32)), {k});
        },
        "C", {"i", "j"});
    s = create_schedule({C});
    CF = s.cache_write(C, "mma.accumulator");
    IterVar tx = thread_axis("threadIdx.x");
    for (const Tensor &t : {AS, BS}) {
      s[t].set_scope("shared");
      auto [r, c] = s[t].axes<2>();
      auto [o, lane] = s[t].split(s[t].fuse(r, c), 32);
      s[t].bind(lane, tx);
    }
    af = s[AF].set_scope("mma.matrix_a");
    auto [ai, ak] = af.axes<2>();
    std::tie(aio, aii) = af.split(ai, 16);
    auto [ako, aki] = af.split(ak, 16);
    af.reorder({aio, ako, aii, aki});
    bf = s[BF].set_scope("mma.matrix_b");
    auto [bk0, bj] = bf.axes<2>();
    auto [bko, bki] = bf.split(bk0, 16);
    auto [bjo_, bji] = bf.split(bj, 16);
    bjo = bjo_, bk = bki;
    bf.reorder({bko, bjo, bki, bji});
    cf = s[CF];
    auto [ci, cj] = cf.axes<2>();
    auto [cko, cki] = cf.split(cf.reduce_axis()[0], 16);
    auto [cio_, cjo, cii_, cji] = cf.tile(ci, cj, 16, 16);
    cio = cio_, cii = cii_;
    cf.reorder({cko, cio, cjo, cii, cji, cki});
    sc = s[C];
    auto [i, j] = sc.axes<2>();
    auto [io_, jo, ii_, ji] = sc.tile(i, j, 16, 16);
    io = io_, ii = ii_;
    if (unroll)
      for (auto [stage, iv] : std::initializer_list<std::pair<Stage, IterVar>>{
               {af, aio}, {af, ako}, {bf, bko}, {bf, bjo}, {cf, cko}, {cf, cio}, {cf, cjo},
               {sc, io}, {sc, jo}})
        stage.unroll(iv);
  }
  void tensorize() {
    af.tensorize(aii, mma_load_matrix("mma.matrix_a", layouts.a_col ? "col_major" : "row_major"));
    bf.tensorize(bk, mma_load_matrix("mma.matrix_b", layouts.b_col ? "col_major" : "row_major"));
    cf.tensorize(cii, mma_gemm());
    sc.tensorize(ii, mma_store_matrix());
  }
  LoweredFunc lowered() { return lower(s, {A, B, C}).funcs[0]; }
  std::string mismatch(const LoweredFunc &f) {
    return exact_gemm_mismatch(f, M, N, K, layouts.a_col, layouts.b_col);
  }
};

// Rewrites the calls named `intrinsic` with `f`.
class CallRewriter : public IRMutator {
public:
  CallRewriter(const char *intrinsic, std::function<Expr(const Call *)> f)
      : intrinsic_(intrinsic), f_(std::move(f)) {}

protected:
  Expr visit(const Call *op) override {
    if (op->is_intrinsic(intrinsic_))
      return f_(op);
    return IRMutator::visit(op);
  }

private:
  const char *intrinsic_;
  std::function<Expr(const Call *)> f_;
};

// Rewrites the statements that evaluate intrinsic `intrinsic` with `f`.
class EvaluateRewriter : public IRMutator {
public:
  EvaluateRewriter(const char *intrinsic, std::function<Stmt(const Evaluate *)> f)
      : intrinsic_(intrinsic), f_(std::move(f)) {}

protected:
  Stmt visit(const Evaluate *op) override {
    const auto *call = op->value.as<Call>();
    return call && call->is_intrinsic(intrinsic_) ? f_(op) : IRMutator::visit(op);
  }

private:
  const char *intrinsic_;
  std::function<Stmt(const Evaluate *)> f_;
};

// `f` with its intrinsic calls `name` rewritten by `call`.
LoweredFunc rewrite(LoweredFunc f, const char *name, std::function<Expr(const Call *)> call) {
  f.body = CallRewriter(name, std::move(call)).mutate(f.body);
  return f;
}

Expr with_arg(const Call *op, size_t i, Expr value) {
  std::vector<Expr> args = op->args;
  args[i] = std::move(value);
  return Call::make(op->type, op->name, args, op->call_kind);
}

LoweredFunc rewrite_stmts(LoweredFunc f, const char *name, std::function<Stmt(const Evaluate *)> s) {
  f.body = EvaluateRewriter(name, std::move(s)).mutate(f.body);
  return f;
}

Expr lane_id() { return Call::make(Int(32), intrinsic::mma_lane_id, {}, Call::PureIntrinsic); }

// address_of(buf[index + delta]).
Expr shifted(const Expr &ptr, int delta) {
  const auto *load = ptr.as<Call>()->args[0].as<BufferLoad>();
  return Call::make(Handle(), intrinsic::address_of,
                    {BufferLoad::make(load->buffer, {load->indices[0] + delta})},
                    Call::PureIntrinsic);
}

// The lane ids in `e` replaced by the next lane's: each thread passes its neighbour's address.
Expr rotate_lanes(const Expr &e) {
  Expr next = floormod(lane_id() + 1, 32);
  return CallRewriter(intrinsic::mma_lane_id, [next](const Call *) { return next; }).mutate(e);
}

} // namespace

TEST(MmaIntrinsics, EveryLayoutMatchesReferenceOnExecutor) {
  for (bool a_col : {false, true})
    for (bool b_col : {false, true}) {
      SCOPED_TRACE(std::string("A ") + (a_col ? "col" : "row") + ", B " + (b_col ? "col" : "row"));
      OneWarpMmaGemm g(32, 48, 32, {a_col, b_col});
      g.tensorize();
      LoweredFunc f = g.lowered();
      std::string ir = to_string(f);
      // A row-major and B stored N x K load without .trans, the others with it.
      EXPECT_EQ(count_of(ir, ", 4, 1, address_of(A"), a_col ? 4 : 0) << ir;
      EXPECT_EQ(count_of(ir, ", 4, 1, address_of(B"), b_col ? 0 : 6) << ir;
      EXPECT_EQ(count_of(ir, "@mma_sync("), 2 * 3 * 2 * 2) << ir; // 2x3 tiles, 2 K steps
      EXPECT_EQ(count_of(ir, "@mma_store_fragment("), 2 * 3 * 2) << ir;
      EXPECT_EQ(g.mismatch(f), "");
    }
}

// What the executor's fragment layouts are for: mistakes in the lane mapping of an intrinsic
// give wrong numbers (and the correct mapping, above, exact ones).
TEST(MmaIntrinsics, WrongLaneMappingsGiveWrongNumbers) {
  OneWarpMmaGemm g(32, 32, 32);
  g.tensorize();
  LoweredFunc f = g.lowered();
  ASSERT_EQ(g.mismatch(f), "");
  // ldmatrix rows from the neighbouring lane's address.
  EXPECT_NE(g.mismatch(rewrite(f, intrinsic::mma_ldmatrix,
                               [](const Call *op) { return with_arg(op, 4, rotate_lanes(op->args[4])); })),
            "");
  // B loaded without .trans although it is stored K x N.
  EXPECT_NE(g.mismatch(rewrite(f, intrinsic::mma_ldmatrix,
                               [](const Call *op) {
                                 return with_arg(op, 3, make_const(Int(32), 1 - *as_const_int(op->args[3])));
                               })),
            "");
  // Each thread storing its accumulators where its neighbour's belong.
  EXPECT_NE(g.mismatch(rewrite(f, intrinsic::mma_store_fragment,
                               [](const Call *op) { return with_arg(op, 2, rotate_lanes(op->args[2])); })),
            "");
  // The two n8 halves of a 16x16 tile swapped in the MMA.
  EXPECT_NE(g.mismatch(rewrite(f, intrinsic::mma_sync,
                               [](const Call *op) {
                                 int64_t b = *as_const_int(op->args[5]);
                                 return with_arg(op, 5, make_const(Int(32), b ^ 1));
                               })),
            "");
}

TEST(MmaIntrinsics, CudaIsInlinePtxWithConstantRegisterIndices) {
  OneWarpMmaGemm g(32, 32, 32, {false, true});
  g.tensorize();
  std::string src = codegen_cuda(lower(g.s, {g.A, g.B, g.C}));
  for (const char *text :
       {"unsigned AF[4][4];", "unsigned BF[8][2];", "float C_mma_accumulator[8][4];",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];",
        "\"=r\"(BF[0][0]), \"=r\"(BF[0][1]), \"=r\"(BF[1][0]), \"=r\"(BF[1][1])",
        "__cvta_generic_to_shared(&AS[",
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};",
        "\"+f\"(C_mma_accumulator[0][0])", "= make_float2(C_mma_accumulator[0][0], "
        "C_mma_accumulator[0][1]);",
        "C_mma_accumulator[7][3] = 0.0f;", "((int)threadIdx.x) % 16"})
    EXPECT_NE(src.find(text), std::string::npos) << text << "\n" << src;
  EXPECT_EQ(src.find("#include <mma.h>"), std::string::npos) << src;
  for (const char *arch : {"sm_80", "sm_90"}) {
    SCOPED_TRACE(arch);
    CompileOptions o;
    o.arch = arch;
    EXPECT_FALSE(nvrtc_compile(src, nvrtc_options(o), "mma_one_warp.cu").cubin.empty());
  }
}

// ---- misuse --------------------------------------------------------------------------------

TEST(MmaIntrinsicsErrors, DeclarationArguments) {
  expect_error([] { mma_load_matrix("wmma.matrix_a"); },
               {"mma_load_matrix", "scope must be mma.matrix_a or mma.matrix_b, got 'wmma.matrix_a'"});
  expect_error([] { mma_load_matrix("mma.matrix_b", "row"); },
               {"layout must be row_major or col_major, got 'row'"});
  expect_error([] { mma_store_matrix("local"); }, {"scope must be global or shared, got 'local'"});
  expect_error([] { mma_gemm(Float(32)); },
               {"mma_gemm", "takes float16 or bfloat16 operands, got float32"});
  expect_error([] { mma_load_matrix("mma.matrix_a", "row_major", Int(16)); },
               {"mma_load_matrix", "float16 or bfloat16 operands, got int16"});
  expect_error([] { mma_store_matrix("global", Int(32)); },
               {"mma_store_matrix", "stores float32, or rounds to float16 or bfloat16; got int32"});
}

TEST(MmaIntrinsicsErrors, WrongInputType) {
  OneWarpMmaGemm g(16, 16, 16, {}, Float(32));
  g.af.tensorize(g.aii, mma_load_matrix("mma.matrix_a"));
  expect_error([&] { g.lowered(); },
               {"tensorize of stage 'AF'", "mma_load_matrix(mma.matrix_a)", "is float16",
                "of float32"});
}

TEST(MmaIntrinsicsErrors, WrongExtent) {
  OneWarpMmaGemm g(32, 32, 16, {}, Float(16), /*unroll=*/false);
  g.tensorize();
  g.cf.tensorize(g.cio, mma_gemm()); // too far out: a 2x2x16x16x16 nest
  expect_error([&] { g.lowered(); },
               {"tensorize of stage 'C.mma.accumulator' at axis 'i.c.outer' with intrinsic "
                "'mma_gemm'",
                "16x16x16 block", "Tensorize at 'i.c.inner'"});
}

TEST(MmaIntrinsicsErrors, WrongFamilyOfScope) {
  OneWarpMmaGemm g(16, 16, 16);
  g.tensorize();
  g.af.tensorize(g.aii, wmma_load_matrix("wmma.matrix_a"));
  expect_error([&] { g.lowered(); },
               {"expects buffer 'BC' in scope 'wmma.matrix_a'", "'AF' is in 'mma.matrix_a'"});
}

// Shared rows of 20 halves (40 bytes): ldmatrix row addresses would not be 16-byte aligned.
TEST(MmaIntrinsicsErrors, MisalignedLeadingDimension) {
  OneWarpMmaGemm g(16, 16, 16);
  g.s[g.AS].storage_align(g.s[g.AS].op_axis(0), 32, 20);
  g.tensorize();
  expect_error([&] { g.lowered(); },
               {"mma_load_matrix(mma.matrix_a, row_major)", "'AS' has a leading dimension of 20",
                "multiple of 8 halves", "storage_align"});
}

// Without unrolling, fragment indices are loop variables: register arrays indexed at run time.
TEST(MmaIntrinsicsErrors, CodegenNeedsConstantFragmentIndices) {
  OneWarpMmaGemm g(32, 32, 16, {}, Float(16), /*unroll=*/false);
  g.tensorize();
  LoweredModule m = lower(g.s, {g.A, g.B, g.C});
  EXPECT_EQ(g.mismatch(m.funcs[0]), ""); // the executor does not mind
  expect_error([&] { codegen_cuda(m); },
               {"mma_", "the tile index", "is not a constant", "local memory",
                "unroll the loops around the intrinsic (Stage::unroll)"});
}

// Before tensorize, the fragment stages are element-wise loops over register fragments.
TEST(MmaIntrinsicsErrors, FragmentsUsedElementWise) {
  OneWarpMmaGemm g(16, 16, 16);
  LoweredModule m = lower(g.s, {g.A, g.B, g.C});
  expect_error([&] { codegen_cuda(m); },
               {"is a fragment (scope mma.", "through the mma_* intrinsics",
                "tensorize the stage that uses it"});
  expect_error([&] { g.mismatch(m.funcs[0]); },
               {"is a fragment", "wmma_* / mma_* / wgmma_* intrinsics of its scope"});
}

// The executor reports what would be undefined behaviour or garbage on the GPU.
TEST(MmaIntrinsicsErrors, ExecutorChecksWarpCalls) {
  OneWarpMmaGemm g(32, 32, 32);
  g.tensorize();
  LoweredFunc f = g.lowered();
  expect_error([&] {
    g.mismatch(rewrite(f, intrinsic::mma_ldmatrix,
                       [](const Call *op) { return with_arg(op, 4, shifted(op->args[4], 1)); }));
  }, {"mma_ldmatrix by warp 0", "passes row address 'AS' + 1 elements",
      "not 16-byte aligned as ldmatrix requires"});
  expect_error([&] {
    g.mismatch(rewrite(f, intrinsic::mma_store_fragment,
                       [](const Call *op) { return with_arg(op, 2, shifted(op->args[2], 1)); }));
  }, {"mma_store_fragment by warp 0", "stores 2 elements at 'C' + 1", "not aligned to 8 bytes"});
  expect_error([&] {
    g.mismatch(rewrite(f, intrinsic::mma_ldmatrix, [](const Call *op) {
      return with_arg(op, 1, op->args[1] + floordiv(lane_id(), 16));
    }));
  }, {"mma_ldmatrix: argument 'index' differs within warp 0", "thread (0,0,0) and thread (16,0,0)"});
  expect_error([&] {
    g.mismatch(rewrite_stmts(f, intrinsic::mma_sync, [](const Evaluate *op) {
      return IfThenElse::make(lane_id() < 16, Stmt(op));
    }));
  }, {"mma_sync is called by only 16 of the 32 threads of warp 0", "thread (16,0,0) does not call it"});
  expect_error([&] {
    g.mismatch(rewrite_stmts(f, intrinsic::mma_fill_fragment,
                             [](const Evaluate *) { return Evaluate::make(0); }));
  }, {"mma_sync by warp 0", "reads tile 0 of fragment 'C.mma.accumulator'",
      "not loaded or filled"});
}

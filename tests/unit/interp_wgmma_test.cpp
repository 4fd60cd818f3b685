// The wgmma intrinsics on the executor: hand-built kernels whose warpgroups copy A and B into
// shared memory in the no-swizzle canonical layouts, multiply with wgmma_mma and store the
// accumulator, compared exactly with float64; wrong layouts shown to give wrong numbers; and the
// misuses the executor reports (missing fence, results read or operands overwritten before the
// wait, calls by part of a warpgroup, bad shapes).
#include "ExactGemm.h"
#include "TestUtil.h"
#include "interp_kernels.h"

#include "SassUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

using namespace tessel;
using namespace tessel::interp;
using namespace tessel::interp_test;
using tessel::test::exact_gemm_values;
using tessel::test::expect_error;

namespace {

Expr wgmma_thread_id() {
  return Call::make(Int(32), intrinsic::wgmma_thread_id, {}, Call::PureIntrinsic);
}

// C (64 groups x N) = A (64 groups x K) * B (K x N): warpgroup y of the one block computes rows
// 64 y .. 64 y + 63 of C. Every thread copies elements of A and B into shared memory in the
// layouts wgmma reads, then each warpgroup fills its accumulator tile with 0, issues one
// wgmma_mma per K step of 16 (chained on the tile), waits and stores.
struct WgmmaGemm {
  int groups = 1; ///< warpgroups (threadIdx.y)
  int N = 64, K = 32;
  bool trans_b = true;       ///< B MN-major in shared memory ([N/8][K][8]); else K-major
  bool a_rows_outer = false; ///< A's core matrices [rows/8][K/8]; else [K/8][rows/8]
  int tile = 0;              ///< the accumulator tile used (the allocation holds tile + 1)
  bool commit_each_step = false; ///< a group per K step and wgmma_wait(1) after it
  // Mistakes.
  bool fence = true, commit = true, wait = true, store = true;
  bool overwrite_b_before_wait = false;
  bool mma_by_half_group = false;
  bool a_ptr_differs_per_warp = false;
  bool wrong_store_lanes = false; ///< lane l stores as if it held row l % 8, column 2 (l / 8)
  bool wrong_trans_b = false;     ///< passes !trans_b for B's layout
  int n_arg = 0;                  ///< n passed to the intrinsics when nonzero
  int block_x = 128;
  DataType out = Float(32); ///< C's type: the store rounds to it
  int store_lanes = 2;      ///< wgmma_store's lanes (4: quads exchanging pairs)
  bool add_one = false;     ///< an epilogue adds 1 to every register (wgmma_reg / _set)
  bool epilogue_before_wait = false;
  int epilogue_registers = 0; ///< registers the epilogue visits; 0: n / 2
  int col_limit = 0, row_limit = 0; ///< wgmma_store's limits (0: none): columns / rows stored

  int rows() const { return 64 * groups; }
  // Element strides (LBO: between core matrices along K; SBO: along M or N) of the layouts.
  int a_lbo() const { return a_rows_outer ? 64 : rows() * 8; }
  int a_sbo() const { return a_rows_outer ? K * 8 : 64; }
  int b_lbo() const { return trans_b ? 64 : N * 8; }
  int b_sbo() const { return trans_b ? K * 8 : 64; }
  Expr a_index(Expr m, Expr k) const {
    return floormod(m, 8) * 8 + floordiv(m, 8) * a_sbo() + floormod(k, 8) + floordiv(k, 8) * a_lbo();
  }
  Expr b_index(Expr k, Expr c) const {
    Expr in_core = trans_b ? floormod(c, 8) + floormod(k, 8) * 8 : floormod(c, 8) * 8 + floormod(k, 8);
    return in_core + floordiv(c, 8) * b_sbo() + floordiv(k, 8) * b_lbo();
  }

  LoweredFunc build() const {
    const DataType f16 = Float(16), f32 = Float(32);
    const int R = rows(), n = n_arg ? n_arg : N;
    Buffer A = flat("A", f16, int64_t(R) * K), B = flat("B", f16, int64_t(K) * N),
           C = flat("C", out, int64_t(R) * N);
    Buffer As = flat("A_shared", f16, int64_t(R) * K, "shared"),
           Bs = flat("B_shared", f16, int64_t(K) * N, "shared"),
           acc = flat("acc", f32, 64 * N * (tile + 1), "wgmma.accumulator");
    Axes ax;
    const int threads = block_x * groups;
    Expr linear = ax.tx + block_x * ax.ty, tid = wgmma_thread_id();
    Var e("e"), ks("ks");
    Expr ia = e * threads + linear, ib = e * threads + linear;
    Stmt fill_shared = Seq::make(
        {loop(e, (R * K + threads - 1) / threads,
              IfThenElse::make(ia < R * K, st(As, a_index(floordiv(ia, K), floormod(ia, K)),
                                              ld(A, ia)))),
         loop(e, (K * N + threads - 1) / threads,
              IfThenElse::make(ib < K * N, st(Bs, b_index(floordiv(ib, N), floormod(ib, N)),
                                              ld(B, ib)))),
         call(intrinsic::fence_proxy_async), sync_threads()});

    Expr a_ptr = 8 * ax.ty * a_sbo() + 2 * ks * a_lbo(); // a_index(64 y, 16 ks)
    if (a_ptr_differs_per_warp)
      a_ptr = a_ptr + floordiv(tid, 32) * 8;
    Expr b_ptr = 2 * ks * b_lbo(); // b_index(16 ks, 0)
    Stmt mma = call(intrinsic::wgmma_mma,
                    {data_var(acc), tile, n, address_of(As, a_ptr), a_lbo(), a_sbo(),
                     address_of(Bs, b_ptr), b_lbo(), b_sbo(), int(trans_b != wrong_trans_b), 0});
    if (mma_by_half_group)
      mma = IfThenElse::make(ax.tx < 64, mma);
    std::vector<Stmt> step = {mma};
    if (commit_each_step)
      step.insert(step.end(), {call(intrinsic::wgmma_commit), call(intrinsic::wgmma_wait, {1})});

    std::vector<Stmt> body = {fill_shared,
                              call(intrinsic::wgmma_fill, {data_var(acc), tile, n, Expr(0.0f)})};
    if (fence)
      body.push_back(call(intrinsic::wgmma_fence));
    body.push_back(loop(ks, K / 16, Seq::make(step)));
    if (commit)
      body.push_back(call(intrinsic::wgmma_commit));
    if (overwrite_b_before_wait) // after a barrier: no race, but the wgmma may still read B
      body.insert(body.end(), {sync_threads(), st(Bs, linear, make_zero(f16))});
    if (wait)
      body.push_back(call(intrinsic::wgmma_wait, {0}));
    if (add_one) {
      // for r: acc[r] = acc[r] + 1, register by register, after (or wrongly before) the wait.
      Var r("r");
      Expr reg = Call::make(Float(32), intrinsic::wgmma_reg, {data_var(acc), tile, n, r},
                            Call::Intrinsic);
      Stmt set = call(intrinsic::wgmma_reg_set,
                      {data_var(acc), tile, n, r, reg + make_const(Float(32), 1.0)});
      int regs = epilogue_registers ? epilogue_registers : n / 2;
      body.push_back(loop(r, regs, set));
      if (epilogue_before_wait)
        std::swap(body[body.size() - 1], body[body.size() - 2]);
    }
    Expr w = floordiv(tid, 32), l = floormod(tid, 32);
    Expr row = 64 * ax.ty + 16 * w + (wrong_store_lanes ? floormod(l, 8) : floordiv(l, 4));
    Expr col = wrong_store_lanes ? 2 * floordiv(l, 8) : 2 * floormod(l, 4);
    std::vector<Expr> store_args = {data_var(acc), tile, n, address_of(C, row * N + col), N,
                                    store_lanes};
    if (col_limit || row_limit)
      store_args.push_back(col_limit ? col_limit : N);
    if (row_limit)
      store_args.push_back(row_limit);
    if (store)
      body.push_back(call(intrinsic::wgmma_store, store_args));

    LoweredFunc f;
    f.name = "wgmma_gemm";
    f.args = {A, B, C};
    f.arg_shapes = {{R, K}, {K, N}, {R, N}};
    f.launch = launch(1, 1, block_x, groups);
    f.body = ax.bind_all(f.launch, allocate(As, allocate(Bs, allocate(acc, Seq::make(body)))));
    return f;
  }

  /// Runs on exact inputs: "" when C equals the float64 product, else the first difference.
  std::string mismatch() const {
    const int R = rows();
    std::vector<double> a = exact_gemm_values(size_t(R) * K, 1),
                        b = exact_gemm_values(size_t(K) * N, 2);
    HostBuffer Ah = HostBuffer::from_doubles(Float(16), a), Bh = HostBuffer::from_doubles(Float(16), b);
    HostBuffer Ch = HostBuffer::from_doubles(out, std::vector<double>(size_t(R) * N, NAN));
    execute(build(), {&Ah, &Bh, &Ch});
    std::vector<double> c = Ch.to_doubles();
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < N; ++j) {
        double ref = 0;
        for (int k = 0; k < K; ++k)
          ref += a[size_t(i) * K + k] * b[size_t(k) * N + j];
        ref += add_one ? 1 : 0;
        ref = HostBuffer::from_doubles(out, {ref}).to_doubles()[0]; // rounded once to C's type
        // Past a store limit C keeps its NaN.
        if ((col_limit && j >= col_limit) || (row_limit && i % 64 >= row_limit))
          ref = NAN;
        if (c[size_t(i) * N + j] != ref && !(std::isnan(ref) && std::isnan(c[size_t(i) * N + j]))) {
          std::ostringstream os;
          os << "C[" << i << ", " << j << "] = " << c[size_t(i) * N + j] << ", expected " << ref;
          return os.str();
        }
      }
    return "";
  }

  void expect_error(std::initializer_list<const char *> parts) const {
    test::expect_error([&] { mismatch(); }, parts);
  }
};

} // namespace

TEST(InterpWgmma, CanonicalLayoutsMatchReference) {
  for (int N : {64, 256})
    for (bool trans_b : {true, false})
      for (bool a_rows_outer : {false, true}) {
        SCOPED_TRACE("N " + std::to_string(N) + (trans_b ? ", B MN-major" : ", B K-major") +
                     (a_rows_outer ? ", A [rows/8][K/8]" : ", A [K/8][rows/8]"));
        WgmmaGemm g;
        g.groups = 2, g.N = N, g.trans_b = trans_b, g.a_rows_outer = a_rows_outer;
        EXPECT_EQ(g.mismatch(), "");
      }
}

TEST(InterpWgmma, OneWarpgroupK16) {
  WgmmaGemm g;
  g.K = 16, g.N = 8;
  EXPECT_EQ(g.mismatch(), "");
}

// wgmma_mma on a tile whose earlier wgmma_mma (of the previous group) is still pending chains
// on it, as on the GPU; tile 1 of a two-tile accumulator.
TEST(InterpWgmma, ChainsAcrossCommitGroups) {
  WgmmaGemm g;
  g.K = 64, g.commit_each_step = true, g.tile = 1;
  EXPECT_EQ(g.mismatch(), "");
}

// wgmma_store's limits (the last block of a dimension that blocks do not divide): only the
// tile's columns below the column limit and rows below the row limit are written, with every
// lane grouping; the CUDA guards the stores the same way.
TEST(InterpWgmma, StoreLimitsWriteOnlyWhatIsInside) {
  for (int lanes : {1, 2}) {
    WgmmaGemm g;
    g.N = 64, g.store_lanes = lanes, g.col_limit = 40, g.row_limit = 19;
    EXPECT_EQ(g.mismatch(), "") << "lanes " << lanes;
    WgmmaGemm rows;
    rows.N = 64, rows.store_lanes = lanes, rows.row_limit = 8;
    EXPECT_EQ(rows.mismatch(), "") << "lanes " << lanes;
  }
  WgmmaGemm quads;
  quads.N = 64, quads.out = Float(16), quads.store_lanes = 4, quads.col_limit = 32,
  quads.row_limit = 50;
  EXPECT_EQ(quads.mismatch(), "");
  WgmmaGemm odd;
  odd.N = 64, odd.store_lanes = 2, odd.col_limit = 33;
  odd.expect_error({"the column limit 33 is not a multiple of the 2 elements stored at a time"});
  WgmmaGemm g;
  g.N = 64, g.col_limit = 40, g.row_limit = 19;
  LoweredModule m;
  m.funcs.push_back(g.build());
  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("const int wgmma_row_limit = 19;"), std::string::npos) << src;
  EXPECT_NE(src.find(" + h * 8 < wgmma_row_limit) *(float2*)"), std::string::npos) << src;
  CompiledKernel k = tessel::test::compile_for_sm90(m, src, "wgmma_store_limits.cu");
  EXPECT_EQ(k.kernels.size(), 1u) << k.log;
}

// The layouts matter: a store lane mapping other than the accumulator's, or B read as K-major
// when it is stored MN-major, give wrong numbers (all of C is still written).
TEST(InterpWgmma, WrongLayoutsGiveWrongNumbers) {
  WgmmaGemm lanes;
  lanes.wrong_store_lanes = true;
  EXPECT_NE(lanes.mismatch(), "");
  WgmmaGemm trans;
  trans.wrong_trans_b = true;
  EXPECT_NE(trans.mismatch(), "");
}

TEST(InterpWgmma, MmaAfterFillWithoutFenceIsAnError) {
  WgmmaGemm g;
  g.fence = false;
  g.expect_error({"wgmma_mma by warp 0 (warp 0 of warpgroup 0) of block (0,0,0)", "tile 0",
                  "'acc'", "call wgmma_fence"});
}

TEST(InterpWgmma, StoreBeforeWaitIsAnError) {
  WgmmaGemm g;
  g.wait = false;
  g.expect_error({"wgmma_store by warp 0", "reads tile 0 of accumulator 'acc'",
                  "of a committed group has not completed", "wgmma_wait"});
  g.commit = false;
  g.expect_error({"wgmma_store by warp 0", "is not even committed"});
}

TEST(InterpWgmma, BlockEndingWithResultsPendingIsAnError) {
  WgmmaGemm g;
  g.wait = false, g.store = false;
  g.expect_error({"kernel 'wgmma_gemm'", "block (0,0,0) ends while warp 0 has a wgmma_mma on "
                                         "tile 0 of accumulator 'acc'",
                  "wgmma_wait"});
}

TEST(InterpWgmma, OperandOverwrittenBeforeWaitIsAnError) {
  WgmmaGemm g;
  g.overwrite_b_before_wait = true;
  g.expect_error({"wgmma_wait by warp 0", "shared operand 'B_shared'[",
                  "overwritten before wgmma_wait"});
}

TEST(InterpWgmma, CallByPartOfAWarpgroupIsAnError) {
  WgmmaGemm g;
  g.mma_by_half_group = true;
  g.expect_error({"wgmma_mma in block (0,0,0) is called by warp 0 but not by warp 2 of "
                  "warpgroup 0 (warps 0..3)"});
}

TEST(InterpWgmma, OperandPointerMustBeUniformOverTheWarpgroup) {
  WgmmaGemm g;
  g.a_ptr_differs_per_warp = true;
  g.expect_error({"wgmma_mma: argument 'a_ptr' differs within warpgroup 0 of block (0,0,0)",
                  "thread (0,0,0) and thread (32,0,0)"});
}

// C stored 4 elements a lane (lanes 4): the same elements in the same places as pairs, each
// rounded once (float16) or exact (float32, 16 bytes a lane); lanes 4 needs tiles n a multiple
// of 16 and pointers 2 elements apart in each quad.
TEST(InterpWgmma, StoresInQuads) {
  for (DataType out : {Float(16), Float(32)})
    for (int lanes : {2, 4}) {
      WgmmaGemm g;
      g.out = out, g.store_lanes = lanes, g.K = 256; // sums that float16 must round
      EXPECT_EQ(g.mismatch(), "") << out << ", lanes " << lanes;
    }
  WgmmaGemm narrow;
  narrow.N = 8, narrow.store_lanes = 4;
  narrow.expect_error({"wgmma_store: lanes 4 stores tiles n a multiple of 16, got n=8"});
  for (DataType out : {Float(16), Float(32)}) {
    WgmmaGemm scattered;
    scattered.out = out, scattered.store_lanes = 4, scattered.wrong_store_lanes = true;
    scattered.expect_error({"lanes 4 needs the pointers of a quad of lanes 2 elements apart"});
  }
}

// An epilogue in registers: wgmma_reg / wgmma_reg_set read and write each thread's own registers
// of the tile (so the stored C is the product + 1), and touch no tile before its wait.
TEST(InterpWgmma, EpilogueInRegisters) {
  WgmmaGemm g;
  g.add_one = true;
  EXPECT_EQ(g.mismatch(), "");
  g.tile = 1;
  EXPECT_EQ(g.mismatch(), "");
  WgmmaGemm early;
  early.add_one = true, early.epilogue_before_wait = true;
  early.expect_error({"wgmma_reg by warp 0", "reads tile 0 of accumulator 'acc'",
                      "has not completed"});
  WgmmaGemm past;
  past.add_one = true, past.epilogue_registers = 33; // a thread holds 32 of a 64 x 64 tile
  past.expect_error({"register 32 of a 64 x 64 tile; a thread holds 32"});
}

TEST(InterpWgmma, BadShapesAreErrors) {
  for (int n : {12, 264}) {
    WgmmaGemm g;
    g.n_arg = n;
    g.expect_error({"wgmma_fill: n = ", "a multiple of 8 from 8 to 256"});
  }
  // Whole warps, but not whole warpgroups.
  for (int x : {64, 160}) {
    WgmmaGemm g;
    g.block_x = x;
    g.expect_error({"kernel 'wgmma_gemm' calls wgmma_fill with", "use a multiple of 128"});
  }
}

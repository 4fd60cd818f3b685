// Stage::rasterize: the grouped block ordering as expressions (checked against an enumeration of
// the order for many grid shapes), the lowered kernel's blocks computing their tiles in that order
// on the CPU executor, GEMM schedules with rasterized blocks against the float64 reference, the
// printed IR and CUDA, and the errors of misuse.
#include "TestUtil.h"

#include "compiler/arith/Analyzer.h"
#include "compiler/arith/IntEval.h"
#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/lower/Rasterize.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "runtime/Nvrtc.h"
#include "runtime/interp/Executor.h"
#include "schedules/Gemm.h"
#include "schedules/GemmWmma.h"
#include "schedules/Registry.h"
#include "schedules/WmmaIntrinsics.h"

#include "SassUtil.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <utility>
#include <vector>

using namespace tessel;
using tessel::test::expect_error;

namespace {

using Tile = std::pair<int64_t, int64_t>;

// The grouped order written out by enumeration, independently of grouped_tile's formula: groups
// of `group` rows from the top (the last one shorter), in each group the columns from the left,
// in each column the group's rows from the top. order[L] is the tile of the L-th block launched.
std::vector<Tile> grouped_order(int64_t ny, int64_t nx, int64_t group) {
  std::vector<Tile> order;
  for (int64_t first = 0; first < ny; first += group)
    for (int64_t col = 0; col < nx; ++col)
      for (int64_t row = first; row < std::min(ny, first + group); ++row)
        order.push_back({row, col});
  return order;
}

// T[i, j] = 2 * A[i, j] in th x tw tiles, one tile per block, rasterized in groups of `group`.
struct Elementwise {
  int64_t ny, nx, th = 2, tw = 3;
  Tensor A, T;
  Schedule s;
  IterVar bi, bj, ti, tj;

  Elementwise(int64_t ny_, int64_t nx_, int64_t group) : ny(ny_), nx(nx_) {
    A = placeholder({ny * th, nx * tw}, Float(32), "A");
    T = compute({ny * th, nx * tw}, [&](Var i, Var j) { return A(i, j) * 2.0f; }, "T",
                {"i", "j"});
    s = create_schedule({T});
    Stage st = s[T];
    auto [i, j] = st.axes<2>();
    std::tie(bi, bj, ti, tj) = std::tuple_cat(st.tile(i, j, th, tw));
    st.bind(bi, thread_axis("blockIdx.y")).bind(bj, thread_axis("blockIdx.x"));
    st.bind(ti, thread_axis("threadIdx.y")).bind(tj, thread_axis("threadIdx.x"));
    if (group > 0)
      st.rasterize(bi, bj, group);
  }
};

// Replaces every value stored into `name` by the linear launch position of the block storing it,
// blockIdx.y * gridDim.x + blockIdx.x, so that the output shows which block computed what.
class StoreBlockId : public IRMutator {
public:
  StoreBlockId(std::string name, int64_t grid_x) : name_(std::move(name)), grid_x_(grid_x) {}
  using IRMutator::mutate;

protected:
  Stmt visit(const AttrStmt *op) override {
    if (const auto *iv = std::get_if<IterVar>(&op->node); iv && op->key == attr::thread_extent) {
      if (iv->thread_tag() == "blockIdx.x")
        bx_ = iv->var();
      if (iv->thread_tag() == "blockIdx.y")
        by_ = iv->var();
    }
    return IRMutator::visit(op);
  }
  Stmt visit(const BufferStore *op) override {
    if (op->buffer.name() != name_)
      return IRMutator::visit(op);
    internal_check(bx_.defined() && by_.defined()) << "store outside the block loops";
    Expr id = cast(op->value.type(), Expr(by_) * int(grid_x_) + bx_);
    return BufferStore::make(op->buffer, id, op->indices);
  }

private:
  std::string name_;
  int64_t grid_x_;
  Var bx_, by_;
};

} // namespace

TEST(Rasterize, GroupedTileIsTheGroupedOrderForManyGrids) {
  Var block("block");
  for (int64_t ny = 1; ny <= 12; ++ny)
    for (int64_t nx = 1; nx <= 9; ++nx)
      for (int64_t group = 1; group <= 14; ++group) {
        SCOPED_TRACE(testing::Message() << ny << "x" << nx << " group " << group);
        std::vector<Tile> order = grouped_order(ny, nx, group);
        ASSERT_EQ(int64_t(order.size()), ny * nx);
        auto [row, col] = grouped_tile(block, ny, nx, group);
        // What the kernel computes after simplification, given the launch position's range.
        arith::Analyzer an;
        an.bind(block, Range(0, int(ny * nx)));
        Expr srow = an.simplify(row), scol = an.simplify(col);
        std::set<Tile> seen;
        for (int64_t L = 0; L < ny * nx; ++L) {
          arith::VarValues v{{block.get(), L}};
          Tile got{*arith::eval_int(row, v), *arith::eval_int(col, v)};
          ASSERT_EQ(got, order[L]) << "block " << L;
          ASSERT_EQ(Tile(*arith::eval_int(srow, v), *arith::eval_int(scol, v)), got)
              << "simplified: " << srow << ", " << scol;
          seen.insert(got);
        }
        EXPECT_EQ(int64_t(seen.size()), ny * nx); // a bijection on the grid
        // Row-major exactly when the shortcut says so (then no remap is emitted).
        bool row_major = true;
        for (int64_t L = 0; L < ny * nx; ++L)
          row_major = row_major && order[L] == Tile(L / nx, L % nx);
        EXPECT_EQ(grouped_order_is_row_major(ny, nx, group), row_major);
      }
}

// The lowered kernel itself: each block stores its launch position into its tile, and tile
// (row, col) must hold the position the grouped order gives it, for divisible and
// non-divisible groups, groups larger than the grid and single rows or columns.
TEST(Rasterize, LoweredBlocksComputeTheirTilesInGroupedOrder) {
  for (int64_t ny : {1, 2, 3, 5, 8})
    for (int64_t nx : {1, 2, 5})
      for (int64_t group : {1, 2, 3, 4, 16}) {
        SCOPED_TRACE(testing::Message() << ny << "x" << nx << " blocks, group " << group);
        Elementwise e(ny, nx, group);
        LoweredFunc f = lower(e.s, {e.A, e.T}).funcs.at(0);
        ASSERT_EQ(f.launch.grid[0], nx);
        ASSERT_EQ(f.launch.grid[1], ny); // the grid is unchanged
        f.body = StoreBlockId("T", nx).mutate(f.body);
        int64_t n = ny * e.th * nx * e.tw;
        interp::HostBuffer A = interp::HostBuffer::zeros(Float(32), n);
        interp::HostBuffer T =
            interp::HostBuffer::from_doubles(Float(32), std::vector<double>(n, -1));
        interp::execute(f, {&A, &T});
        std::vector<Tile> order = grouped_order(ny, nx, group);
        for (int64_t L = 0; L < ny * nx; ++L) {
          auto [row, col] = order[L];
          for (int64_t i = 0; i < e.th; ++i)
            for (int64_t j = 0; j < e.tw; ++j)
              ASSERT_EQ(T.get((row * e.th + i) * nx * e.tw + col * e.tw + j), double(L))
                  << "tile (" << row << ", " << col << ") element (" << i << ", " << j << ")";
        }
      }
}

TEST(Rasterize, ElementwiseMatchesReference) {
  for (int64_t group : {2, 3, 5}) {
    Elementwise e(7, 4, group);
    CheckResult r = check_on_cpu(e.s, {e.A, e.T}, 1);
    EXPECT_TRUE(r.compare.ok) << "group " << group << ": " << r.str();
  }
}

// The tile is bound by LetStmts inside both block loops, before anything else of the block, and
// the body indexes with it; group 1 leaves no trace.
TEST(Rasterize, LoweredIrBindsTheTileInsideTheBlockLoops) {
  Elementwise e(5, 4, 2);
  std::string ir = to_string(lower(e.s, {e.A, e.T}));
  size_t bx = ir.find("blockIdx.x"), by = ir.find("blockIdx.y");
  size_t row = ir.find("let i.outer.raster: int32 = ");
  size_t col = ir.find("let j.outer.raster: int32 = ");
  size_t tx = ir.find("threadIdx");
  ASSERT_NE(row, std::string::npos) << ir;
  ASSERT_NE(col, std::string::npos) << ir;
  EXPECT_LT(std::max(bx, by), row) << ir;
  EXPECT_LT(row, col) << ir;
  EXPECT_LT(col, tx) << ir;
  // 5 rows in groups of 2: the last group has one row, so the group's height is a min().
  EXPECT_NE(ir.find("min(", row), std::string::npos) << ir;
  EXPECT_NE(ir.find("let T.block: int32 = blockIdx.y * 4 + blockIdx.x"), std::string::npos) << ir;
  // After the lets only the tile is used: T's 2 x 3 tile (row, col) starts at row * 24 + col * 3.
  EXPECT_EQ(ir.find("blockIdx", col), std::string::npos) << ir;
  EXPECT_NE(ir.find("= A[i.outer.raster * 24 + ", col), std::string::npos) << ir;
  EXPECT_NE(ir.find("j.outer.raster * 3 + threadIdx.x]", col), std::string::npos) << ir;

  Elementwise plain(5, 4, 1);
  std::string same = to_string(lower(plain.s, {plain.A, plain.T}));
  EXPECT_EQ(same.find("raster"), std::string::npos) << same;
  Elementwise none(5, 4, 0);
  EXPECT_EQ(same, to_string(lower(none.s, {none.A, none.T})));
}

// Shared-memory tiles computed at the block's loops follow the remapped tile: gemm_shared with
// its block axes rasterized, including sizes whose tiles need guards.
TEST(Rasterize, GemmSharedMatchesReference) {
  struct Case {
    int64_t M, N, K, group;
  };
  for (Case c : {Case{300, 200, 20, 2}, Case{300, 200, 20, 3}, Case{70, 66, 33, 2},
                 Case{128, 64, 32, 4}}) {
    SCOPED_TRACE(testing::Message() << c.M << "x" << c.N << "x" << c.K << " group " << c.group);
    ScheduledProgram p = gemm_shared(c.M, c.N, c.K, Float(32));
    Stage sc = p.schedule[p.args.back()];
    sc.rasterize(sc.leaf_iter_vars()[0], sc.leaf_iter_vars()[1], c.group);
    // One column of blocks (128 x 64) is already in grouped order: nothing to remap.
    bool remapped = c.N > 64;
    std::string ir = to_string(lower(p.schedule, p.args));
    EXPECT_EQ(ir.find("let i.outer.raster") != std::string::npos, remapped) << ir;
    // The shared tile of A follows the remapped row (copied with cp.async).
    EXPECT_EQ(ir.find("@address_of(A[i.outer.raster * ") != std::string::npos, remapped) << ir;
    CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

TEST(Rasterize, GemmWmmaMatchesReference) {
  // One warp per 16x16 block: 5 x 3 blocks, groups of 2 (short last group), 3, 4 and 8 (> rows).
  GemmWmmaTiles t{.block_row_warps = 1, .block_col_warps = 1, .warp_row_tiles = 1,
                  .warp_col_tiles = 1, .chunk = 1};
  for (int64_t group : {2, 3, 4, 8}) {
    SCOPED_TRACE(testing::Message() << "group " << group);
    t.raster_group = group;
    ScheduledProgram p = gemm_wmma(80, 48, 32, t);
    CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
  // The default tiles with double-buffered shared tiles: 3 x 2 blocks of 64 x 64, groups of 2.
  GemmWmmaTiles d = gemm_wmma_tiles(192, 128, 64);
  ASSERT_EQ(d.block_m(), 64);
  d.stages = 2;
  d.raster_group = 2;
  ScheduledProgram p = gemm_wmma(192, 128, 64, d);
  CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

// The registry's G parameter reaches the schedule; without it (callers that pass M, N, K only)
// the blocks stay in row-major order.
TEST(Rasterize, RegistryParameterG) {
  const ScheduleEntry &e = find_schedule("gemm_wmma");
  EXPECT_EQ(e.default_shape.at("G"), 1);
  ScheduledProgram p =
      e.build(resolve_shape(e, {{"M", 320}, {"N", 256}, {"K", 32}, {"G", 2}}), Float(16));
  const auto &r = p.schedule[p.args.back()].get()->rasterization;
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->group, 2);
  CheckResult c = check_on_cpu(p.schedule, p.args, p.num_inputs);
  EXPECT_TRUE(c.compare.ok) << c.str();
  ScheduledProgram q = e.build({{"M", 320}, {"N", 256}, {"K", 32}}, Float(16));
  EXPECT_FALSE(q.schedule[q.args.back()].get()->rasterization.has_value());
}

TEST(Rasterize, GemmWmmaCompilesForSm80AndSm90) {
  GemmWmmaTiles t = gemm_wmma_tiles(1280, 1024, 1024);
  t.raster_group = 8;
  ScheduledProgram p = gemm_wmma(1280, 1024, 1024, t);
  LoweredModule m = lower(p.schedule, p.args);
  EXPECT_EQ(m.funcs[0].launch.grid[0], 8);
  EXPECT_EQ(m.funcs[0].launch.grid[1], 10);
  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("i_outer_raster"), std::string::npos) << src;
  EXPECT_NE(src.find("nvcuda::wmma::mma_sync("), std::string::npos) << src;
  if (!tessel::test::compiles_for_sm80_and_sm90(src, "gemm_wmma_raster", {"HMMA"}))
    GTEST_SKIP() << tessel::test::kNoCuobjdump;
}

// ---- Misuse ---------------------------------------------------------------------------------

namespace {

// gemm_definition scheduled with 16x16 blocks bound to the grid, nothing rasterized yet.
struct BlockedGemm {
  GemmTensors g = gemm_definition(64, 48, 32, Float(32));
  Schedule s = create_schedule({g.C});
  Stage c = s[g.C];
  IterVar bi, bj, ti, tj;
  BlockedGemm(bool bind = true) {
    auto [i, j] = c.axes<2>();
    std::tie(bi, bj, ti, tj) = std::tuple_cat(c.tile(i, j, 16, 16));
    if (!bind)
      return;
    c.bind(bi, thread_axis("blockIdx.y")).bind(bj, thread_axis("blockIdx.x"));
    c.bind(ti, thread_axis("threadIdx.y")).bind(tj, thread_axis("threadIdx.x"));
  }
  void lower_it() { lower(s, {g.A, g.B, g.C}); }
};

} // namespace

TEST(RasterizeErrors, AxesOfAnotherStageOrGone) {
  GemmTensors g = gemm_definition(64, 48, 32, Float(32));
  Schedule s = create_schedule({g.C});
  Tensor CL = s.cache_write(g.C, "local");
  auto [i, j] = s[g.C].axes<2>();
  expect_error([&] { s[g.C].rasterize(s[CL].op_axis(0), j, 4); },
               {"rasterize", "axis 'i.c' is not an axis of stage 'C'",
                "belongs to stage 'C.local'"});
  auto [bi, ii] = s[g.C].split(i, 16);
  (void)ii;
  expect_error([&] { s[g.C].rasterize(i, j, 4); },
               {"rasterize", "axis 'i' of stage 'C' was already split or fused away"});
  expect_error([&] { s[g.C].rasterize(bi, bi, 4); },
               {"rasterize", "stage 'C'", "rows and cols are both 'i.outer'"});
}

TEST(RasterizeErrors, ReductionAxis) {
  BlockedGemm t;
  IterVar k = t.c.reduce_axis()[0];
  expect_error([&] { t.c.rasterize(t.bi, k, 4); },
               {"rasterize", "stage 'C', axis 'k' is a reduction axis", "data-parallel"});
}

TEST(RasterizeErrors, GroupBelowOne) {
  BlockedGemm t;
  expect_error([&] { t.c.rasterize(t.bi, t.bj, 0); },
               {"rasterize", "stage 'C', axes 'i.outer', 'j.outer'", "at least 1", "got 0"});
  expect_error([&] { t.c.rasterize(t.bi, t.bj, -3); }, {"got -3"});
  GemmWmmaTiles w;
  w.raster_group = -2;
  expect_error([&] { gemm_wmma(256, 256, 64, w); }, {"rasterize", "stage 'C'", "got -2"});
}

TEST(RasterizeErrors, TwiceOnOneStage) {
  BlockedGemm t;
  t.c.rasterize(t.bi, t.bj, 4);
  expect_error([&] { t.c.rasterize(t.bi, t.bj, 2); },
               {"rasterize",
                "stage 'C' is already rasterized on ('i.outer', 'j.outer') with group 4",
                "Rasterize a stage once"});
  expect_error([&] { t.c.rasterize(t.ti, t.tj, 2); }, {"already rasterized", "one order"});
}

TEST(RasterizeErrors, SplitOrFuseAfterRasterize) {
  BlockedGemm t(false);
  t.c.rasterize(t.bi, t.bj, 4);
  expect_error([&] { t.c.split(t.bi, 2); },
               {"split", "axis 'i.outer' of stage 'C' is rasterized", "split it before"});
  expect_error([&] { t.c.fuse(t.bi, t.bj); }, {"fuse", "'i.outer'", "is rasterized"});
}

TEST(RasterizeErrors, AxesNotBoundToTheBlockGrid) {
  BlockedGemm unbound(false);
  unbound.c.rasterize(unbound.bi, unbound.bj, 4);
  expect_error([&] { unbound.lower_it(); },
               {"rasterize", "stage 'C' is rasterized on ('i.outer', 'j.outer')",
                "axis 'i.outer' is not bound to a thread index", "bind 'i.outer' to blockIdx.y"});

  // Bound the other way round: found at lower() when bound after rasterize ...
  BlockedGemm swapped(false);
  swapped.c.rasterize(swapped.bi, swapped.bj, 4);
  swapped.c.bind(swapped.bi, thread_axis("blockIdx.x")).bind(swapped.bj, thread_axis("blockIdx.y"));
  expect_error([&] { swapped.lower_it(); },
               {"axis 'i.outer' is bound to blockIdx.x", "bind 'i.outer' to blockIdx.y"});
  // ... and at once when bound before.
  BlockedGemm early(false);
  early.c.bind(early.bj, thread_axis("threadIdx.x"));
  expect_error([&] { early.c.rasterize(early.bi, early.bj, 4); },
               {"rasterize", "axis 'j.outer' is bound to threadIdx.x",
                "cols axis must be bound to blockIdx.x"});
  BlockedGemm unrolled(false);
  unrolled.c.unroll(unrolled.bi);
  expect_error([&] { unrolled.c.rasterize(unrolled.bi, unrolled.bj, 4); },
               {"axis 'i.outer' is unrolled"});
}

TEST(RasterizeErrors, ComputedBetweenTheRasterizedLoops) {
  BlockedGemm t;
  Tensor AS = t.s.cache_read(t.g.A, "shared", {t.g.C});
  t.s[AS].compute_at(t.c, t.bi);
  t.c.rasterize(t.bi, t.bj, 2);
  expect_error([&] { t.lower_it(); },
               {"rasterize", "stage 'A.shared' is computed at loop 'i.outer' of stage 'C'",
                "between its rasterized loops", "compute it at 'j.outer'"});
}

TEST(RasterizeErrors, ReductionOrTensorizeOutsideTheRasterizedLoops) {
  BlockedGemm t;
  IterVar k = t.c.reduce_axis()[0];
  t.c.reorder({k, t.bi, t.bj});
  t.c.rasterize(t.bi, t.bj, 2);
  expect_error([&] { t.lower_it(); },
               {"rasterize", "stage 'C': reduction loop 'k' encloses the rasterized loops"});

  BlockedGemm u;
  u.c.rasterize(u.bi, u.bj, 2);
  u.c.tensorize(u.bi, wmma_gemm());
  expect_error([&] { u.lower_it(); },
               {"rasterize", "stage 'C' is tensorized at loop 'i.outer'",
                "tensorize at a loop inside"});
}

TEST(RasterizeErrors, InlinedStage) {
  Tensor A = placeholder({32, 32}, Float(32), "A");
  Tensor B = compute({32, 32}, [&](Var i, Var j) { return A(i, j) + 1.0f; }, "B", {"i", "j"});
  Tensor C = compute({32, 32}, [&](Var i, Var j) { return B(i, j) * 2.0f; }, "C");
  Schedule s = create_schedule({C});
  auto [i, j] = s[B].axes<2>();
  s[B].rasterize(i, j, 2);
  s[B].compute_inline();
  expect_error([&] { lower(s, {A, C}); },
               {"rasterize", "stage 'B' is rasterized on ('i', 'j') but computed inline"});
}

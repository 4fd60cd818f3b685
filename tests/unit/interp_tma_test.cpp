// TMA bulk tensor copies (tma_load) and mbarriers on the executor: hand-built kernels that copy
// boxes of a global tensor into (swizzled) shared tiles and read them back through the same
// layout, exactly; zero fill outside the tensor; a two-stage ring of full barriers over a loop;
// and the misuses the executor reports (a wait that would hang, a tile read before its wait or
// by a thread that did not wait, a stage refilled while in flight or while still being read,
// barriers used before or without a published init, copies still in flight when the block
// ends, a TMA landing on a pending wgmma's operand).
#include "TestUtil.h"
#include "interp_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

using namespace tessel;
using namespace tessel::interp;
using namespace tessel::interp_test;
using tessel::test::expect_error;

namespace {

Expr bitwise_xor(Expr a, Expr b) {
  DataType t = a.type();
  return Call::make(t, intrinsic::bitwise_xor, {std::move(a), std::move(b)}, Call::PureIntrinsic);
}
int64_t product(const std::vector<int64_t> &v) {
  int64_t p = 1;
  for (int64_t x : v)
    p *= x;
  return p;
}
/// Distinct values exact in float16 (integers below 2048).
std::vector<double> distinct_values(size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = double(int64_t(i * 7 % 2039) - 1000);
  return v;
}

/// The element of the box at box offset i, through Stage::swizzle's layout of `swizzle`
/// bytes: the 16-byte unit of each 128-byte row of the tile XORed with the row number modulo
/// swizzle / 16 (for float16 and 128 bytes: i ^ (((i / 64) % 8) * 8)), written independently of
/// the executor's implementation.
Expr swizzled(Expr i, int swizzle, int elem_bytes) {
  if (!swizzle)
    return i;
  const int unit = 16 / elem_bytes, row = 128 / elem_bytes;
  return bitwise_xor(i, floormod(floordiv(i, row), swizzle / 16) * unit);
}

// One block of `threads` threads: thread 0 initializes a barrier, announces the box's bytes
// and issues one tma_load of tensor map A_map (over A) into `tile`; every thread waits and
// copies the tile out to Out (box order) through the swizzled layout.
struct TmaTile {
  DataType dtype = Float(16);
  std::vector<int64_t> dims = {72, 40}, strides = {1, 72}, box = {64, 16};
  int swizzle = 128;    ///< of the map, and how the copy-out reads the tile
  int map_swizzle = -1; ///< the map's, when not `swizzle`
  std::vector<int> coords = {8, 8};
  int64_t arg_size = 0; ///< A's elements (0: what the map reaches)
  int threads = 128;
  int count = 1;        ///< arrivals per phase
  int dst_offset = 0;   ///< the box goes to tile[dst_offset]
  bool prefill = false; ///< every element of the tile written (to 7) before the copy
  // Mistakes.
  bool init = true, init_by_two = false, sync_after_init = true;
  bool expect_tx = true;
  int64_t expect_bytes = 0; ///< announced by expect_tx (0: the box's bytes)
  bool issue = true, second_load = false, write_tile_before_wait = false;
  bool read_before_wait = false;
  bool wait = true;
  int waiters = 0; ///< threads 0 .. waiters - 1 wait (0: all)
  bool read_out = true;
  int coord_count = -1; ///< coordinates passed (-1: all of `coords`)
  // An im2col map (dims C, W, H, N; box {channels, pixels}) and the intrinsic issued.
  bool map_im2col = false;
  std::vector<int64_t> lower_corner, upper_corner;
  const char *load_op = intrinsic::tma_load; ///< coords: (c, w, h, n, off_w, off_h) for im2col

  int64_t box_elems() const { return product(box); }
  int elem_bytes() const { return dtype.bytes(); }

  int64_t a_elems() const {
    if (arg_size)
      return arg_size;
    int64_t reach = 0;
    for (size_t d = 0; d < dims.size(); ++d)
      reach += (dims[d] - 1) * strides[d];
    return reach + 1;
  }

  LoweredFunc build() const {
    const int64_t n = box_elems();
    Buffer A = flat("A", dtype, a_elems()), Out = flat("Out", dtype, n);
    Buffer tile = flat("tile", dtype, n + dst_offset, "shared");
    Buffer bar = flat("bar", UInt(64), 1, "shared");
    Var map("A_map", Handle());
    Axes ax;
    Expr tid = ax.tx;
    auto one = [&](Stmt s) { return IfThenElse::make(tid == 0, std::move(s)); };
    Expr b0 = address_of(bar, 0);

    Var e("e");
    Expr i = e * threads + tid;
    Stmt copy_out = loop(
        e, (n + threads - 1) / threads,
        IfThenElse::make(i < int(n),
                         st(Out, i, ld(tile, dst_offset + swizzled(i, swizzle, elem_bytes())))));
    std::vector<Expr> load_args = {map, address_of(tile, dst_offset), b0};
    for (int d = 0; d < (coord_count < 0 ? int(coords.size()) : coord_count); ++d)
      load_args.push_back(coords.at(size_t(d)));
    Stmt load = call(load_op, load_args);

    std::vector<Stmt> body;
    if (prefill) {
      Var p("p");
      Expr k = p * threads + tid;
      body.push_back(
          loop(p, (n + dst_offset + threads - 1) / threads,
               IfThenElse::make(k < int(n + dst_offset), st(tile, k, make_const(dtype, 7)))));
      body.push_back(sync_threads());
    }
    if (init)
      body.push_back(IfThenElse::make(init_by_two ? tid < 2 : tid == 0,
                                      call(intrinsic::mbarrier_init, {b0, count})));
    body.push_back(one(call(intrinsic::fence_barrier_init)));
    if (sync_after_init)
      body.push_back(sync_threads());
    std::vector<Stmt> issue_stmts;
    if (expect_tx)
      issue_stmts.push_back(call(intrinsic::mbarrier_arrive_expect_tx,
                                 {b0, int(expect_bytes ? expect_bytes : n * elem_bytes())}));
    if (issue)
      issue_stmts.push_back(load);
    if (second_load)
      issue_stmts.push_back(load);
    if (!issue_stmts.empty())
      body.push_back(one(Seq::make(issue_stmts)));
    if (write_tile_before_wait)
      body.push_back(st(tile, dst_offset + tid, make_const(dtype, 1)));
    if (read_before_wait)
      body.push_back(copy_out);
    Stmt w = call(intrinsic::mbarrier_wait, {b0, 0});
    if (wait)
      body.push_back(waiters ? IfThenElse::make(tid < waiters, w) : w);
    if (read_out)
      body.push_back(copy_out);

    LoweredFunc f;
    f.name = "tma_tile";
    f.args = {A, Out};
    f.tensor_maps = {TensorMapParam{map, 0, dims, strides, box,
                                    map_swizzle >= 0 ? map_swizzle : swizzle, map_im2col,
                                    lower_corner, upper_corner}};
    f.launch = launch(1, 1, threads, 1);
    f.body = ax.bind_all(f.launch, allocate(tile, allocate(bar, Seq::make(body))));
    return f;
  }

  /// Runs; "" when Out holds the box (zeros outside the tensor), else the first difference.
  std::string mismatch() const {
    std::vector<double> a = distinct_values(size_t(a_elems()));
    std::vector<double> out = run(a);
    std::vector<int64_t> b(box.size(), 0);
    for (int64_t j = 0; j < box_elems(); ++j) {
      bool inside = true;
      int64_t off = 0;
      for (size_t d = 0; d < box.size(); ++d) {
        int64_t g = coords[d] + b[d];
        inside = inside && g >= 0 && g < dims[d];
        off += g * strides[d];
      }
      double want = inside ? a[size_t(off)] : 0.0;
      if (!(out[size_t(j)] == want)) {
        std::ostringstream os;
        os << "Out[" << j << "] = " << out[size_t(j)] << ", expected " << want;
        return os.str();
      }
      for (size_t d = 0; d < box.size() && ++b[d] == box[d]; ++d)
        b[d] = 0;
    }
    return "";
  }

  /// Runs with A = a; Out, the tile in box order.
  std::vector<double> run(const std::vector<double> &a) const {
    LoweredFunc f = build();
    HostBuffer Ah = HostBuffer::from_doubles(dtype, a);
    HostBuffer Oh = HostBuffer::from_doubles(dtype, std::vector<double>(size_t(box_elems()), NAN));
    execute(f, {&Ah, &Oh});
    return Oh.to_doubles();
  }

  void expect_error(std::initializer_list<const char *> parts) const {
    test::expect_error([&] { run(distinct_values(size_t(a_elems()))); }, parts);
  }
};

// The im2col rows of a 3x3, pad 1, stride 1 convolution over x (N = 2, H = 5, W = 6, C = 64,
// float16, NHWC): an im2col map with lower corners -pad = -1 and upper corners pad - (kernel -
// 1) = -1, so the bounding box is the 6 x 5 output pixels of each image; box {64 channels, 16
// pixels}, 128-byte swizzle. A start at output pixel (n, oh, ow) is (w, h) = (ow - 1, oh - 1).
struct Im2colConv {
  static constexpr int N = 2, H = 5, W = 6, C = 64, P = 16;

  TmaTile tile(int m0, int r, int s) const {
    const int n = m0 / (H * W), oh = m0 % (H * W) / W, ow = m0 % W;
    TmaTile t;
    t.dims = {C, W, H, N}, t.strides = {1, C, W * C, H * W * C}, t.box = {C, P};
    t.swizzle = 128, t.map_im2col = true, t.lower_corner = {-1, -1}, t.upper_corner = {-1, -1};
    t.load_op = intrinsic::tma_load_im2col;
    t.coords = {0, ow - 1, oh - 1, n, s, r};
    t.prefill = true; // the zeros of the padding are written
    return t;
  }

  /// Distinct integers, exact in float16 (|v| <= 2046; 4093 is prime).
  static std::vector<double> x_values() {
    std::vector<double> v(size_t(N * H * W * C));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = double(int64_t(i * 37 % 4093) - 2046);
    return v;
  }

  /// "" when row p of the copy is the im2col row of output pixel m0 + p for tap (r, s):
  /// x[n, oh - 1 + r, ow - 1 + s, c], 0 outside x (and past the last image).
  std::string mismatch(int m0, int r, int s) const {
    std::vector<double> x = x_values(), out = tile(m0, r, s).run(x);
    for (int p = 0; p < P; ++p)
      for (int c = 0; c < C; ++c) {
        const int m = m0 + p, n = m / (H * W), oh = m % (H * W) / W, ow = m % W;
        const int ih = oh - 1 + r, iw = ow - 1 + s;
        const bool inside = n < N && ih >= 0 && ih < H && iw >= 0 && iw < W;
        const double want = inside ? x[size_t(((n * H + ih) * W + iw) * C + c)] : 0.0;
        const double got = out[size_t(p * C + c)];
        if (!(got == want)) {
          std::ostringstream os;
          os << "m0 " << m0 << ", tap (" << r << ", " << s << "): row " << p << " (pixel " << m
             << "), channel " << c << " = " << got << ", expected " << want;
          return os.str();
        }
      }
    return "";
  }
};

// A two-stage ring of full barriers over a loop: tile i of A (8 rows of 32 floats) goes to
// stage i % 2 through full[i % 2], in phase i / 2 of it; every thread waits with parity
// (i / 2) % 2, adds its two elements of the stage to its sums, and after a syncthreads thread 0
// refills the stage with tile i + 2. Out[j] = sum over the tiles of their element j.
struct TmaRing {
  int tiles = 6;
  bool load_before_expect = false; ///< tma_load before the expect_tx of its phase
  bool all_threads_arrive = false; ///< count 128: thread 0 expect_tx, the others arrive
  // Mistakes.
  bool sync_before_refill = true;
  bool wrong_parity = false; ///< waits with parity i % 2

  LoweredFunc build() const {
    const DataType f32 = Float(32);
    const int threads = 128, tile = 256, bytes = tile * 4;
    Buffer A = flat("A", f32, int64_t(tiles) * tile), Out = flat("Out", f32, tile);
    Buffer stages = flat("stage", f32, 2 * tile, "shared"),
           full = flat("full", UInt(64), 2, "shared");
    Buffer acc = flat("acc", f32, 2, "local");
    Var map("A_map", Handle()), i("i"), k("k"), s("s");
    Axes ax;
    Expr tid = ax.tx;
    auto fill = [&](Expr stage, Expr t) {
      Stmt expect = call(intrinsic::mbarrier_arrive_expect_tx, {address_of(full, stage), bytes});
      Stmt load = call(intrinsic::tma_load,
                       {map, address_of(stages, stage * tile), address_of(full, stage), 0, t * 8});
      Stmt thread0 = load_before_expect ? Seq::make({load, expect}) : Seq::make({expect, load});
      if (!all_threads_arrive)
        return IfThenElse::make(tid == 0, thread0);
      return IfThenElse::make(tid == 0, thread0,
                              call(intrinsic::mbarrier_arrive, {address_of(full, stage)}));
    };
    Expr st_i = floormod(i, 2);
    Expr parity = wrong_parity ? floormod(i, 2) : floormod(floordiv(i, 2), 2);
    Stmt step =
        Seq::make({call(intrinsic::mbarrier_wait, {address_of(full, st_i), parity}),
                   loop(k, 2, st(acc, k, ld(acc, k) + ld(stages, st_i * tile + tid * 2 + k))),
                   sync_before_refill ? sync_threads() : Stmt(),
                   IfThenElse::make(i + 2 < tiles, fill(st_i, i + 2))});
    Stmt body = Seq::make(
        {loop(k, 2, st(acc, k, make_zero(f32))),
         IfThenElse::make(tid == 0, Seq::make({loop(s, 2,
                                                    call(intrinsic::mbarrier_init,
                                                         {address_of(full, s),
                                                          all_threads_arrive ? threads : 1})),
                                               call(intrinsic::fence_barrier_init)})),
         sync_threads(), loop(s, 2, fill(s, s)), loop(i, tiles, step),
         loop(k, 2, st(Out, tid * 2 + k, ld(acc, k)))});

    LoweredFunc f;
    f.name = "tma_ring";
    f.args = {A, Out};
    f.tensor_maps = {TensorMapParam{map, 0, {32, 8 * tiles}, {1, 32}, {32, 8}, 0}};
    f.launch = launch(1, 1, threads, 1);
    f.body = ax.bind_all(f.launch, allocate(stages, allocate(full, allocate(acc, body))));
    return f;
  }

  std::string mismatch() const {
    std::vector<double> a = distinct_values(size_t(tiles) * 256);
    HostBuffer Ah = HostBuffer::from_doubles(Float(32), a);
    HostBuffer Oh = HostBuffer::from_doubles(Float(32), std::vector<double>(256, NAN));
    execute(build(), {&Ah, &Oh});
    std::vector<double> out = Oh.to_doubles();
    for (int j = 0; j < 256; ++j) {
      double want = 0;
      for (int t = 0; t < tiles; ++t)
        want += a[size_t(t) * 256 + j];
      if (out[size_t(j)] != want) {
        std::ostringstream os;
        os << "Out[" << j << "] = " << out[size_t(j)] << ", expected " << want;
        return os.str();
      }
    }
    return "";
  }
};

} // namespace

// (1) A 64 x 16 float16 box into a 128-byte swizzled tile, read back through the same formula.
TEST(InterpTma, SwizzledBoxMatchesGlobal) {
  TmaTile t;
  EXPECT_EQ(t.mismatch(), "");
}

// The narrower swizzles, no swizzle, float32, a destination past the tile's start, and the
// layout mattering: reading a swizzled tile as if it were not gives wrong numbers.
TEST(InterpTma, SwizzleWidthsAndTypes) {
  for (int sw : {0, 32, 64, 128}) {
    SCOPED_TRACE("swizzle " + std::to_string(sw));
    TmaTile t;
    t.swizzle = sw;
    t.box = {sw ? sw / 2 : 64, 16};
    EXPECT_EQ(t.mismatch(), "");
  }
  TmaTile f32;
  f32.dtype = Float(32), f32.box = {32, 8}, f32.dims = {40, 20}, f32.strides = {1, 40};
  f32.coords = {4, 3}, f32.dst_offset = 512; // 2048 bytes: 1024-byte aligned
  EXPECT_EQ(f32.mismatch(), "");
  // The layouts differ: a tile copied with one swizzle and read through another is wrong.
  for (auto [map_sw, read_sw] : {std::pair{0, 128}, std::pair{128, 0}, std::pair{128, 64}}) {
    TmaTile t;
    t.map_swizzle = map_sw, t.swizzle = read_sw;
    EXPECT_NE(t.mismatch(), "") << "map swizzle " << map_sw << ", read as " << read_sw;
  }
}

// (2) Boxes partly outside the tensor (negative coordinates and past the end) read zeros
// there; the tile was prefilled, so the zeros are written. Rank 3 with a gap between planes.
TEST(InterpTma, OutOfBoundsElementsAreZero) {
  for (std::vector<int> c : {std::vector<int>{-4, -3}, std::vector<int>{32, 20},
                             std::vector<int>{-64, 0}, std::vector<int>{40, 30}}) {
    SCOPED_TRACE("coordinates " + std::to_string(c[0]) + ", " + std::to_string(c[1]));
    TmaTile t;
    t.dims = {40, 24}, t.strides = {1, 40}, t.box = {16, 8}, t.swizzle = 0, t.coords = c;
    t.prefill = true;
    EXPECT_EQ(t.mismatch(), "");
  }
  TmaTile r3;
  r3.dims = {16, 5, 3}, r3.strides = {1, 16, 96}, r3.box = {8, 4, 2}, r3.swizzle = 0;
  r3.coords = {4, 2, 1}, r3.prefill = true;
  EXPECT_EQ(r3.mismatch(), "");
}

// (3) The ring over 6 tiles: correct sums, whether the tma_load comes before or after the
// expect_tx of its phase and with 128 arrivals per phase.
TEST(InterpTma, TwoStageRingSums) {
  TmaRing r;
  EXPECT_EQ(r.mismatch(), "");
  r.load_before_expect = true;
  EXPECT_EQ(r.mismatch(), "");
  r.all_threads_arrive = true;
  EXPECT_EQ(r.mismatch(), "");
  r.tiles = 7;
  EXPECT_EQ(r.mismatch(), "");
}

// (4) Errors.
TEST(InterpTma, WaitThatWouldHangIsAnError) {
  TmaTile no_expect;
  no_expect.expect_tx = false;
  no_expect.expect_error({"mbarrier_wait by thread (0,0,0) of block (0,0,0) in kernel 'tma_tile' "
                          "never returns",
                          "parity 0 of barrier 'bar'[0]", "phase 0 (parity 0) has not completed",
                          "0 phases completed", "0 of 1 arrivals",
                          "2048 transaction bytes of tma_load calls that no "
                          "mbarrier_arrive_expect_tx announced"});
  TmaTile too_few;
  too_few.count = 2;
  too_few.expect_error({"never returns", "barrier 'bar'[0]", "1 of 2 arrivals"});
  TmaTile no_load;
  no_load.issue = false;
  no_load.expect_error(
      {"never returns", "barrier 'bar'[0]", "1 of 1 arrivals", "waits for 2048 transaction bytes"});
  TmaTile short_expect;
  short_expect.expect_bytes = 1024;
  short_expect.expect_error({"never returns", "1024 transaction bytes of tma_load calls"});
  TmaRing parity;
  parity.wrong_parity = true;
  test::expect_error([&] { parity.mismatch(); },
                     {"mbarrier_wait by thread (0,0,0)", "in kernel 'tma_ring' never returns",
                      "parity 1 of barrier 'full'[1]", "phase 1 (parity 1) has not completed"});
}

TEST(InterpTma, ReadingTheTileBeforeTheWaitIsAnError) {
  TmaTile t;
  t.read_before_wait = true;
  t.expect_error({"read of shared buffer 'tile'[0] by thread (0,0,0) of block (0,0,0) in kernel "
                  "'tma_tile' while the tma_load of tensor map 'A_map' at (8, 8) into 'tile'[0..] "
                  "(issued by thread (0,0,0) on barrier 'bar'[0], phase 0) into it is in flight",
                  "its phase completed but no thread has waited for it yet",
                  "mbarrier_wait for phase 0 of barrier 'bar'[0]"});
  // Even where the tile held values before (no uninitialized read to catch it).
  t.prefill = true;
  t.expect_error({"read of shared buffer 'tile'[0]", "is in flight"});
  // A thread that did not wait reads what another thread's wait landed.
  TmaTile some;
  some.waiters = 64;
  some.expect_error({"data race on shared buffer 'tile'[", "thread (64,0,0) reads it",
                     "in which a tma_load landed it, without having waited for phase 0 of "
                     "barrier 'bar'[0]"});
  // Writing the destination while the copy is in flight.
  TmaTile write;
  write.write_tile_before_wait = true;
  write.expect_error({"write to shared buffer 'tile'[0] by thread (0,0,0)", "is in flight"});
}

TEST(InterpTma, SecondLoadIntoAStageInFlightIsAnError) {
  TmaTile t;
  t.second_load = true;
  t.expect_bytes = 4096;
  t.expect_error({"tma_load by thread (0,0,0) of block (0,0,0) in kernel 'tma_tile'",
                  "writes 'tile'[0] while the tma_load of tensor map 'A_map'",
                  "on barrier 'bar'[0], phase 0) into it is in flight",
                  "wait for its phase (and syncthreads) before reusing the stage"});
  // Refilling a stage that other threads read in this barrier interval.
  TmaRing r;
  r.sync_before_refill = false;
  test::expect_error([&] { r.mismatch(); },
                     {"data race on shared buffer 'stage'[", "of kernel 'tma_ring'",
                      "read it and thread (0,0,0) issues the tma_load of tensor map 'A_map'",
                      "with no syncthreads between"});
}

TEST(InterpTma, BarrierUseBeforeInitIsAnError) {
  TmaTile t;
  t.init = false;
  t.expect_error({"mbarrier_arrive_expect_tx by thread (0,0,0) of block (0,0,0) in kernel "
                  "'tma_tile': barrier 'bar'[0] is used before mbarrier_init"});
  TmaTile unpublished;
  unpublished.sync_after_init = false;
  unpublished.expect_error({"mbarrier_wait by thread (1,0,0)", "barrier 'bar'[0] was initialized "
                                                               "by thread (0,0,0) with no "
                                                               "syncthreads since"});
  TmaTile two;
  two.init_by_two = true;
  two.expect_error({"mbarrier_init by thread (1,0,0)",
                    "barrier 'bar'[0] is also initialized by "
                    "thread (0,0,0)",
                    "exactly one thread initializes a barrier"});
}

TEST(InterpTma, BlockEndingWithACopyInFlightIsAnError) {
  TmaTile t;
  t.wait = false, t.read_out = false;
  t.expect_error({"kernel 'tma_tile': block (0,0,0) ends while the tma_load of tensor map "
                  "'A_map' at (8, 8) into 'tile'[0..] (issued by thread (0,0,0) on barrier "
                  "'bar'[0], phase 0) has not landed: its phase completed but no thread has "
                  "waited for it yet"});
  TmaTile short_expect;
  short_expect.wait = false, short_expect.read_out = false, short_expect.expect_bytes = 1024;
  short_expect.expect_error({"ends while the tma_load", "phase 0 has 1 of 1 arrivals and 1024 "
                                                        "transaction bytes of tma_load calls"});
  TmaTile no_load;
  no_load.issue = false, no_load.wait = false, no_load.read_out = false;
  no_load.expect_error({"block (0,0,0) ends while barrier 'bar'[0]'s phase 0 has 1 of 1 "
                        "arrivals and waits for 2048 transaction bytes"});
}

TEST(InterpTma, BadMapsAndCallsAreErrors) {
  TmaTile wide;
  wide.swizzle = 64; // a 128-byte inner box
  wide.expect_error({"tensor map 'A_map' of kernel 'tma_tile'", "the box's inner extent is 128 "
                                                                "bytes, wider than its 64-byte "
                                                                "swizzle"});
  TmaTile coords;
  coords.coord_count = 1;
  coords.expect_error({"tma_load of tensor map 'A_map' (rank 2) takes (map, dst, bar, c0, ..., "
                       "c1), got 1 coordinates"});
  TmaTile misaligned;
  misaligned.dst_offset = 64; // 128 bytes: enough without swizzle, not with it
  misaligned.expect_error({"tma_load by thread (0,0,0)", "the destination 'tile'[64] is at byte "
                                                         "128 of the buffer, not a multiple of "
                                                         "1024"});
  TmaTile too_small;
  too_small.arg_size = 100;
  too_small.expect_error({"tensor map 'A_map' of kernel 'tma_tile' reaches element 2879 of "
                          "argument 'A', which has 100"});
  TmaTile stride;
  stride.strides = {1, 60}, stride.arg_size = 72 * 40; // 120 bytes
  stride.expect_error({"strides[1] = 60 elements (120 bytes)", "multiples of 16 bytes"});
}

// A tma_load landing on the shared operand of a wgmma_mma not yet waited for: the wgmma
// model's "overwritten before wgmma_wait" check fires when the copy landed (at an mbarrier
// wait) before the wgmma_wait, and an in-flight check when it has not.
TEST(InterpTma, LandingOnAPendingWgmmaOperandIsAnError) {
  for (bool mbarrier_wait_first : {true, false}) {
    SCOPED_TRACE(mbarrier_wait_first ? "landed before wgmma_wait" : "in flight at wgmma_wait");
    const DataType f16 = Float(16), f32 = Float(32);
    Buffer A = flat("A", f16, 64 * 16), As = flat("A_shared", f16, 64 * 16, "shared"),
           Bs = flat("B_shared", f16, 16 * 8, "shared"),
           acc = flat("acc", f32, 64 * 8, "wgmma.accumulator"),
           bar = flat("bar", UInt(64), 1, "shared");
    Var map("A_map", Handle()), e("e");
    Axes ax;
    Expr tid = ax.tx, b0 = address_of(bar, 0);
    std::vector<Stmt> body = {
        loop(e, 8, st(As, e * 128 + tid, make_const(f16, 0.5))),
        IfThenElse::make(tid < 128, st(Bs, tid, make_const(f16, 0.25))),
        IfThenElse::make(tid == 0, Seq::make({call(intrinsic::mbarrier_init, {b0, 1}),
                                              call(intrinsic::fence_barrier_init)})),
        call(intrinsic::fence_proxy_async),
        sync_threads(),
        call(intrinsic::wgmma_fill, {data_var(acc), 0, 8, Expr(0.0f)}),
        call(intrinsic::wgmma_fence),
        call(intrinsic::wgmma_mma,
             {data_var(acc), 0, 8, address_of(As, 0), 512, 64, address_of(Bs, 0), 64, 64, 1, 0}),
        call(intrinsic::wgmma_commit),
        sync_threads(),
        IfThenElse::make(
            tid == 0, Seq::make({call(intrinsic::mbarrier_arrive_expect_tx, {b0, 2048}),
                                 call(intrinsic::tma_load, {map, address_of(As, 0), b0, 0, 0})}))};
    if (mbarrier_wait_first)
      body.push_back(call(intrinsic::mbarrier_wait, {b0, 0}));
    body.push_back(call(intrinsic::wgmma_wait, {0}));
    LoweredFunc f;
    f.name = "tma_wgmma";
    f.args = {A};
    f.tensor_maps = {TensorMapParam{map, 0, {64, 16}, {1, 64}, {64, 16}, 0}};
    f.launch = launch(1, 1, 128, 1);
    f.body = ax.bind_all(f.launch,
                         allocate(As, allocate(Bs, allocate(acc, allocate(bar, Seq::make(body))))));
    HostBuffer Ah = HostBuffer::from_doubles(f16, distinct_values(64 * 16));
    if (mbarrier_wait_first)
      expect_error(
          [&] { execute(f, {&Ah}); },
          {"wgmma_wait by warp 0", "shared operand 'A_shared'[", "overwritten before wgmma_wait"});
    else
      expect_error([&] { execute(f, {&Ah}); },
                   {"wgmma_wait by warp 0", "shared operand 'A_shared'[",
                    "is the destination of a tma_load issued before wgmma_wait"});
  }
}

// (5) im2col: the rows of a 3x3 pad-1 conv for every tap, from starts at the first pixel, whose
// 16 pixels cross image rows, cross from image 0 into image 1, and run past the last image.
TEST(InterpTma, Im2colRowsOfAConv) {
  Im2colConv conv;
  // (n, oh, ow) = (0, 0, 0), (0, 1, 5), (0, 2, 3), (0, 4, 0), (1, 3, 2), (1, 4, 5).
  for (int m0 : {0, 11, 15, 24, 50, 59})
    for (int r = 0; r < 3; ++r)
      for (int s = 0; s < 3; ++s)
        EXPECT_EQ(conv.mismatch(m0, r, s), "");
  // The copy is really swizzled: read as unswizzled, the tile is wrong.
  TmaTile t = conv.tile(15, 1, 1);
  t.swizzle = 0, t.map_swizzle = 128;
  std::vector<double> x = Im2colConv::x_values(), plain = t.run(x);
  EXPECT_NE(plain, conv.tile(15, 1, 1).run(x));
}

TEST(InterpTma, Im2colErrors) {
  Im2colConv conv;
  // An im2col map through tma_load, a tiled one through tma_load_im2col.
  TmaTile tiled_call = conv.tile(0, 0, 0);
  tiled_call.load_op = intrinsic::tma_load, tiled_call.coords = {0, 0, 0, 0};
  tiled_call.expect_error({"tma_load in kernel 'tma_tile': tensor map 'A_map' is an im2col map",
                           "copy through it with tma_load_im2col"});
  TmaTile im2col_call;
  im2col_call.load_op = intrinsic::tma_load_im2col, im2col_call.coords = {0, 0, 0, 0, 0, 0};
  im2col_call.expect_error({"tma_load_im2col in kernel 'tma_tile': tensor map 'A_map' is a tiled "
                            "map", "copy through it with tma_load"});
  // Starts outside the bounding box (w in [-1, 4], h in [-1, 3]).
  for (auto [w, h] : {std::pair{-2, 0}, std::pair{5, 0}, std::pair{0, -2}, std::pair{0, 4}}) {
    TmaTile t = conv.tile(0, 0, 0);
    t.coords[1] = w, t.coords[2] = h;
    const std::string start =
        "the start (w, h) = (" + std::to_string(w) + ", " + std::to_string(h) + ") is outside";
    t.expect_error({"tma_load_im2col by thread (0,0,0) of block (0,0,0) in kernel 'tma_tile' on "
                    "barrier 'bar'[0]",
                    start.c_str(),
                    "bounding box of im2col tensor map 'A_map' (w in [-1, 4], h in [-1, 3]"});
  }
  // The shared rules, as tma_load's: reading before the wait, bytes not announced.
  TmaTile early = conv.tile(15, 1, 2);
  early.read_before_wait = true;
  early.expect_error({"read of shared buffer 'tile'[0]", "while the tma_load_im2col of tensor map "
                      "'A_map' at (c, w, h, n) = (0, 2, 1, 0) with offsets (2, 1) into "
                      "'tile'[0..] (issued by thread (0,0,0) on barrier 'bar'[0], phase 0) into "
                      "it is in flight"});
  TmaTile short_expect = conv.tile(0, 0, 0);
  short_expect.expect_bytes = 1024;
  short_expect.expect_error({"never returns", "barrier 'bar'[0]",
                             "1024 transaction bytes of tma_load calls"});
  // Launch checks of im2col maps.
  TmaTile rank = conv.tile(0, 0, 0);
  rank.box = {64, 16, 1};
  rank.expect_error({"tensor map 'A_map' of kernel 'tma_tile' (im2col) has 4 dims, 4 strides and "
                     "3 box extents"});
  TmaTile corners = conv.tile(0, 0, 0);
  corners.upper_corner = {-1};
  corners.expect_error({"tensor map 'A_map' of kernel 'tma_tile' (im2col) has 2 lower and 1 upper "
                        "corner entries"});
  TmaTile pixels = conv.tile(0, 0, 0);
  pixels.box = {64, 257};
  pixels.expect_error({"tensor map 'A_map'", "box[1] = 257; it must be 1 .. 256 (pixels"});
  TmaTile wide = conv.tile(0, 0, 0);
  wide.swizzle = 64;
  wide.expect_error({"tensor map 'A_map'", "inner extent is 128 bytes, wider than its 64-byte"});
  TmaTile odd = conv.tile(0, 0, 0);
  odd.box = {4, 16}, odd.swizzle = 0;
  odd.expect_error({"tensor map 'A_map'", "inner extent is 8 bytes; it must be a multiple of 16"});
}

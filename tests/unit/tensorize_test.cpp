// Tensorize onto fragment arrays wider than one tile: a warp's accumulator holding a grid of
// 16x16 fragments is indexed by tile number, not by element offset / 256.
#include "compiler/tessel.h"
#include "runtime/interp/Executor.h"
#include "schedules/WmmaIntrinsics.h"

#include <gtest/gtest.h>

using namespace tessel;

namespace {

// One warp computes C (32x32, fp32) = A (32x16) * B (16x32): A and B go through shared memory
// into fragment arrays of 2 tiles each, C accumulates in a 32x32 array of 2x2 fragments.
struct OneWarpGemm {
  Tensor A = placeholder({32, 16}, Float(16), "A"), B = placeholder({16, 32}, Float(16), "B");
  IterVar k = reduce_axis({0, 16}, "k");
  Tensor C = compute(
      {32, 32},
      [&](Var i, Var j) { return sum(A(i, k).astype(Float(32)) * B(k, j).astype(Float(32)), {k}); },
      "C", {"i", "j"});
  Schedule s = create_schedule({C});

  OneWarpGemm() {
    Tensor AS = s.cache_read(A, "shared", {C}), BS = s.cache_read(B, "shared", {C});
    Tensor AF = s.cache_read(AS, "wmma.matrix_a", {C});
    Tensor BF = s.cache_read(BS, "wmma.matrix_b", {C});
    Tensor CF = s.cache_write(C, "wmma.accumulator");
    IterVar tx = thread_axis("threadIdx.x");
    for (const Tensor &t : {AS, BS}) {
      auto [r, c] = s[t].axes<2>();
      auto [o, lane] = s[t].split(s[t].fuse(r, c), 32);
      s[t].bind(lane, tx);
    }
    auto [ai, ak] = s[AF].axes<2>();
    auto [aio, aii] = s[AF].split(ai, 16);
    s[AF].tensorize(aii, wmma_load_matrix("wmma.matrix_a"));
    auto [bk, bj] = s[BF].axes<2>();
    auto [bjo, bji] = s[BF].split(bj, 16);
    s[BF].reorder({bjo, bk, bji});
    s[BF].tensorize(bk, wmma_load_matrix("wmma.matrix_b"));
    auto [ci, cj] = s[CF].axes<2>();
    auto [cio, cjo, cii, cji] = s[CF].tile(ci, cj, 16, 16);
    s[CF].tensorize(cii, wmma_gemm());
    auto [i, j] = s[C].axes<2>();
    auto [io, jo, ii, ji] = s[C].tile(i, j, 16, 16);
    s[C].tensorize(ii, wmma_store_matrix());
  }
};

} // namespace

TEST(Tensorize, FragmentGridIsIndexedByTile) {
  OneWarpGemm g;
  LoweredModule m = lower(g.s, {g.A, g.B, g.C});
  std::string ir = to_string(m);
  // Fragment (i, j) of the 2x2 accumulator grid is tile i * 2 + j, B's fragment j is tile j.
  EXPECT_NE(ir.find("@wmma_fill_fragment(C.wmma.accumulator, 16, 16, 16, i.c.outer * 2 + "
                    "j.c.outer, 0f32)"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("@wmma_store_matrix_sync(C.wmma.accumulator, 16, 16, 16, i.outer * 2 + "
                    "j.outer, "),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("@wmma_mma_sync(C.wmma.accumulator, i.c.outer * 2 + j.c.outer, "
                    "A.shared.wmma.matrix_a, i.c.outer, B.shared.wmma.matrix_b, j.c.outer"),
            std::string::npos)
      << ir;

  // Run it: every output element must come from the right fragment.
  std::vector<double> a(32 * 16), b(16 * 32);
  for (size_t x = 0; x < a.size(); ++x)
    a[x] = double(int(x % 7) - 3) / 4;
  for (size_t x = 0; x < b.size(); ++x)
    b[x] = double(int(x % 5) - 2) / 2;
  interp::HostBuffer A = interp::HostBuffer::from_doubles(Float(16), a);
  interp::HostBuffer B = interp::HostBuffer::from_doubles(Float(16), b);
  interp::HostBuffer C = interp::HostBuffer::from_doubles(Float(32), std::vector<double>(32 * 32, NAN));
  interp::execute(m.funcs[0], {&A, &B, &C});
  std::vector<double> c = C.to_doubles();
  for (int i = 0; i < 32; ++i)
    for (int j = 0; j < 32; ++j) {
      double ref = 0;
      for (int k = 0; k < 16; ++k)
        ref += a[i * 16 + k] * b[k * 32 + j];
      ASSERT_EQ(c[i * 32 + j], ref) << "C[" << i << ", " << j << "]";
    }
}

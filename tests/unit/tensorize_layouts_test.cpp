// Tensorize takes a GEMM body whose operands are read in either order (schedules/OperandLayouts.h):
// batched NN, NT and TN GEMMs written as a user would, e.g. sum(A[b, i, k] * B[b, j, k]) for
// NT, cached into fragments and tensorized on WMMA and on mma.sync, run on the CPU executor
// against float64 and compiled by NVRTC for sm_80; the load of each fragment uses the layout
// and leading dimension of its shared tile. A body no order takes is refused with the orders
// tried.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "runtime/Device.h"
#include "runtime/Nvrtc.h"
#include "schedules/MmaIntrinsics.h"
#include "schedules/WmmaIntrinsics.h"

#include <gtest/gtest.h>

using namespace tessel;
using tessel::test::expect_error;

namespace {

enum class Frags { Wmma, Mma };

// C[b, i, j] = sum_k A * B over a batch, A read A[b, i, k] (or A[b, k, i] when `a_t`: stored
// K x M) and B read B[b, k, j] (or B[b, j, k] when `b_t`: stored N x K). A block per batch and
// 32 x 32 tile, one warp of 2 x 2 fragments, K in steps of 32 through shared tiles.
struct BatchedGemm {
  Tensor A, B, C, AS, BS, AF, BF, CF;
  Schedule s;
  IterVar at_a, at_b; ///< where AF and BF are tensorized

  BatchedGemm(int batch, int M, int N, int K, bool a_t, bool b_t, Frags frags = Frags::Wmma,
              bool b_wrong = false) {
    A = a_t ? placeholder({batch, K, M}, Float(16), "A")
            : placeholder({batch, M, K}, Float(16), "A");
    B = b_t ? placeholder({batch, N, K}, Float(16), "B")
            : placeholder({batch, K, N}, Float(16), "B");
    IterVar k = reduce_axis({0, K}, "k");
    C = compute({batch, M, N},
                [&](Var b, Var i, Var j) {
                  Expr a = a_t ? A(b, k, i) : A(b, i, k);
                  // b_wrong: B read with C's row, a body of no GEMM (needs M == N).
                  Expr x = b_wrong ? B(b, i, k) : b_t ? B(b, j, k) : B(b, k, j);
                  return sum(a.astype(Float(32)) * x.astype(Float(32)), {k});
                },
                "C", {"b", "i", "j"});
    s = create_schedule({C});
    const bool mma = frags == Frags::Mma;
    const std::string f = mma ? "mma." : "wmma.";
    AS = s.cache_read(A, "shared", {C});
    BS = s.cache_read(B, "shared", {C});
    AF = s.cache_read(AS, f + "matrix_a", {C});
    BF = s.cache_read(BS, f + "matrix_b", {C});
    CF = s.cache_write(C, f + "accumulator");

    Stage sc = s[C];
    auto [cb, ci, cj] = sc.axes<3>();
    auto [io, jo, ii, ji] = sc.tile(ci, cj, 32, 32);
    auto [iio, iii] = sc.split(ii, 16);
    auto [jio, jii] = sc.split(ji, 16);
    sc.reorder({cb, io, jo, iio, jio, iii, jii});
    sc.bind(cb, thread_axis("blockIdx.z"));
    sc.bind(io, thread_axis("blockIdx.y"));
    sc.bind(jo, thread_axis("blockIdx.x"));

    Stage sf = s[CF];
    sf.compute_at(sc, jo);
    auto [fb, fi, fj] = sf.axes<3>();
    auto [ko, kr] = sf.split(sf.reduce_axis()[0], 32);
    auto [ki, kk] = sf.split(kr, 16);
    auto [fio, fii] = sf.split(fi, 16);
    auto [fjo, fjj] = sf.split(fj, 16);
    sf.reorder({fb, ko, ki, fio, fjo, fii, fjj, kk});

    // A fragment stage holds a 32 x 16 (or 16 x 32) region: split its 32 into 16s and
    // tensorize at the first of the two 16-wide loops.
    auto fragments = [&](const Tensor &t, bool wide_last) {
      Stage st = s[t];
      st.compute_at(sf, ki);
      auto [b, r, c] = st.axes<3>();
      auto [o, in] = st.split(wide_last ? c : r, 16);
      st.reorder(wide_last ? std::vector<IterVar>{b, o, r, in} : std::vector<IterVar>{b, o, in, c});
      if (mma)
        st.unroll(o);
      return wide_last ? r : in;
    };
    at_a = fragments(AF, a_t);
    at_b = fragments(BF, !b_t);
    IterVar tx = thread_axis("threadIdx.x");
    for (const Tensor &t : {AS, BS}) {
      Stage st = s[t];
      st.compute_at(sf, ko);
      auto [b, r, c] = st.axes<3>();
      auto [o, lane] = st.split(st.fuse(st.fuse(b, r), c), 32);
      st.bind(lane, tx);
    }
    if (mma) {
      for (const IterVar &iv : {ki, fio, fjo})
        sf.unroll(iv);
      for (const IterVar &iv : {iio, jio})
        sc.unroll(iv);
      s[AF].tensorize(at_a, mma_load_matrix("mma.matrix_a"));
      s[BF].tensorize(at_b, mma_load_matrix("mma.matrix_b"));
      sf.tensorize(fii, mma_gemm());
      sc.tensorize(iii, mma_store_matrix());
    } else {
      s[AF].tensorize(at_a, wmma_load_matrix("wmma.matrix_a"));
      s[BF].tensorize(at_b, wmma_load_matrix("wmma.matrix_b"));
      sf.tensorize(fii, wmma_gemm());
      sc.tensorize(iii, wmma_store_matrix());
    }
  }
};

struct Case {
  const char *name;
  bool a_t, b_t;
};
constexpr Case kCases[] = {{"NN", false, false}, {"NT", false, true}, {"TN", true, false}};

void check_batched_gemm(Frags frags, bool on_gpu = false) {
  for (const Case &c : kCases) {
    SCOPED_TRACE(c.name);
    BatchedGemm g(2, 64, 32, 64, c.a_t, c.b_t, frags);
    CheckResult r = on_gpu ? check_on_gpu(g.s, {g.A, g.B, g.C}, 2)
                           : check_on_cpu(g.s, {g.A, g.B, g.C}, 2);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

} // namespace

TEST(TensorizeLayouts, BatchedWmmaGemmsMatchTheReference) { check_batched_gemm(Frags::Wmma); }

TEST(TensorizeLayouts, BatchedMmaGemmsMatchTheReference) { check_batched_gemm(Frags::Mma); }

// The col_major fragments and transposed ldmatrix on the GPU, against float64.
TEST(TensorizeLayouts, GpuBatchedGemmsMatchTheReference) {
  if (!Device::available())
    GTEST_SKIP() << Device::unavailable_reason();
  check_batched_gemm(Frags::Wmma, true);
  check_batched_gemm(Frags::Mma, true);
}

// The NT body holds B's fragment n x k: loaded col_major from B's shared tile (rows of K = 32
// halves), a col_major matrix_b fragment in the CUDA; A stays row_major. The CUDA compiles for
// sm_80.
TEST(TensorizeLayouts, NtWmmaLoadsBColMajor) {
  BatchedGemm g(2, 64, 32, 64, false, true);
  LoweredModule m = lower(g.s, {g.A, g.B, g.C});
  std::string ir = to_string(m);
  EXPECT_NE(ir.find("@wmma_load_matrix_sync(B.shared.wmma.matrix_b, 16, 16, 16, "),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find(", 32, \"col_major\")"), std::string::npos) << ir;
  EXPECT_NE(ir.find(", 32, \"row_major\")"), std::string::npos) << ir;
  std::string src = codegen_cuda(m);
  for (const char *text :
       {"nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::col_major>",
        "nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, "
        "nvcuda::wmma::row_major>"})
    EXPECT_NE(src.find(text), std::string::npos) << text << "\n" << src;
  CompileOptions o;
  o.arch = "sm_80";
  for (const Case &c : kCases) {
    SCOPED_TRACE(c.name);
    for (Frags f : {Frags::Wmma, Frags::Mma}) {
      BatchedGemm h(2, 64, 32, 64, c.a_t, c.b_t, f);
      std::string cu = codegen_cuda(lower(h.s, {h.A, h.B, h.C}));
      EXPECT_FALSE(nvrtc_compile(cu, nvrtc_options(o), "batched_gemm.cu").cubin.empty());
    }
  }
}

// The TN body holds A's fragment k x m: loaded col_major, a col_major matrix_a fragment; on
// mma.sync, A's ldmatrix takes .trans (its fourth argument), as B's (stored K x N) does.
TEST(TensorizeLayouts, TnLoadsAColMajor) {
  BatchedGemm g(2, 64, 32, 64, true, false);
  std::string src = codegen_cuda(lower(g.s, {g.A, g.B, g.C}));
  EXPECT_NE(src.find("nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, "
                     "nvcuda::wmma::col_major>"),
            std::string::npos)
      << src;
  BatchedGemm h(2, 64, 32, 64, true, false, Frags::Mma);
  std::string ir = to_string(lower(h.s, {h.A, h.B, h.C}));
  EXPECT_EQ(tessel::test::count_of(ir, "@mma_ldmatrix(A.shared.mma.matrix_a, "), 4) << ir;
  EXPECT_NE(ir.find(", 4, 1, address_of(A.shared["), std::string::npos) << ir;
}

// B read with C's row index is no GEMM: the refusal lists the orders of B tried.
TEST(TensorizeLayouts, RefusalListsTheLayoutsTried) {
  for (Frags f : {Frags::Wmma, Frags::Mma}) {
    BatchedGemm g(1, 32, 32, 32, false, true, f, /*b_wrong=*/true);
    expect_error(
        [&] {
          lower(g.s, {g.A, g.B, g.C});
        },
        {"tensorize of stage 'C.", "accumulator'",
         "matches none of the intrinsic's operand layouts", "B ('B.shared.",
         "matrix_b'): expected B[k, j] (row_major) or B[j, k] (col_major), found B[i, k]",
         "(A row_major, B row_major)", "or: ", "(A col_major, B col_major)"});
  }
}

// A load whose layout is given must agree with the reader: B's fragment read B[b, j, k] is
// n x k, which a row_major tile fills only by a transposing copy.
TEST(TensorizeLayouts, GivenLoadLayoutAgainstTheBody) {
  BatchedGemm g(1, 32, 32, 32, false, true);
  g.s[g.BF].tensorize(g.at_b, wmma_load_matrix("wmma.matrix_b", "row_major"));
  expect_error(
      [&] {
        lower(g.s, {g.A, g.B, g.C});
      },
      {"wmma_load_matrix(wmma.matrix_b, row_major)",
       "row_major into a k x n fragment: 'C.wmma.accumulator' reduces over dimension 2 "
       "of 'B.shared.wmma.matrix_b', but this layout holds k in dimension 1",
       "row_major into an n x k fragment"});
}

// Stage::storage_interleave: a shared tile stored in chunks of 8 halves of its last dimension
// (the no-swizzle layout of wgmma's shared-memory operands), filled by 16-byte vector copies
// (cp.async when pipelined) and read element by element; checked on the CPU executor against
// float64, in the lowered IR and CUDA, and its misuse errors.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Nvrtc.h"
#include "schedules/Gemm.h"
#include "schedules/MmaIntrinsics.h"

#include "ExactGemm.h"

#include <gtest/gtest.h>

using namespace tessel;
using tessel::test::expect_error;

namespace {

struct Program {
  Schedule s;
  GemmTensors g;
  Tensor AS, BS;
};

// C (M x N) = A x B: 32 x 32 blocks of 32 x 4 threads, each thread 8 outputs of a column; K in
// steps of 32 through shared tiles of A (32 x 32) and B (32 x 32), both interleaved in chunks of
// 8, copied 8 halves at a time.
Program interleaved_gemm(int64_t M, int64_t N, int64_t K, int stages) {
  Program p;
  p.g = gemm_definition(M, N, K, Float(16));
  p.s = create_schedule({p.g.C});
  Schedule &s = p.s;
  p.AS = s.cache_read(p.g.A, "shared", {p.g.C});
  p.BS = s.cache_read(p.g.B, "shared", {p.g.C});
  IterVar bx = thread_axis("blockIdx.x"), by = thread_axis("blockIdx.y");
  IterVar tx = thread_axis("threadIdx.x"), ty = thread_axis("threadIdx.y");
  Stage sc = s[p.g.C];
  auto [i, j] = sc.axes<2>();
  auto [bi, i1] = sc.split(i, 32);
  auto [bj, j1] = sc.split(j, 32);
  auto [ti, i2] = sc.split_nparts(i1, 4);
  sc.reorder({bi, bj, ti, j1, i2});
  sc.bind(bi, by);
  sc.bind(bj, bx);
  sc.bind(ti, ty);
  sc.bind(j1, tx);
  auto [ko, ki] = sc.split(sc.reduce_axis()[0], 32);
  sc.reorder({bi, bj, ti, j1, ko, i2, ki});
  for (const Tensor &t : {p.AS, p.BS}) {
    Stage ss = s[t];
    ss.compute_at(sc, ko);
    ss.storage_interleave(8);
    auto [r, c] = ss.axes<2>();
    auto [c1, vec] = ss.split(c, 8);
    // Rows fastest across threads: 8 threads fill one 8 x 8 chunk, 128 contiguous bytes.
    ss.reorder({c1, r, vec});
    IterVar f = ss.fuse(c1, r);
    auto [f1, lane] = ss.split(f, 32);
    auto [f2, wy] = ss.split(f1, 4);
    ss.bind(lane, tx);
    ss.bind(wy, ty);
    ss.vectorize(vec);
    if (stages > 1)
      ss.pipeline(stages);
  }
  return p;
}

std::string mismatch(const Program &p, int64_t M, int64_t N, int64_t K) {
  return tessel::test::exact_gemm_mismatch(lower(p.s, {p.g.A, p.g.B, p.g.C}).funcs[0], M, N, K);
}

} // namespace

TEST(StorageInterleave, GemmThroughInterleavedTilesMatchesReference) {
  EXPECT_EQ(mismatch(interleaved_gemm(64, 64, 64, 1), 64, 64, 64), "");
  EXPECT_EQ(mismatch(interleaved_gemm(32, 96, 96, 1), 32, 96, 96), "");
}

TEST(StorageInterleave, PipelinedCopiesBecomeCpAsyncIntoChunks) {
  for (int stages : {2, 3}) {
    SCOPED_TRACE("stages " + std::to_string(stages));
    Program p = interleaved_gemm(64, 64, 128, stages);
    EXPECT_EQ(mismatch(p, 64, 64, 128), "");
    LoweredModule m = lower(p.s, {p.g.A, p.g.B, p.g.C});
    std::string ir = to_string(m);
    // One 32 x 32 tile a stage, 4 chunks of 32 rows x 8.
    EXPECT_NE(ir.find("allocate(A.shared, float16, [" + std::to_string(stages * 1024) + "])"),
              std::string::npos)
        << ir;
    // A and B: stages - 1 fills before the K loop, one in it.
    EXPECT_EQ(tessel::test::count_of(ir, "@cp_async("), 2 * stages) << ir;
    EXPECT_NE(ir.find("@cp_async(@address_of(A.shared[threadIdx.x * 8 + threadIdx.y * 256])"),
              std::string::npos)
        << ir;
    std::string src = codegen_cuda(m);
    EXPECT_NE(src.find("tessel_cp_async<16>("), std::string::npos) << src;
    CompileOptions o;
    o.arch = "sm_90";
    EXPECT_FALSE(nvrtc_compile(src, nvrtc_options(o), "interleaved.cu").cubin.empty());
  }
}

TEST(StorageInterleaveErrors, MisuseIsReported) {
  GemmTensors g = gemm_definition(64, 64, 64, Float(16));
  Schedule s = create_schedule({g.C});
  Tensor AS = s.cache_read(g.A, "shared", {g.C});
  expect_error([&] { s[g.C].storage_interleave(8); },
               {"storage_interleave", "stage 'C'", "output or input"});
  expect_error([&] { s[AS].storage_interleave(1); }, {"A.shared", "at least 2"});
  s[AS].storage_interleave(8);
  expect_error([&] { s[AS].storage_align(s[AS].op_axis(0), 16, 8); },
               {"storage_align", "A.shared", "interleaved", "one of the two"});

  // A tile whose last extent is not a multiple of the chunk.
  GemmTensors h = gemm_definition(64, 64, 36, Float(16));
  Schedule t = create_schedule({h.C});
  Tensor HS = t.cache_read(h.A, "shared", {h.C});
  t[HS].storage_interleave(8);
  expect_error([&] { lower(t, {h.A, h.B, h.C}); },
               {"storage_interleave", "A.shared", "chunks of 8", "36", "multiple of 8"});
}

// An intrinsic declared on row-major storage refuses an interleaved tile (and the reverse):
// ldmatrix's row addresses would be wrong.
TEST(StorageInterleaveErrors, TensorizeChecksTheLayout) {
  GemmTensors g = gemm_definition(16, 16, 16, Float(16));
  Schedule s = create_schedule({g.C});
  Tensor AS = s.cache_read(g.A, "shared", {g.C});
  Tensor AF = s.cache_read(AS, "mma.matrix_a", {g.C});
  s[AS].storage_interleave(8);
  s[AF].tensorize(s[AF].op_axis(0), mma_load_matrix("mma.matrix_a"));
  expect_error([&] { lower(s, {g.A, g.B, g.C}); },
               {"row-major storage", "'A.shared'", "interleaved in chunks of 8",
                "remove storage_interleave"});
}

// An intrinsic declared for interleaved storage binds to such a tile and sees its chunk stride
// (rows x chunk elements) and its row stride (the chunk) in the region it covers.
TEST(StorageInterleave, IntrinsicSeesChunkAndRowStrides) {
  Tensor A = placeholder({32, 32}, Float(16), "A");
  Tensor B = compute({32, 32}, [&](Var i, Var j) { return A(i, j); }, "B", {"i", "j"});
  Tensor P = placeholder({16, 16}, Float(16), "P");
  Tensor Q = compute({16, 16}, [&](Var i, Var j) { return P(i, j); }, "Q", {"i", "j"});
  Buffer BP = Buffer::make("BP", Float(16), {16, 16}, "shared").with_interleave(8);
  Buffer BQ = Buffer::make("BQ", Float(16), {16, 16}, "global");
  auto copy = decl_tensor_intrin(
      Q, {{P, BP}, {Q, BQ}},
      [](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
        TensorIntrinBodies b;
        b.body = Evaluate::make(Call::make(
            Void(), "test_copy",
            {in[0].access_ptr(), Expr(int(in[0].chunk_stride())), Expr(int(in[0].stride(0))),
             out.access_ptr()},
            Call::Intrinsic));
        return b;
      },
      "test_copy");
  Schedule s = create_schedule({B});
  Tensor AS = s.cache_read(A, "shared", {B});
  s[AS].storage_interleave(8);
  auto [i, j] = s[B].axes<2>();
  auto [io, ii] = s[B].split(i, 16);
  auto [jo, ji] = s[B].split(j, 16);
  s[B].reorder({io, jo, ii, ji});
  s[B].tensorize(ii, copy);
  std::string ir = to_string(lower(s, {A, B}));
  EXPECT_NE(ir.find("@test_copy(address_of(A.shared[i.outer * 128 + j.outer * 512]), 256, 8, "
                    "address_of(B[i.outer * 512 + j.outer * 16]))"),
            std::string::npos)
      << ir;
}

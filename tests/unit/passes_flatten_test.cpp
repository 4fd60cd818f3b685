// storage_flatten: Form 1 (multi-dimensional realize/load/store) to Form 2 (flat allocations).
#include "compiler/ir/IRPrinter.h"
#include "compiler/passes/StorageFlatten.h"
#include "compiler/support/Error.h"
#include "TestUtil.h"
#include "passes_test_util.h"

#include <gtest/gtest.h>

using namespace tessel;
using namespace tessel::testing;

namespace {

Stmt loop(const Var &v, int extent, Stmt body, ForKind kind = ForKind::Serial) {
  return For::make(v, 0, extent, kind, std::move(body));
}

// C[64, 48] = A[64, 32] x B[32, 48], with a shared copy of A's row tile (storage_align pads its
// row stride from 32 to 40) and a local accumulator tile realized at a non-zero origin.
struct TiledGemm {
  Buffer A = Buffer::make("A", Float(32), {64, 32});
  Buffer B = Buffer::make("B", Float(32), {32, 48});
  Buffer C = Buffer::make("C", Float(32), {64, 48});
  Buffer AS = Buffer::make("A.shared", Float(32), {64, 32}, "shared");
  Buffer CL = Buffer::make("C.local", Float(32), {64, 48}, "local");
  Var io{"io"}, ii{"ii"}, kk{"kk"}, j{"j"}, k{"k"};

  Stmt form1(bool align = true, bool double_buffer = false) {
    Expr row = io * 16 + ii;
    Stmt fill = loop(ii, 16, loop(kk, 32, BufferStore::make(AS, A.load({row, kk}), {row, kk})));
    if (double_buffer)
      fill = AttrStmt::make(AS, attr::pipeline_scope, 2, fill);
    Stmt init = BufferStore::make(CL, make_zero(Float(32)), {row, j});
    Stmt update = BufferStore::make(
        CL, CL.load({row, j}) + AS.load({row, k}) * B.load({k, j}), {row, j});
    Stmt copy_out = BufferStore::make(C, CL.load({row, j}), {row, j});
    Stmt compute = loop(ii, 16, loop(j, 48, Seq::make({init, loop(k, 32, update), copy_out})));
    Stmt local = BufferRealize::make(CL, {Range(io * 16, 16), Range(0, 48)}, compute);
    Stmt shared = BufferRealize::make(AS, {Range(io * 16, 16), Range(0, 32)},
                                      Seq::make({fill, local}));
    if (align)
      shared = AttrStmt::make(AS, "storage_align",
                              Call::make(Handle(), "tuple", {0, 32, 8}, Call::PureIntrinsic),
                              shared);
    return loop(io, 4, shared);
  }
};

// Runs `s` on fresh inputs and returns C.
std::vector<double> run_gemm(const TiledGemm &g, const Stmt &s) {
  Interp in;
  iota(in.memory(g.A, 64 * 32), 0.5);
  iota(in.memory(g.B, 32 * 48), 0.25);
  in.memory(g.C, 64 * 48);
  in.run(s);
  return in.memory(g.C);
}

std::vector<double> reference_gemm() {
  std::vector<double> c(64 * 48, 0.0);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 48; ++j) {
      float acc = 0;
      for (int k = 0; k < 32; ++k)
        acc += float((i * 32 + k) * 0.5) * float((k * 48 + j) * 0.25);
      c[i * 48 + j] = acc;
    }
  return c;
}

} // namespace

TEST(PassFlatten, AllocatesPaddedRealizeAndFlattensAccesses) {
  TiledGemm g;
  std::vector<Buffer> flat_args;
  Stmt out = storage_flatten(g.form1(), {g.A, g.B, g.C}, &flat_args);
  std::string text = to_string(out);

  EXPECT_NE(text.find("allocate(A.shared, float32, [640]), storage_scope = shared"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("allocate(C.local, float32, [768]), storage_scope = local"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("storage_align"), std::string::npos) << text;
  EXPECT_EQ(text.find("realize"), std::string::npos) << text;

  // Every access has one index, on a one-dimensional buffer.
  for (const BufferStore *st : find_all<BufferStore>(out)) {
    EXPECT_EQ(st->indices.size(), 1u);
    EXPECT_EQ(st->buffer.ndim(), 1u);
  }
  // The shared tile's row stride is the padded 40.
  EXPECT_NE(text.find("A.shared[(io * 16 + ii - io * 16) * 40 + kk] = A[(io * 16 + ii) * 32 + kk]"),
            std::string::npos)
      << text;

  // Argument buffers: flat, same storage var, total size.
  ASSERT_EQ(flat_args.size(), 3u);
  EXPECT_TRUE(flat_args[0]->data.same_as(g.A->data));
  EXPECT_EQ(flat_args[0].ndim(), 1u);
  EXPECT_EQ(as_const_int(flat_args[0]->shape[0]), 2048);
  EXPECT_EQ(as_const_int(flat_args[2]->shape[0]), 64 * 48);
  for (const BufferLoad *ld : find_all<BufferLoad>(out)) {
    if (ld->buffer->data.same_as(g.B->data)) {
      EXPECT_TRUE(ld->buffer.same_as(flat_args[1]));
    }
  }
}

TEST(PassFlatten, FlatIrComputesTheSameAsForm1) {
  TiledGemm g;
  Stmt f1 = g.form1();
  Stmt f2 = storage_flatten(f1, {g.A, g.B, g.C});
  std::vector<double> expect = reference_gemm();
  EXPECT_EQ(run_gemm(g, f1), expect);
  EXPECT_EQ(run_gemm(g, f2), expect);
}

TEST(PassFlatten, StorageAlignWithNonZeroOffsetAndInnerDim) {
  Buffer T = Buffer::make("T", Float(16), {8, 4, 16}, "shared");
  Var i("i");
  Stmt body = BufferStore::make(T, make_zero(Float(16)), {i, 1, 2});
  Stmt s = BufferRealize::make(T, {Range(0, 8), Range(0, 4), Range(0, 16)}, body);
  auto align = [](int dim, int factor, int offset, Stmt b, const Buffer &buf) {
    return AttrStmt::make(buf, "storage_align",
                          Call::make(Handle(), "tuple", {dim, factor, offset}, Call::PureIntrinsic),
                          b);
  };
  // dim 1: stride 16 padded so that stride % 32 == 8 -> 40; dim 0: 40 * 4 = 160, padded so that
  // stride % 64 == 0 -> 192. Size 8 * 192.
  s = align(1, 32, 8, align(0, 64, 0, s, T), T);
  Stmt out = storage_flatten(loop(i, 8, s), {});
  std::string text = to_string(out);
  EXPECT_NE(text.find("allocate(T, float16, [1536])"), std::string::npos) << text;
  EXPECT_NE(text.find("T[i * 192 + 40 + 2] = 0f16"), std::string::npos) << text;
}

TEST(PassFlatten, RetargetsDoubleBufferScopeToAllocationVar) {
  TiledGemm g;
  Stmt out = storage_flatten(g.form1(false, true), {g.A, g.B, g.C});
  auto attrs = find_all<AttrStmt>(out);
  ASSERT_EQ(attrs.size(), 1u);
  EXPECT_EQ(attrs[0]->key, attr::pipeline_scope);
  const Expr *node = std::get_if<Expr>(&attrs[0]->node);
  ASSERT_NE(node, nullptr);
  auto allocs = find_all<Allocate>(out);
  bool found = false;
  for (const Allocate *a : allocs)
    found |= a->buffer_var.same_as(*node) && a->scope == "shared";
  EXPECT_TRUE(found) << to_string(out);
  EXPECT_EQ(run_gemm(g, out), reference_gemm());
}

TEST(PassFlatten, VectorIndexBecomesFlatRamp) {
  Buffer A = Buffer::make("A", Float(32), {8, 16});
  Var i("i");
  Stmt s = BufferStore::make(A, Broadcast::make(make_zero(Float(32)), 4),
                             {i, Ramp::make(Expr(4), Expr(1), 4)});
  Stmt out = storage_flatten(s, {A});
  EXPECT_EQ(to_string(out), "A[ramp(i * 16 + 4, 1, 4)] = broadcast(0f32, 4)\n");
}

TEST(PassFlatten, UnknownBufferIsAUserError) {
  Buffer A = Buffer::make("A", Float(32), {8});
  Var i("i");
  Stmt s = loop(i, 8, BufferStore::make(A, make_zero(Float(32)), {i}));
  try {
    storage_flatten(s, {});
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("'A'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("argument"), std::string::npos) << e.what();
  }
}

TEST(PassFlatten, BadStorageAlignIsAUserError) {
  Buffer T = Buffer::make("T", Float(32), {4, 4}, "shared");
  Stmt s = BufferRealize::make(T, {Range(0, 4), Range(0, 4)},
                               BufferStore::make(T, make_zero(Float(32)), {0, 0}));
  s = AttrStmt::make(T, "storage_align",
                     Call::make(Handle(), "tuple", {2, 32, 8}, Call::PureIntrinsic), s);
  EXPECT_THROW(storage_flatten(s, {}), Error);
}

TEST(PassFlatten, InterleavedTileComputesTheSameAndLaysOutChunks) {
  // A's 16 x 32 tile in chunks of 8 columns: [4][16][8], element (r, c) at
  // (c / 8) * 128 + r * 8 + c % 8.
  TiledGemm g;
  Stmt f1 = g.form1(/*align=*/false);
  const auto *outer = f1.as<For>();
  ASSERT_NE(outer, nullptr);
  Stmt interleaved = loop(g.io, 4, AttrStmt::make(g.AS, attr::storage_interleave, 8, outer->body));
  Stmt out = storage_flatten(interleaved, {g.A, g.B, g.C});
  std::string text = to_string(out);
  EXPECT_NE(text.find("allocate(A.shared, float32, [512]), storage_scope = shared"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("A.shared[(io * 16 + ii - io * 16) * 8 + (floordiv(kk, 8) * 128 + floormod(kk, 8))]"),
            std::string::npos)
      << text;
  EXPECT_EQ(run_gemm(g, out), reference_gemm());
}

TEST(PassFlatten, InterleavedVectorStaysInItsChunk) {
  Buffer T = Buffer::make("T", Float(16), {16, 32}, "shared");
  Var i("i"), c("c");
  auto store = [&](Expr col) {
    Stmt s = BufferStore::make(T, Broadcast::make(make_zero(Float(16)), 8),
                               {i, Ramp::make(std::move(col), Expr(1), 8)});
    s = BufferRealize::make(T, {Range(0, 16), Range(0, 32)}, s);
    return AttrStmt::make(T, attr::storage_interleave, 8, s);
  };
  std::string text = to_string(storage_flatten(store(c * 8), {}));
  EXPECT_NE(text.find("T[ramp(i * 8 + (floordiv(c * 8, 8) * 128 + floormod(c * 8, 8)), 1, 8)]"), std::string::npos)
      << text;
  // A vector across rows (an outer dimension) steps by the chunk.
  Stmt rows = BufferStore::make(T, Broadcast::make(make_zero(Float(16)), 4),
                                {Ramp::make(i * 4, Expr(1), 4), c});
  rows = AttrStmt::make(T, attr::storage_interleave, 8,
                        BufferRealize::make(T, {Range(0, 16), Range(0, 32)}, rows));
  text = to_string(storage_flatten(rows, {}));
  EXPECT_NE(text.find("T[ramp(i * 4 * 8 + (floordiv(c, 8) * 128 + floormod(c, 8)), 8, 4)]"),
            std::string::npos)
      << text;
  // A vector starting at column 4 would straddle two chunks.
  tessel::test::expect_error([&] { storage_flatten(store(c * 8 + 4), {}); },
                                {"'T'", "chunks of 8", "8-lane vector"});
}

TEST(PassFlatten, InterleaveNeedsWholeChunks) {
  Buffer T = Buffer::make("T", Float(16), {16, 20}, "shared");
  Stmt s = BufferRealize::make(T, {Range(0, 16), Range(0, 20)},
                               BufferStore::make(T, make_zero(Float(16)), {0, 0}));
  s = AttrStmt::make(T, attr::storage_interleave, 8, s);
  tessel::test::expect_error([&] { storage_flatten(s, {}); },
                                {"'T'", "chunks of 8", "multiple of 8"});
}

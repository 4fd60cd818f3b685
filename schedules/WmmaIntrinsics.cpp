#include "schedules/WmmaIntrinsics.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"
#include "schedules/OperandLayouts.h"

namespace tessel {

namespace {

void check_shape(const WmmaShape &s, const char *what) {
  bool ok = (s.m == 16 && s.n == 16 && s.k == 16) || (s.m == 32 && s.n == 8 && s.k == 16) ||
            (s.m == 8 && s.n == 32 && s.k == 16);
  user_check(ok, what) << "WMMA shape m" << s.m << "n" << s.n << "k" << s.k
                       << " is not supported; use 16x16x16, 32x8x16 or 8x32x16";
}

// WMMA wants 32-byte aligned pointers into memory and a leading dimension that is a multiple
// of 16 bytes; fragments are addressed by whole tiles.
constexpr int kMemoryAlignment = 32;

Buffer memory_decl(const std::string &name, DataType t, std::vector<Expr> shape,
                   const std::string &scope) {
  return Buffer::make(name, t, std::move(shape), scope, {}, Expr(), kMemoryAlignment,
                      kMemoryAlignment / t.bytes());
}

// A fragment array is addressed by tile number (BoundBuffer::tile_index), not by pointer: a
// region only has to start on a column of the tile grid, e.g. fragment (1, 1) of a warp's 64x32
// accumulator starts at element 1 * 16 * 32 + 16, not at a multiple of 256.
Buffer fragment_decl(const std::string &name, DataType t, int rows, int cols,
                     const std::string &scope) {
  return Buffer::make(name, t, {rows, cols}, scope, {}, Expr(), cols * t.bytes(), cols);
}

Expr intrinsic_call(const char *name, std::vector<Expr> args) {
  return Call::make(Void(), name, std::move(args), Call::Intrinsic);
}

void check_leading_dim(const BoundBuffer &b, const std::string &intrin) {
  int64_t ld = b.stride(0);
  int64_t multiple = 16 / b.decl().dtype().bytes();
  user_check(ld % multiple == 0, intrin)
      << "buffer '" << b.buffer().name() << "' has a leading dimension of " << ld
      << " elements; WMMA needs a multiple of " << multiple
      << " (16 bytes). Adjust storage_align or the tile shape.";
}

} // namespace

std::shared_ptr<const TensorIntrin> wmma_load_matrix(const std::string &scope,
                                                     const std::string &layout, WmmaShape s,
                                                     DataType in) {
  check_shape(s, "wmma_load_matrix");
  user_check(in == Float(16) || in == BFloat(16), "wmma_load_matrix")
      << "WMMA fragments here hold float16 or bfloat16, got " << in;
  user_check(scope == "wmma.matrix_a" || scope == "wmma.matrix_b", "wmma_load_matrix")
      << "scope must be wmma.matrix_a or wmma.matrix_b, got '" << scope << "'";
  bool is_a = scope == "wmma.matrix_a";
  int rows = is_a ? s.m : s.k;
  int cols = is_a ? s.k : s.n;
  std::vector<std::shared_ptr<const TensorIntrin>> patterns;
  for (const OperandLoadLayout &l : operand_load_layouts(layout, "wmma_load_matrix")) {
    Tensor A;
    Tensor C = operand_load_pattern(rows, cols, in, l, &A);
    const int frows = l.fragment(rows, cols).first, fcols = l.fragment(rows, cols).second;
    Buffer BA = memory_decl("BA", in, A.shape(), "shared");
    Buffer BC = fragment_decl("BC", in, frows, fcols, scope);
    std::string name = "wmma_load_matrix(" + scope + ", " + l.memory() + ")";
    auto intrin = decl_tensor_intrin(
        C, {{A, BA}, {C, BC}},
        [s, frows, fcols, l, name](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
          check_leading_dim(in[0], name);
          TensorIntrinBodies b;
          b.body = Evaluate::make(intrinsic_call(
              intrinsic::wmma_load_matrix_sync,
              {out.data(), s.m, s.n, s.k, out.tile_index(frows, fcols, name), in[0].access_ptr(),
               Expr(int(in[0].stride(0))), StringImm::make(l.memory())}));
          return b;
        },
        name);
    patterns.push_back(operand_load_layout(intrin, l, is_a));
  }
  return tensor_intrin_layouts("wmma_load_matrix(" + scope + (layout.empty() ? "" : ", " + layout) +
                                   ")",
                               std::move(patterns));
}

std::shared_ptr<const TensorIntrin> wmma_gemm(WmmaShape s, DataType acc, DataType in) {
  check_shape(s, "wmma_gemm");
  user_check(acc == Float(32) || acc == Float(16), "wmma_gemm")
      << "the accumulator must be float32 or float16, got " << acc;
  user_check(in == Float(16) || (in == BFloat(16) && acc == Float(32)), "wmma_gemm")
      << "WMMA multiplies float16 (float16 or float32 accumulator) or bfloat16 (float32 "
         "accumulator), got "
      << in << " into " << acc;
  std::vector<std::shared_ptr<const TensorIntrin>> patterns;
  for (bool a_col : {false, true})
    for (bool b_col : {false, true}) {
      Tensor A, B;
      Tensor C = gemm_pattern(s.m, s.n, s.k, in, acc, a_col, b_col, &A, &B);
      // A fragment holding its operand transposed is cut into tiles of that shape.
      const int ar = a_col ? s.k : s.m, ac = a_col ? s.m : s.k;
      const int br = b_col ? s.n : s.k, bc = b_col ? s.k : s.n;
      Buffer BA = fragment_decl("BA", in, ar, ac, "wmma.matrix_a");
      Buffer BB = fragment_decl("BB", in, br, bc, "wmma.matrix_b");
      Buffer BC = fragment_decl("BC", acc, s.m, s.n, "wmma.accumulator");
      auto intrin = decl_tensor_intrin(
          C, {{A, BA}, {B, BB}, {C, BC}},
          [=](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
            Expr c_index = out.tile_index(s.m, s.n, "wmma_gemm");
            TensorIntrinBodies b;
            b.reset = Evaluate::make(
                intrinsic_call(intrinsic::wmma_fill_fragment,
                               {out.data(), s.m, s.n, s.k, c_index, make_zero(acc)}));
            b.update = Evaluate::make(intrinsic_call(
                intrinsic::wmma_mma_sync,
                {out.data(), c_index, in[0].data(), in[0].tile_index(ar, ac, "wmma_gemm"),
                 in[1].data(), in[1].tile_index(br, bc, "wmma_gemm"), out.data(), c_index}));
            return b;
          },
          "wmma_gemm");
      patterns.push_back(gemm_layout(intrin, a_col, b_col));
    }
  return tensor_intrin_layouts("wmma_gemm", std::move(patterns));
}

std::shared_ptr<const TensorIntrin> wmma_store_matrix(WmmaShape s, DataType dtype,
                                                      const std::string &scope) {
  check_shape(s, "wmma_store_matrix");
  user_check(dtype == Float(32) || dtype == Float(16), "wmma_store_matrix")
      << "the accumulator must be float32 or float16, got " << dtype;
  Tensor A = placeholder({s.m, s.n}, dtype, "A");
  Tensor C = compute({s.m, s.n}, [&](Var i, Var j) { return A(i, j); }, "C", {"i", "j"});
  Buffer BA = fragment_decl("BA", dtype, s.m, s.n, "wmma.accumulator");
  Buffer BC = memory_decl("BC", dtype, C.shape(), scope);
  return decl_tensor_intrin(
      C, {{A, BA}, {C, BC}},
      [s](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
        check_leading_dim(out, "wmma_store_matrix");
        TensorIntrinBodies b;
        b.body = Evaluate::make(intrinsic_call(
            intrinsic::wmma_store_matrix_sync,
            {in[0].data(), s.m, s.n, s.k, in[0].tile_index(s.m, s.n, "wmma_store_matrix"), out.access_ptr(),
             Expr(int(out.stride(0))), StringImm::make("row_major")}));
        return b;
      },
      "wmma_store_matrix");
}

} // namespace tessel

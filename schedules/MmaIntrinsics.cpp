#include "schedules/MmaIntrinsics.h"

#include "compiler/arith/IndexInterval.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"
#include "schedules/OperandLayouts.h"

namespace tessel {

namespace {

constexpr int kTile = 16;      // every intrinsic covers 16x16 (x16)
constexpr int kRowBytes = 16;  // ldmatrix reads rows of 8 halves from 16-byte aligned addresses

Expr lane() { return Call::make(Int(32), intrinsic::mma_lane_id, {}, Call::PureIntrinsic); }

Expr intrinsic_call(const char *name, std::vector<Expr> args) {
  return Call::make(Void(), name, std::move(args), Call::Intrinsic);
}

// Fragments are addressed by tile number (BoundBuffer::tile_index), as WMMA's are.
Buffer fragment_decl(const std::string &name, DataType t, const std::string &scope) {
  return Buffer::make(name, t, {kTile, kTile}, scope, {}, Expr(), kTile * t.bytes(), kTile);
}

void check_operand_type(DataType in, const char *intrin) {
  user_check(in == Float(16) || in == BFloat(16), intrin)
      << "mma.sync.m16n8k16 takes float16 or bfloat16 operands, got " << in;
}

// The first fragment tile of a 16x16 operand region: matrix_a counts m16k16 tiles, matrix_b
// k16n8 ones (an x4 load fills two, n0 and n0 + 8). A fragment holding its operand transposed
// (n x k) numbers its 16x16 regions as the operand's order would, so the two halves stay
// adjacent: region r is tiles 2r and 2r + 1 either way.
Expr operand_tile(const BoundBuffer &b, bool is_a, bool transposed, const std::string &context) {
  if (is_a)
    return b.tile_index(kTile, kTile, context);
  return transposed ? b.tile_index(kTile, kTile, context) * 2 : b.tile_index(kTile, 8, context);
}

void check_leading_dim(const BoundBuffer &b, const std::string &intrin) {
  int64_t ld = b.stride(0);
  user_check(ld % (kRowBytes / 2) == 0, intrin)
      << "buffer '" << b.buffer().name() << "' has a leading dimension of " << ld
      << " elements; ldmatrix reads 16-byte rows from 16-byte aligned addresses, so it must be a "
         "multiple of 8 halves. Adjust storage_align or the tile shape (a padding of 8 halves "
         "keeps the loads free of bank conflicts).";
}

} // namespace

std::shared_ptr<const TensorIntrin> mma_load_matrix(const std::string &scope,
                                                    const std::string &layout, DataType in) {
  check_operand_type(in, "mma_load_matrix");
  user_check(scope == "mma.matrix_a" || scope == "mma.matrix_b", "mma_load_matrix")
      << "scope must be mma.matrix_a or mma.matrix_b, got '" << scope << "'";
  bool is_a = scope == "mma.matrix_a";
  std::vector<std::shared_ptr<const TensorIntrin>> patterns;
  for (const OperandLoadLayout &l : operand_load_layouts(layout, "mma_load_matrix")) {
    Tensor A;
    Tensor C = operand_load_pattern(kTile, kTile, in, l, &A);
    Buffer BA = Buffer::make("BA", in, A.shape(), "shared", {}, Expr(), kRowBytes, kRowBytes / 2);
    Buffer BC = fragment_decl("BC", in, scope);
    // Register i of a thread receives 8x8 matrix i. A's registers hold, in the PTX ISA's order,
    // its (rows, cols) blocks (0,0), (8,0), (0,8), (8,8); B's the (k, n) blocks (0,0), (8,0),
    // (0,8), (8,8): two k16n8 operands. Stored as is, lanes 0..15 point at rows 0..15 of the
    // first 8 columns and lanes 16..31 at those of the next 8; stored transposed, the blocks
    // are (0,0), (0,8), (8,0), (8,8) of the stored tile and each is transposed by the load.
    // Only the stored tile matters here: the fragment's order changes which tile it is.
    bool stored_as_operand = !l.col_major;
    bool trans = is_a ? l.col_major : !l.col_major;
    bool frag_t = l.fragment_transposed;
    std::string name = "mma_load_matrix(" + scope + ", " + l.memory() +
                       (in == Float(16) ? "" : ", " + in.str()) + ")";
    auto intrin = decl_tensor_intrin(
        C, {{A, BA}, {C, BC}},
        [=](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
          check_leading_dim(in[0], name);
          Expr row = stored_as_operand ? floormod(lane(), 16)
                                       : floormod(lane(), 8) + floordiv(lane(), 16) * 8;
          Expr col8 =
              stored_as_operand ? floordiv(lane(), 16) * 8 : floormod(floordiv(lane(), 8), 2) * 8;
          TensorIntrinBodies b;
          b.body = Evaluate::make(intrinsic_call(intrinsic::mma_ldmatrix,
                                                 {out.data(), operand_tile(out, is_a, frag_t, name),
                                                  4, int(trans), in[0].access_ptr(row, col8)}));
          return b;
        },
        name);
    patterns.push_back(operand_load_layout(intrin, l, is_a));
  }
  return tensor_intrin_layouts("mma_load_matrix(" + scope + (layout.empty() ? "" : ", " + layout) +
                                   (in == Float(16) ? "" : ", " + in.str()) + ")",
                               std::move(patterns));
}

std::shared_ptr<const TensorIntrin> mma_gemm(DataType in) {
  check_operand_type(in, "mma_gemm");
  std::string name = in == Float(16) ? "mma_gemm" : "mma_gemm(" + in.str() + ")";
  std::vector<std::shared_ptr<const TensorIntrin>> patterns;
  for (bool a_col : {false, true})
    for (bool b_col : {false, true}) {
      Tensor A, B;
      Tensor C = gemm_pattern(kTile, kTile, kTile, in, Float(32), a_col, b_col, &A, &B);
      Buffer BA = fragment_decl("BA", in, "mma.matrix_a");
      Buffer BB = fragment_decl("BB", in, "mma.matrix_b");
      Buffer BC = fragment_decl("BC", Float(32), "mma.accumulator");
      auto intrin = decl_tensor_intrin(
          C, {{A, BA}, {B, BB}, {C, BC}},
          [=](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
            // Both m16n8 halves of the tile: accumulator tiles c, c + 1 and B tiles b, b + 1.
            Expr c = out.tile_index(kTile, 8, "mma_gemm");
            Expr a = operand_tile(in[0], true, a_col, "mma_gemm");
            Expr bt = operand_tile(in[1], false, b_col, "mma_gemm");
            std::vector<Stmt> fill, update;
            for (int h = 0; h < 2; ++h) {
              fill.push_back(Evaluate::make(intrinsic_call(
                  intrinsic::mma_fill_fragment, {out.data(), c + h, make_zero(Float(32))})));
              update.push_back(Evaluate::make(
                  intrinsic_call(intrinsic::mma_sync, {out.data(), c + h, in[0].data(), a,
                                                       in[1].data(), bt + h, out.data(), c + h})));
            }
            TensorIntrinBodies b;
            b.reset = Seq::make(std::move(fill));
            b.update = Seq::make(std::move(update));
            return b;
          },
          name);
      patterns.push_back(gemm_layout(intrin, a_col, b_col));
    }
  return tensor_intrin_layouts(name, std::move(patterns));
}

std::shared_ptr<const TensorIntrin> mma_store_matrix(const std::string &scope, DataType out) {
  user_check(scope == "global" || scope == "shared", "mma_store_matrix")
      << "scope must be global or shared, got '" << scope << "'";
  user_check(out == Float(32) || out == Float(16) || out == BFloat(16), "mma_store_matrix")
      << "stores float32, or rounds to float16 or bfloat16; got " << out;
  Tensor A = placeholder({kTile, kTile}, Float(32), "A");
  Tensor C = compute(
      {kTile, kTile},
      [&](Var i, Var j) { return out == Float(32) ? A(i, j) : A(i, j).astype(out); }, "C",
      {"i", "j"});
  Buffer BA = fragment_decl("BA", Float(32), "mma.accumulator");
  Buffer BC = Buffer::make("BC", out, C.shape(), scope);
  return decl_tensor_intrin(
      C, {{A, BA}, {C, BC}},
      [](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
        int64_t ld = out.stride(0);
        // Thread (g, t) = (lane / 4, lane % 4) holds columns 2t, 2t + 1 of rows g and g + 8.
        bool pairs = ld % 2 == 0 && divide_exact(out.elem_offset(), 2).has_value();
        Expr c = in[0].tile_index(kTile, 8, "mma_store_matrix");
        std::vector<Stmt> stores;
        for (int h = 0; h < 2; ++h)
          stores.push_back(Evaluate::make(intrinsic_call(
              intrinsic::mma_store_fragment,
              {in[0].data(), c + h, out.access_ptr(floordiv(lane(), 4), floormod(lane(), 4) * 2 + 8 * h),
               Expr(int(ld)), pairs ? 2 : 1})));
        TensorIntrinBodies b;
        b.body = Seq::make(std::move(stores));
        return b;
      },
      out == Float(32) ? "mma_store_matrix" : "mma_store_matrix(" + out.str() + ")");
}

} // namespace tessel

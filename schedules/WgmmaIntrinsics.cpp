#include "schedules/WgmmaIntrinsics.h"

#include "compiler/arith/IndexInterval.h"
#include "compiler/ir/IREquality.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"

namespace tessel {

namespace {

constexpr int kRows = 64;    // a warpgroup's accumulator tile has 64 rows
constexpr int kK16 = 16;     // K of one fp16 / bf16 wgmma
constexpr int kK8 = 32;      // K of one fp8 wgmma (32 bytes of a row, as kK16 halves)
constexpr int kChunk = 8;    // halves per core-matrix row: the interleave chunk

Expr thread_in_group() {
  return Call::make(Int(32), intrinsic::wgmma_thread_id, {}, Call::PureIntrinsic);
}

Expr intrinsic_call(const char *name, std::vector<Expr> args) {
  return Call::make(Void(), name, std::move(args), Call::Intrinsic);
}

// Zeros into accumulator tile `tile` (64 x n) of `acc`: a reduction's reset, a first write.
Stmt fill_zero(const BoundBuffer &acc, const Expr &tile, int64_t n) {
  return Evaluate::make(intrinsic_call(intrinsic::wgmma_fill,
                                       {acc.data(), tile, Expr(int(n)), make_zero(Float(32))}));
}

Buffer accumulator_decl(int64_t n, const char *name = "BC") {
  return Buffer::make(name, Float(32), {kRows, int(n)}, "wgmma.accumulator", {}, Expr(), 4,
                      kChunk);
}

Buffer operand_decl(const char *name, DataType dtype, std::vector<Expr> shape, int swizzle) {
  // Swizzled: chunks of `swizzle` bytes (64 halves or 128 fp8 values in the widest); the region
  // may start at any 16-byte unit of a row (which binding checks: its offset has a floormod of
  // the column the alignment check cannot see).
  return Buffer::make(name, dtype, std::move(shape), "shared", {}, Expr(), swizzle ? 0 : 16, 1)
      .with_interleave(swizzle ? swizzle / dtype.bytes() : kChunk, swizzle);
}

// The leading and stride byte offsets (in elements) of B's descriptor, from its bound layout.
// Swizzled, K-major (col_major): the next 8 rows (of N) are the next atom (SBO), LBO unused (16
// bytes, as CUTLASS sets it); row major (k x n, chunks along N): the next 8 k are the next atom
// (SBO), the next chunk of columns the next chunk (LBO). Unswizzled, row major: next 8 k = next
// core matrix (LBO), next 8 n = next chunk (SBO); col major (n x k, chunks along K): next 8 n =
// next core matrix (SBO), next 8 k = next chunk (LBO).
std::pair<int64_t, int64_t> b_offsets(const BoundBuffer &b, bool b_col, int swizzle,
                                      DataType dtype) {
  if (swizzle)
    return {b_col ? 16 / dtype.bytes() : b.chunk_stride(), 8 * b.stride(0)};
  return {b_col ? b.chunk_stride() : 8 * b.stride(0), b_col ? 8 * b.stride(0) : b.chunk_stride()};
}

// The pattern of a wgmma: C (64 x n, float32) = A (64 x k) B, B n x k (col_major) or k x n.
Tensor gemm_pattern(const Tensor &A, const Tensor &B, bool b_col, int64_t n, int64_t k_extent) {
  IterVar k = reduce_axis({0, int(k_extent)}, "k");
  return compute(
      {kRows, int(n)},
      [&](Var i, Var j) {
        Expr b = b_col ? B(j, k) : B(k, j);
        return sum(A(i, k).astype(Float(32)) * b.astype(Float(32)), {k});
      },
      "C", {"i", "j"});
}

void check_n(int64_t n, const char *intrin) {
  user_check(is_wgmma_n(n), intrin) << "n=" << n
                                    << " is not a wgmma shape: n must be a multiple of 8 from 8 "
                                       "to 256 (m64nNk16)";
}

} // namespace

bool is_wgmma_n(int64_t n) { return n >= 8 && n <= 256 && n % 8 == 0; }

std::shared_ptr<const TensorIntrin> wgmma_gemm(int64_t n, const std::string &b_layout,
                                               int swizzle, DataType dtype, DataType b_dtype) {
  check_n(n, "wgmma_gemm");
  if (b_dtype.is_void())
    b_dtype = dtype;
  const bool fp8 = dtype.is_float8();
  user_check(dtype == Float(16) || dtype == BFloat(16) || fp8, "wgmma_gemm")
      << "the operands must be float16, bfloat16, float8_e4m3 or float8_e5m2, got " << dtype;
  user_check(fp8 ? b_dtype.is_float8() : b_dtype == dtype, "wgmma_gemm")
      << "A is " << dtype << " and B " << b_dtype << "; wgmma takes two float8 types (e4m3, "
      << "e5m2, in any pair) or A and B of one 16-bit type";
  // 8-bit operands: K is 32 a wgmma (32 bytes of a row, as fp16's 16), and both operands must
  // be K-major in shared memory (wgmma transposes only 16-bit types) in a swizzled layout.
  user_check(!fp8 || (b_layout == "col_major" && swizzle != 0), "wgmma_gemm")
      << "float8 operands are read K-major from swizzled tiles: B must be col_major (N x K, K "
         "contiguous: C = A B^T) and swizzle 32, 64 or 128; got B " << b_layout << ", swizzle "
      << swizzle;
  const int kK = fp8 ? kK8 : kK16;
  user_check(swizzle == 0 || swizzle == 32 || swizzle == 64 || swizzle == 128, "wgmma_gemm")
      << "swizzle must be 32, 64 or 128 (Stage::swizzle) or 0 (storage_interleave(8)), got "
      << swizzle;
  user_check(swizzle == 0 || b_layout == "col_major" || n % (swizzle / 2) == 0, "wgmma_gemm")
      << "n=" << n << ": a B tile stored N-contiguous in the " << swizzle
      << "-byte swizzled layout is read in blocks of " << swizzle / 2
      << " columns, so n must be a multiple of " << swizzle / 2;
  user_check(b_layout == "row_major" || b_layout == "col_major", "wgmma_gemm")
      << "b_layout must be row_major or col_major, got '" << b_layout << "'";
  bool b_col = b_layout == "col_major";
  Tensor A = placeholder({kRows, kK}, dtype, "A");
  Tensor B = b_col ? placeholder({int(n), kK}, b_dtype, "B") : placeholder({kK, int(n)}, dtype, "B");
  Tensor C = gemm_pattern(A, B, b_col, n, kK);
  std::string name = "wgmma_gemm(" + std::to_string(n) + (b_col ? ", col_major" : "") +
                     (swizzle ? "" : ", no swizzle") +
                     (dtype == Float(16) ? std::string()
                                         : ", " + (dtype == BFloat(16) ? std::string("bfloat16")
                                                                       : dtype.str())) +
                     (b_dtype != dtype ? " x " + b_dtype.str() : std::string()) + ")";
  return decl_tensor_intrin(
      C,
      {{A, operand_decl("BA", dtype, A.shape(), swizzle)},
       {B, operand_decl("BB", b_dtype, B.shape(), swizzle)},
       {C, accumulator_decl(n)}},
      [=](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
        // stride(0) is the row stride inside a chunk (8, or 64 swizzled), chunk_stride() the
        // distance between chunks of columns; 8 rows of a chunk are a core matrix (no swizzle)
        // or a 1024-byte swizzle atom.
        const BoundBuffer &a = in[0], &b = in[1];
        // A is K-major, as B col major: a whole k16 slice inside a row of the swizzle's width
        // (the next 8 rows the next atom, SBO; LBO unused, 16 bytes), or (unswizzled, chunks
        // along K) the next 8 rows the next core matrix (SBO), the next 8 k the next chunk.
        const int64_t a_lbo = swizzle ? 16 / dtype.bytes() : a.chunk_stride(),
                      a_sbo = 8 * a.stride(0);
        const auto [b_lbo, b_sbo] = b_offsets(b, b_col, swizzle, dtype);
        Expr tile = out.tile_index(kRows, n, name);
        TensorIntrinBodies bodies;
        bodies.reset = fill_zero(out, tile, n);
        bodies.update = Evaluate::make(intrinsic_call(
            intrinsic::wgmma_mma,
            {out.data(), tile, Expr(int(n)), a.access_ptr(), Expr(int(a_lbo)), Expr(int(a_sbo)),
             b.access_ptr(), Expr(int(b_lbo)), Expr(int(b_sbo)), Expr(b_col ? 0 : 1),
             Expr(swizzle)}));
        return bodies;
      },
      name);
}

std::shared_ptr<const TensorIntrin> wgmma_store_matrix(int64_t n, const std::string &scope,
                                                       DataType dtype) {
  return wgmma_store_matrix(n, scope, dtype, WgmmaEpilogue{});
}

std::shared_ptr<const TensorIntrin> wgmma_store_matrix(int64_t n, const std::string &scope,
                                                       DataType dtype,
                                                       const WgmmaEpilogue &epilogue) {
  check_n(n, "wgmma_store_matrix");
  user_check(scope == "global" || scope == "shared", "wgmma_store_matrix")
      << "scope must be global or shared, got '" << scope << "'";
  user_check(dtype == Float(32) || dtype == Float(16) || dtype == BFloat(16),
             "wgmma_store_matrix")
      << "the stored type must be float32, float16 or bfloat16, got " << dtype;
  const bool has_epilogue = bool(epilogue.f);
  user_check(has_epilogue || (epilogue.column_inputs.empty() && epilogue.scalar_inputs.empty()),
             "wgmma_store_matrix")
      << "epilogue '" << epilogue.name << "' has inputs but no function";
  Tensor A = placeholder({kRows, int(n)}, Float(32), "A");
  std::vector<Tensor> columns, scalars;
  for (size_t k = 0; k < epilogue.column_inputs.size(); ++k)
    columns.push_back(placeholder({int(n)}, epilogue.column_inputs[k], "V" + std::to_string(k)));
  for (size_t k = 0; k < epilogue.scalar_inputs.size(); ++k)
    scalars.push_back(placeholder({1}, epilogue.scalar_inputs[k], "S" + std::to_string(k)));
  Tensor C = compute(
      {kRows, int(n)},
      [&](Var i, Var j) {
        Expr v = A(i, j);
        if (has_epilogue) {
          std::vector<Expr> at;
          for (const Tensor &c : columns)
            at.push_back(c(j));
          for (const Tensor &c : scalars)
            at.push_back(c(0));
          v = epilogue.f(v, at);
          user_check(v.type() == Float(32), "wgmma_store_matrix")
              << "epilogue '" << epilogue.name << "' must give float32 (the accumulator's type; "
              << "the store rounds to the output type), got " << v.type();
        }
        return dtype == Float(32) ? v : v.astype(dtype);
      },
      "C", {"i", "j"});
  std::vector<std::pair<Tensor, Buffer>> binds = {{A, accumulator_decl(n, "BA")}};
  for (size_t k = 0; k < columns.size(); ++k)
    binds.push_back({columns[k], Buffer::make("BV" + std::to_string(k),
                                              epilogue.column_inputs[k], {int(n)})});
  for (size_t k = 0; k < scalars.size(); ++k)
    binds.push_back(
        {scalars[k], Buffer::make("BS" + std::to_string(k), epilogue.scalar_inputs[k], {1})});
  binds.push_back({C, Buffer::make("BC", dtype, C.shape(), scope)});
  const std::string name = "wgmma_store_matrix(" + std::to_string(n) +
                     (dtype == Float(32) ? std::string() : ", " + dtype.str()) +
                     (has_epilogue ? ", " + epilogue.name : std::string()) + ")";
  auto intrin = decl_tensor_intrin(
      C, binds,
      [=](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
        int64_t ld = out.stride(0);
        bool pairs = ld % 2 == 0 && divide_exact(out.elem_offset(), 2).has_value();
        // Thread t of the warpgroup: warp t / 32 owns rows 16 (t / 32) .. + 15; lane l holds
        // columns 2 (l % 4), + 1 of rows l / 4 and l / 4 + 8 in every 8-column group.
        // float32 rows that may start off a 32-byte sector (C's width not a multiple of 8): the
        // quad's lanes exchange registers so that each store instruction writes whole sectors
        // (pairs or single floats would write each sector in parts, 4x the L2 write
        // transactions measured on an H100 at 4096 x 4095).
        bool sectors = dtype == Float(32) && scope == "global" &&
                       !(ld % 8 == 0 && divide_exact(out.elem_offset(), 8).has_value());
        // Otherwise a quad of lanes swaps pairs so that each lane stores 4 consecutive
        // elements: 16-bit outputs then cover whole 32-byte sectors (pairs of 4 bytes leave half
        // sectors, which the GPU completes by reading DRAM), float32 ones take half the store
        // instructions of pairs (16 bytes a lane; with pairs the memory queue of a block's
        // 128 x 256 float32 tile fills: ncu's lg_throttle stall, 4.1 cycles an instruction at
        // 4096 x 4096 x 1024 on an H100, 0.5 with a float16 C).
        bool quads = !sectors && n % 16 == 0 && ld % 4 == 0 &&
                     divide_exact(out.elem_offset(), 4).has_value();
        Expr t = thread_in_group();
        Expr row = floordiv(t, 32) * 16 + floordiv(floormod(t, 32), 4);
        Expr col = floormod(t, 4) * 2;
        // The inputs come in first-use order of the pattern: find them by declaration.
        auto bound = [&](const std::string &decl) -> const BoundBuffer & {
          for (const BoundBuffer &b : in)
            if (b.decl().name() == decl)
              return b;
          internal_error << name << ": no input bound to " << decl;
          return in.front();
        };
        const BoundBuffer &acc = bound("BA");
        Expr tile = acc.tile_index(kRows, n, name);
        // The last block of columns that blocks do not divide stores those inside (the limit
        // is N minus the tile's first column: a multiple of the lanes wherever they are > 1).
        // The same for the rows of the last block of rows (fewer rows than a block: M < 64).
        const Expr limit = out.limit(1), row_limit = out.limit(0);
        std::vector<Expr> args = {acc.data(), tile, Expr(int(n)), out.access_ptr(row, col),
                                  Expr(int(ld)), Expr(quads ? 4 : sectors ? 8 : pairs ? 2 : 1)};
        if (limit.defined() || row_limit.defined())
          args.push_back(limit.defined() ? limit : Expr(int(n)));
        if (row_limit.defined())
          args.push_back(row_limit);
        Stmt store = Evaluate::make(intrinsic_call(intrinsic::wgmma_store, args));
        TensorIntrinBodies bodies;
        bodies.body = store;
        if (!has_epilogue)
          return bodies;
        // Register r = 4 q + 2 h + e holds column 8 q + 2 (t % 4) + e (row + 8 h): the epilogue
        // in place, register by register, in unrolled loops.
        Var q("q"), h("h"), e("e");
        Expr r = q * 4 + h * 2 + e;
        Expr reg = Call::make(Float(32), intrinsic::wgmma_reg, {acc.data(), tile, Expr(int(n)), r},
                              Call::Intrinsic);
        // A column's values are loaded once for its two registers (rows + 0 and + 8).
        std::vector<Expr> at;
        std::vector<std::pair<Var, Expr>> lets;
        for (size_t k = 0; k < columns.size(); ++k) {
          Var v("v" + std::to_string(k), epilogue.column_inputs[k]);
          Expr at_col = col + q * 8 + e;
          Expr value = bound("BV" + std::to_string(k)).load({at_col});
          // Columns past the limit are not stored: their vector elements are not read.
          if (limit.defined())
            value = if_then_else(at_col < limit, value, make_zero(value.type()));
          lets.push_back({v, value});
          at.push_back(v);
        }
        // Scalars are loaded once for the whole tile.
        std::vector<std::pair<Var, Expr>> scalar_lets;
        for (size_t k = 0; k < scalars.size(); ++k) {
          Var v("s" + std::to_string(k), epilogue.scalar_inputs[k]);
          scalar_lets.push_back({v, bound("BS" + std::to_string(k)).load({Expr(0)})});
          at.push_back(v);
        }
        Stmt set = Evaluate::make(intrinsic_call(
            intrinsic::wgmma_reg_set, {acc.data(), tile, Expr(int(n)), r, epilogue.f(reg, at)}));
        auto unrolled = [](Var v, int64_t extent, Stmt body) {
          return For::make(v, 0, Expr(int(extent)), ForKind::Unrolled, std::move(body));
        };
        Stmt column = unrolled(h, 2, set);
        for (auto it = lets.rbegin(); it != lets.rend(); ++it)
          column = LetStmt::make(it->first, it->second, column);
        Stmt tile_body = Seq::make({unrolled(q, n / 8, unrolled(e, 2, column)), store});
        for (auto it = scalar_lets.rbegin(); it != scalar_lets.rend(); ++it)
          tile_body = LetStmt::make(it->first, it->second, tile_body);
        bodies.body = tile_body;
        return bodies;
      },
      name);
  auto partial = std::make_shared<TensorIntrin>(*intrin);
  partial->partial_output = true;
  return partial;
}

Expr fp8_scaled_partial(const Expr &partial, const Expr &scale_a, const Expr &scale_b) {
  return partial * (scale_a * scale_b);
}

std::shared_ptr<const TensorIntrin> wgmma_promote(int64_t n, Fp8Scales scales) {
  check_n(n, "wgmma_promote");
  const bool block_wise = scales == Fp8Scales::BlockWise;
  user_check(!block_wise || n == 128, "wgmma_promote")
      << "n=" << n << ": with block-wise scales a tile's columns are one 128-column block of B "
      << "(one scale_b per tile), so n must be 128";
  Tensor P = placeholder({kRows, int(n)}, Float(32), "P");
  Tensor SA = block_wise ? placeholder({kRows, 1}, Float(32), "SA")
                         : placeholder({1}, Float(32), "SA");
  Tensor SB = placeholder({1}, Float(32), "SB");
  IterVar r = reduce_axis({0, 1}, "r");
  Tensor D = compute(
      {kRows, int(n)},
      [&](Var i, Var j) {
        Expr sa = block_wise ? SA(i, r) : SA(0);
        Expr sb = block_wise ? SB(r) : SB(0);
        return sum(fp8_scaled_partial(P(i, j), sa, sb), {r});
      },
      "D", {"i", "j"});
  const std::string name = "wgmma_promote(" + std::to_string(n) +
                           (block_wise ? ", block-wise scales)" : ", per-tensor scales)");
  return decl_tensor_intrin(
      D,
      {{P, accumulator_decl(n, "BP")},
       {SA, Buffer::make("BSA", Float(32), SA.shape())},
       {SB, Buffer::make("BSB", Float(32), SB.shape())},
       {D, accumulator_decl(n, "BD")}},
      [=](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
        const BoundBuffer &p = in[0], &sa = in[1], &sb = in[2];
        const Expr tile = out.tile_index(kRows, n, name), ptile = p.tile_index(kRows, n, name);
        // The scale element of a bound region: `row` of the tile's rows (block-wise scale_a),
        // the region's first element otherwise.
        auto scale_at = [](const BoundBuffer &b, const Expr &row) {
          std::vector<Expr> at(b.buffer().ndim(), Expr(0));
          if (row.defined())
            at[at.size() - 2] = row;
          return b.load(at);
        };
        // Register r = 4 q + 2 h + e of the thread holds row 16 (t / 32) + (t % 32) / 4 + 8 h
        // (Intrinsics.h): the scale of its row is loaded once for its n / 4 registers.
        Var q("q"), h("h"), e("e"), scale("scale", Float(32));
        Expr t = thread_in_group();
        Expr row = floordiv(t, 32) * 16 + floordiv(floormod(t, 32), 4) + h * 8;
        Expr rg = q * 4 + h * 2 + e;
        auto reg = [&](const BoundBuffer &b, const Expr &index) {
          return Call::make(Float(32), intrinsic::wgmma_reg, {b.data(), index, Expr(int(n)), rg},
                            Call::Intrinsic);
        };
        // fp8_scaled_partial with the scales' product hoisted: the same roundings.
        Stmt set = Evaluate::make(intrinsic_call(
            intrinsic::wgmma_reg_set,
            {out.data(), tile, Expr(int(n)), rg, reg(out, tile) + reg(p, ptile) * scale}));
        auto unrolled = [](Var v, int64_t extent, Stmt body) {
          return For::make(v, 0, Expr(int(extent)), ForKind::Unrolled, std::move(body));
        };
        Expr product = scale_at(sa, block_wise ? row : Expr()) * scale_at(sb, Expr());
        TensorIntrinBodies bodies;
        bodies.reset = fill_zero(out, tile, n);
        bodies.update = unrolled(
            h, 2, LetStmt::make(scale, product, unrolled(q, n / 8, unrolled(e, 2, set))));
        return bodies;
      },
      name);
}

namespace {

Buffer rows_decl(const char *name) {
  return Buffer::make(name, Float(32), {kRows}, "wgmma.rows", {}, Expr(), 4, kRows);
}

Expr register_of(const BoundBuffer &acc, const Expr &tile, int64_t n, const Expr &r) {
  return Call::make(Float(32), intrinsic::wgmma_reg, {acc.data(), tile, Expr(int(n)), r},
                    Call::Intrinsic);
}

Expr row_of(const BoundBuffer &rows, const Expr &tile, int h) {
  return Call::make(Float(32), intrinsic::wgmma_row, {rows.data(), tile, Expr(h)},
                    Call::Intrinsic);
}

Stmt set_row(const BoundBuffer &rows, const Expr &tile, int h, const Expr &value) {
  return Evaluate::make(intrinsic_call(intrinsic::wgmma_row_set, {rows.data(), tile, Expr(h), value}));
}

} // namespace

Expr wgmma_fp8_a_column(const Expr &j) {
  Expr c = floormod(j, 32), q = floormod(j, 16);
  return floordiv(j, 32) * 32 + floordiv(c, 16) * 16 + floordiv(q, 4) * 2 +
         floordiv(floormod(q, 4), 2) * 8 + floormod(q, 2);
}

std::shared_ptr<const TensorIntrin> wgmma_acc_to_a(int64_t n, DataType dtype) {
  const bool fp8 = dtype.is_float8();
  const int kK = fp8 ? kK8 : kK16;
  user_check(n % kK == 0 && n >= kK && n <= 256, "wgmma_acc_to_a")
      << "n=" << n << ": an A operand's columns are whole k" << kK << " slices, a multiple of "
      << kK << " up to 256";
  user_check(dtype == Float(16) || dtype == BFloat(16) || fp8, "wgmma_acc_to_a")
      << "A from registers is float16, bfloat16, float8_e4m3 or float8_e5m2, not " << dtype;
  Tensor X = placeholder({kRows, int(n)}, Float(32), "X");
  Tensor A = compute(
      {kRows, int(n)},
      [&](Var i, Var j) { return X(i, fp8 ? wgmma_fp8_a_column(j) : Expr(j)).astype(dtype); },
      "A", {"i", "j"});
  const std::string name = "wgmma_acc_to_a(" + std::to_string(n) +
                           (dtype == Float(16) ? std::string() : ", " + dtype.str()) + ")";
  return decl_tensor_intrin(
      A,
      {{X, accumulator_decl(n, "BX")},
       {A, Buffer::make("BA", dtype, {kRows, int(n)}, "wgmma.matrix_a", {}, Expr(), 4, kK)}},
      [=](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
        TensorIntrinBodies bodies;
        bodies.body = Evaluate::make(intrinsic_call(
            intrinsic::wgmma_acc_to_a, {out.data(), out.tile_index(kRows, n, name), in[0].data(),
                                        in[0].tile_index(kRows, n, name), Expr(int(n))}));
        return bodies;
      },
      name);
}

std::shared_ptr<const TensorIntrin> wgmma_gemm_rs(int64_t n, const std::string &b_layout,
                                                  int swizzle, DataType dtype) {
  check_n(n, "wgmma_gemm_rs");
  const bool fp8 = dtype.is_float8();
  user_check(dtype == Float(16) || dtype == BFloat(16) || fp8, "wgmma_gemm_rs")
      << "A from registers is float16, bfloat16, float8_e4m3 or float8_e5m2, not " << dtype;
  user_check(b_layout == "row_major" || b_layout == "col_major", "wgmma_gemm_rs")
      << "b_layout must be row_major or col_major, got '" << b_layout << "'";
  user_check(swizzle == 0 || swizzle == 32 || swizzle == 64 || swizzle == 128, "wgmma_gemm_rs")
      << "swizzle must be 32, 64 or 128 (Stage::swizzle) or 0 (storage_interleave(8)), got "
      << swizzle;
  user_check(!fp8 || (b_layout == "col_major" && swizzle != 0), "wgmma_gemm_rs")
      << "float8 B is read K-major (col_major: B stored n x 32) from a swizzled tile; got "
      << b_layout << (swizzle ? "" : ", unswizzled");
  const bool b_col = b_layout == "col_major";
  const int kK = fp8 ? kK8 : kK16;
  Tensor A = placeholder({kRows, kK}, dtype, "A");
  Tensor B = b_col ? placeholder({int(n), kK}, dtype, "B") : placeholder({kK, int(n)}, dtype, "B");
  Tensor C = gemm_pattern(A, B, b_col, n, kK);
  const std::string name = "wgmma_gemm_rs(" + std::to_string(n) + (b_col ? ", col_major" : "") +
                           (swizzle ? ", swizzle " + std::to_string(swizzle) : std::string()) +
                           (dtype == Float(16) ? std::string() : ", " + dtype.str()) + ")";
  return decl_tensor_intrin(
      C,
      {{A, Buffer::make("BA", dtype, {kRows, kK}, "wgmma.matrix_a", {}, Expr(), 4, kK)},
       {B, operand_decl("BB", dtype, B.shape(), swizzle)},
       {C, accumulator_decl(n)}},
      [=](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
        const BoundBuffer &a = in[0], &b = in[1];
        const auto [b_lbo, b_sbo] = b_offsets(b, b_col, swizzle, dtype);
        Expr tile = out.tile_index(kRows, n, name);
        TensorIntrinBodies bodies;
        bodies.reset = fill_zero(out, tile, n);
        bodies.update = Evaluate::make(intrinsic_call(
            intrinsic::wgmma_mma_rs,
            {out.data(), tile, Expr(int(n)), a.data(), a.tile_index(kRows, kK, name),
             b.access_ptr(), Expr(int(b_lbo)), Expr(int(b_sbo)), Expr(b_col ? 0 : 1),
             Expr(swizzle)}));
        return bodies;
      },
      name);
}

std::shared_ptr<const TensorIntrin> wgmma_row_reduce(int64_t n, RowReduce kind,
                                                     const WgmmaRowFunction &f) {
  check_n(n, "wgmma_row_reduce");
  const bool is_max = kind == RowReduce::Max;
  auto apply = [f](const Expr &x) { return f.f ? f.f(x, Expr()) : x; };
  Tensor X = placeholder({kRows, int(n)}, Float(32), "X");
  IterVar j = reduce_axis({0, int(n)}, "j");
  Tensor R = compute(
      {kRows},
      [&](Var i) {
        Expr v = apply(X(i, j));
        user_check(v.type() == Float(32), "wgmma_row_reduce")
            << "the function '" << f.name << "' must give float32, got " << v.type();
        return is_max ? max(v, {j}) : sum(v, {j});
      },
      "R", {"i"});
  const std::string name = std::string("wgmma_row_reduce(") + std::to_string(n) +
                           (is_max ? ", max" : ", sum") +
                           (f.f ? ", " + f.name : std::string()) + ")";
  auto combine = [is_max](const Expr &a, const Expr &b) { return is_max ? max(a, b) : a + b; };
  return decl_tensor_intrin(
      R, {{X, accumulator_decl(n, "BX")}, {R, rows_decl("BR")}},
      [=](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
        const BoundBuffer &x = in[0];
        const Expr tile = x.tile_index(kRows, n, name), rtile = out.elem_offset_div(kRows);
        TensorIntrinBodies bodies;
        const Expr identity = is_max ? Expr(-INFINITY) : Expr(0.0f);
        std::vector<Stmt> reset, update;
        for (int h = 0; h < 2; ++h) {
          reset.push_back(set_row(out, rtile, h, identity));
          // Register 4 q + 2 h + e holds row 16 w + l / 4 + 8 h: the thread's n / 4 of the row,
          // combined pairwise (a tree: independent operations), then across the quad.
          std::vector<Expr> terms;
          for (int64_t q = 0; q < n / 8; ++q)
            for (int e = 0; e < 2; ++e)
              terms.push_back(apply(register_of(x, tile, n, Expr(int(4 * q + 2 * h + e)))));
          while (terms.size() > 1) {
            std::vector<Expr> next;
            for (size_t k = 0; k + 1 < terms.size(); k += 2)
              next.push_back(combine(terms[k], terms[k + 1]));
            if (terms.size() % 2)
              next.push_back(terms.back());
            terms = std::move(next);
          }
          Var p0("p0", Float(32)), p1("p1", Float(32)), p2("p2", Float(32));
          auto shuffled = [&](const Var &v, int mask) {
            return combine(v, Call::make(Float(32), intrinsic::shfl_xor, {v, Expr(mask)},
                                         Call::PureIntrinsic));
          };
          update.push_back(LetStmt::make(
              p0, terms[0],
              LetStmt::make(p1, shuffled(p0, 1),
                            LetStmt::make(p2, shuffled(p1, 2),
                                          set_row(out, rtile, h,
                                                  combine(row_of(out, rtile, h), p2))))));
        }
        bodies.reset = Seq::make(reset);
        bodies.update = Seq::make(update);
        return bodies;
      },
      name);
}

std::shared_ptr<const TensorIntrin> wgmma_rowwise(int64_t n, const WgmmaRowFunction &f) {
  check_n(n, "wgmma_rowwise");
  user_check(bool(f.f), "wgmma_rowwise") << "the function '" << f.name << "' is undefined";
  Tensor X = placeholder({kRows, int(n)}, Float(32), "X");
  Tensor R = placeholder({kRows}, Float(32), "R");
  Tensor Y = compute(
      {kRows, int(n)},
      [&](Var i, Var j) {
        Expr v = f.f(X(i, j), R(i));
        user_check(v.type() == Float(32), "wgmma_rowwise")
            << "the function '" << f.name << "' must give float32, got " << v.type();
        return v;
      },
      "Y", {"i", "j"});
  const std::string name = "wgmma_rowwise(" + std::to_string(n) + ", " + f.name + ")";
  return decl_tensor_intrin(
      Y,
      {{X, accumulator_decl(n, "BX")}, {R, rows_decl("BR")}, {Y, accumulator_decl(n, "BY")}},
      [=](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
        // The inputs come in first-use order of the pattern: find them by declaration.
        const BoundBuffer &x = in[0].decl().name() == "BX" ? in[0] : in[1];
        const BoundBuffer &r = in[0].decl().name() == "BX" ? in[1] : in[0];
        const Expr xtile = x.tile_index(kRows, n, name), ytile = out.tile_index(kRows, n, name),
                   rtile = r.elem_offset_div(kRows);
        const bool in_place = x.data().same_as(out.data()) && structural_equal(xtile, ytile);
        Var q("q"), e("e"), row("row", Float(32));
        std::vector<Stmt> body;
        // A tile written for the first time is filled first (the executor tracks its shape).
        if (!in_place)
          body.push_back(fill_zero(out, ytile, n));
        for (int h = 0; h < 2; ++h) {
          Expr rg = q * 4 + h * 2 + e;
          Stmt set = Evaluate::make(intrinsic_call(
              intrinsic::wgmma_reg_set,
              {out.data(), ytile, Expr(int(n)), rg, f.f(register_of(x, xtile, n, rg), row)}));
          body.push_back(LetStmt::make(
              row, row_of(r, rtile, h),
              For::make(q, 0, Expr(int(n / 8)), ForKind::Unrolled,
                        For::make(e, 0, Expr(2), ForKind::Unrolled, set))));
        }
        TensorIntrinBodies bodies;
        bodies.body = Seq::make(body);
        return bodies;
      },
      name);
}

} // namespace tessel

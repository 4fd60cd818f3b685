// The warp-level Tensor Core intrinsics (wmma_*) on fragments held per warp.
//
// A fragment allocation holds, for each warp, `size` elements: tile `index` of an m x n x k
// operation starts at index * (rows * cols) and is stored row-major (rows x cols: m x k for
// matrix_a, k x n for matrix_b, m x n for the accumulator), whatever the layout in memory was.
// Which shape a tile holds is recorded when it is loaded or filled, because wmma_mma_sync does
// not name one. Every call is checked to be made by all 32 threads of a warp with the same
// arguments, as nvcuda::wmma requires.
#include "runtime/interp/SharedMemoryChecker.h"
#include "runtime/interp/WarpIntrinsic.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

namespace tessel::interp {

namespace {

struct Shape {
  int m = 0, n = 0, k = 0;
};

// The shapes nvcuda::wmma supports for 16-bit inputs; code 0 means "nothing loaded".
constexpr Shape kShapes[] = {{0, 0, 0}, {16, 16, 16}, {32, 8, 16}, {8, 32, 16}};

int rows_of(FragKind f, Shape s) { return f == FragKind::MatrixB ? s.k : s.m; }
int cols_of(FragKind f, Shape s) { return f == FragKind::MatrixA ? s.k : s.n; }

class WmmaCode : public WarpIntrinsicCode {
public:
  enum Op { Fill, Load, Store, Mma };

  Op op = Fill;
  std::vector<Memory *> frags_; ///< fill/load/store: 1; mma: d, a, b, c
  Memory *ptr_mem = nullptr;
  int shape_code = 0;
  bool col_major = false;

private:
  /// The offset of tile `tile` of `frag` in warp w's storage, checked against the allocation.
  int64_t tile_base(const Machine &M, const Memory &frag, uint32_t w, int64_t tile,
                    Shape s) const {
    int64_t elems = int64_t(rows_of(frag.frag, s)) * cols_of(frag.frag, s);
    user_check(tile >= 0 && (tile + 1) * elems <= frag.size, "interp")
        << name_ << " by warp " << w << " of block " << M.block_name() << ": tile index "
        << tile << " is out of bounds of fragment '" << frag.name << "' (" << frag.size
        << " elements, tiles of " << elems << ")";
    return int64_t(w) * frag.size + tile * elems;
  }

  uint8_t &shape_record(Memory &frag, uint32_t w, int64_t tile) const {
    return frag.tile_shape[size_t(w) * frag.tiles_per_warp + size_t(tile)];
  }

  /// The shape a fragment tile holds; an error if it was never loaded or filled.
  int recorded_shape(const Machine &M, Memory &frag, uint32_t w, int64_t tile) const {
    int code = shape_record(frag, w, tile);
    user_check(code != 0, "interp")
        << name_ << " by warp " << w << " of block " << M.block_name() << " reads tile "
        << tile << " of fragment '" << frag.name
        << "', which was not loaded or filled since its allocation";
    return code;
  }

  void run(Machine &M, uint32_t w, const std::vector<int64_t> &a,
           const std::vector<LaneValues> &) override {
    if (op == Mma)
      return run_mma(M, w, a);
    Memory &frag = *frags_[0];
    const Shape s = kShapes[shape_code];
    const int64_t tile = a[0];
    const int64_t base = tile_base(M, frag, w, tile, s);
    const int rows = rows_of(frag.frag, s), cols = cols_of(frag.frag, s);
    if (op == Fill) {
      Val v;
      v.i = a[1];
      Val conv = convert(v, uniform_[1]->type, frag);
      std::fill(frag.data.begin() + base, frag.data.begin() + base + rows * cols, conv);
      shape_record(frag, w, tile) = uint8_t(shape_code);
      return;
    }
    Memory &mem = *ptr_mem;
    const int64_t p = a[1], ld = a[2];
    const int32_t agent = warp_agent(w);
    if (op == Store) {
      int held = recorded_shape(M, frag, w, tile);
      user_check(held == shape_code, "interp")
          << name_ << ": fragment '" << frag.name << "' tile " << tile << " holds a "
          << kShapes[held].m << "x" << kShapes[held].n << "x" << kShapes[held].k
          << " result but is stored as " << s.m << "x" << s.n << "x" << s.k;
    }
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        int64_t i = p + (col_major ? c * ld + r : r * ld + c);
        if (i < 0 || i >= mem.size)
          report_out_of_bounds(M, mem, op == Store, i, mem.size, agent);
        Val &f = frag.data[base + r * cols + c];
        if (op == Load) {
          if (mem.scope == MemScope::Shared)
            shared_read(M, mem, i, agent);
          f = mem.data[i];
        } else {
          if (mem.scope == MemScope::Shared)
            shared_write(M, mem, i, agent);
          mem.data[i] = f;
        }
      }
    if (op == Load)
      shape_record(frag, w, tile) = uint8_t(shape_code);
  }

  // d = a * b + c, each product exact in double; the sum is rounded once to the accumulator
  // type (fp32, or fp16 for fp16 accumulators). The GPU's internal order and rounding of the
  // fp32 sum are unspecified, so tests compare with a tolerance.
  void run_mma(Machine &M, uint32_t w, const std::vector<int64_t> &a) {
    Memory &D = *frags_[0], &A = *frags_[1], &B = *frags_[2], &C = *frags_[3];
    const int code = recorded_shape(M, A, w, a[1]);
    const Shape s = kShapes[code];
    for (auto [mem, tile] : {std::pair{&B, a[2]}, std::pair{&C, a[3]}}) {
      int other = recorded_shape(M, *mem, w, tile);
      user_check(other == code, "interp")
          << name_ << " by warp " << w << ": '" << A.name << "' holds a " << s.m << "x" << s.n
          << "x" << s.k << " tile but '" << mem->name << "' a " << kShapes[other].m << "x"
          << kShapes[other].n << "x" << kShapes[other].k << " one";
    }
    const int64_t bd = tile_base(M, D, w, a[0], s), ba = tile_base(M, A, w, a[1], s),
                  bb = tile_base(M, B, w, a[2], s), bc = tile_base(M, C, w, a[3], s);
    const bool float_inputs = A.num.is_float(), float_acc = C.num.is_float();
    std::vector<Val> result(size_t(s.m) * s.n);
    for (int i = 0; i < s.m; ++i)
      for (int j = 0; j < s.n; ++j) {
        double sum = 0;
        for (int kk = 0; kk < s.k; ++kk) {
          Val x = A.data[ba + i * s.k + kk], y = B.data[bb + kk * s.n + j];
          sum += float_inputs ? x.f * y.f : double(x.i) * double(y.i);
        }
        Val c = C.data[bc + i * s.n + j];
        Val &r = result[size_t(i) * s.n + j];
        if (float_acc)
          r.f = round_float(D.num.kind, sum + c.f);
        else
          r.i = D.num.wrap(int64_t(sum) + c.i);
      }
    std::copy(result.begin(), result.end(), D.data.begin() + bd);
    shape_record(D, w, a[0]) = uint8_t(code);
  }

  static Val convert(Val v, DataType from, const Memory &to) {
    double x = from.is_float() ? v.f : double(v.i);
    Val r;
    if (to.num.is_float())
      r.f = round_float(to.num.kind, x);
    else
      r.i = to.num.wrap(int64_t(x));
    return r;
  }
};

} // namespace

StmtPtr compile_wmma(Compiler &C, const Call *call) {
  auto code = std::make_unique<WmmaCode>();
  code->src = Expr(call);
  code->name_ = call->name;
  const std::string &n = call->name;
  auto scalar = [&](const Expr &e, const char *what) {
    user_check(e.type().is_scalar(), "interp") << n << ": " << what << " must be a scalar";
    code->add_uniform(C.expr(e), what);
  };
  const size_t want = n == intrinsic::wmma_mma_sync ? 8 : n == intrinsic::wmma_fill_fragment ? 6 : 8;
  user_check(call->args.size() == want, "interp")
      << n << " takes " << want << " arguments, got " << call->args.size() << ": " << Expr(call);

  if (n == intrinsic::wmma_mma_sync) {
    code->op = WmmaCode::Mma;
    const FragKind kinds[] = {FragKind::Accumulator, FragKind::MatrixA, FragKind::MatrixB,
                              FragKind::Accumulator};
    const char *names[] = {"d_index", "a_index", "b_index", "c_index"};
    for (int i = 0; i < 4; ++i) {
      code->frags_.push_back(compile_fragment(C, call, call->args[2 * i], kinds[i]));
      scalar(call->args[2 * i + 1], names[i]);
    }
    auto &f = code->frags_;
    user_check(f[1]->dtype == f[2]->dtype && f[0]->dtype == f[3]->dtype, "interp")
        << n << ": matrix_a and matrix_b must have one type (" << f[1]->dtype << ", "
        << f[2]->dtype << ") and the accumulators another (" << f[0]->dtype << ", "
        << f[3]->dtype << ")";
    return code;
  }

  const int64_t m = const_arg(call, 1, "m"), nn = const_arg(call, 2, "n"),
                k = const_arg(call, 3, "k");
  for (int s = 1; s < 4; ++s)
    if (kShapes[s].m == m && kShapes[s].n == nn && kShapes[s].k == k)
      code->shape_code = s;
  user_check(code->shape_code != 0, "interp")
      << n << ": unsupported shape m=" << m << " n=" << nn << " k=" << k
      << " (supported: 16x16x16, 32x8x16, 8x32x16)";

  if (n == intrinsic::wmma_fill_fragment) {
    code->op = WmmaCode::Fill;
    code->frags_.push_back(compile_fragment(C, call, call->args[0], FragKind::None));
    scalar(call->args[4], "index");
    scalar(call->args[5], "value");
    return code;
  }

  bool load = n == intrinsic::wmma_load_matrix_sync;
  user_check(load || n == intrinsic::wmma_store_matrix_sync, "interp")
      << "unknown WMMA intrinsic '" << n << "'";
  code->op = load ? WmmaCode::Load : WmmaCode::Store;
  Memory *frag = compile_fragment(C, call, call->args[0], load ? FragKind::None : FragKind::Accumulator);
  code->frags_.push_back(frag);
  scalar(call->args[4], "index");
  PtrArg ptr = compile_pointer(C, call, call->args[5]);
  code->ptr_mem = ptr.mem;
  code->add_uniform(std::move(ptr.index), "pointer");
  scalar(call->args[6], "stride");
  const auto *layout = call->args[7].as<StringImm>();
  user_check(layout && (layout->value == "row_major" || layout->value == "col_major"), "interp")
      << n << ": layout must be \"row_major\" or \"col_major\", got " << call->args[7];
  code->col_major = layout->value == "col_major";
  user_check(ptr.mem->scope == MemScope::Global || ptr.mem->scope == MemScope::Shared, "interp")
      << n << ": '" << ptr.mem->name << "' is in " << scope_name(ptr.mem->scope)
      << " memory; WMMA loads and stores take global or shared memory";
  // nvcuda::wmma takes a pointer of the fragment's element type; anything else is a codegen bug.
  user_check(ptr.mem->dtype == frag->dtype, "interp")
      << n << ": fragment '" << frag->name << "' holds " << frag->dtype << " but buffer '"
      << ptr.mem->name << "' holds " << ptr.mem->dtype;
  return code;
}

} // namespace tessel::interp

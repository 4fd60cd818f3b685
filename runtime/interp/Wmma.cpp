// The warp-level Tensor Core intrinsics (wmma_*) on fragments held per warp.
//
// A fragment allocation holds, for each warp, `size` elements: tile `index` of an m x n x k
// operation starts at index * (rows * cols) and is stored row-major (rows x cols: m x k for
// matrix_a, k x n for matrix_b, m x n for the accumulator), whatever the layout in memory was.
// Which shape a tile holds is recorded when it is loaded or filled, because wmma_mma_sync does
// not name one. Every call is checked to be made by all 32 threads of a warp with the same
// arguments, as nvcuda::wmma requires.
#include "runtime/interp/Machine.h"
#include "runtime/interp/SharedMemoryChecker.h"

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

const char *frag_kind_name(FragKind f) {
  switch (f) {
  case FragKind::MatrixA:
    return "wmma.matrix_a";
  case FragKind::MatrixB:
    return "wmma.matrix_b";
  case FragKind::Accumulator:
    return "wmma.accumulator";
  case FragKind::None:
    break;
  }
  return "not a fragment";
}

/// A fragment operand: the fragment and the expression of its tile index.
struct FragArg {
  Memory *mem = nullptr;
  ExprPtr index;
};

/// A pointer into a buffer: address_of(buf[index]) or access_ptr(type, buf, offset, ...).
struct PtrArg {
  Memory *mem = nullptr;
  ExprPtr index;
};

class WmmaCode : public StmtCode {
public:
  enum Op { Fill, Load, Store, Mma };

  void exec(Machine &M, const Mask &m) override {
    std::vector<const Val *> vals;
    for (auto &e : scalars_)
      vals.push_back(e->eval(M, m));
    std::vector<uint32_t> count(M.n_warps, 0), first(M.n_warps, 0);
    m.each([&](uint32_t t) {
      if (count[t / 32]++ == 0)
        first[t / 32] = t;
    });
    for (uint32_t w = 0; w < M.n_warps; ++w) {
      if (count[w] == 0)
        continue;
      check_whole_warp(M, m, w, count[w]);
      std::vector<int64_t> args(vals.size());
      for (size_t a = 0; a < vals.size(); ++a) {
        args[a] = vals[a][first[w]].i;
        for (uint32_t t = 32 * w; t < 32 * w + 32; ++t)
          user_check(vals[a][t].i == args[a], "interp")
              << name_ << ": argument '" << arg_names_[a] << "' differs within warp " << w
              << " of block " << M.block_name() << " (" << M.thread_name(first[w])
              << " and " << M.thread_name(t) << " pass different values); all threads of a "
              << "warp must pass the same arguments";
      }
      run(M, w, args);
    }
  }

  Expr src;
  std::string name_;
  Op op = Fill;
  std::vector<ExprPtr> scalars_; ///< warp-uniform arguments, evaluated per thread
  std::vector<std::string> arg_names_;
  std::vector<Memory *> frags_; ///< fill/load/store: 1; mma: d, a, b, c
  Memory *ptr_mem = nullptr;
  int shape_code = 0;
  bool col_major = false;

private:
  void check_whole_warp(const Machine &M, const Mask &m, uint32_t w, uint32_t count) const {
    uint32_t lanes = std::min<uint32_t>(32, M.n_threads - 32 * w);
    user_check(lanes == 32, "interp")
        << name_ << " in block " << M.block_name() << ": warp " << w << " has only " << lanes
        << " threads (the block has " << M.n_threads
        << "); WMMA intrinsics need whole warps, so use a multiple of 32 threads per block";
    if (count == 32)
      return;
    uint32_t missing = 32 * w;
    while (m.contains(missing))
      ++missing;
    user_error("interp") << name_ << " is called by only " << count
                         << " of the 32 threads of warp " << w << " in block "
                         << M.block_name() << ": " << M.thread_name(missing)
                         << " does not call it; all threads of a warp must call a wmma_* "
                            "intrinsic together (not under a threadIdx-dependent condition)";
  }

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

  void run(Machine &M, uint32_t w, const std::vector<int64_t> &a) {
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
      Val conv = convert(v, scalars_[1]->type, frag);
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

Memory *fragment(Compiler &C, const Call *call, const Expr &arg, FragKind want) {
  Memory *m = C.memory_of(arg, call->name.c_str());
  user_check(m->scope == MemScope::Fragment, "interp")
      << call->name << ": '" << m->name << "' is not a WMMA fragment (scope "
      << scope_name(m->scope) << ")";
  user_check(want == FragKind::None || m->frag == want, "interp")
      << call->name << ": '" << m->name << "' is a " << frag_kind_name(m->frag)
      << " fragment but a " << frag_kind_name(want) << " one is needed here";
  return m;
}

PtrArg pointer(Compiler &C, const Call *call, const Expr &arg) {
  const auto *p = arg.as<Call>();
  if (p && p->name == intrinsic::address_of && p->args.size() == 1) {
    const auto *load = p->args[0].as<BufferLoad>();
    user_check(load && load->indices.size() == 1, "interp")
        << call->name << ": address_of needs a flat BufferLoad, got " << p->args[0];
    return {C.memory_of(load->buffer->data, call->name.c_str()), C.expr(load->indices[0])};
  }
  if (p && p->name == intrinsic::access_ptr && p->args.size() == 5)
    return {C.memory_of(p->args[1], call->name.c_str()), C.expr(p->args[2])};
  user_error("interp") << call->name << ": expected address_of(buf[index]) or access_ptr(...) "
                       << "as the pointer argument, got " << arg;
}

int64_t const_arg(const Call *call, size_t i, const char *what) {
  auto v = as_const_int(call->args[i]);
  user_check(v.has_value(), "interp")
      << call->name << ": " << what << " must be a constant, got " << call->args[i];
  return *v;
}

} // namespace

StmtPtr compile_wmma(Compiler &C, const Call *call) {
  auto code = std::make_unique<WmmaCode>();
  code->src = Expr(call);
  code->name_ = call->name;
  const std::string &n = call->name;
  auto scalar = [&](const Expr &e, const char *what) {
    user_check(e.type().is_scalar(), "interp") << n << ": " << what << " must be a scalar";
    code->scalars_.push_back(C.expr(e));
    code->arg_names_.push_back(what);
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
      code->frags_.push_back(fragment(C, call, call->args[2 * i], kinds[i]));
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
    code->frags_.push_back(fragment(C, call, call->args[0], FragKind::None));
    scalar(call->args[4], "index");
    scalar(call->args[5], "value");
    return code;
  }

  bool load = n == intrinsic::wmma_load_matrix_sync;
  user_check(load || n == intrinsic::wmma_store_matrix_sync, "interp")
      << "unknown WMMA intrinsic '" << n << "'";
  code->op = load ? WmmaCode::Load : WmmaCode::Store;
  Memory *frag = fragment(C, call, call->args[0], load ? FragKind::None : FragKind::Accumulator);
  code->frags_.push_back(frag);
  scalar(call->args[4], "index");
  PtrArg ptr = pointer(C, call, call->args[5]);
  code->ptr_mem = ptr.mem;
  code->scalars_.push_back(std::move(ptr.index));
  code->arg_names_.push_back("pointer");
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

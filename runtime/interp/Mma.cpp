// The PTX warp-level matrix intrinsics (mma_*) on per-thread register fragments.
//
// An mma.* allocation is modelled as what it is on the GPU: each lane's own registers. Warp w,
// lane l holds size / 32 elements at [w][l][...]; tile `index` of a scope owns the lane's
// elements index * (tile / 32) onwards (8 halves of an m16k16 matrix_a tile, 4 halves of a
// k16n8 matrix_b tile, 4 floats of an m16n8 accumulator tile), and two halves make one 32-bit
// register. Which element of the matrix each of them is follows the PTX ISA's figures for
// mma.m16n8k16 and ldmatrix exactly, and ldmatrix reads its rows from the addresses that the
// lanes pass (lanes 8i..8i+7 the rows of matrix i), so a wrong lane mapping in an intrinsic
// gives wrong numbers here as it would on the GPU.
#include "runtime/interp/SharedMemoryChecker.h"
#include "runtime/interp/WarpIntrinsic.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

namespace tessel::interp {

namespace {

/// Elements of one tile over the whole warp: m16k16 for matrix_a, k16n8 / m16n8 otherwise.
int64_t tile_elements(FragKind f) { return f == FragKind::MmaA ? 256 : 128; }

// Where element e of a lane's tile lies in the matrix, with g = lane / 4, t = lane % 4 (the
// PTX ISA's groupID and threadID_in_group); halves 2q, 2q + 1 form register q.
struct RowCol {
  int row, col;
};
RowCol a_element(int lane, int e) { // m16k16: a0..a7
  int g = lane / 4, t = lane % 4, q = e / 2;
  return {g + 8 * (q % 2), 2 * t + e % 2 + 8 * (q / 2)};
}
RowCol b_element(int lane, int e) { // k16n8 (row = k): b0..b3
  int g = lane / 4, t = lane % 4, q = e / 2;
  return {2 * t + e % 2 + 8 * q, g};
}
RowCol c_element(int lane, int e) { // m16n8: c0..c3
  int g = lane / 4, t = lane % 4;
  return {g + 8 * (e / 2), 2 * t + e % 2};
}

class MmaCode : public WarpIntrinsicCode {
public:
  enum Op { Fill, Ldmatrix, Mma, Store };

  Op op = Fill;
  std::vector<Memory *> frags_; ///< fill / ldmatrix / store: 1; mma: d, a, b, c
  Memory *ptr_mem = nullptr;
  int num = 4;        ///< ldmatrix: matrices
  bool trans = false; ///< ldmatrix
  int lanes = 1;      ///< store: elements per access

private:
  /// Element `p` of lane `lane`'s registers in `frag`.
  static Val &reg(Memory &frag, uint32_t w, int lane, int64_t p) {
    return frag.data[size_t(w) * frag.size + size_t(lane) * (frag.size / 32) + p];
  }

  /// The first of a tile's elements in each lane's registers, checked against the allocation.
  int64_t tile_first(const Machine &M, const Memory &frag, uint32_t w, int64_t tile,
                     int64_t tiles = 1) const {
    int64_t elems = tile_elements(frag.frag);
    user_check(tile >= 0 && (tile + tiles) * elems <= frag.size, "interp")
        << name_ << " by warp " << w << " of block " << M.block_name() << ": tile index "
        << tile << (tiles > 1 ? " (and the next)" : "") << " is out of bounds of fragment '"
        << frag.name << "' (" << frag.size << " elements, tiles of " << elems << ")";
    return tile * (elems / 32);
  }

  uint8_t &written(Memory &frag, uint32_t w, int64_t tile) const {
    return frag.tile_shape[size_t(w) * frag.tiles_per_warp + size_t(tile)];
  }

  void check_written(const Machine &M, Memory &frag, uint32_t w, int64_t tile) const {
    user_check(written(frag, w, tile), "interp")
        << name_ << " by warp " << w << " of block " << M.block_name() << " reads tile " << tile
        << " of fragment '" << frag.name << "', which was not loaded or filled since its "
        << "allocation";
  }

  void run(Machine &M, uint32_t w, const std::vector<int64_t> &a,
           const std::vector<LaneValues> &lane_args) override {
    switch (op) {
    case Fill:
      return run_fill(M, w, a);
    case Ldmatrix:
      return run_ldmatrix(M, w, a[0], lane_args[0]);
    case Mma:
      return run_mma(M, w, a);
    case Store:
      return run_store(M, w, a[0], a[1], lane_args[0]);
    }
  }

  void run_fill(Machine &M, uint32_t w, const std::vector<int64_t> &a) {
    Memory &frag = *frags_[0];
    int64_t first = tile_first(M, frag, w, a[0]);
    Val v;
    v.i = a[1];
    DataType from = uniform_[1]->type;
    Val value;
    value.f = round_float(frag.num.kind, from.is_float() ? v.f : double(v.i));
    for (int l = 0; l < 32; ++l)
      for (int e = 0; e < 4; ++e)
        reg(frag, w, l, first + e) = value;
    written(frag, w, a[0]) = 1;
  }

  // ldmatrix: the 8 rows of matrix i (8 halves, 16 bytes each) come from the addresses of
  // lanes 8i..8i+7; lane l receives in register i the halves (l / 4, 2 (l % 4) + j) of matrix
  // i, or with .trans (2 (l % 4) + j, l / 4), for j = 0, 1.
  void run_ldmatrix(Machine &M, uint32_t w, int64_t tile, const LaneValues &addr) {
    Memory &frag = *frags_[0], &mem = *ptr_mem;
    int64_t regs_per_tile = tile_elements(frag.frag) / 64;
    int64_t first = tile_first(M, frag, w, tile, (num + regs_per_tile - 1) / regs_per_tile);
    const int32_t agent = warp_agent(w);
    for (int i = 0; i < num; ++i) {
      Val rows[8][8];
      for (int r = 0; r < 8; ++r) {
        int lane = 8 * i + r;
        int64_t p = addr[lane];
        user_check(p % 8 == 0, "interp")
            << name_ << " by warp " << w << " of block " << M.block_name() << ": "
            << M.thread_name(32 * w + lane) << " passes row address '" << mem.name << "' + " << p
            << " elements, which is not 16-byte aligned as ldmatrix requires";
        for (int c = 0; c < 8; ++c) {
          if (p + c < 0 || p + c >= mem.size)
            report_out_of_bounds(M, mem, false, p + c, mem.size, agent);
          shared_read(M, mem, p + c, agent);
          rows[r][c] = mem.data[p + c];
        }
      }
      for (int l = 0; l < 32; ++l)
        for (int j = 0; j < 2; ++j) {
          int r = trans ? 2 * (l % 4) + j : l / 4, c = trans ? l / 4 : 2 * (l % 4) + j;
          reg(frag, w, l, first + 2 * i + j) = rows[r][c];
        }
    }
    for (int64_t t = tile; t < tile + (num + regs_per_tile - 1) / regs_per_tile; ++t)
      written(frag, w, t) = 1;
  }

  // D = A * B + C for one m16n8k16: gathered from and scattered to the lanes' registers. Each
  // product is exact in double; the sum is rounded once to float32 (the GPU's internal order
  // and rounding are unspecified, so tests compare with a tolerance or use exact inputs).
  void run_mma(Machine &M, uint32_t w, const std::vector<int64_t> &a) {
    Memory &D = *frags_[0], &A = *frags_[1], &B = *frags_[2], &C = *frags_[3];
    for (auto [mem, tile] : {std::pair{&A, a[1]}, std::pair{&B, a[2]}, std::pair{&C, a[3]}})
      check_written(M, *mem, w, tile);
    int64_t fd = tile_first(M, D, w, a[0]), fa = tile_first(M, A, w, a[1]),
            fb = tile_first(M, B, w, a[2]), fc = tile_first(M, C, w, a[3]);
    double am[16][16], bm[16][8], cm[16][8];
    for (int l = 0; l < 32; ++l) {
      for (int e = 0; e < 8; ++e) {
        RowCol x = a_element(l, e);
        am[x.row][x.col] = reg(A, w, l, fa + e).f;
      }
      for (int e = 0; e < 4; ++e) {
        RowCol y = b_element(l, e), z = c_element(l, e);
        bm[y.row][y.col] = reg(B, w, l, fb + e).f;
        cm[z.row][z.col] = reg(C, w, l, fc + e).f;
      }
    }
    for (int l = 0; l < 32; ++l)
      for (int e = 0; e < 4; ++e) {
        RowCol z = c_element(l, e);
        double sum = cm[z.row][z.col];
        for (int k = 0; k < 16; ++k)
          sum += am[z.row][k] * bm[k][z.col];
        reg(D, w, l, fd + e).f = round_float(D.num.kind, sum);
      }
    written(D, w, a[0]) = 1;
  }

  // Each lane writes its own c0, c1 at p, p + 1 and c2, c3 at p + 8 * stride (+ 1).
  void run_store(Machine &M, uint32_t w, int64_t tile, int64_t stride, const LaneValues &ptr) {
    Memory &frag = *frags_[0], &mem = *ptr_mem;
    check_written(M, frag, w, tile);
    int64_t first = tile_first(M, frag, w, tile);
    for (int l = 0; l < 32; ++l) {
      const int32_t thread = int32_t(32 * w + l);
      user_check(ptr[l] % lanes == 0, "interp")
          << name_ << " by warp " << w << " of block " << M.block_name() << ": "
          << M.thread_name(uint32_t(thread)) << " stores " << lanes << " elements at '"
          << mem.name << "' + " << ptr[l] << ", which is not aligned to "
          << lanes * mem.dtype.bytes() << " bytes";
      for (int e = 0; e < 4; ++e) {
        int64_t i = ptr[l] + (e / 2) * 8 * stride + e % 2;
        if (i < 0 || i >= mem.size)
          report_out_of_bounds(M, mem, true, i, mem.size, thread);
        if (mem.scope == MemScope::Shared)
          shared_write(M, mem, i, thread);
        // Rounded to the memory's type where it is narrower (float16 / bfloat16 C).
        Val v;
        v.f = round_float(mem.num.kind, reg(frag, w, l, first + e).f);
        mem.data[i] = v;
      }
    }
  }
};

// The fragment `arg` of kind `want`: float32 accumulators, float16 or bfloat16 operands.
Memory *mma_fragment(Compiler &C, const Call *call, const Expr &arg, FragKind want) {
  Memory *m = compile_fragment(C, call, arg, want);
  const bool operand = want != FragKind::MmaAccumulator;
  user_check(operand ? m->dtype == Float(16) || m->dtype == BFloat(16) : m->dtype == Float(32),
             "interp")
      << call->name << ": fragment '" << m->name << "' (" << fragment_scope_name(want)
      << ") holds " << m->dtype << "; mma.sync.m16n8k16 takes "
      << (operand ? "float16 or bfloat16" : "float32") << " there";
  user_check(m->size % tile_elements(want) == 0, "interp")
      << call->name << ": fragment '" << m->name << "' holds " << m->size
      << " elements, not a whole number of " << tile_elements(want) << "-element tiles";
  return m;
}

} // namespace

StmtPtr compile_mma(Compiler &C, const Call *call) {
  auto code = std::make_unique<MmaCode>();
  code->src = Expr(call);
  code->name_ = call->name;
  const std::string &n = call->name;
  const std::vector<Expr> &a = call->args;
  auto expect_args = [&](size_t k, const char *signature) {
    user_check(a.size() == k, "interp")
        << n << " takes " << k << " arguments " << signature << ", got " << a.size() << ": "
        << Expr(call);
  };
  auto uniform = [&](const Expr &e, const char *what) {
    user_check(e.type().is_scalar(), "interp") << n << ": " << what << " must be a scalar";
    code->add_uniform(C.expr(e), what);
  };
  auto pointer = [&](const Expr &e, MemScope only) {
    PtrArg p = compile_pointer(C, call, e);
    user_check(p.mem->scope == MemScope::Shared ||
                   (only == MemScope::Global && p.mem->scope == MemScope::Global),
               "interp")
        << n << ": '" << p.mem->name << "' is in " << scope_name(p.mem->scope) << " memory; "
        << (only == MemScope::Shared ? "ldmatrix reads shared memory"
                                     : "the store writes global or shared memory");
    code->ptr_mem = p.mem;
    code->add_per_lane(std::move(p.index));
  };

  if (n == intrinsic::mma_fill_fragment) {
    expect_args(3, "(frag, index, value)");
    code->op = MmaCode::Fill;
    code->frags_.push_back(mma_fragment(C, call, a[0], FragKind::MmaAccumulator));
    uniform(a[1], "index");
    uniform(a[2], "value");
    return code;
  }
  if (n == intrinsic::mma_ldmatrix) {
    expect_args(5, "(frag, index, num, trans, ptr)");
    code->op = MmaCode::Ldmatrix;
    Memory *frag = C.memory_of(a[0], n.c_str());
    FragKind kind = frag->frag == FragKind::MmaB ? FragKind::MmaB : FragKind::MmaA;
    code->frags_.push_back(mma_fragment(C, call, a[0], kind));
    uniform(a[1], "index");
    code->num = int(const_arg(call, 2, "num"));
    user_check(code->num == 1 || code->num == 2 || code->num == 4, "interp")
        << n << ": ldmatrix loads 1, 2 or 4 matrices, not " << code->num;
    code->trans = const_arg(call, 3, "trans") != 0;
    pointer(a[4], MemScope::Shared);
    user_check(code->ptr_mem->dtype.bits() == 16 && code->ptr_mem->dtype == frag->dtype, "interp")
        << n << ": '" << code->ptr_mem->name << "' holds " << code->ptr_mem->dtype
        << " but fragment '" << frag->name << "' " << frag->dtype
        << "; ldmatrix moves 16-bit elements unchanged";
    return code;
  }
  if (n == intrinsic::mma_sync) {
    expect_args(8, "(d, d_index, a, a_index, b, b_index, c, c_index)");
    code->op = MmaCode::Mma;
    const FragKind kinds[] = {FragKind::MmaAccumulator, FragKind::MmaA, FragKind::MmaB,
                              FragKind::MmaAccumulator};
    const char *names[] = {"d_index", "a_index", "b_index", "c_index"};
    for (int i = 0; i < 4; ++i) {
      code->frags_.push_back(mma_fragment(C, call, a[2 * i], kinds[i]));
      uniform(a[2 * i + 1], names[i]);
    }
    user_check(code->frags_[1]->dtype == code->frags_[2]->dtype, "interp")
        << n << ": A ('" << code->frags_[1]->name << "') holds " << code->frags_[1]->dtype
        << " and B ('" << code->frags_[2]->name << "') " << code->frags_[2]->dtype
        << "; mma.sync multiplies operands of one type";
    return code;
  }
  if (n == intrinsic::mma_store_fragment) {
    expect_args(5, "(frag, index, ptr, stride, lanes)");
    code->op = MmaCode::Store;
    Memory *frag = mma_fragment(C, call, a[0], FragKind::MmaAccumulator);
    code->frags_.push_back(frag);
    uniform(a[1], "index");
    uniform(a[3], "stride");
    code->lanes = int(const_arg(call, 4, "lanes"));
    user_check(code->lanes == 1 || code->lanes == 2, "interp")
        << n << ": lanes must be 1 or 2, got " << code->lanes;
    pointer(a[2], MemScope::Global);
    const DataType out = code->ptr_mem->dtype;
    user_check(out == Float(32) || out == Float(16) || out == BFloat(16), "interp")
        << n << ": fragment '" << frag->name << "' holds " << frag->dtype << " but buffer '"
        << code->ptr_mem->name << "' holds " << out
        << "; the store writes float32, or rounds to float16 or bfloat16";
    return code;
  }
  user_error("interp") << "unknown mma intrinsic '" << n << "'";
}

} // namespace tessel::interp

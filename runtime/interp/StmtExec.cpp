// Statements: control flow under the active-thread mask, storage and stores.
#include "runtime/interp/Machine.h"
#include "runtime/interp/SharedMemoryChecker.h"
#include "runtime/interp/WarpScheduler.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

#include <cmath>

namespace tessel::interp {

namespace {

class SeqCode : public StmtCode {
public:
  explicit SeqCode(std::vector<StmtPtr> stmts) : stmts_(std::move(stmts)) {}
  void exec(Machine &M, const Mask &m) override {
    for (auto &s : stmts_)
      s->exec(M, m);
  }

private:
  std::vector<StmtPtr> stmts_;
};

class LetStmtCode : public StmtCode {
public:
  LetStmtCode(int slot, ExprPtr value, StmtPtr body)
      : slot_(slot), value_(std::move(value)), body_(std::move(body)) {}
  void exec(Machine &M, const Mask &m) override {
    const Val *v = value_->eval(M, m);
    Val *s = M.slots[slot_].data();
    const size_t L = value_->lanes;
    m.each([&](uint32_t t) { std::copy(v + t * L, v + t * L + L, s + t * L); });
    body_->exec(M, m);
  }

private:
  int slot_;
  ExprPtr value_;
  StmtPtr body_;
};

/// threadIdx.* / blockIdx.*: binds the variable to each thread's index.
class ThreadBindCode : public StmtCode {
public:
  ThreadBindCode(int slot, int dim, bool block, StmtPtr body)
      : slot_(slot), dim_(dim), block_(block), body_(std::move(body)) {}
  void exec(Machine &M, const Mask &m) override {
    Val *s = M.slots[slot_].data();
    m.each([&](uint32_t t) { s[t].i = block_ ? M.block_idx[dim_] : M.tid[t][dim_]; });
    body_->exec(M, m);
  }

private:
  int slot_, dim_;
  bool block_;
  StmtPtr body_;
};

class ForCode : public StmtCode {
public:
  ForCode(int slot, DataType t, ExprPtr min, ExprPtr extent, StmtPtr body)
      : slot_(slot), num_(Numeric::of(t)), min_(std::move(min)), extent_(std::move(extent)),
        body_(std::move(body)) {}
  void exec(Machine &M, const Mask &m) override {
    const Val *mn = min_->eval(M, m), *ex = extent_->eval(M, m);
    int64_t first = -1;
    bool uniform = true;
    m.each([&](uint32_t t) {
      if (first < 0)
        first = t;
      else if (mn[t].i != mn[first].i || ex[t].i != ex[first].i)
        uniform = false;
    });
    if (first < 0)
      return;
    Val *var = M.slots[slot_].data();
    if (uniform) {
      // The common case: every active thread runs every iteration.
      const int64_t lo = mn[first].i, n = ex[first].i;
      for (int64_t it = 0; it < n; ++it) {
        int64_t v = num_.wrap(lo + it);
        m.each([&](uint32_t t) { var[t].i = v; });
        body_->exec(M, m);
      }
      return;
    }
    // A trip count that depends on the thread: threads past their end sit out. Copies of the
    // bounds, since the body may evaluate the bound expressions again.
    std::vector<int64_t> lo(M.n_threads), n(M.n_threads);
    int64_t max_n = 0;
    m.each([&](uint32_t t) {
      lo[t] = mn[t].i;
      n[t] = ex[t].i;
      max_n = std::max(max_n, n[t]);
    });
    for (int64_t it = 0; it < max_n; ++it) {
      Mask active = m.filter([&](uint32_t t) { return it < n[t]; });
      active.each([&](uint32_t t) { var[t].i = num_.wrap(lo[t] + it); });
      body_->exec(M, active);
    }
  }

private:
  int slot_;
  Numeric num_;
  ExprPtr min_, extent_;
  StmtPtr body_;
};

class IfCode : public StmtCode {
public:
  IfCode(ExprPtr cond, StmtPtr then_case, StmtPtr else_case)
      : cond_(std::move(cond)), then_(std::move(then_case)), else_(std::move(else_case)) {}
  void exec(Machine &M, const Mask &m) override {
    const Val *c = cond_->eval(M, m);
    size_t taken = 0;
    m.each([&](uint32_t t) { taken += c[t].i != 0; });
    // Uniform conditions keep the caller's mask, so a barrier under them stays legal.
    if (taken == m.count()) {
      then_->exec(M, m);
      return;
    }
    if (taken == 0) {
      if (else_)
        else_->exec(M, m);
      return;
    }
    Mask mt = m.filter([&](uint32_t t) { return c[t].i != 0; });
    Mask mf = else_ ? m.filter([&](uint32_t t) { return c[t].i == 0; }) : Mask{};
    then_->exec(M, mt);
    if (else_)
      else_->exec(M, mf);
  }

private:
  ExprPtr cond_;
  StmtPtr then_, else_;
};

class AssertCode : public StmtCode {
public:
  AssertCode(ExprPtr cond, std::string message, StmtPtr body)
      : cond_(std::move(cond)), message_(std::move(message)), body_(std::move(body)) {}
  void exec(Machine &M, const Mask &m) override {
    const Val *c = cond_->eval(M, m);
    m.each([&](uint32_t t) {
      user_check(c[t].i != 0, "interp") << "assertion failed in " << M.where(t) << ": " << message_;
    });
    body_->exec(M, m);
  }

private:
  ExprPtr cond_;
  std::string message_;
  StmtPtr body_;
};

/// Gives an allocation fresh storage each time it executes: "written since allocation" starts
/// over, so a read of what a previous iteration left there is reported. With independent warps
/// each warp enters it on its own: a warp renews only its own local and fragment storage, and
/// shared storage is renewed by the first warp to enter it for the n-th time in the block.
class AllocateCode : public StmtCode {
public:
  AllocateCode(Memory *mem, StmtPtr body) : mem_(mem), body_(std::move(body)) {}
  void exec(Machine &M, const Mask &m) override {
    if (M.warps)
      enter_warp(M, M.warps->current());
    else
      renew(M);
    body_->exec(M, m);
  }

private:
  size_t owners(const Machine &M) const {
    return mem_->scope == MemScope::Local      ? M.n_threads
           : mem_->scope == MemScope::Fragment ? M.n_warps
                                               : 1;
  }
  /// A wgmma.accumulator's (and A operand's) size is per warpgroup: a warp holds a quarter of
  /// it. Its rows (wgmma.rows) are too, but each row is held by the 4 lanes of a quad: a warp
  /// holds as many.
  size_t per_owner() const {
    const bool quarter = mem_->frag == FragKind::WgmmaAccumulator || mem_->frag == FragKind::WgmmaA;
    return size_t(quarter ? mem_->size / 4 : mem_->size);
  }

  void renew(Machine &M) {
    Memory &mem = *mem_;
    // A warpgroup's accumulator registers start as NaN: a read of one never written (ordinary
    // instructions may write a tile register by register) shows in the result.
    Val start{0};
    if (mem.frag == FragKind::WgmmaAccumulator)
      start.f = std::nan("");
    mem.data.assign(owners(M) * per_owner(), start);
    if (mem.scope == MemScope::Shared) {
      if (!M.barriers.empty())
        release_barriers(M, mem);
      mem.shadow.assign(mem.size, ShadowCell{});
      keep_store_reads(M, mem);
    }
    if (mem.scope == MemScope::Fragment)
      mem.tile_shape.assign(owners(M) * mem.tiles_per_warp, 0);
  }

  void enter_warp(Machine &M, uint32_t w) {
    Memory &mem = *mem_;
    if (mem.scope == MemScope::Shared) {
      if (block_ != M.block_serial) {
        block_ = M.block_serial;
        entries_.assign(M.n_warps, 0);
        instances_ = 0;
      }
      if (++entries_[w] > instances_) {
        instances_ = entries_[w];
        renew(M);
      }
      return;
    }
    if (mem.data.size() != owners(M) * per_owner())
      renew(M);
    const size_t per = per_owner();
    auto zero = [&](size_t first, size_t count) {
      std::fill_n(mem.data.begin() + std::ptrdiff_t(first * per), count * per, Val{0});
    };
    if (mem.scope == MemScope::Local) {
      zero(32 * size_t(w), std::min<size_t>(32, M.n_threads - 32 * w));
    } else {
      zero(w, 1);
      std::fill_n(mem.tile_shape.begin() + std::ptrdiff_t(w * mem.tiles_per_warp),
                  mem.tiles_per_warp, uint8_t(0));
    }
  }

  Memory *mem_;
  StmtPtr body_;
  uint64_t block_ = ~uint64_t(0); ///< shared: the block whose entries are counted
  std::vector<uint32_t> entries_; ///< shared: per warp, its entries in that block
  uint32_t instances_ = 0;
};

template <MemScope S> class StoreCode : public StmtCode {
public:
  StoreCode(Memory *mem, ExprPtr index, ExprPtr value)
      : mem_(mem), index_(std::move(index)), value_(std::move(value)) {}
  void exec(Machine &M, const Mask &m) override {
    const Val *v = value_->eval(M, m), *idx = index_->eval(M, m);
    const size_t L = index_->lanes;
    Memory &mem = *mem_;
    const int64_t size = mem.size;
    Val *data = mem.data.data();
    m.each([&](uint32_t t) {
      for (size_t l = 0; l < L; ++l) {
        int64_t i = idx[t * L + l].i;
        if (i < 0 || i >= size) [[unlikely]]
          report_out_of_bounds(M, mem, true, i, size, int32_t(t));
        if constexpr (S == MemScope::Local)
          data[t * size + i] = v[t * L + l];
        else {
          if constexpr (S == MemScope::Shared)
            shared_write(M, mem, i, int32_t(t));
          data[i] = v[t * L + l];
        }
      }
    });
  }

private:
  Memory *mem_;
  ExprPtr index_, value_;
};

class EvalCode : public StmtCode {
public:
  explicit EvalCode(ExprPtr e) : e_(std::move(e)) {}
  void exec(Machine &M, const Mask &m) override { e_->eval(M, m); }

private:
  ExprPtr e_;
};

/// "threadIdx.y" -> {1, false}; "blockIdx.z" -> {2, true}; other tags -> dim -1.
std::pair<int, bool> parse_thread_tag(const std::string &tag) {
  bool block = tag.rfind("blockIdx.", 0) == 0;
  bool thread = tag.rfind("threadIdx.", 0) == 0;
  if ((!block && !thread) || tag.size() != (block ? 10u : 11u))
    return {-1, false};
  char c = tag.back();
  return {c >= 'x' && c <= 'z' ? c - 'x' : -1, block};
}

StmtPtr compile_thread_binding(Compiler &C, const Var &var, const std::string &tag,
                               const Expr &extent, const Stmt &body) {
  auto [dim, block] = parse_thread_tag(tag);
  user_check(dim >= 0, "interp") << "unknown thread tag '" << tag << "'";
  const int64_t launch = block ? C.M.launch.grid[dim] : C.M.launch.block[dim];
  auto ext = as_const_int(extent);
  user_check(ext.has_value(), "interp")
      << "the extent of " << tag << " must be a constant, got " << extent;
  user_check(*ext == launch, "interp")
      << tag << " is bound with extent " << *ext << " but the launch configuration has "
      << launch << " (" << (block ? "grid" : "block") << " dimension " << dim << ")";
  int slot = 0;
  StmtPtr code = C.scoped(var, slot, [&] { return C.stmt(body); });
  return std::make_unique<ThreadBindCode>(slot, dim, block, std::move(code));
}

MemScope parse_scope(const std::string &scope, FragKind &frag) {
  frag = FragKind::None;
  if (scope == "shared" || scope == "shared.dyn")
    return MemScope::Shared;
  if (scope == "local" || scope.empty())
    return MemScope::Local;
  if (scope == "wmma.matrix_a")
    frag = FragKind::MatrixA;
  else if (scope == "wmma.matrix_b")
    frag = FragKind::MatrixB;
  else if (scope == "wmma.accumulator")
    frag = FragKind::Accumulator;
  else if (scope == "mma.matrix_a")
    frag = FragKind::MmaA;
  else if (scope == "mma.matrix_b")
    frag = FragKind::MmaB;
  else if (scope == "mma.accumulator")
    frag = FragKind::MmaAccumulator;
  else if (scope == "wgmma.accumulator")
    frag = FragKind::WgmmaAccumulator;
  else if (scope == "wgmma.rows")
    frag = FragKind::WgmmaRows;
  else if (scope == "wgmma.matrix_a")
    frag = FragKind::WgmmaA;
  user_check(frag != FragKind::None, "interp")
      << "cannot allocate storage in scope '" << scope << "' inside a kernel";
  return MemScope::Fragment;
}

StmtPtr compile_allocate(Compiler &C, const Allocate *op) {
  auto mem = std::make_unique<Memory>();
  mem->name = op->buffer_var.name();
  mem->dtype = op->dtype;
  mem->num = Numeric::of(op->dtype);
  mem->scope = parse_scope(op->scope, mem->frag);
  mem->size = op->constant_size();
  user_check(op->dtype.is_scalar(), "interp")
      << "allocation '" << mem->name << "' has vector type " << op->dtype
      << "; the executor supports scalar element types";
  user_check(mem->size > 0, "interp")
      << "allocation '" << mem->name << "' needs a positive constant size, got "
      << (op->extents.empty() ? Expr(0) : op->extents[0]);
  // The smallest fragment tile (8x16 / 16x8) has 128 elements.
  mem->tiles_per_warp = mem->size / 128 + 1;
  Memory *raw = mem.get();
  if (raw->scope == MemScope::Shared) {
    raw->var = op->buffer_var.get();
    C.M.shared_by_var[raw->var] = raw;
  }
  C.M.memories.push_back(std::move(mem));
  C.bind_memory(op->buffer_var, raw);
  return std::make_unique<AllocateCode>(raw, C.stmt(op->body));
}

StmtPtr compile_store(Compiler &C, const BufferStore *op) {
  user_check(op->indices.size() == 1, "interp")
      << "store to '" << op->buffer.name() << "' has " << op->indices.size()
      << " indices: the executor takes flattened IR (run storage_flatten first)";
  Memory *mem = C.memory_of(op->buffer->data, "store");
  ExprPtr index = C.index(op->indices[0]);
  ExprPtr value = C.expr(op->value);
  switch (mem->scope) {
  case MemScope::Global:
    return std::make_unique<StoreCode<MemScope::Global>>(mem, std::move(index), std::move(value));
  case MemScope::Shared:
    return std::make_unique<StoreCode<MemScope::Shared>>(mem, std::move(index), std::move(value));
  case MemScope::Local:
    return std::make_unique<StoreCode<MemScope::Local>>(mem, std::move(index), std::move(value));
  case MemScope::Fragment:
    break;
  }
  user_error("interp") << "'" << mem->name
                       << "' is a fragment: it can only be written by the wmma_* / mma_* / "
                          "wgmma_* intrinsics of its scope";
}

} // namespace

int Compiler::bind_var(const Var &v) {
  int slot = static_cast<int>(M.slots.size());
  M.slots.emplace_back(size_t(M.n_threads) * v.type().lanes(), Val{0});
  slots_[v.get()] = slot;
  return slot;
}

Memory *Compiler::memory_of(const Expr &buffer_var, const char *context) {
  const auto *v = buffer_var.as<Variable>();
  auto it = v ? memories_.find(v) : memories_.end();
  user_check(it != memories_.end(), "interp")
      << context << " of buffer '" << (v ? v->name : to_string(buffer_var))
      << "', which is neither a kernel argument nor allocated in the kernel";
  return it->second;
}

StmtPtr Compiler::stmt(const Stmt &s) {
  if (!s.defined())
    return std::make_unique<SeqCode>(std::vector<StmtPtr>{});
  switch (s->kind()) {
  case IRNodeKind::Seq: {
    std::vector<StmtPtr> stmts;
    for (const Stmt &x : s.as<Seq>()->stmts)
      stmts.push_back(stmt(x));
    return std::make_unique<SeqCode>(std::move(stmts));
  }
  case IRNodeKind::LetStmt: {
    const auto *op = s.as<LetStmt>();
    ExprPtr value = expr(op->value);
    int slot = 0;
    StmtPtr body = scoped(op->var, slot, [&] { return stmt(op->body); });
    return std::make_unique<LetStmtCode>(slot, std::move(value), std::move(body));
  }
  case IRNodeKind::AttrStmt: {
    const auto *op = s.as<AttrStmt>();
    const auto *iv = std::get_if<IterVar>(&op->node);
    if (op->key == attr::thread_extent && iv)
      return compile_thread_binding(*this, iv->var(), iv->thread_tag(), op->value, op->body);
    if (op->key == attr::virtual_thread && iv) {
      // Virtual threads are the same thread run several times; serially is one valid order.
      Var v = iv->var();
      Stmt loop = For::make(v, make_zero(v.type()), cast(v.type(), op->value), ForKind::Serial,
                            op->body);
      return stmt(loop);
    }
    return stmt(op->body); // other attributes only guide code generation
  }
  case IRNodeKind::AssertStmt: {
    const auto *op = s.as<AssertStmt>();
    return std::make_unique<AssertCode>(expr(op->condition), op->message, stmt(op->body));
  }
  case IRNodeKind::For: {
    const auto *op = s.as<For>();
    if (op->for_kind == ForKind::ThreadBinding) {
      user_check(is_zero(op->min), "interp")
          << "loop bound to " << op->thread_tag << " must start at 0, got " << op->min;
      return compile_thread_binding(*this, op->loop_var, op->thread_tag, op->extent, op->body);
    }
    ExprPtr min = expr(op->min), extent = expr(op->extent);
    int slot = 0;
    StmtPtr body = scoped(op->loop_var, slot, [&] { return stmt(op->body); });
    return std::make_unique<ForCode>(slot, op->loop_var.type(), std::move(min),
                                     std::move(extent), std::move(body));
  }
  case IRNodeKind::Allocate:
    return compile_allocate(*this, s.as<Allocate>());
  case IRNodeKind::BufferStore:
    return compile_store(*this, s.as<BufferStore>());
  case IRNodeKind::IfThenElse: {
    const auto *op = s.as<IfThenElse>();
    user_check(op->condition.type().is_scalar(), "interp")
        << "IfThenElse condition must be scalar, got " << op->condition.type();
    // In program order (a function's arguments are evaluated in no set order): compiling a
    // statement can depend on what compiled before it.
    ExprPtr cond = expr(op->condition);
    StmtPtr then_case = stmt(op->then_case);
    StmtPtr else_case = op->else_case.defined() ? stmt(op->else_case) : nullptr;
    return std::make_unique<IfCode>(std::move(cond), std::move(then_case), std::move(else_case));
  }
  case IRNodeKind::Evaluate: {
    const Expr &v = s.as<Evaluate>()->value;
    if (const auto *call = v.as<Call>())
      return compile_evaluate(*this, call);
    return std::make_unique<EvalCode>(expr(v));
  }
  case IRNodeKind::BufferRealize:
    user_error("interp") << "BufferRealize of '" << s.as<BufferRealize>()->buffer.name()
                         << "' in the kernel: the executor takes flattened IR (Form 2)";
  default:
    break;
  }
  internal_error << "interp: unhandled statement " << s;
}

StmtPtr compile_evaluate(Compiler &C, const Call *call) {
  if (call->is_intrinsic(intrinsic::syncthreads) ||
      call->is_intrinsic(intrinsic::named_barrier_sync) ||
      call->is_intrinsic(intrinsic::named_barrier_arrive) ||
      call->is_intrinsic(intrinsic::setmaxnreg) || call->is_intrinsic(intrinsic::cluster_sync))
    return compile_warp_sync(C, call);
  if (call->is_intrinsic(intrinsic::thread_allreduce))
    return compile_thread_allreduce(C, call);
  if (call->is_intrinsic(intrinsic::flag_release) || call->is_intrinsic(intrinsic::flag_wait))
    return compile_block_flag(C, call);
  if (call->name.rfind("wmma_", 0) == 0 && call->call_kind == Call::Intrinsic)
    return compile_wmma(C, call);
  if (call->name.rfind("cp_async", 0) == 0 && call->call_kind == Call::Intrinsic)
    return compile_async_copy(C, call);
  if (call->name.rfind("mma_", 0) == 0 && call->call_kind == Call::Intrinsic)
    return compile_mma(C, call);
  if ((call->name.rfind("wgmma_", 0) == 0 || call->name == intrinsic::fence_proxy_async) &&
      call->call_kind == Call::Intrinsic)
    return compile_wgmma(C, call);
  if (call->name.rfind("tma_store", 0) == 0 && call->call_kind == Call::Intrinsic)
    return compile_tma_store(C, call);
  if ((call->name.rfind("mbarrier_", 0) == 0 || call->name == intrinsic::fence_barrier_init ||
       call->name == intrinsic::tma_load || call->name == intrinsic::tma_load_im2col ||
       call->name == intrinsic::tma_load_multicast) &&
      call->call_kind == Call::Intrinsic)
    return compile_tma(C, call);
  return std::make_unique<EvalCode>(C.expr(Expr(call)));
}

} // namespace tessel::interp

#include "compiler/passes/ReduceLastWaveParts.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/IterVar.h"
#include "compiler/passes/IntrinsicStmt.h"
#include "compiler/passes/RemoveNoOp.h"
#include "compiler/support/Error.h"

#include <llvm/ADT/DenseMap.h>

#include <algorithm>
#include <functional>
#include <map>

namespace tessel {

namespace {

using passes_detail::intrinsic_stmt;

// The tile's stores in `s` and the epilogue in registers before them (which must see the whole
// sum): wgmma_store and wgmma_reg_set calls.
int tile_store_ops(const Stmt &s) {
  int n = 0;
  post_order_visit(s, [&](const IRNode *node) {
    if (const auto *c = llvm::dyn_cast<Call>(node);
        c && (c->is_intrinsic(intrinsic::wgmma_store) || c->is_intrinsic(intrinsic::wgmma_reg_set)))
      ++n;
  });
  return n;
}

// One part's registers and the workspace: X' (write) or X'' (add part `q`), from X.
class PartRegisters : public IRMutator {
public:
  // The workspace element of register `reg` of the tile a wgmma_store call stores.
  using Slot = std::function<Expr(const Call *store, const Expr &reg)>;
  PartRegisters(Buffer parts, bool add, Slot slot)
      : parts_(std::move(parts)), add_(add), slot_(std::move(slot)) {}

protected:
  Stmt visit(const Evaluate *op) override {
    const auto *c = op->value.as<Call>();
    if (!c || !c->is_intrinsic(intrinsic::wgmma_store))
      return Evaluate::make(Expr(0)); // an epilogue, a staging tile's store: X's alone
    const Expr &acc = c->args[0], &tile = c->args[1], &n = c->args[2];
    Var r("r");
    Expr reg = Call::make(Float(32), intrinsic::wgmma_reg, {acc, tile, n, r}, Call::Intrinsic);
    Expr at = slot_(c, r);
    Stmt body = add_ ? Evaluate::make(Call::make(
                           Void(), intrinsic::wgmma_reg_set,
                           {acc, tile, n, r, reg + BufferLoad::make(parts_, {at})},
                           Call::Intrinsic))
                     : BufferStore::make(parts_, reg, {at});
    return For::make(r, 0, floordiv(n, 2), ForKind::Unrolled, body);
  }
  Stmt visit(const BufferStore *) override { return Evaluate::make(Expr(0)); }

private:
  Buffer parts_;
  bool add_;
  Slot slot_;
};

class Rewriter : public IRMutator {
public:
  explicit Rewriter(std::vector<Buffer> *workspaces) : workspaces_(workspaces) {}

protected:
  Stmt visit(const Allocate *op) override {
    if (op->scope == "wgmma.accumulator" && op->extents.size() == 1)
      if (auto n = as_const_int(op->extents[0]))
        accumulators_[op->buffer_var.get()] = *n;
    return IRMutator::visit(op);
  }

  Stmt visit(const AttrStmt *op) override {
    if (const IterVar *iv = thread_index_bound_by(Stmt(op));
        iv && iv->thread_tag().rfind("threadIdx", 0) == 0) {
      auto extent = as_const_int(op->value);
      internal_check(extent.has_value()) << iv->thread_tag() << " of extent " << op->value;
      threads_[iv->thread_tag()] = {iv->var(), *extent};
    }
    if (op->key == attr::last_wave_steps)
      return mutate(op->body); // (a loop without a TMA ring: counted by nobody)
    if (op->key == attr::warp_roles) {
      const bool outer = ping_pong_;
      ping_pong_ = is_one(op->value);
      Stmt s = IRMutator::visit(op);
      ping_pong_ = outer;
      return s;
    }
    if (op->key != attr::last_wave)
      return IRMutator::visit(op);
    user_check(!ping_pong_, "split_last_wave")
        << "the tiles of the last wave are split, but the consumers take turns (ping-pong); "
           "split the last wave of cooperative consumers";
    return split_tile(op);
  }

private:
  struct Thread {
    Var var;
    int64_t extent = 1;
  };

  Stmt split_tile(const AttrStmt *op) {
    const auto *t = op->value.as<Call>();
    internal_check(t && t->args.size() == 4) << "last_wave attr without tuple(parts, tiles, slot, tail)";
    const int64_t parts = *as_const_int(t->args[0]), tiles = *as_const_int(t->args[1]);
    const Expr slot = t->args[2], tail = t->args[3];
    const Expr part = std::get<Expr>(op->node);
    internal_check(part.as<Variable>()) << "last_wave attr on " << part;
    const std::string &part_name = part.as<Variable>()->name;
    Stmt body = mutate(op->body);
    user_check(tile_store_ops(body) > 0, "split_last_wave")
        << "the tile of '" << part_name << "' is not stored by wgmma_store (a wgmma "
        << "accumulator's store); split_last_wave hands wgmma accumulators between blocks";

    // The block's threads (all of them consumers here: the producer warpgroup comes later).
    Expr tid = make_const(Int(32), 0);
    int64_t threads = 1;
    for (const char *tag : {"threadIdx.z", "threadIdx.y", "threadIdx.x"}) {
      auto it = threads_.find(tag);
      if (it == threads_.end())
        continue;
      tid = tid * make_const(Int(32), it->second.extent) + it->second.var;
      threads *= it->second.extent;
    }
    user_check(threads % 32 == 0, "split_last_wave")
        << "the block has " << threads << " threads; split_last_wave hands registers between "
        << "whole warps";
    const int64_t warps = threads / 32;

    // Registers a thread holds (the one accumulator the tile's stores read).
    const Variable *acc = nullptr;
    post_order_visit(body, [&](const IRNode *node) {
      const auto *c = llvm::dyn_cast<Call>(node);
      if (!c || !c->is_intrinsic(intrinsic::wgmma_store))
        return;
      const auto *v = c->args[0].as<Variable>();
      internal_check(v && (!acc || acc == v)) << "split_last_wave: the tile's stores read "
                                              << "several accumulators";
      acc = v;
    });
    auto size = accumulators_.find(acc);
    internal_check(size != accumulators_.end()) << "accumulator '" << acc->name << "' not allocated";
    const int64_t regs = size->second / 128;

    const std::string base = part_name.substr(0, part_name.rfind('.'));
    Buffer sums = Buffer::make(base + ".last_wave_parts", Float(32),
                               {make_const(Int(32), tiles * (parts - 1) * regs * threads)});
    Buffer flags = Buffer::make(base + ".last_wave_flags", Int(32),
                                {make_const(Int(32), tiles * (parts - 1) * warps)});
    workspaces_->push_back(sums);
    workspaces_->push_back(flags);
    // Part q (1 .. parts - 1) of the block's tile: its registers and its warps' flags.
    auto first_of = [&](const Expr &q) { return slot * make_const(Int(32), parts - 1) + q - 1; };
    auto flag = [&](const Expr &q) {
      Expr i = first_of(q) * make_const(Int(32), warps) + floordiv(tid, make_const(Int(32), 32));
      return Call::make(Handle(), intrinsic::address_of, {BufferLoad::make(flags, {i})},
                        Call::PureIntrinsic);
    };
    auto registers = [&](const Expr &q, bool add, const Stmt &x) {
      PartRegisters::Slot at = [&, q](const Call *store, const Expr &r) {
        Expr reg = store->args[1] * floordiv(store->args[2], 2) + r;
        return (first_of(q) * make_const(Int(32), regs) + reg) * make_const(Int(32), threads) +
               tid;
      };
      return remove_no_op(PartRegisters(sums, add, at).mutate(x));
    };
    auto wrap = [&](const Stmt &x) {
      Stmt give = Seq::make({registers(part, false, x), intrinsic_stmt(intrinsic::flag_release,
                                                                        {flag(part)})});
      Var q("q");
      Stmt take = For::make(q, 1, make_const(Int(32), parts - 1), ForKind::Serial,
                            Seq::make({intrinsic_stmt(intrinsic::flag_wait, {flag(q)}),
                                       registers(q, true, x)}));
      return IfThenElse::make(part > 0, give,
                              IfThenElse::make(tail, Seq::make({take, x}), x));
    };
    return around_stores(body, wrap);
  }

  // `s` (holding tile stores) with the smallest statement, or run of a Seq's statements,
  // holding all of them replaced by wrap(it).
  static Stmt around_stores(const Stmt &s, const std::function<Stmt(const Stmt &)> &wrap) {
    if (const auto *l = s.as<LetStmt>())
      return LetStmt::make(l->var, l->value, around_stores(l->body, wrap));
    if (const auto *a = s.as<AttrStmt>())
      return AttrStmt::make(a->node, a->key, a->value, around_stores(a->body, wrap));
    if (const auto *a = s.as<Allocate>())
      return Allocate::make(a->buffer_var, a->dtype, a->extents, a->scope,
                            around_stores(a->body, wrap));
    if (const auto *seq = s.as<Seq>()) {
      // The children from the first holding stores to the last (not the main loop before).
      size_t first = seq->stmts.size(), last = 0;
      for (size_t i = 0; i < seq->stmts.size(); ++i)
        if (tile_store_ops(seq->stmts[i])) {
          first = std::min(first, i);
          last = i;
        }
      std::vector<Stmt> stmts(seq->stmts.begin(), seq->stmts.begin() + first);
      if (first == last)
        stmts.push_back(around_stores(seq->stmts[first], wrap));
      else
        stmts.push_back(wrap(Seq::make(std::vector<Stmt>(seq->stmts.begin() + first,
                                                         seq->stmts.begin() + last + 1))));
      stmts.insert(stmts.end(), seq->stmts.begin() + last + 1, seq->stmts.end());
      return Seq::make(std::move(stmts));
    }
    return wrap(s);
  }

  std::vector<Buffer> *workspaces_;
  llvm::DenseMap<const Variable *, int64_t> accumulators_;
  std::map<std::string, Thread> threads_;
  bool ping_pong_ = false;
};

} // namespace

Stmt reduce_last_wave_parts(Stmt s, std::vector<Buffer> *workspaces) {
  return Rewriter(workspaces).mutate(s);
}

} // namespace tessel

#include "compiler/passes/ReduceLastWaveParts.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/IterVar.h"
#include "compiler/ir/Substitute.h"
#include "compiler/passes/IntrinsicStmt.h"
#include "compiler/passes/RemoveNoOp.h"
#include "compiler/support/Error.h"

#include <llvm/ADT/DenseMap.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

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
    if ((op->scope == "wgmma.accumulator" || op->scope == "wgmma.rows") &&
        op->extents.size() == 1)
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
    if (op->key == attr::fold_merge && !in_split_)
      return mutate(op->body); // (the last round is whole: one part a tile)
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
  using PartSlot = std::function<Expr(const Expr &q, int64_t regs, const Expr &reg)>;

  Stmt split_tile(const AttrStmt *op) {
    const auto *t = op->value.as<Call>();
    internal_check(t && t->args.size() == 4) << "last_wave attr without tuple(parts, tiles, slot, tail)";
    const int64_t parts = *as_const_int(t->args[0]), tiles = *as_const_int(t->args[1]);
    const Expr slot = t->args[2], tail = t->args[3];
    const Expr part = std::get<Expr>(op->node);
    internal_check(part.as<Variable>()) << "last_wave attr on " << part;
    const std::string &part_name = part.as<Variable>()->name;
    in_split_ = true;
    Stmt body = mutate(op->body);
    in_split_ = false;
    const AttrStmt *fold = nullptr;
    post_order_visit(body, [&](const IRNode *node) {
      if (const auto *a = llvm::dyn_cast<AttrStmt>(node); a && a->key == attr::fold_merge)
        fold = a;
    });
    user_check(fold || tile_store_ops(body) > 0, "split_last_wave")
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
    const std::string base = part_name.substr(0, part_name.rfind('.'));
    Buffer flags = Buffer::make(base + ".last_wave_flags", Int(32),
                                {make_const(Int(32), tiles * (parts - 1) * warps)});
    // Part q (1 .. parts - 1) of the block's tile: its place among the parts, its warp's flag.
    auto first_of = [&](const Expr &q) { return slot * make_const(Int(32), parts - 1) + q - 1; };
    auto flag = [&](const Expr &q) {
      Expr i = first_of(q) * make_const(Int(32), warps) + floordiv(tid, make_const(Int(32), 32));
      return Call::make(Handle(), intrinsic::address_of, {BufferLoad::make(flags, {i})},
                        Call::PureIntrinsic);
    };
    // Register `reg` of the `regs` a thread hands over, in part q's share of a workspace
    // (coalesced: register-major, the block's threads minor).
    PartSlot part_slot = [&](const Expr &q, int64_t regs, const Expr &reg) {
      return (first_of(q) * make_const(Int(32), regs) + reg) * make_const(Int(32), threads) + tid;
    };
    if (fold)
      return merge_fold_parts(body, fold, part, tail, flags, base, tiles, parts, threads,
                              part_slot, flag);

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

    Buffer sums = Buffer::make(base + ".last_wave_parts", Float(32),
                               {make_const(Int(32), tiles * (parts - 1) * regs * threads)});
    workspaces_->push_back(sums);
    workspaces_->push_back(flags);
    // Part q's registers in the workspace.
    auto registers = [&](const Expr &q, bool add, const Stmt &x) {
      PartRegisters::Slot at = [&, q](const Call *store, const Expr &r) {
        return part_slot(q, regs, store->args[1] * floordiv(store->args[2], 2) + r);
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

  // A fold's steps split (attr::fold_merge around them, in the tile's work `body`): after
  // them, a part past the first leaves every state's registers in a workspace and raises its
  // warps' flags, and skips the rest of the tile; the first part of a split tile waits for
  // each later part in order and merges its states into its own (the fold's merge, in the
  // fold's store order), then computes the rest of the tile as always. A thread holds the same
  // rows and columns of the states in every part's block (the same layout), so it reads back
  // what the same thread of the later part wrote.
  Stmt merge_fold_parts(const Stmt &body, const AttrStmt *fold, const Expr &part,
                        const Expr &tail, const Buffer &flags, const std::string &base,
                        int64_t tiles, int64_t parts, int64_t threads,
                        const PartSlot &part_slot,
                        const std::function<Expr(const Expr &)> &flag) {
    const auto *t = fold->value.as<Call>();
    internal_check(t && t->args.size() % 4 == 0) << "fold_merge attr without its states";
    // Each state's registers: a row state (wgmma.rows) two a 64-row tile, an accumulator
    // (wgmma.accumulator) n / 2 a tile, n its columns (read off its wgmma_reg calls).
    struct State {
      Var data, a, b;
      Expr merge;
      bool rows = false;
      int64_t n = 0, offset = 0, count = 0;
    };
    // The registers' forms in the tile's work: an accumulator's columns, the row states.
    std::map<const Variable *, int64_t> columns;
    std::set<const Variable *> row_states;
    post_order_visit(body, [&](const IRNode *node) {
      const auto *c = llvm::dyn_cast<Call>(node);
      if (!c || c->args.empty())
        return;
      const Variable *v = c->args[0].as<Variable>();
      if (c->is_intrinsic(intrinsic::wgmma_reg) || c->is_intrinsic(intrinsic::wgmma_reg_set))
        columns[v] = *as_const_int(c->args[2]);
      else if (c->is_intrinsic(intrinsic::wgmma_row) ||
               c->is_intrinsic(intrinsic::wgmma_row_set))
        row_states.insert(v);
    });
    std::vector<State> states;
    int64_t regs = 0, row_tiles = -1;
    for (size_t i = 0; i < t->args.size(); i += 4) {
      State st{Var(t->args[i].as<Variable>()), Var(t->args[i + 1].as<Variable>()),
               Var(t->args[i + 2].as<Variable>()), t->args[i + 3]};
      auto size = accumulators_.find(st.data.get());
      user_check(size != accumulators_.end(), "split_last_wave")
          << "state '" << st.data.name() << "' of the fold split over the last wave is not in a "
          << "warpgroup's registers (scope wgmma.rows or wgmma.accumulator); split_last_wave "
             "hands a fold's states between blocks from those registers";
      auto n = columns.find(st.data.get());
      st.n = n != columns.end() ? n->second : 0;
      st.rows = row_states.count(st.data.get()) > 0;
      const int64_t tiles_of_state = st.rows ? size->second / 64 : size->second / 64 / st.n;
      internal_check(st.rows != (st.n > 0) && tiles_of_state > 0 &&
                     (row_tiles < 0 || row_tiles == tiles_of_state))
          << "fold state '" << st.data.name() << "': rows " << st.rows << ", columns " << st.n
          << ", " << size->second << " elements a warpgroup";
      row_tiles = tiles_of_state;
      st.offset = regs;
      st.count = st.rows ? 2 : st.n / 2;
      regs += row_tiles * st.count;
      states.push_back(st);
    }
    Buffer saved = Buffer::make(base + ".last_wave_states", Float(32),
                                {make_const(Int(32), tiles * (parts - 1) * regs * threads)});
    workspaces_->push_back(saved);
    workspaces_->push_back(flags);
    // Register `r` of tile `tile` of state `st` (a row state: half r), its value and its slot in
    // part q's share of the workspace.
    auto value = [&](const State &st, const Expr &tile, const Expr &r) {
      return st.rows ? Call::make(Float(32), intrinsic::wgmma_row, {st.data, tile, r},
                                  Call::Intrinsic)
                     : Call::make(Float(32), intrinsic::wgmma_reg,
                                  {st.data, tile, make_const(Int(32), st.n), r}, Call::Intrinsic);
    };
    auto set = [&](const State &st, const Expr &tile, const Expr &r, const Expr &v) {
      return st.rows ? intrinsic_stmt(intrinsic::wgmma_row_set, {st.data, tile, r, v})
                     : intrinsic_stmt(intrinsic::wgmma_reg_set,
                                      {st.data, tile, make_const(Int(32), st.n), r, v});
    };
    auto at = [&](const Expr &q, const State &st, const Expr &tile, const Expr &r) {
      return part_slot(q, regs,
                       make_const(Int(32), st.offset) + tile * make_const(Int(32), st.count) + r);
    };
    // Over each state's registers (unrolled): body(state, tile, register, its row's half).
    auto each = [&](const std::function<Stmt(const State &, const Expr &, const Expr &,
                                             const Expr &)> &f) {
      std::vector<Stmt> seq;
      for (const State &st : states) {
        Var tile("tile"), r("r");
        // An accumulator's registers come in pairs of a row: 0, 1 row g, 2, 3 row g + 8, ...
        Expr half = st.rows ? Expr(r) : floormod(floordiv(r, 2), 2);
        Stmt s = For::make(r, 0, make_const(Int(32), st.count), ForKind::Unrolled,
                           f(st, tile, r, half));
        seq.push_back(For::make(tile, 0, make_const(Int(32), row_tiles), ForKind::Unrolled, s));
      }
      return Seq::make(seq);
    };
    Stmt give = Seq::make(
        {each([&](const State &st, const Expr &tile, const Expr &r, const Expr &) {
           return BufferStore::make(saved, value(st, tile, r), {at(part, st, tile, r)});
         }),
         intrinsic_stmt(intrinsic::flag_release, {flag(part)})});
    Var q("q");
    Stmt merge = each([&](const State &st, const Expr &tile, const Expr &r, const Expr &half) {
      VarMap vmap;
      for (const State &o : states) {
        // Another state at this register's row (a row state), or this state's register.
        const Expr &reg = &o == &st ? r : half;
        vmap[o.a.get()] = value(o, tile, reg);
        vmap[o.b.get()] = BufferLoad::make(saved, {at(q, o, tile, reg)});
        if (&o != &st && !o.rows)
          for (const Var &v : free_vars(st.merge))
            internal_check(!v.same_as(o.a) && !v.same_as(o.b))
                << "the merge of '" << st.data.name() << "' reads accumulator '"
                << o.data.name() << "' (fold() allows a merge to read states without axes "
                << "of their own only)";
      }
      return set(st, tile, r, substitute(st.merge, vmap));
    });
    Stmt take = For::make(q, 1, make_const(Int(32), parts - 1), ForKind::Serial,
                          Seq::make({intrinsic_stmt(intrinsic::flag_wait, {flag(q)}), merge}));
    Stmt merged =
        Seq::make({fold->body, IfThenElse::make(part > 0, give, IfThenElse::make(tail, take))});
    return skip_after_fold(body, fold, merged, part == make_const(part.type(), 0));
  }

  // `s` with the fold_merge attr `fold` replaced by `merged` and every statement after it in
  // the tile's work guarded by `keep` (the later parts stop after handing their states over).
  static Stmt skip_after_fold(const Stmt &s, const AttrStmt *fold, const Stmt &merged,
                              const Expr &keep) {
    if (s.get() == fold)
      return merged;
    auto holds = [&](const Stmt &x) {
      bool found = false;
      post_order_visit(x, [&](const IRNode *n) { found = found || n == fold; });
      return found;
    };
    if (const auto *l = s.as<LetStmt>())
      return LetStmt::make(l->var, l->value, skip_after_fold(l->body, fold, merged, keep));
    if (const auto *a = s.as<AttrStmt>())
      return AttrStmt::make(a->node, a->key, a->value,
                            skip_after_fold(a->body, fold, merged, keep));
    if (const auto *a = s.as<Allocate>())
      return Allocate::make(a->buffer_var, a->dtype, a->extents, a->scope,
                            skip_after_fold(a->body, fold, merged, keep));
    const auto *seq = s.as<Seq>();
    internal_check(seq) << "split_last_wave: a fold's steps inside " << s;
    std::vector<Stmt> stmts;
    size_t i = 0;
    while (!holds(seq->stmts[i]))
      stmts.push_back(seq->stmts[i++]);
    stmts.push_back(skip_after_fold(seq->stmts[i], fold, merged, keep));
    std::vector<Stmt> rest(seq->stmts.begin() + long(i) + 1, seq->stmts.end());
    if (!rest.empty())
      stmts.push_back(IfThenElse::make(keep, Seq::make(rest)));
    return Seq::make(stmts);
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
  bool in_split_ = false;
};

} // namespace

Stmt reduce_last_wave_parts(Stmt s, std::vector<Buffer> *workspaces) {
  return Rewriter(workspaces).mutate(s);
}

} // namespace tessel

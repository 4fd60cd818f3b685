#include "compiler/passes/OrderWgmmaTurns.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/Substitute.h"
#include "compiler/ir/IterVar.h"
#include "compiler/passes/IntrinsicStmt.h"
#include "compiler/support/Error.h"

namespace tessel {

namespace {

using passes_detail::intrinsic_stmt;
using passes_detail::is_intrinsic_stmt;

constexpr const char *kPingPong = "pragma_ping_pong";
// Warpgroup g waits for its turn on kTurn + g (split_warp_roles' consumers take 1..4).
constexpr int kTurn = 5;
constexpr int kThreads = 256; // both warpgroups: one waits, the other arrives

// The turns around each wgmma group of a loop body.
class GroupTurns : public IRMutator {
public:
  GroupTurns(Var ty, std::string loop) : ty_(std::move(ty)), loop_(std::move(loop)) {}
  int groups = 0;

protected:
  // A turn runs from a fence to the last commit before the next wait or fence: two groups
  // issued together (overlap_wgmma_steps: the next step's S with this step's P V) are one turn.
  Stmt visit(const Seq *op) override {
    std::vector<Stmt> out;
    for (size_t i = 0; i < op->stmts.size(); ++i) {
      const Stmt &x = op->stmts[i];
      if (is_intrinsic_stmt(x, intrinsic::wgmma_commit) && another_commit_follows(op->stmts, i))
        out.push_back(x);
      else
        out.push_back(mutate(x));
    }
    return Seq::make(std::move(out));
  }
  Stmt visit(const IfThenElse *op) override {
    const bool per_warpgroup = uses_var(op->condition, ty_);
    depth_ += per_warpgroup;
    Stmt s = IRMutator::visit(op);
    depth_ -= per_warpgroup;
    return s;
  }
  Stmt visit(const For *op) override {
    const bool per_warpgroup = uses_var(op->extent, ty_) || uses_var(op->min, ty_);
    depth_ += per_warpgroup;
    Stmt s = IRMutator::visit(op);
    depth_ -= per_warpgroup;
    return s;
  }
  Stmt visit(const Evaluate *op) override {
    Stmt s(op);
    const bool fence = is_intrinsic_stmt(s, intrinsic::wgmma_fence),
               commit = is_intrinsic_stmt(s, intrinsic::wgmma_commit);
    if (!fence && !commit)
      return s;
    user_check(depth_ == 0, "ping_pong")
        << "loop '" << loop_ << "': a wgmma group is issued under a condition on "
        << ty_.name() << ", so the two warpgroups would not take the same turns; ping-pong "
           "needs every group of the loop issued by both warpgroups";
    if (fence) {
      ++groups;
      return Seq::make({intrinsic_stmt(intrinsic::named_barrier_sync,
                                       {Expr(kTurn) + ty_, Expr(kThreads)}),
                        s});
    }
    return Seq::make({s, intrinsic_stmt(intrinsic::named_barrier_arrive,
                                         {Expr(kTurn + 1) - ty_, Expr(kThreads)})});
  }

private:
  static bool another_commit_follows(const std::vector<Stmt> &list, size_t i) {
    for (size_t j = i + 1; j < list.size(); ++j) {
      if (is_intrinsic_stmt(list[j], intrinsic::wgmma_commit))
        return true;
      if (is_intrinsic_stmt(list[j], intrinsic::wgmma_fence) ||
          is_intrinsic_stmt(list[j], intrinsic::wgmma_wait))
        return false;
    }
    return false;
  }

  Var ty_;
  std::string loop_;
  int depth_ = 0; // conditions on ty_ around the statement
};

class TurnOrder : public IRMutator {
protected:
  Stmt visit(const AttrStmt *op) override {
    if (op->key == attr::thread_extent) {
      const auto *iv = std::get_if<IterVar>(&op->node);
      if (!iv || iv->thread_tag() != "threadIdx.y")
        return IRMutator::visit(op);
      // threadIdx.y around the loops inside (restored after: a sibling's binding is not ours)
      Var outer = ty_;
      const int64_t outer_extent = ty_extent_;
      ty_ = iv->var();
      ty_extent_ = as_const_int(op->value) ? *as_const_int(op->value) : -1;
      Stmt s = IRMutator::visit(op);
      ty_ = outer;
      ty_extent_ = outer_extent;
      return s;
    }
    if (op->key != kPingPong)
      return IRMutator::visit(op);
    const auto *iv = std::get_if<IterVar>(&op->node);
    internal_check(iv) << "ping_pong without its IterVar";
    const Var t = iv->var();
    user_check(ty_.defined() && ty_extent_ == 2, "ping_pong")
        << "loop '" << t.name() << "': ping-pong takes turns between the two warpgroups of a "
           "block on threadIdx.y; the block has "
        << (ty_.defined() ? std::to_string(ty_extent_) + " on threadIdx.y" : "no threadIdx.y")
        << ": bind a split of 2 warpgroups' rows to threadIdx.y";
    // The loop of t, wherever passes placed it inside the attr (a pipeline's prologue first).
    struct Finder : IRMutator {
      const Var &t, &ty;
      int groups = 0;
      Finder(const Var &t, const Var &ty) : t(t), ty(ty) {}
      Stmt visit(const For *f) override {
        if (!f->loop_var.same_as(t))
          return IRMutator::visit(f);
        user_check(!uses_var(f->extent, ty) && !uses_var(f->min, ty), "ping_pong")
            << "loop '" << t.name() << "' runs a number of steps that depends on " << ty.name()
            << "; the two warpgroups must take as many turns";
        GroupTurns turns(ty, t.name());
        Stmt body = turns.mutate(f->body);
        groups += turns.groups;
        Stmt loop = For::make(f->loop_var, f->min, f->extent, f->for_kind, body, f->thread_tag);
        return Seq::make(
            {IfThenElse::make(ty == 1, intrinsic_stmt(intrinsic::named_barrier_arrive,
                                                      {Expr(kTurn), Expr(kThreads)})),
             loop,
             IfThenElse::make(ty == 0, intrinsic_stmt(intrinsic::named_barrier_sync,
                                                      {Expr(kTurn), Expr(kThreads)}))});
      }
    } finder(t, ty_);
    Stmt body = finder.mutate(op->body);
    user_check(finder.groups > 0, "ping_pong")
        << "loop '" << t.name() << "' issues no wgmma group; ping-pong orders the two "
           "warpgroups' wgmma (tensorize the loop's contractions with a wgmma intrinsic)";
    return body;
  }

private:
  Var ty_;
  int64_t ty_extent_ = 0;
};

} // namespace

Stmt order_wgmma_turns(Stmt s) { return TurnOrder().mutate(s); }

} // namespace tessel

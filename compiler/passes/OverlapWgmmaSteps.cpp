#include "compiler/passes/OverlapWgmmaSteps.h"

#include "compiler/arith/Analyzer.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/IterVar.h"
#include "compiler/ir/Substitute.h"
#include "compiler/passes/FlatBuffer.h"
#include "compiler/passes/IntrinsicStmt.h"
#include "compiler/support/Error.h"

#include <llvm/ADT/DenseSet.h>

#include <algorithm>
#include <array>
#include <map>
#include <sstream>
#include <tuple>

namespace tessel {

namespace {

using passes_detail::intrinsic_stmt;
using passes_detail::is_intrinsic_stmt;

constexpr const char *kOverlap = "pragma_overlap_steps";

using VarSet = llvm::DenseSet<const Variable *>;

// A buffer both sets hold (the first by name, for a message that does not depend on where
// the variables were allocated), or none.
const Variable *shared(const VarSet &a, const VarSet &b) {
  const Variable *first = nullptr;
  for (const Variable *v : a)
    if (b.count(v) && (!first || v->name < first->name))
      first = v;
  return first;
}

bool meets(const VarSet &a, const VarSet &b) { return shared(a, b) != nullptr; }

// What a statement reads and writes (buffers by their data var, wgmma registers by their
// allocation), and whether it has effects beyond registers (memory, barriers, shuffles are not
// effects: they read registers of the warp only).
struct Access {
  VarSet reads, writes;
  bool effects = false;

  void add(const Access &o) {
    reads.insert(o.reads.begin(), o.reads.end());
    writes.insert(o.writes.begin(), o.writes.end());
    effects |= o.effects;
  }
};

class AccessOf : public IRVisitor {
public:
  Access a;

protected:
  void visit(const BufferLoad *op) override {
    a.reads.insert(op->buffer->data.as<Variable>());
    IRVisitor::visit(op);
  }
  void visit(const BufferStore *op) override {
    a.writes.insert(op->buffer->data.as<Variable>());
    a.effects |= op->buffer.scope() != "local";
    IRVisitor::visit(op);
  }
  void visit(const Call *op) override {
    IRVisitor::visit(op);
    auto var = [&](size_t i) { return i < op->args.size() ? op->args[i].as<Variable>() : nullptr; };
    if (op->call_kind != Call::Intrinsic)
      return; // pure intrinsics and math
    if (op->is_intrinsic(intrinsic::wgmma_reg) || op->is_intrinsic(intrinsic::wgmma_row)) {
      a.reads.insert(var(0));
    } else if (op->is_intrinsic(intrinsic::wgmma_reg_set) ||
               op->is_intrinsic(intrinsic::wgmma_row_set) ||
               op->is_intrinsic(intrinsic::wgmma_fill)) {
      a.writes.insert(var(0));
    } else if (op->is_intrinsic(intrinsic::wgmma_acc_to_a)) {
      a.writes.insert(var(0));
      a.reads.insert(var(2));
    } else if (op->is_intrinsic(intrinsic::wgmma_mma) ||
               op->is_intrinsic(intrinsic::wgmma_mma_rs)) {
      a.reads.insert(var(0));
      a.writes.insert(var(0));
      if (op->is_intrinsic(intrinsic::wgmma_mma_rs))
        a.reads.insert(var(3));
      a.effects = true; // reads shared memory asynchronously
    } else if (!op->is_intrinsic(intrinsic::shfl_xor) &&
               !op->is_intrinsic(intrinsic::wgmma_thread_id)) {
      a.effects = true;
    }
    a.reads.erase(nullptr);
    a.writes.erase(nullptr);
  }
};

Access access_of(const Stmt &s) {
  AccessOf v;
  v.visit_stmt(s);
  return v.a;
}

Access access_of(const std::vector<Stmt> &list) {
  Access a;
  for (const Stmt &s : list)
    a.add(access_of(s));
  return a;
}

// The statements of `s` in order; an `if` without else of register updates whose condition
// reads no buffer (a causal fold's per-row guard: loop and thread indices) is distributed over
// its statements, so that each is classified on its own. (One with effects, a producer's
// waits and copies, stays whole.)
void flatten(const Stmt &s, std::vector<Stmt> &out) {
  if (const auto *q = s.as<Seq>()) {
    for (const Stmt &x : q->stmts)
      flatten(x, out);
    return;
  }
  if (const auto *i = s.as<IfThenElse>(); i && !i->else_case.defined()) {
    const Access c = access_of(Evaluate::make(i->condition));
    if (c.reads.empty() && !c.effects && !access_of(i->then_case).effects) {
      std::vector<Stmt> inner;
      flatten(i->then_case, inner);
      for (const Stmt &x : inner)
        out.push_back(IfThenElse::make(i->condition, x));
      return;
    }
  }
  out.push_back(s);
}

// The loop body cut at its two wgmma groups.
struct Steps {
  std::vector<Stmt> producer;   // P: issues the ring's TMA loads, stays at its step
  std::vector<Stmt> a_before;   // fills and waits before A, at A's step
  std::vector<Stmt> a, b;       // the groups: wgmma_fence .. wgmma_commit
  std::vector<Stmt> x_early, x_late, y_rows, y_after;
  VarSet a_accumulators;
  VarSet b_registers; // B's accumulator and its A operand in registers
};

class Rotate : public IRMutator {
protected:
  Stmt visit(const Allocate *op) override {
    scope_[op->buffer_var.get()] = op->scope;
    return IRMutator::visit(op);
  }

  Stmt visit(const AttrStmt *op) override {
    if (op->key == attr::thread_extent) {
      if (const auto *iv = std::get_if<IterVar>(&op->node)) {
        const std::string &tag = iv->thread_tag();
        if (tag.rfind("threadIdx.", 0) == 0) {
          const int d = tag.back() - 'x';
          auto extent = as_const_int(op->value);
          auto saved = threads_[size_t(d)];
          threads_[size_t(d)] = {iv->var(), extent ? *extent : -1};
          Stmt s = IRMutator::visit(op);
          threads_[size_t(d)] = saved;
          return s;
        }
      }
      return IRMutator::visit(op);
    }
    if (op->key != kOverlap)
      return IRMutator::visit(op);
    const auto *iv = std::get_if<IterVar>(&op->node);
    internal_check(iv) << "overlap_steps without its IterVar";
    t_ = iv->var();
    found_ = false;
    Stmt body = mutate(op->body);
    user_check(found_, "overlap_steps")
        << "loop '" << t_.name() << "' was not found in its stage's nest after lowering (fused "
           "or unrolled away); mark a loop that stays";
    t_ = Var();
    return body;
  }

  Stmt visit(const For *op) override {
    if (!t_.defined() || !op->loop_var.same_as(t_))
      return IRMutator::visit(op);
    found_ = true;
    return rotate(op);
  }

private:
  template <typename... T> [[noreturn]] void fail(const T &...what) const {
    std::ostringstream os;
    (os << ... << what);
    user_error("overlap_steps") << "loop '" << t_.name() << "': " << os.str();
  }

  Steps cut(const Stmt &body) {
    std::vector<Stmt> list;
    flatten(body, list);
    std::vector<size_t> fences, commits;
    for (size_t i = 0; i < list.size(); ++i) {
      if (is_intrinsic_stmt(list[i], intrinsic::wgmma_fence))
        fences.push_back(i);
      if (is_intrinsic_stmt(list[i], intrinsic::wgmma_commit))
        commits.push_back(i);
    }
    if (fences.size() != 2 || commits.size() != 2)
      fail("its body must issue two wgmma groups (it issues ", fences.size(),
           " at its top level): mark the loop whose steps run both contractions");
    auto wait0 = [&](size_t i) {
      if (i >= list.size() || !is_intrinsic_stmt(list[i], intrinsic::wgmma_wait))
        fail("each wgmma group must be followed by its wgmma_wait");
      const auto *c = list[i].as<Evaluate>()->value.as<Call>();
      if (!is_zero(c->args[0]))
        fail("each wgmma group must be waited for in the same step (wgmma_wait(0))");
    };
    wait0(commits[0] + 1);
    wait0(commits[1] + 1);
    if (!(fences[0] < commits[0] && commits[0] + 1 < fences[1] && fences[1] < commits[1]))
      fail("its wgmma groups are not in the form fence .. commit, wait");
    Steps s;
    for (size_t i = 0; i < fences[0]; ++i) {
      const bool loads = passes_detail::contains(list[i], [](const IRNode *n) {
        const auto *c = llvm::dyn_cast<Call>(n);
        return c && c->is_intrinsic(intrinsic::tma_load);
      });
      if (loads) {
        s.producer.push_back(list[i]);
        continue;
      }
      // What moves with A to the next step: its accumulator's reset and the wait for its
      // operands. Copies into shared memory (a cp.async ring) would overwrite the slot B reads.
      const bool waits = is_intrinsic_stmt(list[i], intrinsic::mbarrier_wait);
      if (!waits && access_of(list[i]).effects)
        fail("before its first group it writes memory other than by TMA (a cp.async ring, "
             "TMA=0?); the next step's copies would overwrite the operands of this step's "
             "second group: fill the ring with bulk_copy (TMA)");
      s.a_before.push_back(list[i]);
    }
    s.a.assign(list.begin() + long(fences[0]), list.begin() + long(commits[0]) + 1);
    s.b.assign(list.begin() + long(fences[1]), list.begin() + long(commits[1]) + 1);
    const Access a = access_of(s.a), b = access_of(s.b);
    for (const Stmt &x : s.a)
      if (const auto *e = x.as<Evaluate>())
        if (const auto *c = e->value.as<Call>(); c && c->is_intrinsic(intrinsic::wgmma_mma))
          s.a_accumulators.insert(c->args[0].as<Variable>());
    // B's registers: its accumulator and its A operand in registers (not its shared operands,
    // which the ring's barriers order).
    VarSet &b_registers = s.b_registers;
    for (const VarSet *set : {&b.reads, &b.writes})
      for (const Variable *v : *set)
        if (is_register_array(v))
          b_registers.insert(v);
    VarSet b_results = b.writes;

    // X: the statements between the groups. Those that write B's registers, or have effects,
    // run after the previous step's B is done; the rest beside it.
    for (size_t i = commits[0] + 2; i < fences[1]; ++i) {
      const Access x = access_of(list[i]);
      (meets(x.writes, b_registers) || x.effects ? s.x_late : s.x_early).push_back(list[i]);
    }
    // Y: the statements after B's wait. Register updates that touch none of B's registers
    // join X's early part; the rest (B's results read, barriers) stay after B.
    for (size_t i = commits[1] + 2; i < list.size(); ++i) {
      const Access y = access_of(list[i]);
      const bool after = y.effects || meets(y.reads, b_registers) || meets(y.writes, b_registers);
      (after ? s.y_after : s.y_rows).push_back(list[i]);
    }
    const Access xe = access_of(s.x_early), xl = access_of(s.x_late),
                 yr = access_of(s.y_rows), ya = access_of(s.y_after),
                 pre = access_of(s.a_before);
    // The moves, and what each needs:
    // - X_early(t + 1) and Y_rows(t + 1) before B(t) lands and before Y_after(t): they read
    //   nothing B and Y_after write, and write nothing they read or write;
    Access early = xe;
    early.add(yr);
    VarSet after = b_results;
    after.insert(ya.writes.begin(), ya.writes.end());
    if (const Variable *v = shared(early.reads, after))
      fail("the work between its groups reads '", v->name, "', which the second group or what ",
           "follows it writes (the work would run before the previous step's second group is "
           "done)");
    if (const Variable *v = shared(early.writes, ya.reads))
      fail("the work between its groups writes '", v->name, "', which what follows the second ",
           "group reads");
    if (const Variable *v = shared(early.writes, ya.writes))
      fail("the work between its groups and what follows the second group both write '",
           v->name, "'");
    // - X_late(t + 1) after Y_rows(t + 1): Y_rows writes nothing X_late reads, X_late writes
    //   nothing Y_rows reads; and X_early(t + 1), now all before X_late(t + 1), reads nothing
    //   X_late writes;
    if (meets(yr.writes, xl.reads) || meets(xl.writes, yr.reads) || meets(xl.writes, yr.writes))
      fail("the second group's operands are computed from the row state it updates after it");
    if (const Variable *v = shared(xe.reads, xl.writes))
      fail("the work between its groups reads '", v->name, "', which the second group's ",
           "operands' setup writes (that setup waits for the previous step's second group)");
    // - A(t + 1) and its fills before B(t) and Y_after(t): A's registers are none of theirs.
    Access a_all = a;
    a_all.add(pre);
    if (meets(a_all.writes, b_registers) || meets(a_all.writes, ya.reads) ||
        meets(a_all.writes, ya.writes) || meets(a_all.reads, b_results))
      fail("its first group shares registers with the second group or what follows it");
    if (s.a_accumulators.empty())
      fail("its first group issues no wgmma_mma with an accumulator");
    return s;
  }

  // The threads' linear index and count in the block, from the thread_extent attrs around.
  std::pair<Expr, int64_t> thread_slot() const {
    Expr index = make_zero(Int(32));
    int64_t count = 1;
    for (int d = 2; d >= 0; --d) {
      const auto &[var, extent] = threads_[size_t(d)];
      if (!var.defined())
        continue;
      if (extent <= 0)
        fail("the block's thread counts must be constants");
      index = index * Expr(int(extent)) + var;
      count *= extent;
    }
    return {index, count};
  }

  Stmt rotate(const For *loop) {
    // A step count known only at run time (a causal fold's, of the block) is guarded: the
    // rotation runs a first and a last step.
    auto extent = as_const_int(loop->extent);
    if (extent && *extent < 2)
      return Stmt(loop);
    Steps s = cut(loop->body);
    auto at = [&](std::vector<Stmt> seg, const Expr &step) {
      return substitute(Seq::make(std::move(seg)), t_, step);
    };
    auto cat = [](std::initializer_list<std::vector<Stmt>> parts) {
      std::vector<Stmt> out;
      for (const auto &p : parts)
        out.insert(out.end(), p.begin(), p.end());
      return out;
    };
    const Expr first = loop->min, last = loop->min + loop->extent - 1;
    // The register arrays a fence or wait names (by name: the generated code must not depend
    // on where the allocator put the variables).
    auto args_of = [](std::vector<Expr> args, const VarSet &regs) {
      std::vector<const Variable *> sorted(regs.begin(), regs.end());
      std::sort(sorted.begin(), sorted.end(),
                [](const Variable *a, const Variable *b) { return a->name < b->name; });
      for (const Variable *v : sorted)
        args.push_back(Expr(v));
      return args;
    };
    // The waits inside the loop fence only the registers of the groups they land: the first
    // leaves B in flight; after the second, the other registers hold the next step's work.
    const Stmt wait0 = intrinsic_stmt(intrinsic::wgmma_wait, {Expr(0)});
    const Stmt wait1 = intrinsic_stmt(intrinsic::wgmma_wait, args_of({Expr(1)}, s.a_accumulators));
    const Stmt wait_b = intrinsic_stmt(intrinsic::wgmma_wait, args_of({Expr(0)}, s.b_registers));

    // The rows X_early and Y_rows wrote, summed into the thread's word of shared memory.
    std::map<std::tuple<std::string, int64_t, int64_t>, Expr> rows;
    for (const std::vector<Stmt> *part : {&s.x_early, &s.y_rows})
      for (const Stmt &x : *part)
        post_order_visit(x, [&](const IRNode *n) {
          const auto *c = llvm::dyn_cast<Call>(n);
          if (!c || !c->is_intrinsic(intrinsic::wgmma_row_set))
            return;
          const auto *rows_var = c->args[0].as<Variable>();
          auto tile = as_const_int(c->args[1]), half = as_const_int(c->args[2]);
          if (rows_var && tile && half)
            rows[{rows_var->name, *tile, *half}] =
                Call::make(Float(32), intrinsic::wgmma_row, {c->args[0], c->args[1], c->args[2]},
                           Call::Intrinsic);
        });
    std::vector<Stmt> keep;
    Var keep_var("keep_before_wait", Handle());
    auto [slot, threads] = thread_slot();
    if (!rows.empty()) {
      Expr sum;
      for (const auto &[key, value] : rows)
        sum = sum.defined() ? sum + value : value;
      Buffer kb = passes_detail::make_flat_buffer(keep_var->name, keep_var, Float(32),
                                                  Expr(int(threads)), "shared");
      keep.push_back(BufferStore::make(kb, sum, {slot}));
    }

    // One fence before both groups, of their registers only: the others (B's result copied
    // out, the probabilities) are dead there, and an asm that claims to modify them would keep
    // them alive across the loop.
    VarSet issued = s.b_registers;
    issued.insert(s.a_accumulators.begin(), s.a_accumulators.end());
    std::vector<Stmt> a_issue = s.a;
    a_issue.front() = intrinsic_stmt(intrinsic::wgmma_fence, args_of({}, issued));
    std::vector<Stmt> b_issue(s.b.begin() + 1, s.b.end());
    Stmt prologue = at(cat({s.a_before, s.a, {wait0}, s.x_early, s.y_rows, s.x_late}), first);
    const Expr next = t_ + 1;
    Stmt body = Seq::make({at(s.producer, t_), at(cat({s.a_before, a_issue}), next), at(b_issue, t_),
                           wait1, at(cat({s.x_early, s.y_rows}), next), Seq::make(keep), wait_b,
                           at(s.y_after, t_), at(s.x_late, next)});
    Stmt steps = For::make(loop->loop_var, loop->min, arith::simplify(loop->extent - 1),
                           loop->for_kind, body, loop->thread_tag);
    const Stmt b_fence = intrinsic_stmt(intrinsic::wgmma_fence, args_of({}, s.b_registers));
    Stmt epilogue = at(cat({s.producer, {b_fence}, b_issue, {wait_b}, s.y_after}), last);
    Stmt out = Seq::make({prologue, steps, epilogue});
    if (!extent)
      out = IfThenElse::make(loop->extent > 0, out);
    if (!keep.empty())
      out = Allocate::make(keep_var, Float(32), {Expr(int(threads))}, "shared", out);
    return out;
  }

  // A warpgroup's register array (an allocation in a wgmma.* scope).
  bool is_register_array(const Variable *v) const {
    auto it = scope_.find(v);
    return it != scope_.end() && it->second.rfind("wgmma.", 0) == 0;
  }

  Var t_;
  bool found_ = false;
  std::map<const Variable *, std::string> scope_;
  std::array<std::pair<Var, int64_t>, 3> threads_{};
};

} // namespace

Stmt overlap_wgmma_steps(Stmt s) { return Rotate().mutate(s); }

} // namespace tessel

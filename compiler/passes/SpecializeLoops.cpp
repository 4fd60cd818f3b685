#include "compiler/passes/SpecializeLoops.h"

#include "compiler/arith/Analyzer.h"
#include "compiler/arith/CanonicalForm.h"
#include "compiler/arith/IntEval.h"
#include "compiler/ir/IREquality.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/IterVar.h"
#include "compiler/support/Error.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

namespace {

constexpr const char *kSpecialize = "pragma_specialize";
constexpr const char *kOverlapSteps = "pragma_overlap_steps"; // overlap_wgmma_steps' mark

// Where a variable's value comes from, as seen from inside the specialized loop.
enum class VarKind { Uniform, Bounded };

// The conditions of a statement: of its ifs, selects and if_then_else calls.
std::vector<Expr> conditions_of(const Stmt &s) {
  std::vector<Expr> out;
  post_order_visit(s, [&](const IRNode *n) {
    if (const auto *i = llvm::dyn_cast<IfThenElse>(n))
      out.push_back(i->condition);
    else if (const auto *sel = llvm::dyn_cast<Select>(n))
      out.push_back(sel->condition);
    else if (const auto *c = llvm::dyn_cast<Call>(n); c && c->is_intrinsic(intrinsic::if_then_else))
      out.push_back(c->args[0]);
  });
  return out;
}

// x >= 0 comparisons that together imply `cmp` (a comparison of integers), the min and max on
// either side split; none when `cmp` is no such comparison.
std::optional<std::vector<Expr>> sufficient_differences(const Expr &cmp) {
  Expr lo, hi; // cmp is lo <= hi (+ strict: lo < hi)
  bool strict = false;
  if (const auto *x = cmp.as<LE>())
    lo = x->a, hi = x->b;
  else if (const auto *x = cmp.as<LT>())
    lo = x->a, hi = x->b, strict = true;
  else if (const auto *x = cmp.as<GE>())
    lo = x->b, hi = x->a;
  else if (const auto *x = cmp.as<GT>())
    lo = x->b, hi = x->a, strict = true;
  else
    return std::nullopt;
  if (!lo.type().is_int() || lo.type().lanes() != 1)
    return std::nullopt;
  std::vector<Expr> out;
  // lo <= hi (or <): split max and min where the split keeps an implication.
  std::vector<std::pair<Expr, Expr>> work{{lo, hi}};
  while (!work.empty()) {
    auto [l, h] = work.back();
    work.pop_back();
    if (const auto *m = h.as<Min>()) { // l <= min(a, b) <- l <= a and l <= b
      work.push_back({l, m->a});
      work.push_back({l, m->b});
    } else if (const auto *m = h.as<Max>()) { // l <= max(a, b) <- l <= a
      work.push_back({l, m->a});
    } else if (const auto *m = l.as<Max>()) { // max(a, b) <= h <- a <= h and b <= h
      work.push_back({m->a, h});
      work.push_back({m->b, h});
    } else if (const auto *m = l.as<Min>()) { // min(a, b) <= h <- a <= h
      work.push_back({m->a, h});
    } else if (const auto *s = h.as<Sub>(); s && (s->a.as<Min>() || s->a.as<Max>())) {
      work.push_back({l + s->b, s->a}); // l <= m - c as l + c <= m
    } else if (const auto *s = h.as<Add>(); s && (s->a.as<Min>() || s->a.as<Max>())) {
      work.push_back({l - s->b, s->a});
    } else {
      out.push_back(strict ? h - l - make_const(h.type(), 1) : h - l);
    }
  }
  return out;
}

// `s` with a new variable for each let and loop it binds: the copy of a body beside the body
// binds none of the body's variables a second time.
Stmt with_fresh_bindings(const Stmt &s) {
  struct Fresh : IRMutator {
    llvm::DenseMap<const Variable *, Var> renamed;
    Expr visit(const Variable *op) override {
      auto it = renamed.find(op);
      return it != renamed.end() ? Expr(it->second) : Expr(op);
    }
    Stmt visit(const LetStmt *op) override {
      Expr value = mutate(op->value);
      Var v(op->var->name, op->var.type());
      renamed[op->var.get()] = v;
      return LetStmt::make(v, value, mutate(op->body));
    }
    Stmt visit(const For *op) override {
      Expr min = mutate(op->min), extent = mutate(op->extent);
      Var v(op->loop_var->name, op->loop_var.type());
      renamed[op->loop_var.get()] = v;
      return For::make(v, min, extent, op->for_kind, mutate(op->body), op->thread_tag);
    }
  } fresh;
  return fresh.mutate(s);
}

// The loops inside a specialized loop, with bounds of their variables (none: unbounded).
using InnerLoops = llvm::DenseMap<const Variable *, std::optional<std::pair<int64_t, int64_t>>>;

// d >= 0 as a t + U + W >= 0: the coefficient of t, U (uniform terms, its constant included)
// and the least value of W; none when d is not of that form.
struct Split {
  int64_t a = 0;
  arith::LinearForm uniform{Int(32)};
  int64_t least = 0;
};

class Specializer : public IRMutator {
protected:
  Stmt visit(const AttrStmt *op) override {
    if (op->key == attr::thread_extent) {
      const auto *iv = std::get_if<IterVar>(&op->node);
      internal_check(iv) << "thread_extent without its IterVar";
      const bool block = iv->thread_tag().rfind("blockIdx", 0) == 0;
      kinds_[iv->var().get()] = block ? VarKind::Uniform : VarKind::Bounded;
      // A thread index lies below the largest extent it is bound with (the block's).
      if (!block)
        if (auto e = as_const_int(op->value)) {
          auto [it, fresh] = ranges_.try_emplace(iv->var().get(), 0, *e - 1);
          it->second.second = std::max(it->second.second, *e - 1);
        }
      return IRMutator::visit(op);
    }
    if (op->key == kOverlapSteps)
      if (const auto *iv = std::get_if<IterVar>(&op->node))
        overlapped_.insert(iv->var().get());
    if (op->key != kSpecialize)
      return IRMutator::visit(op);
    const auto *iv = std::get_if<IterVar>(&op->node);
    internal_check(iv) << "specialize without its IterVar";
    const Var t = iv->var();
    // A loop whose steps overlap_wgmma_steps rotates must keep one body: its statements are
    // unswitched one by one (the overlap's attr may sit outside this one or inside it).
    bool overlapped = overlapped_.count(t.get()) != 0;
    post_order_visit(op->body, [&](const IRNode *n) {
      if (const auto *a = llvm::dyn_cast<AttrStmt>(n); a && a->key == kOverlapSteps)
        if (const auto *o = std::get_if<IterVar>(&a->node); o && o->var().same_as(t))
          overlapped = true;
    });
    // The loop of t, wherever passes placed it inside the attr (a pipeline's prologue before it).
    struct Finder : IRMutator {
      Specializer &self;
      const Var &t;
      bool per_statement;
      Finder(Specializer &s, const Var &v, bool p) : self(s), t(v), per_statement(p) {}
      Stmt visit(const For *f) override {
        if (!f->loop_var.same_as(t))
          return IRMutator::visit(f);
        Stmt body = self.mutate(f->body); // loops marked inside it first
        return For::make(f->loop_var, f->min, f->extent, f->for_kind,
                         self.specialized(f, body, per_statement), f->thread_tag);
      }
    } finder(*this, t, overlapped);
    return finder.mutate(op->body);
  }

  Stmt visit(const For *op) override {
    // A loop around a specialized one whose range the block shares has one value a block.
    if (is_uniform(op->min) && is_uniform(op->extent))
      kinds_[op->loop_var.get()] = VarKind::Uniform;
    return IRMutator::visit(op);
  }

  Stmt visit(const LetStmt *op) override {
    // A value of uniform ones (a reversed block index, a rasterized tile) is uniform.
    if (is_uniform(op->value))
      kinds_[op->var.get()] = VarKind::Uniform;
    return IRMutator::visit(op);
  }

  bool is_uniform(const Expr &e) const {
    bool uniform = true;
    post_order_visit(e, [&](const IRNode *n) {
      if (const auto *v = llvm::dyn_cast<Variable>(n)) {
        auto k = kinds_.find(v);
        uniform &= k != kinds_.end() && k->second == VarKind::Uniform;
      } else if (llvm::isa<Call>(n) || llvm::isa<BufferLoad>(n)) {
        uniform = false;
      }
    });
    return uniform;
  }

private:
  // `body` of `loop`, without the conditions that hold on all of its iterations, unswitched on
  // the predicate the other conditions give (as a whole, or statement by statement when
  // `per_statement`), or unchanged.
  Stmt specialized(const For *loop, const Stmt &body, bool per_statement) {
    const Var &t = loop->loop_var;
    // The loops inside t: never uniform; bounded by their ranges' bounds where those are
    // finite (a column loop of extent min(row - 16 t + 1, 16) runs below 16).
    InnerLoops inner;
    arith::Analyzer bounds;
    post_order_visit(body, [&](const IRNode *n) {
      if (const auto *f = llvm::dyn_cast<For>(n)) {
        arith::IntInterval lo = bounds.const_int_bound(f->min),
                           hi = bounds.const_int_bound(arith::simplify(f->min + f->extent));
        std::optional<std::pair<int64_t, int64_t>> range;
        if (lo.min != arith::IntInterval::kNegInf && hi.max != arith::IntInterval::kPosInf &&
            hi.max > lo.min)
          range = std::pair(lo.min, hi.max - 1);
        // One variable bound by loops of different ranges: no range.
        auto [it, fresh] = inner.try_emplace(f->loop_var.get(), range);
        if (!fresh && it->second != range)
          it->second = std::nullopt;
      }
    });
    std::vector<Expr> always, dropped; // atoms true on every iteration; on those P selects
    std::vector<std::vector<Split>> dropped_splits; // each dropped atom's, normalized
    for (const Expr &c : conditions_of(body)) {
      for (const Expr &atom : conjuncts(c)) {
        if (contains(always, atom) || contains(dropped, atom))
          continue;
        std::optional<std::vector<Expr>> diffs = sufficient_differences(atom);
        if (!diffs)
          continue;
        std::vector<Split> splits;
        bool about_t = false, ok = true;
        for (const Expr &d : *diffs) {
          std::optional<Split> s = split(t, d, inner);
          if (!s) {
            ok = false;
            break;
          }
          if (s->a == 0) { // no t: it must hold outright
            if (!s->uniform.is_constant() || s->uniform.constant + s->least < 0) {
              ok = false;
              break;
            }
            continue;
          }
          about_t = true;
          splits.push_back(*s);
        }
        if (!ok || !about_t)
          continue;
        if (std::all_of(splits.begin(), splits.end(),
                        [&](const Split &s) { return holds_on_every_step(loop, s); })) {
          always.push_back(atom); // a causal fold's per-row guard inside its triangular loop
          continue;
        }
        for (Split &s : splits) {
          // a t + U + least >= 0 over the integers, divided by the gcd g of a and U's
          // coefficients, is (a / g) t + U / g + floor((U's constant + least) / g) >= 0:
          // comparisons of one block at different scales (t * 64 and t * 128 against the rows)
          // fall in one group below.
          int64_t c0 = s.uniform.constant + s.least;
          s.uniform.constant = 0;
          int64_t g = std::abs(s.a);
          for (const auto &[atom, coeff] : s.uniform.terms)
            g = std::gcd(g, std::abs(coeff));
          if (g > 1) {
            s.a /= g;
            for (auto &term : s.uniform.terms)
              term.second /= g;
            c0 = arith::floordiv_int(c0, g);
          }
          s.least = c0;
        }
        dropped.push_back(atom);
        dropped_splits.push_back(std::move(splits));
      }
    }
    const Stmt kept = always.empty() ? body : Drop(always).mutate(body);
    if (dropped.empty())
      return kept;
    // P for the dropped atoms of `x` (all of them: none given): a t + U + min least >= 0 for
    // each (a, U) among their splits.
    auto predicate_of = [&](const Stmt &x) {
      const std::vector<Expr> atoms = x.defined() ? dropped_in(x, dropped) : dropped;
      std::map<std::pair<int64_t, std::string>, Split> groups; // one predicate per (a, U)
      for (size_t i = 0; i < dropped.size(); ++i) {
        if (!contains(atoms, dropped[i]))
          continue;
        for (const Split &s : dropped_splits[i]) {
          auto key = std::make_pair(s.a, to_string(arith::to_expr(s.uniform)));
          auto [it, fresh] = groups.try_emplace(key, s);
          it->second.least = std::min(it->second.least, s.least);
        }
      }
      Expr predicate;
      for (const auto &[key, s] : groups) {
        Expr p = make_const(t.type(), s.a) * t + arith::to_expr(s.uniform) +
                     make_const(t.type(), s.least) >=
                 make_zero(t.type());
        predicate = predicate.defined() ? predicate && p : p;
      }
      return arith::simplify(predicate);
    };
    Drop drop(dropped);
    if (!per_statement)
      return IfThenElse::make(predicate_of(Stmt()), with_fresh_bindings(drop.mutate(kept)),
                              kept);
    // Each run of statements that hold a dropped condition gets its own branch (the unrolled
    // elements of a mask one branch); the body stays one sequence of statements (what
    // overlap_wgmma_steps cuts at its wgmma groups). Allocations, lets and attrs around
    // statements are looked through.
    auto holds_dropped = [&](const Stmt &x) { return !dropped_in(x, dropped).empty(); };
    // An if whose own condition alone holds the atoms is left as it is: a branch around it
    // would only test P instead (a producer's guard of its refills).
    auto needs_branch = [&](const Stmt &x) {
      if (const auto *i = x.as<IfThenElse>())
        return holds_dropped(i->then_case) ||
               (i->else_case.defined() && holds_dropped(i->else_case));
      return holds_dropped(x);
    };
    auto branch = [&](const Stmt &x) {
      return IfThenElse::make(predicate_of(x), with_fresh_bindings(drop.mutate(x)), x);
    };
    std::function<Stmt(const Stmt &)> unswitch;
    auto whole = [&](const Stmt &x) { // x unswitched, or branched around when a statement
      Stmt y = unswitch(x);
      return y.same_as(x) && needs_branch(x) ? branch(x) : y;
    };
    unswitch = [&](const Stmt &s) -> Stmt {
      if (!holds_dropped(s))
        return s;
      if (const auto *q = s.as<Seq>()) {
        // A run takes statements of its kind between two of its own too (a mask's elements
        // that every query sees), so that the mask is one branch.
        std::vector<Stmt> out, run, between;
        auto flush = [&] {
          if (!run.empty())
            out.push_back(branch(Seq::make(std::move(run))));
          run.clear();
          out.insert(out.end(), between.begin(), between.end());
          between.clear();
        };
        for (const Stmt &x : q->stmts) {
          Stmt y = unswitch(x);
          if (y.same_as(x) && needs_branch(x)) { // a statement to branch around
            run.insert(run.end(), between.begin(), between.end());
            between.clear();
            run.push_back(x);
          } else if (y.same_as(x) && !run.empty() && same_kind(run.back(), x)) {
            between.push_back(x);
          } else {
            flush();
            out.push_back(y);
          }
        }
        flush();
        return Seq::make(std::move(out));
      }
      if (const auto *l = s.as<LetStmt>(); l && !holds_dropped(Evaluate::make(l->value)))
        return LetStmt::make(l->var, l->value, whole(l->body));
      if (const auto *a = s.as<Allocate>())
        return Allocate::make(a->buffer_var, a->dtype, a->extents, a->scope, whole(a->body));
      if (const auto *a = s.as<AttrStmt>(); a && !holds_dropped(Evaluate::make(a->value)))
        return AttrStmt::make(a->node, a->key, a->value, whole(a->body));
      return s; // a statement for the caller's run (or the body itself: branched below)
    };
    return whole(kept);
  }

  // Whether a t + U + least >= 0 (`s`) holds for every t of `loop`'s range: at its first t
  // when a > 0, at its last when a < 0, by the linear forms of U and the range's bounds.
  static bool holds_on_every_step(const For *loop, const Split &s) {
    const Expr t = s.a > 0 ? loop->min : loop->min + loop->extent - 1;
    arith::LinearForm f = arith::linear_form(make_const(t.type(), s.a) * t);
    f.add(s.uniform, 1);
    f.constant += s.least;
    return f.is_constant() && f.constant >= 0;
  }

  // `s` with the atoms of `atoms` taken out of its conditions (a condition left with none is
  // true: its if becomes its then-case, its select the true value).
  struct Drop : IRMutator {
    const std::vector<Expr> &atoms;
    explicit Drop(const std::vector<Expr> &a) : atoms(a) {}
    Expr cond(const Expr &c) {
      std::vector<Expr> kept;
      for (const Expr &p : conjuncts(c))
        if (!contains(atoms, p))
          kept.push_back(p);
      Expr out = const_true();
      for (const Expr &k : kept)
        out = is_one(out) ? k : out && k;
      return out;
    }
    Stmt visit(const IfThenElse *op) override {
      Stmt then_case = mutate(op->then_case);
      Stmt else_case = op->else_case.defined() ? mutate(op->else_case) : op->else_case;
      Expr c = cond(op->condition);
      if (is_one(c))
        return then_case;
      return IfThenElse::make(c, then_case, else_case);
    }
    Expr visit(const Select *op) override {
      Expr c = cond(op->condition);
      return is_one(c) ? mutate(op->true_value)
                       : Select::make(c, mutate(op->true_value), mutate(op->false_value));
    }
    Expr visit(const Call *op) override {
      if (!op->is_intrinsic(intrinsic::if_then_else))
        return IRMutator::visit(op);
      Expr c = cond(op->args[0]);
      if (is_one(c))
        return mutate(op->args[1]);
      return Call::make(op->type, op->name, {c, mutate(op->args[1]), mutate(op->args[2])},
                        op->call_kind);
    }
  };

  // Whether a and b are writes of one kind: calls of one intrinsic (a fragment's elements
  // set one by one) or stores into one buffer.
  static bool same_kind(const Stmt &a, const Stmt &b) {
    const auto *ea = a.as<Evaluate>(), *eb = b.as<Evaluate>();
    if (ea && eb) {
      const auto *ca = ea->value.as<Call>(), *cb = eb->value.as<Call>();
      return ca && cb && ca->name == cb->name;
    }
    const auto *sa = a.as<BufferStore>(), *sb = b.as<BufferStore>();
    return sa && sb && sa->buffer.same_as(sb->buffer);
  }

  // The atoms of `atoms` among the conditions of `s`.
  static std::vector<Expr> dropped_in(const Stmt &s, const std::vector<Expr> &atoms) {
    std::vector<Expr> out;
    for (const Expr &c : conditions_of(s))
      for (const Expr &atom : conjuncts(c))
        if (contains(atoms, atom) && !contains(out, atom))
          out.push_back(atom);
    return out;
  }

  static bool contains(const std::vector<Expr> &v, const Expr &e) {
    for (const Expr &x : v)
      if (x.same_as(e) || structural_equal(x, e))
        return true;
    return false;
  }

  // d as a t + U + W with W's least value (the loops inside t in `inner`, the threads in
  // ranges_), or none.
  std::optional<Split> split(const Var &t, const Expr &d, const InnerLoops &inner) {
    arith::LinearForm f = arith::linear_form(d);
    Split s;
    s.uniform = arith::LinearForm(f.type);
    s.uniform.constant = f.constant;
    arith::Analyzer an;
    Expr w = make_zero(f.type);
    for (const auto &[atom, coeff] : f.terms) {
      if (const auto *v = atom.as<Variable>(); v && v == t.get()) {
        s.a = coeff;
        continue;
      }
      bool uniform = true, bounded = true;
      post_order_visit(atom, [&](const IRNode *n) {
        if (const auto *v = llvm::dyn_cast<Variable>(n)) {
          if (v == t.get()) {
            uniform = bounded = false;
            return;
          }
          auto k = kinds_.find(v);
          const bool is_uniform = k != kinds_.end() && k->second == VarKind::Uniform &&
                                  !inner.count(v);
          uniform &= is_uniform;
          if (auto r = inner.find(v); r != inner.end() && r->second)
            an.bind(Var(v), arith::IntInterval{r->second->first, r->second->second});
          else if (inner.count(v))
            bounded = false;
          else if (auto r = ranges_.find(v); r != ranges_.end())
            an.bind(Var(v), arith::IntInterval{r->second.first, r->second.second});
          else
            bounded = false;
        } else if (const auto *c = llvm::dyn_cast<Call>(n)) {
          if (c->is_intrinsic(intrinsic::wgmma_thread_id) ||
              c->is_intrinsic(intrinsic::mma_lane_id))
            uniform = false; // a thread's: bounded below (thread_index below)
          else if (c->call_kind != Call::PureIntrinsic || !c->args.empty())
            uniform = bounded = false;
        }
      });
      if (uniform) {
        s.uniform.add_term(atom, coeff);
      } else if (bounded) {
        w = w + make_const(f.type, coeff) * thread_index(atom);
      } else {
        return std::nullopt;
      }
    }
    for (const std::optional<Var> &lane : {wgmma_thread_, mma_lane_})
      if (lane)
        an.bind(*lane, arith::IntInterval{ranges_[lane->get()].first, ranges_[lane->get()].second});
    arith::IntInterval b = an.const_int_bound(arith::simplify(w));
    if (b.min == arith::IntInterval::kNegInf)
      return std::nullopt;
    s.least = b.min;
    return s;
  }

  // `e` with wgmma_thread_id() and mma_lane_id() as variables of their ranges.
  Expr thread_index(const Expr &e) {
    struct Sub : IRMutator {
      Specializer &self;
      explicit Sub(Specializer &s) : self(s) {}
      Expr visit(const Call *op) override {
        if (op->is_intrinsic(intrinsic::wgmma_thread_id))
          return self.lane_var(self.wgmma_thread_, 127, "wgmma_thread");
        if (op->is_intrinsic(intrinsic::mma_lane_id))
          return self.lane_var(self.mma_lane_, 31, "mma_lane");
        return IRMutator::visit(op);
      }
    } sub(*this);
    return sub.mutate(e);
  }

  Var lane_var(std::optional<Var> &slot, int64_t max, const char *name) {
    if (!slot) {
      slot = Var(name, Int(32));
      ranges_[slot->get()] = {0, max};
    }
    return *slot;
  }

  llvm::DenseMap<const Variable *, VarKind> kinds_;
  llvm::DenseSet<const Variable *> overlapped_; // loops marked by Stage::overlap_steps
  llvm::DenseMap<const Variable *, std::pair<int64_t, int64_t>> ranges_;
  std::optional<Var> wgmma_thread_, mma_lane_;
};

} // namespace

Stmt specialize_loops(Stmt s) { return Specializer().mutate(s); }

} // namespace tessel

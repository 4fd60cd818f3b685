#include "compiler/passes/VectorizeLoops.h"

#include "compiler/arith/Simplify.h"
#include "compiler/ir/IREquality.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/Substitute.h"
#include "compiler/ir/WrittenBuffers.h"
#include "compiler/support/Error.h"
#include "compiler/support/Remarks.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallVector.h>

#include <algorithm>
#include <optional>
#include <sstream>

namespace tessel {

namespace {

Expr widen(const Expr &e, int lanes) {
  if (e.type().lanes() == lanes)
    return e;
  internal_check(e.type().is_scalar()) << "widening a vector of " << e.type().lanes() << " lanes";
  return Broadcast::make(e, lanes);
}

// a + b, skipping a zero side: a loop from 0 gives ramp(i * 4, 1, 4), not ramp(0 + i * 4, ...).
Expr add(const Expr &a, const Expr &b) {
  if (is_zero(a))
    return b;
  return is_zero(b) ? a : a + b;
}

bool is_dense_ramp(const Expr &e) {
  const auto *r = e.as<Ramp>();
  return r && is_one(r->stride);
}

template <typename... T> std::string str(const T &...parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

// Why a loop stays serial, and what would let it vectorize (for the remark; empty: nothing
// but dropping vectorize).
struct Refusal {
  std::string why, fix;
};

const char *const kContiguousFix =
    "make that access contiguous along it (vectorize the axis it is contiguous in, or change "
    "the buffer's layout)";

// Why a load or store at `index` (the vectorized index) is not a dense vector access.
Refusal access_refusal(const char *access, const Buffer &b, const std::vector<Expr> &index) {
  std::string what = str("the ", access, " '", b.name(), "'");
  if (index.size() != 1)
    return {what + " is not flat", kContiguousFix};
  if (index[0].type().is_scalar())
    return {what + " is at the same element in every lane", kContiguousFix};
  if (const auto *r = index[0].as<Ramp>())
    return {str(what, " has stride ", r->stride, " along it"), kContiguousFix};
  return {str(what, " is not at consecutive elements along it (index ", index[0], ")"),
          kContiguousFix};
}

// Rewrites the body of one vectorized loop. Anything it cannot express as vector code sets
// `failed` (and `refusal`, the first reason), and the caller keeps the loop.
class Vectorizer : public IRMutator {
public:
  Vectorizer(const Var &var, const Expr &min, int lanes)
      : var_(var.get()), lanes_(lanes), ramp_(Ramp::make(min, make_one(min.type()), lanes)),
        loop_var_(var), min_(min) {}

  using IRMutator::mutate;

  /// `cond` as one scalar condition if it has the same value in every lane, else undefined:
  /// where it does not use the lane; or, conjunct by conjunct, a comparison of the lane plus
  /// or minus the rest (monotone in it) that simplifies to the same condition at the first and
  /// the last lane (the columns of a padded copy, `x * 8 + lane < 1000`: `x < 125`).
  Expr same_in_every_lane(const Expr &cond) {
    if (mutate(cond).same_as(cond))
      return cond;
    if (const auto *a = cond.as<And>()) {
      Expr l = same_in_every_lane(a->a), r = l.defined() ? same_in_every_lane(a->b) : Expr();
      return r.defined() ? l && r : Expr();
    }
    auto sides = [](const Expr &e) -> std::optional<std::pair<Expr, Expr>> {
      if (const auto *o = e.as<LT>()) return std::pair{o->a, o->b};
      if (const auto *o = e.as<LE>()) return std::pair{o->a, o->b};
      if (const auto *o = e.as<GT>()) return std::pair{o->a, o->b};
      if (const auto *o = e.as<GE>()) return std::pair{o->a, o->b};
      return std::nullopt;
    };
    auto ab = sides(cond);
    // (A let vectorized in the loop would hide the lane from the substitution below.)
    if (!ab || uses_var(cond, [&](const Variable *x) { return lets_.count(x) > 0; }))
      return Expr();
    Expr diff = ab->first - ab->second;
    Expr v = loop_var_;
    if (uses_var(arith::simplify(diff - v), loop_var_) &&
        uses_var(arith::simplify(diff + v), loop_var_))
      return Expr(); // not the lane plus or minus the rest
    Expr first = arith::simplify(substitute(cond, loop_var_, min_));
    Expr last = arith::simplify(
        substitute(cond, loop_var_, min_ + make_const(min_.type(), lanes_ - 1)));
    return structural_equal(first, last) ? first : Expr();
  }

  bool failed() const { return failed_; }
  const Refusal &refusal() const { return refusal_; }

  /// True if no buffer is written at one index and read or written at another: then each
  /// lane only sees its own writes, as in the serial loop. Otherwise `refusal` says which.
  bool lanes_independent() {
    for (const auto &[data, acc] : accesses_) {
      if (!acc.written)
        continue;
      for (const Expr &i : acc.indices)
        if (!structural_equal(i, acc.indices.front())) {
          refuse({str("'", acc.name, "' is written at one element and accessed at another "
                                     "(a lane could see another lane's write)"),
                  "write and read each element of it at the same index"});
          return false;
        }
    }
    return true;
  }

protected:
  Expr visit(const Variable *op) override {
    if (op == var_)
      return ramp_;
    auto it = lets_.find(op);
    return it == lets_.end() ? Expr(op) : it->second;
  }

  Expr visit(const Add *op) override {
    return ramp_arith<Add>(op, [](const Ramp *r, const Expr &s) {
      return Ramp::make(add(r->base, s), r->stride, r->lanes);
    });
  }
  Expr visit(const Sub *op) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (const auto *r = a.as<Ramp>(); r && b.type().is_scalar())
      return Ramp::make(r->base - b, r->stride, r->lanes);
    return rebuild<Sub>(op, a, b);
  }
  Expr visit(const Mul *op) override {
    return ramp_arith<Mul>(op, [](const Ramp *r, const Expr &s) {
      return Ramp::make(r->base * s, r->stride * s, r->lanes);
    });
  }
  Expr visit(const FloorDiv *op) override { return binary(op); }
  Expr visit(const FloorMod *op) override { return binary(op); }
  Expr visit(const Div *op) override { return binary(op); }
  Expr visit(const Mod *op) override { return binary(op); }
  Expr visit(const Min *op) override { return binary(op); }
  Expr visit(const Max *op) override { return binary(op); }
  Expr visit(const EQ *op) override { return binary(op); }
  Expr visit(const NE *op) override { return binary(op); }
  Expr visit(const LT *op) override { return binary(op); }
  Expr visit(const LE *op) override { return binary(op); }
  Expr visit(const GT *op) override { return binary(op); }
  Expr visit(const GE *op) override { return binary(op); }
  Expr visit(const And *op) override { return binary(op); }
  Expr visit(const Or *op) override { return binary(op); }

  Expr visit(const Select *op) override {
    Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value))
      return op;
    int lanes = std::max({c.type().lanes(), t.type().lanes(), f.type().lanes()});
    return Select::make(c, widen(t, lanes), widen(f, lanes));
  }

  Expr visit(const Cast *op) override {
    Expr v = mutate(op->value);
    if (v.same_as(op->value))
      return op;
    return Cast::make(op->type.with_lanes(v.type().lanes()), v);
  }

  Expr visit(const Let *op) override {
    Expr value = mutate(op->value);
    if (value.type().is_vector()) {
      Var v(op->var.name(), value.type());
      lets_[op->var.get()] = v;
      return Let::make(v, value, mutate(op->body));
    }
    Expr body = mutate(op->body);
    if (value.same_as(op->value) && body.same_as(op->body))
      return op;
    return Let::make(op->var, value, body);
  }

  // Calls (math functions, if_then_else, intrinsics) have no vector form here.
  Expr visit(const Call *op) override {
    return unless_changed(op, {str("the call ", op->name, "(...) has no vector form"),
                               "compute it in a stage of its own"});
  }
  Expr visit(const Ramp *op) override { return unless_changed(op, no_vector_form(op)); }
  Expr visit(const Broadcast *op) override { return unless_changed(op, no_vector_form(op)); }
  Expr visit(const Reduce *op) override { return unless_changed(op, no_vector_form(op)); }
  Expr visit(const TensorLoad *op) override { return unless_changed(op, no_vector_form(op)); }

  Expr visit(const BufferLoad *op) override {
    Expr e = IRMutator::visit(op);
    const auto *load = e.as<BufferLoad>();
    record(load->buffer, load->indices, false);
    if (e.same_as(Expr(op)))
      return e;
    if (load->indices.size() != 1 || !is_dense_ramp(load->indices[0]))
      return fail(op, access_refusal("read of", load->buffer, load->indices));
    return e;
  }

  Stmt visit(const BufferStore *op) override {
    // A store of if_then_else(c, t, f) whose condition is the same in every lane (the zero
    // padding of an im2col tile) becomes a branch around two stores, so that the side taken is
    // a plain vector copy instead of a choice per lane.
    if (const auto *c = op->value.as<Call>();
        c && c->is_intrinsic(intrinsic::if_then_else) && c->args.size() == 3)
      if (Expr same = same_in_every_lane(c->args[0]); same.defined())
        return mutate(IfThenElse::make(same,
                                       BufferStore::make(op->buffer, c->args[1], op->indices),
                                       BufferStore::make(op->buffer, c->args[2], op->indices)));
    Expr value = mutate(op->value);
    std::vector<Expr> idx;
    mutate_all(op->indices, idx);
    // A store that does not move with the lanes would run once instead of once per lane.
    if (idx.size() != 1 || !is_dense_ramp(idx[0]))
      return fail(op, access_refusal("store to", op->buffer, idx));
    record(op->buffer, idx, true);
    return BufferStore::make(op->buffer, widen(value, lanes_), std::move(idx));
  }

  Stmt visit(const IfThenElse *op) override {
    Expr c = mutate(op->condition);
    if (!c.same_as(op->condition))
      return fail(op, {str("it is guarded by a condition that depends on it (",
                           op->condition, ")"),
                       "split by a factor that divides the extent, or with "
                       "TailStrategy::ShiftInwards, so that no guard is needed"});
    return IRMutator::visit(op);
  }

  Stmt visit(const LetStmt *op) override {
    Expr value = mutate(op->value);
    if (value.type().is_vector()) {
      Var v(op->var.name(), value.type());
      lets_[op->var.get()] = v;
      return LetStmt::make(v, value, mutate(op->body));
    }
    return IRMutator::visit(op);
  }

  Stmt visit(const AttrStmt *op) override {
    if (!mutate(op->value).same_as(op->value))
      return fail(op, {str("its attribute '", op->key, "' depends on it"), ""});
    return IRMutator::visit(op);
  }

  Stmt visit(const AssertStmt *op) override {
    if (!mutate(op->condition).same_as(op->condition))
      return fail(op, {"an assertion depends on it", ""});
    return IRMutator::visit(op);
  }

  // Loops, allocations and effects (intrinsic calls) stay scalar: the whole loop falls back.
  Stmt visit(const For *op) override {
    return fail(op, {str("its body has a loop (over '", op->loop_var->name, "')"),
                     "vectorize the innermost loop (reorder it inside)"});
  }
  Stmt visit(const Allocate *op) override {
    return fail(op, {str("its body allocates '", op->buffer_var->name, "'"),
                     "compute that stage outside the vectorized loop"});
  }
  Stmt visit(const BufferRealize *op) override {
    return fail(op, {str("its body allocates '", op->buffer.name(), "'"),
                     "compute that stage outside the vectorized loop"});
  }
  Stmt visit(const Evaluate *op) override {
    if (is_const(op->value))
      return op;
    const auto *call = op->value.as<Call>();
    return fail(op, {str("its body calls ", call ? call->name : std::string("an intrinsic"),
                         ", which has effects of its own"),
                     ""});
  }

private:
  struct Accesses {
    std::string name;
    bool written = false;
    llvm::SmallVector<Expr, 4> indices;
  };

  void refuse(Refusal r) {
    if (!failed_)
      refusal_ = std::move(r);
    failed_ = true;
  }
  Expr fail(const ExprNode *op, Refusal r) {
    refuse(std::move(r));
    return op;
  }
  Stmt fail(const StmtNode *op, Refusal r) {
    refuse(std::move(r));
    return op;
  }

  static Refusal no_vector_form(const ExprNode *op) {
    return {str("the expression ", Expr(op), " has no vector form"), ""};
  }

  template <typename T> Expr unless_changed(const T *op, Refusal r) {
    Expr e = IRMutator::visit(op);
    return e.same_as(Expr(op)) ? e : fail(op, std::move(r));
  }

  template <typename T> Expr rebuild(const T *op, const Expr &a, const Expr &b) {
    if (a.same_as(op->a) && b.same_as(op->b))
      return op;
    int lanes = std::max(a.type().lanes(), b.type().lanes());
    return T::make(widen(a, lanes), widen(b, lanes));
  }

  template <typename T> Expr binary(const T *op) {
    return rebuild(op, mutate(op->a), mutate(op->b));
  }

  // Commutative ops that keep a Ramp a Ramp when the other side is a scalar (or both are
  // Ramps, for Add), so indices like i * 16 + ramp(0, 1, 4) stay dense accesses.
  template <typename T, typename F> Expr ramp_arith(const T *op, F with_scalar) {
    Expr a = mutate(op->a), b = mutate(op->b);
    const auto *ra = a.as<Ramp>(), *rb = b.as<Ramp>();
    if (ra && b.type().is_scalar())
      return with_scalar(ra, b);
    if (rb && a.type().is_scalar())
      return with_scalar(rb, a);
    if (ra && rb && T::static_kind == IRNodeKind::Add)
      return Ramp::make(add(ra->base, rb->base), ra->stride + rb->stride, ra->lanes);
    return rebuild(op, a, b);
  }

  void record(const Buffer &b, const std::vector<Expr> &idx, bool write) {
    Accesses &acc = accesses_[b->data.get()];
    acc.name = b.name();
    acc.written |= write;
    acc.indices.push_back(idx.size() == 1 ? idx[0] : Expr());
    if (idx.size() != 1)
      refuse(access_refusal(write ? "store to" : "read of", b, idx));
  }

  const Variable *var_;
  Var loop_var_;
  Expr min_;
  int lanes_;
  Expr ramp_;
  bool failed_ = false;
  Refusal refusal_;
  llvm::DenseMap<const Variable *, Expr> lets_;
  llvm::DenseMap<const ExprNode *, Accesses> accesses_;
};

class LoopVectorizer : public IRMutator {
public:
  explicit LoopVectorizer(Remarks *remarks) : remarks_(remarks) {}

protected:
  Stmt visit(const For *op) override {
    Stmt s = IRMutator::visit(op); // inner loops first
    op = s.as<For>();
    if (op->for_kind != ForKind::Vectorized)
      return s;
    auto extent = as_const_int(op->extent);
    if (extent && *extent == 1)
      return substitute(op->body, op->loop_var, op->min);
    Stmt serial = For::make(op->loop_var, op->min, op->extent, ForKind::Serial, op->body);
    if (!extent) {
      report(op, Refusal{str("its extent (", op->extent, ") is not a constant"),
                         "split it by a constant factor and vectorize the inner loop"});
      return serial;
    }
    if (*extent < 2)
      return serial; // runs at most once
    Vectorizer v(op->loop_var, op->min, int(*extent));
    Stmt body = v.mutate(op->body);
    if (v.failed() || !v.lanes_independent()) {
      report(op, v.refusal());
      return serial;
    }
    report(op, std::nullopt);
    return body;
  }

private:
  // "vectorize of axis 'j.inner' of stage 'B' (4 lanes)": applied, or not and why.
  void report(const For *op, const std::optional<Refusal> &refusal) {
    if (!remarks_)
      return;
    std::string what = str("vectorize of axis '", op->loop_var->name, "'");
    if (std::string stage = first_written_buffer(op->body); !stage.empty())
      what += str(" of stage '", stage, "'");
    if (auto lanes = as_const_int(op->extent))
      what += str(" (", *lanes, " lanes)");
    if (!refusal)
      return remarks_->applied("vectorize_loops", what + ": applied");
    std::string fix = refusal->fix.empty()
                          ? "Drop vectorize"
                          : "To vectorize, " + refusal->fix + ", or drop vectorize";
    remarks_->missed("vectorize_loops", str(what, " not applied: ", refusal->why,
                                            "; it runs as a serial loop. ", fix));
  }

  Remarks *remarks_;
};

} // namespace

Stmt vectorize_loops(Stmt s, Remarks *remarks) { return LoopVectorizer(remarks).mutate(s); }

} // namespace tessel

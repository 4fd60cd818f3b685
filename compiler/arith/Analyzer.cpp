// The Analyzer: variable ranges, and the entry points into the interval analysis
// (ConstIntBound.cpp) and the simplifier (RewriteSimplify.cpp, SimplifyStmt.cpp).
#include "compiler/arith/Analyzer.h"

#include "compiler/arith/ConstIntBound.h"
#include "compiler/arith/Simplify.h"
#include "compiler/ir/IROperator.h"

namespace tessel::arith {

struct Analyzer::Impl {
  VarBounds ranges;
};

Analyzer::Analyzer() : impl_(new Impl) {}
Analyzer::~Analyzer() { delete impl_; }

void Analyzer::bind(const Var &v, const Range &r) {
  // Bounds of min and extent, so `bind(j, Range(i*4, 4))` with i known still bounds j.
  auto range = loop_var_bound(const_int_bound(r.min), const_int_bound(r.extent));
  if (range)
    bind(v, *range);
}
void Analyzer::bind(const Var &v, IntInterval iv) { impl_->ranges[v.get()] = iv; }
void Analyzer::unbind(const Var &v) { impl_->ranges.erase(v.get()); }

IntInterval Analyzer::const_int_bound(const Expr &e) {
  return arith::const_int_bound(e, impl_->ranges);
}

bool Analyzer::can_prove(const Expr &cond) { return is_one(simplify(cond)); }

Expr Analyzer::simplify(const Expr &e) { return Simplifier(impl_->ranges).mutate(e); }
Stmt Analyzer::simplify(const Stmt &s) { return Simplifier(impl_->ranges).mutate(s); }

Expr simplify(const Expr &e) { return Analyzer().simplify(e); }
Stmt simplify(const Stmt &s) { return Analyzer().simplify(s); }
bool can_prove(const Expr &cond) { return Analyzer().can_prove(cond); }

} // namespace tessel::arith

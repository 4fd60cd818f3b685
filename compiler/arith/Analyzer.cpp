// PLACEHOLDER implementation, replaced by the simplifier work: returns its input unchanged.
#include "compiler/arith/Analyzer.h"

#include "compiler/ir/IROperator.h"

namespace tessel::arith {

struct Analyzer::Impl {
  llvm::DenseMap<const Variable *, IntInterval> ranges;
};

Analyzer::Analyzer() : impl_(new Impl) {}
Analyzer::~Analyzer() { delete impl_; }

void Analyzer::bind(const Var &v, const Range &r) {
  auto lo = as_const_int(r.min), ext = as_const_int(r.extent);
  if (lo && ext)
    bind(v, IntInterval{*lo, *lo + *ext - 1});
}
void Analyzer::bind(const Var &v, IntInterval iv) { impl_->ranges[v.get()] = iv; }
void Analyzer::unbind(const Var &v) { impl_->ranges.erase(v.get()); }

IntInterval Analyzer::const_int_bound(const Expr &e) {
  if (auto v = as_const_int(e))
    return IntInterval::single(*v);
  if (const auto *var = e.as<Variable>()) {
    auto it = impl_->ranges.find(var);
    if (it != impl_->ranges.end())
      return it->second;
  }
  return IntInterval::everything();
}

bool Analyzer::can_prove(const Expr &cond) { return is_one(cond); }
Expr Analyzer::simplify(const Expr &e) { return e; }
Stmt Analyzer::simplify(const Stmt &s) { return s; }

Expr simplify(const Expr &e) { return Analyzer().simplify(e); }
Stmt simplify(const Stmt &s) { return Analyzer().simplify(s); }
bool can_prove(const Expr &cond) { return Analyzer().can_prove(cond); }

} // namespace tessel::arith

#include "compiler/arith/LinearForm.h"

#include "compiler/ir/IREquality.h"
#include "compiler/ir/IROperator.h"

namespace tessel {

namespace {

void add_term(LinearForm &f, const Expr &atom, int64_t c) {
  if (c == 0)
    return;
  for (auto it = f.terms.begin(); it != f.terms.end(); ++it) {
    if (structural_equal(it->first, atom)) {
      it->second += c;
      if (it->second == 0)
        f.terms.erase(it);
      return;
    }
  }
  f.terms.emplace_back(atom, c);
}

} // namespace

LinearForm LinearForm::from(const Expr &e) {
  LinearForm f;
  f.type = e.type();
  if (auto v = as_const_int(e)) {
    f.constant = *v;
    return f;
  }
  if (const auto *op = e.as<Add>())
    return from(op->a) + from(op->b);
  if (const auto *op = e.as<Sub>())
    return from(op->a) - from(op->b);
  if (const auto *op = e.as<Mul>()) {
    if (auto c = as_const_int(op->b))
      return from(op->a).scaled(*c);
    if (auto c = as_const_int(op->a))
      return from(op->b).scaled(*c);
  }
  add_term(f, e, 1);
  return f;
}

LinearForm LinearForm::operator+(const LinearForm &o) const {
  LinearForm r = *this;
  for (const auto &[atom, c] : o.terms)
    add_term(r, atom, c);
  r.constant += o.constant;
  return r;
}

LinearForm LinearForm::operator-(const LinearForm &o) const { return *this + o.scaled(-1); }

LinearForm LinearForm::scaled(int64_t c) const {
  LinearForm r;
  r.type = type;
  r.constant = constant * c;
  if (c != 0)
    for (const auto &[atom, k] : terms)
      r.terms.emplace_back(atom, k * c);
  return r;
}

int64_t LinearForm::coeff(const Expr &atom) const {
  for (const auto &[a, c] : terms)
    if (structural_equal(a, atom))
      return c;
  return 0;
}

Expr LinearForm::to_expr() const {
  Expr e;
  for (const auto &[atom, c] : terms) {
    Expr term = c == 1 ? atom : atom * make_const(type, c);
    e = e.defined() ? e + term : term;
  }
  if (!e.defined())
    return make_const(type, constant);
  if (constant > 0)
    return e + make_const(type, constant);
  if (constant < 0)
    return e - make_const(type, -constant);
  return e;
}

Expr linear_normalize(const Expr &e) { return LinearForm::from(e).to_expr(); }

} // namespace tessel

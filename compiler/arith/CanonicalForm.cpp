#include "compiler/arith/CanonicalForm.h"

#include "compiler/arith/IntEval.h"
#include "compiler/ir/IREquality.h"
#include "compiler/ir/IROperator.h"

#include <numeric>

namespace tessel::arith {

int64_t LinearForm::wrap(int64_t v) const {
  // Signed representation of the type's width: uint coefficients print as `- x` not `+ x*2^32-1`.
  return wrap_to_type(DataType(DataType::Int, type.bits()), v);
}

void LinearForm::add_term(const Expr &atom, int64_t coeff) {
  coeff = wrap(coeff);
  if (coeff == 0)
    return;
  for (auto it = terms.begin(); it != terms.end(); ++it) {
    if (structural_equal(it->first, atom)) {
      it->second = wrap(int64_t(uint64_t(it->second) + uint64_t(coeff)));
      if (it->second == 0)
        terms.erase(it);
      return;
    }
  }
  terms.emplace_back(atom, coeff);
}

void LinearForm::add(const LinearForm &other, int64_t scale) {
  for (const auto &[atom, c] : other.terms)
    add_term(atom, int64_t(uint64_t(c) * uint64_t(scale)));
  constant = wrap(int64_t(uint64_t(constant) + uint64_t(other.constant) * uint64_t(scale)));
}

int64_t LinearForm::coeff_of(const Expr &atom) const {
  for (const auto &[a, c] : terms)
    if (structural_equal(a, atom))
      return c;
  return 0;
}

int64_t coeff_gcd(const LinearForm &f) {
  int64_t g = 0;
  for (const auto &[atom, c] : f.terms) {
    if (c == INT64_MIN) // |c| does not fit; 1 is always a safe common divisor
      return 1;
    g = std::gcd(g, c);
  }
  return g;
}

namespace {

void collect(const Expr &e, int64_t scale, LinearForm &f);

// A product: constant factors become the coefficient; `(x*2) * (y*3)` is the atom x*y times 6.
void collect_mul(const Mul *op, int64_t scale, LinearForm &f) {
  if (auto c = as_const_int(op->b))
    return collect(op->a, int64_t(uint64_t(scale) * uint64_t(*c)), f);
  if (auto c = as_const_int(op->a))
    return collect(op->b, int64_t(uint64_t(scale) * uint64_t(*c)), f);
  LinearForm fa = linear_form(op->a), fb = linear_form(op->b);
  Expr a = op->a, b = op->b;
  int64_t k = 1;
  if (fa.terms.size() == 1 && fa.constant == 0 && fb.terms.size() == 1 && fb.constant == 0) {
    k = int64_t(uint64_t(fa.terms[0].second) * uint64_t(fb.terms[0].second));
    a = fa.terms[0].first;
    b = fb.terms[0].first;
  }
  // Products of two variables in name order, so that x*y and y*x are one atom.
  const auto *va = a.as<Variable>(), *vb = b.as<Variable>();
  if (va && vb && vb->name < va->name)
    std::swap(a, b);
  Expr atom = a.same_as(op->a) && b.same_as(op->b) ? Expr(op) : Mul::make(a, b);
  f.add_term(atom, int64_t(uint64_t(k) * uint64_t(scale)));
}

void collect(const Expr &e, int64_t scale, LinearForm &f) {
  if (auto c = as_const_int(e)) {
    f.constant = f.wrap(int64_t(uint64_t(f.constant) + uint64_t(*c) * uint64_t(scale)));
  } else if (const auto *op = e.as<Add>()) {
    collect(op->a, scale, f);
    collect(op->b, scale, f);
  } else if (const auto *op = e.as<Sub>()) {
    collect(op->a, scale, f);
    collect(op->b, int64_t(0 - uint64_t(scale)), f);
  } else if (const auto *op = e.as<Mul>()) {
    collect_mul(op, scale, f);
  } else {
    f.add_term(e, scale);
  }
}

// Finds the atoms floordiv(e, c) and floormod(e, c) of a positive constant c.
bool as_div_mod(const Expr &atom, bool want_div, Expr *e, int64_t *c) {
  Expr a, b;
  if (want_div) {
    const auto *d = atom.as<FloorDiv>();
    if (!d)
      return false;
    a = d->a, b = d->b;
  } else {
    const auto *m = atom.as<FloorMod>();
    if (!m)
      return false;
    a = m->a, b = m->b;
  }
  auto cb = as_const_int(b);
  if (!cb || *cb <= 0)
    return false;
  *e = a, *c = *cb;
  return true;
}

// True if k * linear_form(e) is part of f term by term (every term of e appears in f with
// exactly k times its coefficient), so that subtracting it removes those terms.
bool contains_scaled(const LinearForm &f, const LinearForm &e, int64_t k) {
  if (e.terms.empty())
    return false;
  for (const auto &[atom, c] : e.terms)
    if (f.coeff_of(atom) != f.wrap(int64_t(uint64_t(c) * uint64_t(k))))
      return false;
  return true;
}

// floormod(e, c) as the simplifier writes it when bounds do not decide it: without the terms
// that are multiples of c and with the constant reduced to [0, c).
Expr reduced_mod(const LinearForm &e, int64_t c) {
  LinearForm r(e.type);
  for (const auto &[atom, k] : e.terms)
    if (k % c != 0)
      r.add_term(atom, k);
  r.constant = floormod_int(e.constant, c);
  return FloorMod::make(to_expr(r), make_const(e.type, c));
}

// True if a - b is a constant multiple of c: then floormod(a, c) == floormod(b, c).
bool congruent(const LinearForm &a, const Expr &b, int64_t c) {
  LinearForm d = a;
  d.add(linear_form(b), -1);
  return d.is_constant() && d.constant % c == 0;
}

// Recombines what splitting an index produces: floordiv(e, c)*c*m + floormod(e', c)*m -> e*m
// when e' = e (mod c), and e*m - floordiv(e, c)*c*m -> floormod(e, c)*m. Both identities hold
// for every e.
bool merge_div_mod(LinearForm &f) {
  for (size_t i = 0; i < f.terms.size(); ++i) {
    Expr div = f.terms[i].first; // copies: the terms change below
    int64_t k = f.terms[i].second;
    Expr e;
    int64_t c;
    if (!as_div_mod(div, true, &e, &c) || k % c != 0)
      continue;
    int64_t m = k / c; // the multiple of e or floormod(e, c) that pairs with k*floordiv(e, c)
    LinearForm le = linear_form(e);
    for (size_t j = 0; j < f.terms.size(); ++j) {
      Expr mod = f.terms[j].first, e2;
      int64_t c2;
      if (f.terms[j].second != m || !as_div_mod(mod, false, &e2, &c2) || c2 != c ||
          !congruent(le, e2, c))
        continue;
      f.add_term(div, -k);
      f.add_term(mod, -m);
      f.add(le, m);
      return true;
    }
    if (contains_scaled(f, le, -m)) {
      f.add_term(div, -k);
      f.add(le, m);
      f.add_term(reduced_mod(le, c), -m);
      return true;
    }
  }
  return false;
}

} // namespace

std::optional<Expr> as_nonpositive(const Expr &c) {
  auto integer = [](const Expr &a) { return a.type().is_scalar() && a.type().is_int(); };
  auto one = [](const Expr &a) { return make_const(a.type(), 1); };
  if (const auto *op = c.as<LE>(); op && integer(op->a))
    return op->a - op->b;
  if (const auto *op = c.as<LT>(); op && integer(op->a))
    return op->a - op->b + one(op->a);
  if (const auto *op = c.as<GE>(); op && integer(op->a))
    return op->b - op->a;
  if (const auto *op = c.as<GT>(); op && integer(op->a))
    return op->b - op->a + one(op->a);
  return std::nullopt;
}

LinearForm linear_form(const Expr &e) {
  LinearForm f(e.type());
  collect(e, 1, f);
  while (merge_div_mod(f)) {
  }
  return f;
}

Expr to_expr(const LinearForm &f) {
  DataType t = f.type;
  auto scaled = [&](const Expr &atom, int64_t c) {
    return c == 1 ? atom : Mul::make(atom, IntImm::make(t, c));
  };
  Expr sum;
  bool constant_done = false;
  for (const auto &[atom, c] : f.terms)
    if (c > 0)
      sum = sum.defined() ? Add::make(sum, scaled(atom, c)) : scaled(atom, c);
  for (const auto &[atom, c] : f.terms) {
    if (c > 0)
      continue;
    if (!sum.defined() && f.constant > 0) {
      sum = IntImm::make(t, f.constant); // `16 - x` reads better than `x*-1 + 16`
      constant_done = true;
    }
    if (!sum.defined())
      sum = scaled(atom, c);
    else if (c == INT64_MIN)
      sum = Add::make(sum, scaled(atom, c));
    else
      sum = Sub::make(sum, scaled(atom, -c));
  }
  if (!sum.defined())
    return IntImm::make(t, f.constant);
  if (constant_done)
    return sum;
  if (f.constant > 0)
    return Add::make(sum, IntImm::make(t, f.constant));
  if (f.constant < 0 && f.constant != INT64_MIN)
    return Sub::make(sum, IntImm::make(t, -f.constant));
  if (f.constant == INT64_MIN)
    return Add::make(sum, IntImm::make(t, f.constant));
  return sum;
}

Expr canonical_sum(const Expr &e) { return to_expr(linear_form(e)); }

} // namespace tessel::arith

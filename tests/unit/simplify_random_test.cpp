// Randomized checks of the simplifier and the interval analysis against direct evaluation.
//
// Thousands of random integer expressions over a few variables with small ranges are simplified
// under those ranges, then the original and the simplified expression are evaluated at random
// points of the ranges: they must agree, the bounds of each must contain its values, and
// whatever can_prove proves must hold. A failure prints both expressions and the point.
#include "compiler/arith/Analyzer.h"
#include "compiler/arith/IntEval.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>

using namespace tessel;
using arith::Analyzer;
using arith::IntInterval;
using arith::VarValues;

namespace {

class ExprGen {
public:
  explicit ExprGen(uint64_t seed, DataType t = Int(32)) : t_(t), rng_(seed) {
    // Ranges chosen so that index-like patterns (x*16 + y with y in [0, 16)) occur often.
    add_var("x", 0, 15);
    add_var("y", 0, 15);
    add_var("z", t.is_int() ? -8 : 0, 7);
    add_var("w", 0, 3);
  }

  std::vector<Var> vars;
  std::vector<IntInterval> ranges;

  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool chance(int percent) { return uniform(0, 99) < percent; }

  Expr constant() {
    static const int64_t interesting[] = {0, 1, 2, 3, 4, 8, 15, 16, 17, 32, 64, -1, -2, -16};
    int64_t v = chance(50) ? interesting[uniform(0, std::size(interesting) - 1)] : uniform(-20, 20);
    return make_const(t_, t_.is_int() ? v : std::abs(v));
  }

  Expr divisor() {
    static const int64_t divisors[] = {1, 2, 3, 4, 4, 8, 8, 16, 16, 32, 5, 7, -1, -2, -3, -4, -16};
    int64_t v = divisors[uniform(0, std::size(divisors) - 1)];
    return make_const(t_, t_.is_int() ? v : std::abs(v));
  }

  Expr leaf() { return chance(65) ? Expr(vars[uniform(0, vars.size() - 1)]) : constant(); }

  Expr int_expr(int depth) {
    if (depth == 0 || chance(15))
      return leaf();
    int d = depth - 1;
    switch (uniform(0, 13)) {
    case 0:
    case 1:
      return Add::make(int_expr(d), int_expr(d));
    case 2:
      return Sub::make(int_expr(d), int_expr(d));
    case 3:
      return Mul::make(int_expr(d), chance(70) ? constant() : int_expr(d));
    case 4: // index-like: a * c + b
      return Add::make(Mul::make(int_expr(d), divisor()), int_expr(d));
    case 5:
    case 6:
      return FloorDiv::make(int_expr(d), divisor());
    case 7:
    case 8:
      return FloorMod::make(int_expr(d), divisor());
    case 9:
      return chance(50) ? Div::make(int_expr(d), divisor()) : Mod::make(int_expr(d), divisor());
    case 10:
      return Min::make(int_expr(d), int_expr(d));
    case 11:
      return Max::make(int_expr(d), int_expr(d));
    case 12:
      return Select::make(bool_expr(d), int_expr(d), int_expr(d));
    default: // widening and narrowing back
      if (t_.bits() < 64)
        return Cast::make(t_, Cast::make(Int(64), int_expr(d)));
      return Cast::make(t_, Cast::make(Int(32), Cast::make(t_, int_expr(d))));
    }
  }

  Expr bool_expr(int depth) {
    int d = std::max(depth - 1, 0);
    if (depth > 1 && chance(20)) {
      switch (uniform(0, 2)) {
      case 0:
        return And::make(bool_expr(d), bool_expr(d));
      case 1:
        return Or::make(bool_expr(d), bool_expr(d));
      default:
        return Not::make(bool_expr(d));
      }
    }
    Expr a = int_expr(d), b = int_expr(d);
    switch (uniform(0, 5)) {
    case 0:
      return EQ::make(a, b);
    case 1:
      return NE::make(a, b);
    case 2:
      return LT::make(a, b);
    case 3:
      return LE::make(a, b);
    case 4:
      return GT::make(a, b);
    default:
      return GE::make(a, b);
    }
  }

  VarValues point() {
    VarValues p;
    for (size_t i = 0; i < vars.size(); ++i)
      p[vars[i].get()] = uniform(ranges[i].min, ranges[i].max);
    return p;
  }

  void bind_all(Analyzer &an) {
    for (size_t i = 0; i < vars.size(); ++i)
      an.bind(vars[i], ranges[i]);
  }

  std::string describe(const VarValues &p) {
    std::ostringstream os;
    for (const Var &v : vars)
      os << v.name() << " = " << p.lookup(v.get()) << "  ";
    return os.str();
  }

private:
  DataType t_;
  void add_var(const char *name, int64_t lo, int64_t hi) {
    vars.emplace_back(name, t_);
    ranges.push_back({lo, hi});
  }
  std::mt19937_64 rng_;
};

int count_nodes(const Expr &e) {
  int n = 0;
  post_order_visit(e, [&](const IRNode *) { ++n; });
  return n;
}

constexpr int kCases = 6000;
constexpr int kPointsPerCase = 24;
constexpr int kMaxReported = 5;

} // namespace

// Simplifies `cases` random expressions of type t (with the variable ranges known to the
// analyzer or not) and compares them with the originals at random points.
void check_simplify(DataType t, bool ranges_known, uint64_t seed, int cases) {
  ExprGen gen(seed, t);
  Analyzer an;
  if (ranges_known)
    gen.bind_all(an);
  // Signed overflow is outside what the simplifier promises; unsigned wrap-around is not.
  bool skip_overflow = t.is_int();
  int compared = 0, overflowed = 0, failures = 0, before = 0, after = 0;
  for (int n = 0; n < cases && failures < kMaxReported; ++n) {
    Expr e = n % 4 == 3 ? gen.bool_expr(5) : gen.int_expr(5);
    Expr s = an.simplify(e);
    ASSERT_EQ(s.type(), e.type()) << to_string(e) << "\n  -> " << to_string(s);
    before += count_nodes(e);
    after += count_nodes(s);
    for (int k = 0; k < kPointsPerCase; ++k) {
      VarValues p = gen.point();
      bool of = false;
      auto want = arith::eval_int(e, p, &of);
      ASSERT_TRUE(want) << "cannot evaluate " << to_string(e);
      if (of && skip_overflow) {
        ++overflowed;
        continue;
      }
      auto got = arith::eval_int(s, p);
      ++compared;
      if (!got || *got != *want) {
        ADD_FAILURE() << "simplification changed the value (" << t
                      << (ranges_known ? ", ranges known" : "")
                      << ")\n  original:   " << to_string(e) << "\n  simplified: " << to_string(s)
                      << "\n  at " << gen.describe(p) << "\n  original = " << *want
                      << ", simplified = " << (got ? std::to_string(*got) : "<no value>");
        ++failures;
        break;
      }
    }
  }
  std::cout << "[ stats    ] " << t << (ranges_known ? " (ranges known): " : ": ") << cases
            << " expressions, " << compared << " points compared, " << overflowed
            << " skipped (signed overflow); nodes " << before << " -> " << after << "\n";
}

TEST(SimplifyRandom, SimplifiedEqualsOriginal) { check_simplify(Int(32), true, 20261122, kCases); }
TEST(SimplifyRandom, SimplifiedEqualsOriginalWithoutRanges) {
  check_simplify(Int(32), false, 31337, kCases / 2);
}
TEST(SimplifyRandom, SimplifiedEqualsOriginalInt64) {
  check_simplify(Int(64), true, 64, kCases / 3);
}
TEST(SimplifyRandom, SimplifiedEqualsOriginalUInt32) {
  check_simplify(UInt(32), true, 32, kCases / 3);
  check_simplify(UInt(32), false, 33, kCases / 3);
}

TEST(SimplifyRandom, SimplifyIsIdempotentMostly) {
  // A second simplification should rarely find more to do; report how often it does.
  ExprGen gen(7);
  Analyzer an;
  gen.bind_all(an);
  int changed = 0;
  for (int n = 0; n < 2000; ++n) {
    Expr s = an.simplify(gen.int_expr(5));
    Expr s2 = an.simplify(s);
    if (to_string(s) != to_string(s2))
      ++changed;
  }
  std::cout << "[ stats    ] not idempotent in " << changed << " of 2000\n";
  EXPECT_LT(changed, 2000 / 20);
}

TEST(ConstIntBoundRandom, BoundsContainEveryValue) {
  ExprGen gen(424242);
  Analyzer an;
  gen.bind_all(an);
  int failures = 0, bounded = 0;
  for (int n = 0; n < kCases && failures < kMaxReported; ++n) {
    Expr e = gen.int_expr(5);
    Expr s = an.simplify(e);
    IntInterval be = an.const_int_bound(e), bs = an.const_int_bound(s);
    bounded += be.bounded();
    for (int k = 0; k < kPointsPerCase; ++k) {
      VarValues p = gen.point();
      auto v = arith::eval_int(e, p);
      auto vs = arith::eval_int(s, p);
      ASSERT_TRUE(v && vs);
      // Bounds hold under wrap-around too, so no point is skipped here.
      if (*v < be.min || *v > be.max) {
        ADD_FAILURE() << "value " << *v << " outside [" << be.min << ", " << be.max << "] of "
                      << to_string(e) << "\n  at " << gen.describe(p);
        ++failures;
        break;
      }
      if (*vs < bs.min || *vs > bs.max) {
        ADD_FAILURE() << "value " << *vs << " outside [" << bs.min << ", " << bs.max << "] of "
                      << to_string(s) << " (simplified from " << to_string(e) << ")\n  at "
                      << gen.describe(p);
        ++failures;
        break;
      }
    }
  }
  std::cout << "[ stats    ] " << bounded << " of " << kCases << " bounds finite\n";
}

TEST(SimplifyRandom, CanProveIsNeverWrong) {
  ExprGen gen(99);
  Analyzer an;
  gen.bind_all(an);
  int proven = 0, failures = 0;
  for (int n = 0; n < kCases && failures < kMaxReported; ++n) {
    Expr c = gen.bool_expr(4);
    if (!an.can_prove(c))
      continue;
    ++proven;
    for (int k = 0; k < 4 * kPointsPerCase; ++k) {
      VarValues p = gen.point();
      bool of = false;
      auto v = arith::eval_int(c, p, &of);
      ASSERT_TRUE(v);
      if (!of && !*v) {
        ADD_FAILURE() << "proved but false: " << to_string(c)
                      << "\n  simplified: " << to_string(an.simplify(c)) << "\n  at "
                      << gen.describe(p);
        ++failures;
        break;
      }
    }
  }
  std::cout << "[ stats    ] proved " << proven << " of " << kCases << " conditions\n";
  EXPECT_GT(proven, 100);
}

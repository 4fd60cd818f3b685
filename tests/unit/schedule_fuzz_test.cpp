// A schedule fuzzer: random programs (elementwise chains, row reductions, GEMM-like
// contractions, some of both over part of their axis (causal, anti-causal, banded: `where`),
// stencils over padded inputs) under random schedules (splits that do and do not
// divide, fuse, reorder, bind to blocks and threads, cache_read / cache_write into shared and
// local, compute_at, compute_inline, vectorize, unroll, reductions across threads, rfactor),
// each run on the CPU executor against the float64 reference. A case passes when its result is within the
// tolerance or when tessel refuses it with a tessel::Error that names a stage; an internal error
// or a wrong result fails it, printing the seed and the schedule it drew. CI runs a fixed set;
//
//   TESSEL_RANDOM_CASES=2000 ./build/tests/tessel_tests --gtest_filter='ScheduleFuzz.*'
//   TESSEL_RANDOM_SEED=1234 ./build/tests/tessel_tests --gtest_filter='ScheduleFuzz.*'  # replay
//   TESSEL_FUZZ_VERBOSE=1 ...      # print every refusal with its schedule (2: every case)
// (TESSEL_RANDOM_CASES and TESSEL_RANDOM_SEED are what every randomized test reads.)
#include "TestUtil.h"

#include "compiler/tessel.h"
#include "runtime/Check.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <regex>
#include <sstream>

using namespace tessel;

namespace {

class Fuzzer {
public:
  explicit Fuzzer(uint64_t seed) : rng_(seed) {}

  int64_t in(int64_t lo, int64_t hi) { return lo + int64_t(rng_() % uint64_t(hi - lo + 1)); }
  bool coin(int percent = 50) { return int64_t(rng_() % 100) < percent; }
  template <typename T> T one_of(std::initializer_list<T> v) {
    return *(v.begin() + rng_() % v.size());
  }
  std::ostringstream log;

  // Splits `iv` of `st` by a random factor (dividing or not, sometimes past the extent).
  std::pair<IterVar, IterVar> split(Stage st, const IterVar &iv, int64_t extent,
                                    std::initializer_list<int64_t> factors) {
    int64_t f = coin(30) ? std::max<int64_t>(1, extent / in(1, 4)) : one_of(factors);
    log << "  s[" << st.name() << "].split(" << iv.name() << ", " << f << ")\n";
    return st.split(iv, f);
  }
  void bind(Stage st, const IterVar &iv, const char *tag) {
    log << "  s[" << st.name() << "].bind(" << iv.name() << ", " << tag << ")\n";
    st.bind(iv, thread_axis(tag));
  }

private:
  std::mt19937_64 rng_;
};

struct Program {
  std::vector<Tensor> inputs;
  std::vector<Tensor> middle; ///< intermediate stages, producers first
  Tensor out;
  std::string what;
};

// A random definition over small shapes.
Program random_program(Fuzzer &f) {
  Program p;
  const int M = int(f.in(1, 24)), N = int(f.in(1, 40)), K = int(f.in(1, 33));
  const DataType in = f.one_of({Float(32), Float(16)});
  auto widen = [](Expr e) { return e.type() == Float(32) ? e : e.astype(Float(32)); };
  // Reductions over part of their axis (causal, anti-causal, banded): the predicate is chosen
  // from the shape, not drawn, so that the schedules drawn for a seed stay what they were.
  const int kind = (M * 7 + N * 3 + K) % 4, off = (M + K) % 5 - 2;
  auto where = [&](Var i, const IterVar &k) -> Expr {
    switch (kind) {
    case 1: return k.var() <= i + off;
    case 2: return k.var() >= i - off;
    case 3: return k.var() > i - 4 && k.var() <= i + off + 4;
    default: return Expr();
    }
  };
  const std::string where_name[] = {"", " where k <= i + off", " where k >= i - off",
                                    " where i - 4 < k <= i + off + 4"};
  // Inputs laid out compact, with rows padded to 3 more elements, or column-major (strided
  // placeholders), chosen from the shape likewise.
  const int layout = (M * 5 + N + K * 3) % 3;
  auto input = [&](int rows, int cols, const char *name) {
    switch (layout) {
    case 1: return placeholder({rows, cols}, in, name, {cols + 3, 1});
    case 2: return placeholder({rows, cols}, in, name, {1, rows});
    default: return placeholder({rows, cols}, in, name);
    }
  };
  const char *layout_name[] = {"", " (inputs' rows padded)", " (inputs column-major)"};
  switch (f.in(0, 3)) {
  case 0: { // elementwise chain
    Tensor A = input(M, N, "A"), B = input(M, N, "B");
    Tensor T1 = compute({M, N}, [&](Var i, Var j) { return widen(A(i, j)) * 0.5f + widen(B(i, j)); }, "T1");
    Tensor T2 = compute({M, N}, [&](Var i, Var j) { return max(T1(i, j), 0.0f) - widen(B(i, j)); }, "T2");
    p.out = compute({M, N}, [&](Var i, Var j) { return T2(i, j) * T1(i, j) + 1.0f; }, "out");
    p.inputs = {A, B};
    p.middle = {T1, T2};
    p.what = "elementwise " + std::to_string(M) + "x" + std::to_string(N);
    break;
  }
  case 1: { // a row reduction feeding an elementwise stage
    Tensor A = input(M, K, "A");
    IterVar k = reduce_axis({0, K}, "k");
    bool use_max = f.coin();
    Tensor R = compute({M}, [&](Var i) {
      return use_max ? max(widen(A(i, k)), {k}, where(i, k))
                     : sum(widen(A(i, k)) * widen(A(i, k)), {k}, where(i, k));
    }, "R");
    p.out = compute({M, K}, [&](Var i, Var j) { return widen(A(i, j)) - R(i); }, "out");
    p.inputs = {A};
    p.middle = {R};
    p.what = std::string(use_max ? "row max " : "row sum ") + std::to_string(M) + "x" +
             std::to_string(K) + where_name[kind] + " (off " + std::to_string(off) + ")";
    break;
  }
  case 2: { // GEMM-like
    Tensor A = input(M, K, "A"), B = input(K, N, "B");
    IterVar k = reduce_axis({0, K}, "k");
    p.out = compute({M, N}, [&](Var i, Var j) {
      return sum(widen(A(i, k)) * widen(B(k, j)), {k}, where(i, k));
    }, "out");
    p.inputs = {A, B};
    p.what = "gemm " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
             where_name[kind] + " (off " + std::to_string(off) + ")";
    break;
  }
  default: { // a 3-point stencil over a zero-padded input
    Tensor A = input(M, N, "A");
    Tensor P = compute({M + 2, N + 2}, [&](Var i, Var j) {
      return if_then_else(all({i >= 1, i <= M, j >= 1, j <= N}), widen(A(i - 1, j - 1)), 0.0f);
    }, "P");
    p.out = compute({M, N}, [&](Var i, Var j) {
      return P(i, j + 1) + P(i + 1, j + 1) * 2.0f - P(i + 2, j + 1) + P(i + 1, j);
    }, "out");
    p.inputs = {A};
    p.middle = {P};
    p.what = "stencil " + std::to_string(M) + "x" + std::to_string(N);
    break;
  }
  }
  p.what += std::string(" ") + (in == Float(32) ? "float32" : "float16") + layout_name[layout];
  return p;
}

int64_t extent_of(const IterVar &iv) { return *as_const_int(iv->dom.extent); }

// Random schedule of the output stage: the loops the middle stages may attach at.
struct OutLoops {
  IterVar block;  ///< the innermost block-level loop (undefined: none)
  IterVar thread; ///< the innermost thread-level loop (undefined: none)
  int64_t tx = 0; ///< threadIdx.x extent bound (0: none)
};

OutLoops schedule_output(Fuzzer &f, Schedule &s, const Program &p) {
  OutLoops o;
  Stage st = s[p.out];
  std::vector<IterVar> axes = st.op_axis();
  IterVar i = axes[0], j = axes[1];
  if (f.coin(25)) { // one thread, one block: just loops
    if (f.coin())
      st.unroll(st.leaf_iter_vars().back()), f.log << "  s[out].unroll(inner)\n";
    return o;
  }
  if (f.coin(30)) { // fuse, then one level of blocks x threads
    IterVar fused = st.fuse(i, j);
    f.log << "  s[out].fuse(i, j)\n";
    auto [b, t] = f.split(st, fused, extent_of(i) * extent_of(j), {32, 64, 17, 128});
    f.bind(st, b, "blockIdx.x");
    f.bind(st, t, "threadIdx.x");
    o.block = b;
    o.thread = t;
    o.tx = 1;
    return o;
  }
  auto [io, ii] = f.split(st, i, extent_of(i), {1, 2, 4, 5, 8});
  auto [jo, ji] = f.split(st, j, extent_of(j), {4, 8, 16, 32, 7});
  f.log << "  s[out].reorder(i.outer, j.outer, i.inner, j.inner)\n";
  st.reorder({io, jo, ii, ji});
  if (f.coin(80)) { // else one block, its tile loops serial
    f.bind(st, io, "blockIdx.y");
    f.bind(st, jo, "blockIdx.x");
  }
  o.block = jo;
  if (f.coin(70)) {
    f.bind(st, ji, "threadIdx.x");
    f.bind(st, ii, "threadIdx.y");
    o.thread = ji;
    o.tx = 1;
  } else if (f.coin()) {
    auto [jio, jii] = f.split(st, ji, 8, {2, 4});
    if (f.coin()) {
      f.log << "  s[out].vectorize(" << jii.name() << ")\n";
      st.vectorize(jii);
    } else {
      f.log << "  s[out].unroll(" << jii.name() << ")\n";
      st.unroll(jii);
    }
  }
  return o;
}

// Binds a stage computed at a block-level loop to the threads, fusing its axes: the threads
// cooperate on its region instead of each computing all of it.
void share_among_threads(Fuzzer &f, Schedule &s, const Tensor &t) {
  Stage st = s[t];
  IterVar fused = st.op_axis().size() == 1 ? st.op_axis()[0] : st.fuse(st.op_axis());
  auto [o, x] = st.split(fused, f.one_of<int64_t>({8, 16, 32}));
  auto [oo, y] = st.split(o, 1);
  f.log << "  s[" << t.name() << "]: fuse all, split, bind threadIdx.x / threadIdx.y (extent 1)\n";
  st.bind(x, thread_axis("threadIdx.x"));
  st.bind(y, thread_axis("threadIdx.y"));
  (void)oo;
}

void schedule_middle(Fuzzer &f, Schedule &s, const Program &p, const OutLoops &o,
                     const Tensor &t) {
  Stage st = s[t];
  bool reduction = !st.reduce_axis().empty();
  int choice = int(f.in(0, 4));
  if (choice == 0 && !reduction) {
    f.log << "  s[" << t.name() << "].compute_inline()\n";
    st.compute_inline();
    return;
  }
  if (choice == 4 && o.tx && !reduction) { // at the root, in shared memory: every block's copy
    f.log << "  " << t.name() << " at the root, shared\n";
    st.set_scope("shared");
    share_among_threads(f, s, t);
    return;
  }
  if (choice == 1 || !o.block.defined()) { // its own kernel (a workspace)
    f.log << "  " << t.name() << " at the root\n";
    std::vector<IterVar> axes = st.op_axis();
    auto [b, x] = f.split(st, axes[0], extent_of(axes[0]), {1, 4, 16});
    f.bind(st, b, "blockIdx.x");
    if (reduction && f.coin(30)) { // across threads
      auto [ko, ki] = st.split(st.reduce_axis()[0], f.one_of<int64_t>({2, 8, 32}));
      f.log << "  s[" << t.name() << "]: reduce axis split, inner bound to threadIdx.x\n";
      f.bind(st, ki, "threadIdx.x");
      (void)ko;
      (void)x;
    } else if (reduction && f.coin(40)) { // rfactor, then across threads
      auto [ko, ki] = st.split(st.reduce_axis()[0], f.one_of<int64_t>({4, 16, 64}));
      Tensor rf = s.rfactor(t, ki);
      f.log << "  " << rf.name() << " = rfactor(" << t.name() << ", k.inner), computed per thread\n";
      f.bind(st, st.reduce_axis()[0], "threadIdx.x");
      s[rf].compute_at(st, st.reduce_axis()[0]);
      s[rf].set_scope("local");
      (void)ko;
      (void)x;
    } else {
      f.bind(st, x, "threadIdx.x");
    }
    return;
  }
  if (choice == 2 && o.thread.defined()) { // per thread, in registers
    f.log << "  s[" << t.name() << "].compute_at(s[out], " << o.thread.name() << "), local\n";
    st.compute_at(s[p.out], o.thread);
    st.set_scope("local");
    return;
  }
  // At the block, in shared memory, the block's threads cooperating.
  f.log << "  s[" << t.name() << "].compute_at(s[out], " << o.block.name() << "), shared\n";
  st.compute_at(s[p.out], o.block);
  st.set_scope("shared");
  if (o.tx)
    share_among_threads(f, s, t);
}

// Caches of the inputs and of the output (GEMM: tiles of A and B in shared memory per k step,
// the accumulator in registers); `cl` is the output's cache_write stage, made before the
// output was scheduled.
void schedule_caches(Fuzzer &f, Schedule &s, const Program &p, const OutLoops &o,
                     const Tensor &cl) {
  if (!o.thread.defined()) {
    f.log << "  out.local at the root\n";
    return;
  }
  f.log << "  out.local computed at " << o.thread.name() << "\n";
  s[cl].compute_at(s[p.out], o.thread);
  auto [ko, ki] = s[cl].split(s[cl].reduce_axis()[0], f.one_of<int64_t>({4, 8, 5}));
  f.log << "  s[out.local].split(k) -> k.outer, k.inner\n";
  (void)ki;
  if (!f.coin(60))
    return;
  for (const Tensor &in : p.inputs) {
    Tensor c = s.cache_read(in, "shared", {cl});
    f.log << "  " << in.name() << ".shared = cache_read(" << in.name() << "), at k.outer\n";
    s[c].compute_at(s[cl], ko);
    share_among_threads(f, s, c);
  }
}

std::vector<uint64_t> fuzz_seeds() { return test::random_seeds(300, 20261124); }

} // namespace

TEST(ScheduleFuzz, RandomProgramsAndSchedulesAreCorrectOrRefused) {
  int ran = 0, refused = 0, batched = 0;
  for (uint64_t seed : fuzz_seeds()) {
    Fuzzer f(seed);
    Program p = random_program(f);
    std::string replay = "TESSEL_RANDOM_SEED=" + std::to_string(seed) +
                         " ./build/tests/tessel_tests --gtest_filter='ScheduleFuzz.*'";
    try {
      Schedule s = create_schedule({p.out});
      Tensor cl;
      if (!s[p.out].reduce_axis().empty() && f.coin(70)) {
        cl = s.cache_write(p.out, "local");
        f.log << "  out.local = cache_write(out, local)\n";
      }
      OutLoops o = schedule_output(f, s, p);
      for (auto it = p.middle.rbegin(); it != p.middle.rend(); ++it)
        schedule_middle(f, s, p, o, *it);
      if (cl.defined())
        schedule_caches(f, s, p, o, cl);
      std::vector<Tensor> args = p.inputs;
      args.push_back(p.out);
      // Reductions across threads whose inner loops combine in one exchange (with a count).
      static const std::regex with_count(
          R"(@thread_allreduce\("[a-z]+", @address_of\([^)]*\), [0-9]+, [0-9]+\))");
      const std::string ir = to_string(lower(s, args));
      batched += int(std::distance(std::sregex_iterator(ir.begin(), ir.end(), with_count),
                                   std::sregex_iterator()));
      CheckResult r = check_on_cpu(s, args, p.inputs.size(), seed);
      EXPECT_TRUE(r.compare.ok) << "seed " << seed << ": " << p.what << "\n"
                                << f.log.str() << r.str() << "\nreplay: " << replay;
      if (const char *v = std::getenv("TESSEL_FUZZ_VERBOSE"); v && std::string(v) == "2")
        std::cout << "seed " << seed << " ran: " << p.what << "\n" << f.log.str();
      ++ran;
    } catch (const Error &e) {
      // A refusal: it must say which stage (or loop) to change.
      std::string msg = e.what();
      bool named = msg.find("'") != std::string::npos;
      EXPECT_TRUE(named) << "seed " << seed << ": a refusal that names nothing: " << msg << "\n"
                         << f.log.str() << "replay: " << replay;
      ++refused;
      if (test::replaying_one_seed() || std::getenv("TESSEL_FUZZ_VERBOSE"))
        std::cout << "seed " << seed << " refused: " << msg << "\n" << f.log.str();
    } catch (const InternalError &e) {
      ADD_FAILURE() << "seed " << seed << ": internal error: " << e.what() << "\n"
                    << p.what << "\n" << f.log.str() << "replay: " << replay;
    }
  }
  std::cout << "  " << ran << " cases ran and matched, " << refused << " refused; "
            << batched << " batched allreduces\n";
  // The generator must mostly draw schedules tessel takes, or it tests little. (Not of one
  // replayed seed: a refusal, printed above, is then the answer.)
  if (!test::replaying_one_seed()) {
    EXPECT_GT(ran, 2 * refused);
  }
  // The fixed set draws batched reductions across threads (ScheduleOps' batched_leaves_begin).
  if (!std::getenv("TESSEL_RANDOM_CASES") && !test::replaying_one_seed()) {
    EXPECT_GT(batched, 0);
  }
}

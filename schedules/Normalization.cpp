#include "schedules/Normalization.h"

#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"

namespace tessel {

namespace {

// The tiles for rows of `cols`: enough threads that each takes about 4 vectors of the row, at
// most one per vector and 1024.
RowTiles resolve(const char *name, int64_t cols, DataType dtype, RowTiles t) {
  user_check(dtype.is_float() && dtype.bits() == 16, name)
      << name << " takes float16 or bfloat16 rows, got " << dtype;
  user_check(t.vector == 1 || t.vector == 2 || t.vector == 4 || t.vector == 8, name)
      << name << ": vector must be 1, 2, 4 or 8 elements, got " << t.vector;
  user_check(cols % t.vector == 0, name)
      << name << ": rows of " << cols << " elements are not whole vectors of " << t.vector
      << "; choose a vector width dividing the row (V=1 takes any row)";
  const int64_t vectors = cols / t.vector;
  if (t.threads == 0) {
    t.threads = 1;
    while (t.threads < 1024 && int64_t(t.threads) * 2 <= vectors &&
           (t.threads < 32 || int64_t(t.threads) * 4 < vectors))
      t.threads *= 2;
  }
  user_check(t.threads >= 1 && t.threads <= 1024 && (t.threads & (t.threads - 1)) == 0, name)
      << name << ": threads must be a power of two up to 1024, got " << t.threads;
  user_check(t.threads <= vectors, name)
      << name << ": " << t.threads << " threads for rows of " << vectors << " vectors of "
      << t.vector << "; take at most one thread per vector (T=0 chooses)";
  return t;
}

// The output stage: i on blockIdx.x, j as (outer, threadIdx.x, vector lanes); computed in
// registers (a local stage at the thread's vector) and stored as one vector, its inputs `vecs`
// (x, gamma, ...) read into registers as vectors.
void schedule_row(Schedule &s, const Tensor &y, const std::vector<Tensor> &vecs,
                  const RowTiles &t) {
  Tensor yl = s.cache_write(y, "local");
  auto [i, j] = s[y].axes<2>();
  auto [jo, jv] = s[y].split(j, t.vector);
  auto [jr, jt] = s[y].split(jo, t.threads);
  s[y].bind(i, thread_axis("blockIdx.x"));
  s[y].bind(jt, thread_axis("threadIdx.x"));
  s[y].reorder({i, jr, jt, jv});
  s[yl].compute_at(s[y], jt);
  s[yl].unroll(s[yl].leaf_iter_vars().back());
  for (const Tensor &in : vecs) {
    Tensor r = s.cache_read(in, "local", {yl});
    s[r].compute_at(s[y], jt);
    if (t.vector > 1)
      s[r].vectorize(s[r].leaf_iter_vars().back());
  }
  if (t.vector > 1)
    s[y].vectorize(jv);
}

// A row reduction computed at y's row: local, its loop split as y's (the threads' share of
// vectors across threadIdx.x), each vector of x read into registers at once.
void schedule_row_reduction(Schedule &s, const Tensor &r, const Tensor &x, const Tensor &y,
                            const RowTiles &t) {
  Tensor xr = s.cache_read(x, "local", {r});
  s[r].compute_at(s[y], s[y].leaf_iter_vars()[0]);
  s[r].set_scope("local");
  auto [ko, kv] = s[r].split(s[r].reduce_axis()[0], t.vector);
  auto [kr, kt] = s[r].split(ko, t.threads);
  s[r].reorder({kt, kr, kv}); // the thread's loop outside: the cache below is per thread
  s[r].bind(kt, thread_axis("threadIdx.x"));
  s[xr].compute_at(s[r], kr);
  if (t.vector > 1) {
    s[xr].vectorize(s[xr].leaf_iter_vars().back());
    s[r].unroll(kv);
  }
}

const DataType F32 = Float(32);

} // namespace

ScheduledProgram softmax(int64_t rows, int64_t cols, DataType dtype, RowTiles tiles) {
  RowTiles t = resolve("softmax", cols, dtype, tiles);
  Tensor x = placeholder({rows, cols}, dtype, "x");
  IterVar k = reduce_axis({0, cols}, "k"), k2 = reduce_axis({0, cols}, "k2");
  // exp(x - max) is written where it is used (the sum and the output), so that each reads x.
  auto e = [&](Expr i, Expr j, Expr m) { return exp(x(i, j).astype(F32) - m); };
  Tensor mx = compute({rows}, [&](Var i) { return max(x(i, k).astype(F32), {k}); }, "row_max");
  Tensor sm = compute({rows}, [&](Var i) { return sum(e(i, k2, mx(i)), {k2}); }, "row_sum");
  Tensor y = compute({rows, cols},
                     [&](Var i, Var j) { return (e(i, j, mx(i)) / sm(i)).astype(dtype); }, "y");
  Schedule s = create_schedule({y});
  schedule_row_reduction(s, mx, x, y, t);
  schedule_row_reduction(s, sm, x, y, t);
  schedule_row(s, y, {x}, t);
  ScheduledProgram p;
  p.schedule = s;
  p.args = {x, y};
  p.num_inputs = 1;
  p.flops = 5.0 * double(rows) * double(cols);
  return p;
}

ScheduledProgram layernorm(int64_t rows, int64_t cols, DataType dtype, RowTiles tiles) {
  RowTiles t = resolve("layernorm", cols, dtype, tiles);
  Tensor x = placeholder({rows, cols}, dtype, "x");
  Tensor gamma = placeholder({cols}, dtype, "gamma"), beta = placeholder({cols}, dtype, "beta");
  IterVar k = reduce_axis({0, cols}, "k"), k2 = reduce_axis({0, cols}, "k2");
  const float inv_n = 1.0f / float(cols);
  // x - mean is written where it is used (the variance and the output), so that each reads x.
  Tensor sx = compute({rows}, [&](Var i) { return sum(x(i, k).astype(F32), {k}); }, "row_sum");
  auto d = [&](Expr i, Expr j) { return x(i, j).astype(F32) - sx(i) * inv_n; };
  Tensor sq = compute({rows}, [&](Var i) { return sum(d(i, k2) * d(i, k2), {k2}); }, "row_sq");
  Tensor y = compute({rows, cols}, [&](Var i, Var j) {
    Expr scale = rsqrt(sq(i) * inv_n + 1e-5f);
    return (d(i, j) * scale * gamma(j).astype(F32) + beta(j).astype(F32)).astype(dtype);
  }, "y");
  Schedule s = create_schedule({y});
  schedule_row_reduction(s, sx, x, y, t);
  schedule_row_reduction(s, sq, x, y, t);
  schedule_row(s, y, {x, gamma, beta}, t);
  ScheduledProgram p;
  p.schedule = s;
  p.args = {x, gamma, beta, y};
  p.num_inputs = 3;
  p.flops = 8.0 * double(rows) * double(cols);
  return p;
}

namespace {

ScheduleEntry row_entry(const char *name, const char *description,
                        ScheduledProgram (*build)(int64_t, int64_t, DataType, RowTiles)) {
  ScheduleEntry e;
  e.name = name;
  e.description = description;
  e.default_shape = {{"R", 4096}, {"C", 4096}, {"T", 0}, {"V", 8}};
  e.nonnegative = {"T"};
  e.dtypes = {Float(16), BFloat(16)};
  e.build = [build](const ShapeParams &p, DataType dtype) {
    return build(p.at("R"), p.at("C"), dtype, {int(p.at("T")), int(p.at("V"))});
  };
  return e;
}

} // namespace

ScheduleEntry softmax_entry() {
  return row_entry("softmax",
                   "softmax over rows of C (R rows), one block per row: max and sum reduced "
                   "across T threads (0: from C) by warp shuffles, float32 math, V-element "
                   "vectors, output of the input's type",
                   softmax);
}

ScheduleEntry layernorm_entry() {
  return row_entry("layernorm",
                   "layernorm over rows of C (R rows) with gamma and beta, one block per row: "
                   "mean and variance (two passes) reduced across T threads (0: from C), "
                   "float32 math, V-element vectors, output of the input's type",
                   layernorm);
}

} // namespace tessel

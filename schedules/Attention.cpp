#include "schedules/Attention.h"

#include "compiler/support/Error.h"
#include "compiler/tessel.h"

#include <cmath>

namespace tessel {

ScheduledProgram attention(const AttentionParams &a, DataType dtype) {
  user_check(dtype == Float(16) || dtype == BFloat(16), "attention")
      << "Q, K and V are float16 or bfloat16, not " << dtype;
  user_check(a.Hkv > 0 && a.H % a.Hkv == 0, "attention")
      << "the " << a.Hkv << " key/value heads must divide the " << a.H << " query heads";
  user_check(a.block_keys > 0 && a.Sk % a.block_keys == 0, "attention")
      << "the " << a.Sk << " keys are walked in blocks of " << a.block_keys
      << ", which must divide them: choose a block of keys (BK) that does";
  user_check(!a.causal || a.Sk >= a.Sq, "attention")
      << "causal attention aligns the last query with the last key, so every query sees a "
         "key only with at least as many keys as queries (Sk = "
      << a.Sk << ", Sq = " << a.Sq << ")";
  const int g = int(a.H / a.Hkv), bk = int(a.block_keys), off = int(a.Sk - a.Sq);
  const int64_t T = a.Sk / a.block_keys, Bk = a.block_keys;
  auto view = [&](int64_t S, int64_t H, const char *name) {
    if (!a.bshd)
      return placeholder({a.B, H, S, a.D}, dtype, name);
    return placeholder({a.B, H, S, a.D}, dtype, name, {S * H * a.D, a.D, H * a.D, 1});
  };
  Tensor Q = view(a.Sq, a.H, "Q"), K = view(a.Sk, a.Hkv, "K"), V = view(a.Sk, a.Hkv, "V");
  const float scale = 1.0f / std::sqrt(float(a.D));
  // Where query i sees key j.
  auto visible = [&](const Expr &i, const Expr &j) { return a.causal ? j <= i + off : Expr(); };

  // A step: block t of keys. Its scores and their row max read no state; the new running max,
  // the probabilities, their row sum and their product with V's block read the running max m.
  IterVar t = fold_axis({0, T}, "t");
  Tensor m = fold_state({a.B, a.H, a.Sq}, Float(32), "m");
  Tensor l = fold_state({a.B, a.H, a.Sq}, Float(32), "l");
  Tensor o = fold_state({a.B, a.H, a.Sq, a.D}, Float(32), "o");
  IterVar d = reduce_axis({0, a.D}, "d");
  Tensor S = compute({T, a.B, a.H, a.Sq, Bk},
                     [&](Var tb, Var b, Var h, Var i, Var j) {
                       return sum(Q(b, h, i, d).astype(Float(32)) *
                                      K(b, h / g, tb * bk + j, d).astype(Float(32)) * scale,
                                  {d});
                     },
                     "S", {"t", "b", "h", "i", "j"});
  IterVar j1 = reduce_axis({0, Bk}, "j1");
  Tensor rowmax = compute({T, a.B, a.H, a.Sq},
                          [&](Var tb, Var b, Var h, Var i) {
                            return max(S(tb, b, h, i, j1), {j1}, visible(i, tb * bk + j1));
                          },
                          "rowmax", {"t", "b", "h", "i"});
  Tensor m_new =
      compute({T, a.B, a.H, a.Sq},
              [&](Var tb, Var b, Var h, Var i) { return max(m(b, h, i), rowmax(tb, b, h, i)); },
              "m_new", {"t", "b", "h", "i"});
  Tensor P = compute({T, a.B, a.H, a.Sq, Bk},
                     [&](Var tb, Var b, Var h, Var i, Var j) {
                       Expr p = exp(S(tb, b, h, i, j) - m_new(tb, b, h, i));
                       return a.causal ? if_then_else(visible(i, tb * bk + j), p, 0.0f) : p;
                     },
                     "P", {"t", "b", "h", "i", "j"});
  IterVar j2 = reduce_axis({0, Bk}, "j2");
  Tensor rowsum =
      compute({T, a.B, a.H, a.Sq},
              [&](Var tb, Var b, Var h, Var i) { return sum(P(tb, b, h, i, j2), {j2}); }, "rowsum",
              {"t", "b", "h", "i"});
  IterVar j3 = reduce_axis({0, Bk}, "j3");
  Tensor PV = compute(
      {T, a.B, a.H, a.Sq, a.D},
      [&](Var tb, Var b, Var h, Var i, Var dd) {
        return sum(P(tb, b, h, i, j3) * V(b, h / g, tb * bk + j3, dd).astype(Float(32)), {j3});
      },
      "PV", {"t", "b", "h", "i", "d"});

  // The online softmax: a block rescales the running sum and output by exp(m_old - m_new).
  auto alpha = [&](const std::vector<Var> &v) {
    return exp(m(v[0], v[1], v[2]) - m_new(t, v[0], v[1], v[2]));
  };
  std::function<Expr(const std::vector<Var> &)> where;
  if (a.causal) // the blocks holding a key the query sees
    where = [&](const std::vector<Var> &v) { return t * bk <= v[2] + off; };
  std::vector<Tensor> state =
      fold(t,
           {{m, Expr(-INFINITY), [&](auto &v) { return m_new(t, v[0], v[1], v[2]); }},
            {l, Expr(0.0f),
             [&](auto &v) { return l(v[0], v[1], v[2]) * alpha(v) + rowsum(t, v[0], v[1], v[2]); }},
            {o, Expr(0.0f),
             [&](auto &v) {
               return o(v[0], v[1], v[2], v[3]) * alpha(v) + PV(t, v[0], v[1], v[2], v[3]);
             }}},
           "softmax", where);
  const Tensor &o_last = state[2], &l_last = state[1];
  Tensor O = compute({a.B, a.H, a.Sq, a.D},
                     [&](Var b, Var h, Var i, Var dd) {
                       return (o_last(b, h, i, dd) / l_last(b, h, i)).astype(dtype);
                     },
                     "O", {"b", "h", "i", "d"});

  // A block per (b, h, block_queries queries), a thread per query; the fold per thread in
  // registers, the block's scores and row max computed at its axis with the rest of the step.
  Schedule s = create_schedule({O});
  auto [b, h, i, dd] = s[O].axes<4>();
  auto [io, ii] = s[O].split(i, a.block_queries);
  s[O].reorder({b, h, io, ii, dd});
  s[O].bind(s[O].fuse(s[O].fuse(b, h), io), thread_axis("blockIdx.x"));
  s[O].bind(ii, thread_axis("threadIdx.x"));
  Stage fold_stage = s[o_last];
  fold_stage.compute_at(s[O], ii).set_scope("local");
  for (const Tensor &x : {S, rowmax})
    s[x].compute_at(fold_stage, t).set_scope("local");

  ScheduledProgram prog{s, {Q, K, V, O}, 3, 0};
  // 4 flops per (query, visible key, dim): the two products and their sums.
  double pairs = 0;
  for (int64_t q = 0; q < a.Sq; ++q)
    pairs += a.causal ? double(std::min(a.Sk, q + off + 1)) : double(a.Sk);
  prog.flops = 4.0 * double(a.B * a.H * a.D) * pairs;
  return prog;
}

ScheduleEntry attention_entry() {
  ScheduleEntry e;
  e.name = "attention";
  e.description =
      "fused attention O = softmax(Q K^T / sqrt(D)) V, one kernel: B batches, H query heads "
      "over HKV key/value heads, SQ queries, SK keys, head dim D; CAUSAL 1 aligns the last "
      "query with the last key; BSHD 1 reads Q, K, V as (B, S, H, D) buffers through their "
      "strides (0: (B, H, S, D)); O is (B, H, SQ, D). The online softmax is a fold over blocks of "
      "BK keys, a thread per query and BQ queries a block (CUDA cores)";
  e.default_shape = {{"B", 1},  {"H", 4},      {"HKV", 4},  {"SQ", 256}, {"SK", 256},
                     {"D", 64}, {"CAUSAL", 0}, {"BSHD", 1}, {"BK", 16},  {"BQ", 32}};
  e.nonnegative = {"CAUSAL", "BSHD"};
  e.choices = {{"CAUSAL", {0, 1}}, {"BSHD", {0, 1}}};
  e.dtypes = {Float(16), BFloat(16)};
  e.knobs = {{"BK", {16, 32, 64}}, {"BQ", {32, 64, 128}}};
  e.build = [](const ShapeParams &p, DataType dtype) {
    AttentionParams a;
    a.B = p.at("B");
    a.H = p.at("H");
    a.Hkv = p.at("HKV");
    a.Sq = p.at("SQ");
    a.Sk = p.at("SK");
    a.D = p.at("D");
    a.causal = p.at("CAUSAL") != 0;
    a.bshd = p.at("BSHD") != 0;
    a.block_keys = p.at("BK");
    a.block_queries = p.at("BQ");
    return attention(a, dtype);
  };
  return e;
}

} // namespace tessel

// The tensor-expression DSL: how users define what to compute.
//
//   Tensor A = placeholder({M, K}, Float(16), "A");
//   IterVar k = reduce_axis({0, K}, "k");
//   Tensor C = compute({M, N}, [&](Var i, Var j) {
//       return sum(A(i, k).astype(Float(32)) * B(k, j).astype(Float(32)), {k});
//   }, "C");
#pragma once

#include "compiler/ir/IROperator.h"
#include "compiler/support/Error.h"
#include "compiler/te/Operation.h"

#include <array>
#include <functional>
#include <type_traits>
#include <utility>

namespace tessel {

/// An input of the computation. Every extent must be a positive integer constant.
Tensor placeholder(std::vector<Expr> shape, DataType dtype, std::string name);
/// An input stored with `strides` (in elements, one per dimension, each at least 1): a view of
/// a buffer that is not compact row-major, read through its strides, never copied. The
/// (batch, heads, seq, dim) view of a (batch, seq, heads, dim) tensor, as PyTorch passes
/// attention's Q after a transpose:
///
///   Tensor Q = placeholder({B, H, S, D}, Float(16), "Q", {S * H * D, D, H * D, 1});
///
/// Its argument is the buffer the strides address: storage_elements(shape, strides) elements.
Tensor placeholder(std::vector<Expr> shape, DataType dtype, std::string name,
                   std::vector<int64_t> strides);

/// A reduction axis over [begin, end), as TVM's te.reduce_axis((begin, end), name).
IterVar reduce_axis(std::array<Expr, 2> begin_end, std::string name);

/// Reductions of `source` over `axis`, optionally only where `where` holds, starting from
/// `init` (an expression of the output's indices, of the source's type: C(i, j) =
/// sum(A(i, k) * B(k, j), {k}, Expr(), C0(i, j)) accumulates onto C0; TVM's init) or, where
/// it is undefined, from the combiner's identity.
Expr sum(Expr source, std::vector<IterVar> axis, Expr where = Expr(), Expr init = Expr());
Expr max(Expr source, std::vector<IterVar> axis, Expr where = Expr(), Expr init = Expr());
Expr min(Expr source, std::vector<IterVar> axis, Expr where = Expr(), Expr init = Expr());
// `max(x, {k})` must pick the reduction, not the binary max(Expr, Expr) (an IterVar converts
// to Expr); an initializer_list of IterVars is the better match.
inline Expr sum(Expr source, std::initializer_list<IterVar> axis, Expr where = Expr(),
                Expr init = Expr()) {
  return sum(std::move(source), std::vector<IterVar>(axis), std::move(where), std::move(init));
}
inline Expr max(Expr source, std::initializer_list<IterVar> axis, Expr where = Expr(),
                Expr init = Expr()) {
  return max(std::move(source), std::vector<IterVar>(axis), std::move(where), std::move(init));
}
inline Expr min(Expr source, std::initializer_list<IterVar> axis, Expr where = Expr(),
                Expr init = Expr()) {
  return min(std::move(source), std::vector<IterVar>(axis), std::move(where), std::move(init));
}

/// The axis of a fold over [begin, end): its steps run in order (an Ordered axis). It cannot
/// be split, fused or bound to threads; the size of a step (a block of keys) is the user's,
/// in the definition.
IterVar fold_axis(std::array<Expr, 2> begin_end, std::string name);

/// The running value of a fold's state: a tensor of `shape` read by the fold's updates and by
/// the tensors of its step, which see the value before the step. Give it to fold().
Tensor fold_state(std::vector<Expr> shape, DataType dtype, std::string name);

/// One state of a fold: its value before the first step (a constant) and after each step (a
/// function of its indices: the fold's shared axes, then its own). `merge`, optional: the
/// state's value after two consecutive ranges of steps, from each range's final values of every
/// state at one element (`a`: the earlier range's, `b`: the later's, in the order of the
/// states; a state of lower rank at the element's shared indices). With a merge on every
/// state, a fold's steps can be split over blocks and the parts merged
/// (Stage::split_last_wave on the fold axis). The online softmax's: m = max(m_a, m_b), o and
/// l each part's times exp(m_part - m).
struct FoldState {
  Tensor state;
  Expr init;
  std::function<Expr(const std::vector<Var> &)> update;
  std::function<Expr(const std::vector<Expr> &a, const std::vector<Expr> &b)> merge = nullptr;
};

/// Carries `states` over the steps of `axis` (made with fold_axis) in order, and returns their
/// final values, one tensor per state (named as the state). The states share their leading
/// axes (those of the state of lowest rank); at each step every state takes its update at
/// once: the updates, and the tensors of the step, read the states' values before the step.
/// `where` (over the shared axes; it may read the fold axis, and tensors at the shared axes: a
/// sequence's length from its offsets) skips steps: the loop over `axis` runs only over the
/// steps it can hold for (ReduceBounds), the rest of them guarded. The
/// online softmax of attention over blocks of keys t, with S(t, i, j) the scores of block t,
/// rowmax(t, i) = max(S(t, i, j), {j}), m_new(t, i) = max(m(i), rowmax(t, i)), P(t, i, j) =
/// exp(S(t, i, j) - m_new(t, i)), and PV(t, i, d) = sum(P(t, i, j) * V(t * Bk + j, d), {j}):
///
///   IterVar t = fold_axis({0, Sk / Bk}, "t");
///   Tensor m = fold_state({Sq}, Float(32), "m"), l = ..., o = fold_state({Sq, D}, ...);
///   auto alpha = [&](Var i) { return exp(m(i) - m_new(t, i)); };
///   std::vector<Tensor> r = fold(t, {
///       {m, neg_inf, [&](auto &v) { return m_new(t, v[0]); }},
///       {l, 0.0f,    [&](auto &v) { return l(v[0]) * alpha(v[0]) + rowsum(t, v[0]); }},
///       {o, 0.0f,    [&](auto &v) { return o(v[0], v[1]) * alpha(v[0]) + PV(t, v[0], v[1]); }}},
///     "softmax");
///
/// A tensor of the step (one that reads a state, directly or through others) has the fold's
/// steps as its first axis, and is computed inside the fold (compute_at its fold axis). A state
/// is read by an update at the update's own indices: by its own update at all of them, by
/// another's at the shared ones (so a state with axes of its own is read only by itself).
std::vector<Tensor> fold(const IterVar &axis, std::vector<FoldState> states, std::string name,
                         std::function<Expr(const std::vector<Var> &)> where = nullptr);

/// compute with the body given as a function of the index variables (one Var per dimension).
/// `axis_names` names the index variables (as the lambda's parameter names do in TVM); by
/// default they are i0, i1, ...
Tensor compute_from_vars(std::vector<Expr> shape,
                         const std::function<Expr(const std::vector<Var> &)> &body,
                         std::string name, std::vector<std::string> axis_names = {});

namespace detail {
template <typename F, size_t... I>
Expr call_with_vars(F &f, const std::vector<Var> &v, std::index_sequence<I...>) {
  return f(v[I]...);
}
template <typename F, size_t N> constexpr bool invocable_with_n_vars() {
  return []<size_t... I>(std::index_sequence<I...>) {
    return std::is_invocable_r_v<Expr, F, decltype((void)I, Var())...>;
  }(std::make_index_sequence<N>());
}
template <typename F> constexpr size_t lambda_arity() {
  if constexpr (invocable_with_n_vars<F, 1>()) return 1;
  else if constexpr (invocable_with_n_vars<F, 2>()) return 2;
  else if constexpr (invocable_with_n_vars<F, 3>()) return 3;
  else if constexpr (invocable_with_n_vars<F, 4>()) return 4;
  else if constexpr (invocable_with_n_vars<F, 5>()) return 5;
  else if constexpr (invocable_with_n_vars<F, 6>()) return 6;
  else if constexpr (invocable_with_n_vars<F, 7>()) return 7;
  else if constexpr (invocable_with_n_vars<F, 8>()) return 8;
  else return 0;
}
} // namespace detail

/// compute(shape, [&](Var i, Var j) { return ...; }, "name"): out[i, j] = body(i, j). The lambda
/// takes one Var per dimension (1 to 8) and returns an Expr.
template <typename F>
  requires(detail::lambda_arity<F>() > 0)
Tensor compute(std::vector<Expr> shape, F body, std::string name,
               std::vector<std::string> axis_names = {}) {
  constexpr size_t arity = detail::lambda_arity<F>();
  user_check(shape.size() == arity, "compute")
      << "tensor '" << name << "': the shape has " << shape.size()
      << " dimensions but the index function takes " << arity << " indices";
  return compute_from_vars(
      std::move(shape),
      [&](const std::vector<Var> &v) {
        return detail::call_with_vars(body, v, std::make_index_sequence<arity>());
      },
      std::move(name), std::move(axis_names));
}

} // namespace tessel

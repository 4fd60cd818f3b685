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

/// Reductions of `source` over `axis`, optionally only where `where` holds.
Expr sum(Expr source, std::vector<IterVar> axis, Expr where = Expr());
Expr max(Expr source, std::vector<IterVar> axis, Expr where = Expr());
Expr min(Expr source, std::vector<IterVar> axis, Expr where = Expr());
// `max(x, {k})` must pick the reduction, not the binary max(Expr, Expr) (an IterVar converts
// to Expr); an initializer_list of IterVars is the better match.
inline Expr sum(Expr source, std::initializer_list<IterVar> axis, Expr where = Expr()) {
  return sum(std::move(source), std::vector<IterVar>(axis), std::move(where));
}
inline Expr max(Expr source, std::initializer_list<IterVar> axis, Expr where = Expr()) {
  return max(std::move(source), std::vector<IterVar>(axis), std::move(where));
}
inline Expr min(Expr source, std::initializer_list<IterVar> axis, Expr where = Expr()) {
  return min(std::move(source), std::vector<IterVar>(axis), std::move(where));
}

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

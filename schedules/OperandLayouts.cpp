#include "schedules/OperandLayouts.h"

#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"

namespace tessel {

std::string OperandLoadLayout::describe(const char *rows, const char *cols) const {
  std::string dims =
      fragment_transposed ? std::string(cols) + " x " + rows : std::string(rows) + " x " + cols;
  bool vowel = dims[0] == 'm' || dims[0] == 'n'; // "an m x k", "a k x n"
  return std::string(memory()) + (vowel ? " into an " : " into a ") + dims + " fragment";
}

std::vector<OperandLoadLayout> operand_load_layouts(const std::string &layout, const char *intrin) {
  user_check(layout.empty() || layout == "row_major" || layout == "col_major", intrin)
      << "layout must be row_major or col_major, got '" << layout
      << "' (or leave it out: the stage's body says which)";
  // The operand's own order (what a load declared with one layout always was) before the
  // transposed fragment: a square identity copy with no reader to tell matches the first.
  std::vector<OperandLoadLayout> all{{false, false}, {true, false}, {true, true}, {false, true}};
  std::vector<OperandLoadLayout> out;
  for (const OperandLoadLayout &l : all)
    if (layout.empty() || layout == l.memory())
      out.push_back(l);
  return out;
}

Tensor operand_load_pattern(int rows, int cols, DataType in, const OperandLoadLayout &l,
                            Tensor *memory) {
  auto [fr, fc] = l.fragment(rows, cols);
  // The memory tile's dimensions, and whether the load copies it as is or transposed.
  bool mem_transposed = l.col_major;
  Tensor A =
      mem_transposed ? placeholder({cols, rows}, in, "A") : placeholder({rows, cols}, in, "A");
  bool transposing = mem_transposed != l.fragment_transposed;
  *memory = A;
  return compute({fr, fc}, [&](Var i, Var j) { return transposing ? A(j, i) : A(i, j); }, "C",
                 {"i", "j"});
}

Tensor gemm_pattern(int m, int n, int k, DataType in, DataType acc, bool a_col, bool b_col,
                    Tensor *A, Tensor *B) {
  *A = a_col ? placeholder({k, m}, in, "A") : placeholder({m, k}, in, "A");
  *B = b_col ? placeholder({n, k}, in, "B") : placeholder({k, n}, in, "B");
  IterVar rk = reduce_axis({0, k}, "k");
  const Tensor a = *A, b = *B;
  return compute({m, n},
                 [&](Var i, Var j) {
                   Expr x = a_col ? a(rk, i) : a(i, rk), y = b_col ? b(j, rk) : b(rk, j);
                   return sum(in == acc ? x * y : x.astype(acc) * y.astype(acc), {rk});
                 },
                 "C", {"i", "j"});
}

std::shared_ptr<const TensorIntrin>
operand_load_layout(const std::shared_ptr<const TensorIntrin> &pattern, const OperandLoadLayout &l,
                    bool is_a) {
  return layout_pattern(pattern, {l.memory()}, is_a ? l.describe("m", "k") : l.describe("k", "n"),
                        l.k_dim(is_a));
}

std::shared_ptr<const TensorIntrin> gemm_layout(const std::shared_ptr<const TensorIntrin> &pattern,
                                                bool a_col, bool b_col) {
  const char *a = a_col ? "col_major" : "row_major", *b = b_col ? "col_major" : "row_major";
  return layout_pattern(pattern, {a, b}, std::string("A ") + a + ", B " + b);
}

} // namespace tessel

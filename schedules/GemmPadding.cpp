#include "schedules/GemmPadding.h"

#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"

namespace tessel {

Tensor padded_copy(const Tensor &from, int64_t rows, int64_t cols, const std::string &name) {
  internal_check(from.shape().size() == 2) << "padded_copy takes a matrix";
  const int64_t r = *as_const_int(from.shape()[0]), c = *as_const_int(from.shape()[1]);
  internal_check(rows >= r && cols >= c) << "padded_copy cannot shrink " << from.name();
  if (rows == r && cols == c)
    return from;
  Expr zero = make_const(from.dtype(), 0);
  return compute(
      {rows, cols},
      [&](Var i, Var j) {
        std::vector<Expr> inside;
        if (rows != r)
          inside.push_back(i < Expr(int(r)));
        if (cols != c)
          inside.push_back(j < Expr(int(c)));
        return if_then_else(all(inside), from(i, j), zero);
      },
      name, {"i", "j"});
}

bool tma_reads_in_place(int64_t cols, DataType type) { return cols * type.bytes() % 16 == 0; }

void schedule_padded_copy(Schedule &s, const Tensor &copy, bool in_place) {
  if (!copy.op().as<ComputeOpNode>()) // no copy: the operand itself
    return;
  if (in_place) {
    s[copy].compute_inline();
    return;
  }
  constexpr int kChunk = 8;
  internal_check(*as_const_int(copy.shape()[1]) % kChunk == 0)
      << "padded copy " << copy.name() << " has rows of " << *as_const_int(copy.shape()[1])
      << " elements, not whole 16-byte vectors";
  Tensor regs = s.cache_write(copy, "local");
  Stage sp = s[copy];
  auto [r, c] = sp.axes<2>();
  auto [c1, vec] = sp.split(c, kChunk);
  auto [b, x] = sp.split(sp.fuse(r, c1), 256);
  sp.bind(b, thread_axis("blockIdx.x"));
  sp.bind(x, thread_axis("threadIdx.x"));
  sp.vectorize(vec);
  s[regs].compute_at(sp, x);
  // Rows of the source in whole 16-byte vectors: a thread's 8 elements are all inside it or all
  // past its columns, one 16-byte load or zeros (vectorize_loops' branch around the two); else
  // one load an element.
  const Tensor from = copy.op()->input_tensors().at(0);
  if (*as_const_int(from.shape()[1]) % kChunk == 0)
    s[regs].vectorize(s[regs].axes<2>()[1]);
  else
    s[regs].unroll(s[regs].axes<2>()[1]);
}

Tensor leading_block(const Tensor &full, int64_t rows, int64_t cols, const std::string &name,
                     std::optional<DataType> out, Tensor *total_out) {
  const DataType type = out.value_or(full.dtype());
  auto cast = [&](const Expr &v) { return type == full.dtype() ? v : v.astype(type); };
  if (full.shape().size() == 2)
    return compute(
        {rows, cols}, [&](Var i, Var j) { return cast(full(i, j)); }, name, {"i", "j"});
  IterVar part = reduce_axis({0, *as_const_int(full.shape()[0])}, "part");
  Tensor total = compute(
      {rows, cols}, [&](Var i, Var j) { return sum(full(part.var(), i, j), {part}); },
      type == full.dtype() ? name : name + "_total", {"i", "j"});
  if (type == full.dtype())
    return total;
  if (total_out)
    *total_out = total;
  return compute({rows, cols}, [&](Var i, Var j) { return cast(total(i, j)); }, name, {"i", "j"});
}

void schedule_leading_block(Schedule &s, const Tensor &block, const Tensor &total) {
  // The sum of parts: in `block` itself (computed in a register it then stores), or `total`,
  // which `block` reads (computed in a register where `block` is).
  Tensor sum_stage = total;
  if (total.defined())
    s[total].set_scope("local");
  else if (!s[block].reduce_axis().empty())
    sum_stage = s.cache_write(block, "local");
  Stage sc = s[block];
  auto [r, c] = sc.axes<2>();
  auto [b, x] = sc.split(sc.fuse(r, c), 256);
  sc.bind(b, thread_axis("blockIdx.x"));
  sc.bind(x, thread_axis("threadIdx.x"));
  if (sum_stage.defined()) {
    s[sum_stage].compute_at(sc, x);
    s[sum_stage].unroll(s[sum_stage].reduce_axis()[0]);
  }
}

} // namespace tessel

#include "compiler/schedule/TensorIntrin.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/arith/IndexInterval.h"
#include "compiler/arith/CanonicalForm.h"
#include "compiler/support/Error.h"

namespace tessel {

Expr BoundBuffer::elem_offset_div(int64_t factor) const {
  auto q = divide_exact(elem_offset_, factor);
  internal_check(q) << "elem_offset of " << buffer_.name() << " is not a multiple of " << factor;
  return q->defined() ? *q : Expr(0);
}

Expr BoundBuffer::tile_index(int64_t rows, int64_t cols, const std::string &context) const {
  size_t n = region_offset_.size(), k = strides_.size();
  internal_check(n >= 2 && k >= 2) << "tile_index of " << buffer_.name() << " needs 2 dimensions";
  int64_t ld = strides_[k - 2];
  const Expr &r = region_offset_[n - 2], &c = region_offset_[n - 1];
  // What the outer dimensions contribute: every one of their steps skips whole tiles.
  arith::LinearForm outer = arith::linear_form(elem_offset_);
  outer.add(arith::linear_form(r), -ld);
  outer.add(arith::linear_form(c), -1);
  auto tr = divide_exact(arith::canonical_sum(r), rows);
  auto tc = divide_exact(arith::canonical_sum(c), cols);
  auto to = divide_exact(arith::to_expr(outer), rows * cols);
  user_check(tr && tc && to && ld % cols == 0, context)
      << "the region of '" << buffer_.name() << "' starts at row " << r << ", column " << c
      << " (row stride " << ld << "), which is not the corner of a " << rows << "x" << cols
      << " tile; split the loops so each call covers one whole tile";
  return arith::canonical_sum(*to + *tr * make_const(Int(32), ld / cols) + *tc);
}

Expr BoundBuffer::access_ptr() const {
  return Call::make(Handle(), intrinsic::address_of, {BufferLoad::make(buffer_, region_min_)},
                    Call::PureIntrinsic);
}

Expr BoundBuffer::access_ptr(const Expr &row, const Expr &col) const {
  size_t n = region_min_.size();
  internal_check(n >= 2) << "access_ptr(row, col) of " << buffer_.name() << " needs 2 dimensions";
  std::vector<Expr> at = region_min_;
  at[n - 2] = at[n - 2] + row;
  at[n - 1] = at[n - 1] + col;
  return Call::make(Handle(), intrinsic::address_of, {BufferLoad::make(buffer_, at)},
                    Call::PureIntrinsic);
}

Expr BoundBuffer::load(const std::vector<Expr> &offsets) const {
  internal_check(offsets.size() == region_min_.size())
      << "load of " << buffer_.name() << ": " << offsets.size() << " offsets for "
      << region_min_.size() << " dimensions";
  std::vector<Expr> at = region_min_;
  for (size_t i = 0; i < at.size(); ++i)
    at[i] = at[i] + offsets[i];
  return BufferLoad::make(buffer_, at);
}

int64_t BoundBuffer::stride(size_t i) const {
  internal_check(i < strides_.size()) << "stride " << i << " of " << decl_.name();
  return strides_[i];
}

std::shared_ptr<const TensorIntrin>
decl_tensor_intrin(const Tensor &pattern, const std::vector<std::pair<Tensor, Buffer>> &binds,
                   std::function<TensorIntrinBodies(const std::vector<BoundBuffer> &,
                                                    const BoundBuffer &)>
                       emit,
                   const std::string &name) {
  const auto *c = pattern.op().as<ComputeOpNode>();
  user_check(c, "decl_tensor_intrin")
      << "intrinsic '" << name << "': the pattern must be a compute, not a placeholder";
  auto intrin = std::make_shared<TensorIntrin>();
  intrin->name = name;
  intrin->op = pattern.op();
  intrin->emit = std::move(emit);
  auto find_bind = [&](const Tensor &t) -> Buffer {
    for (const auto &[tensor, buf] : binds)
      if (tensor == t)
        return buf;
    user_error("decl_tensor_intrin") << "intrinsic '" << name << "': no buffer declared for '"
                                     << t.name() << "'";
  };
  for (const Tensor &t : c->input_tensors()) {
    user_check(t.op().as<PlaceholderOpNode>(), "decl_tensor_intrin")
        << "intrinsic '" << name << "': input '" << t.name() << "' must be a placeholder";
    Buffer b = find_bind(t);
    user_check(b.dtype() == t.dtype() && b.ndim() == t.ndim(), "decl_tensor_intrin")
        << "intrinsic '" << name << "': buffer '" << b.name() << "' must have the type and rank of '"
        << t.name() << "'";
    intrin->inputs.push_back(t);
    intrin->input_decls.push_back(b);
  }
  intrin->output_decl = find_bind(pattern);
  user_check(intrin->output_decl.dtype() == pattern.dtype(), "decl_tensor_intrin")
      << "intrinsic '" << name << "': the output buffer's type "
      << intrin->output_decl.dtype() << " differs from the pattern's " << pattern.dtype();
  return intrin;
}

std::shared_ptr<const TensorIntrin>
layout_pattern(const std::shared_ptr<const TensorIntrin> &pattern,
               std::vector<std::string> input_layouts, std::string layout, int reduced_output_dim) {
  auto p = std::make_shared<TensorIntrin>(*pattern);
  p->input_layouts = std::move(input_layouts);
  p->layout = std::move(layout);
  p->reduced_output_dim = reduced_output_dim;
  return p;
}

std::shared_ptr<const TensorIntrin>
tensor_intrin_layouts(const std::string &name,
                      std::vector<std::shared_ptr<const TensorIntrin>> patterns) {
  internal_check(!patterns.empty()) << "intrinsic '" << name << "' has no pattern";
  for (const auto &p : patterns)
    internal_check(!p->layout.empty() && p->alternatives.empty() &&
                   p->input_layouts.size() == p->inputs.size())
        << "intrinsic '" << name << "': each pattern names its layout and has no alternatives";
  auto first = std::make_shared<TensorIntrin>(*patterns.front());
  first->name = name;
  first->alternatives.assign(patterns.begin() + 1, patterns.end());
  return first;
}

} // namespace tessel

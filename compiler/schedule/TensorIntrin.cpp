#include "compiler/schedule/TensorIntrin.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/arith/IndexInterval.h"
#include "compiler/support/Error.h"

namespace tessel {

Expr BoundBuffer::elem_offset_div(int64_t factor) const {
  auto q = divide_exact(elem_offset_, factor);
  internal_check(q) << "elem_offset of " << buffer_.name() << " is not a multiple of " << factor;
  return q->defined() ? *q : Expr(0);
}

Expr BoundBuffer::access_ptr() const {
  return Call::make(Handle(), intrinsic::address_of, {BufferLoad::make(buffer_, region_min_)},
                    Call::PureIntrinsic);
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

} // namespace tessel

#include "compiler/ir/Tensor.h"

#include "compiler/ir/IR.h"
#include "compiler/support/Error.h"

namespace tessel {

Tensor Operation::output(int i) const {
  internal_check(defined()) << "output of an undefined operation";
  user_check(i >= 0 && i < ptr_->num_outputs(), "Operation::output")
      << "operation '" << name() << "' has " << ptr_->num_outputs() << " outputs; index " << i
      << " is out of range";
  return Tensor(*this, i);
}

Expr Tensor::operator()(std::vector<Expr> indices) const {
  user_check(defined(), "tensor indexing") << "indexing an undefined tensor";
  return TensorLoad::make(*this, std::move(indices));
}

} // namespace tessel

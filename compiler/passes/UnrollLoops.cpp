#include "compiler/passes/UnrollLoops.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Substitute.h"

namespace tessel {

namespace {

// The number of leaf statements (stores and evaluations) in `s`, and whether it has a loop.
struct BodyShape {
  int64_t steps = 0;
  bool has_loop = false;
};

BodyShape shape_of(const Stmt &s) {
  BodyShape shape;
  post_order_visit(s, [&](const IRNode *n) {
    if (llvm::isa<BufferStore>(n) || llvm::isa<Evaluate>(n))
      ++shape.steps;
    shape.has_loop |= llvm::isa<For>(n);
  });
  return shape;
}

class LoopUnroller : public IRMutator {
public:
  explicit LoopUnroller(int auto_max_step) : auto_max_step_(auto_max_step) {}

protected:
  Stmt visit(const For *op) override {
    Stmt s = IRMutator::visit(op); // inner loops first, so auto-unrolling sees their result
    op = s.as<For>();
    auto extent = as_const_int(op->extent);
    if (!extent || !should_unroll(op, *extent))
      return s;
    if (*extent <= 0)
      return Evaluate::make(0); // the loop never runs; remove_no_op drops this
    std::vector<Stmt> copies;
    copies.reserve(*extent);
    for (int64_t i = 0; i < *extent; ++i)
      copies.push_back(
          substitute(op->body, op->loop_var, op->min + make_const(op->loop_var.type(), i)));
    return Seq::make(std::move(copies));
  }

private:
  bool should_unroll(const For *op, int64_t extent) const {
    if (op->for_kind == ForKind::Unrolled)
      return true;
    if (op->for_kind != ForKind::Serial || auto_max_step_ <= 0)
      return false;
    BodyShape shape = shape_of(op->body);
    return !shape.has_loop && extent * shape.steps <= auto_max_step_;
  }

  int auto_max_step_;
};

} // namespace

Stmt unroll_loops(Stmt s, int auto_max_step) { return LoopUnroller(auto_max_step).mutate(s); }

} // namespace tessel

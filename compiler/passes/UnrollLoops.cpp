#include "compiler/passes/UnrollLoops.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Substitute.h"
#include "compiler/ir/WrittenBuffers.h"

#include <llvm/Support/raw_ostream.h>

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
  LoopUnroller(int auto_max_step, Remarks *remarks)
      : auto_max_step_(auto_max_step), remarks_(remarks) {}

protected:
  Stmt visit(const For *op) override {
    Stmt s = IRMutator::visit(op); // inner loops first, so auto-unrolling sees their result
    op = s.as<For>();
    auto extent = as_const_int(op->extent);
    if (!extent && op->for_kind == ForKind::Unrolled) {
      std::string why;
      llvm::raw_string_ostream(why)
          << "not applied: its extent (" << op->extent
          << ") is not a constant; it stays a loop (#pragma unroll leaves it to nvcc). To "
             "unroll it, split it by a constant factor and unroll the inner loop";
      report(op, false, why);
    }
    if (!extent || !should_unroll(op, *extent))
      return s;
    if (*extent > 0) {
      std::string how;
      llvm::raw_string_ostream os(how);
      os << "(" << *extent << " copies): applied";
      if (op->for_kind != ForKind::Unrolled)
        os << " (auto_unroll_max_step " << auto_max_step_ << ")";
      report(op, true, os.str());
    }
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

  // "unroll of axis 'i' of stage 'B' " followed by `outcome`.
  void report(const For *op, bool applied, const std::string &outcome) {
    if (!remarks_)
      return;
    std::string what = "unroll of axis '" + op->loop_var->name + "' ";
    if (std::string stage = first_written_buffer(op->body); !stage.empty())
      what += "of stage '" + stage + "' ";
    if (applied)
      remarks_->applied("unroll_loops", what + outcome);
    else
      remarks_->missed("unroll_loops", what + outcome);
  }

  int auto_max_step_;
  Remarks *remarks_;
};

} // namespace

Stmt unroll_loops(Stmt s, int auto_max_step, Remarks *remarks) {
  return LoopUnroller(auto_max_step, remarks).mutate(s);
}

} // namespace tessel

#include "compiler/passes/AsyncCopy.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/Intrinsics.h"

namespace tessel {

namespace {

// The first element of a dense access: the index itself, or the base of a stride-1 Ramp.
Expr first_element(const Expr &index) {
  if (index.type().is_scalar())
    return index;
  if (const auto *r = index.as<Ramp>(); r && is_one(r->stride))
    return r->base;
  return Expr();
}

bool is_zero_value(const Expr &e) {
  if (const auto *b = e.as<Broadcast>())
    return is_zero(b->value);
  return is_zero(e);
}

class AsyncCopyRewriter : public IRMutator {
public:
  int converted = 0;
  std::string refusal; ///< why the first store not rewritten was not

protected:
  Stmt visit(const BufferStore *op) override {
    if (op->buffer.scope() != "shared" || op->indices.size() != 1)
      return kept(op, "the store to '" + op->buffer.name() + "' is not into shared memory");
    // The source, and the condition of a zero-padded copy.
    Expr value = op->value, predicate = const_true();
    if (const auto *c = value.as<Call>(); c && c->is_intrinsic(intrinsic::if_then_else) &&
                                          c->args.size() == 3 && is_zero_value(c->args[2]) &&
                                          c->args[0].type().is_scalar()) {
      predicate = c->args[0];
      value = c->args[1];
    } else if (const auto *s = value.as<Select>(); s && is_zero_value(s->false_value) &&
                                                     s->condition.type().is_scalar()) {
      predicate = s->condition;
      value = s->true_value;
    }
    if (is_const(value))
      return IRMutator::visit(op); // the zeros of a padded copy: nothing to copy
    const auto *load = value.as<BufferLoad>();
    if (!load || load->buffer.scope() != "global" || load->indices.size() != 1)
      return kept(op, "the store to '" + op->buffer.name() +
                          "' is not a copy of global memory (its value is computed)");
    if (load->type != op->value.type())
      return kept(op, "the store to '" + op->buffer.name() + "' converts " + load->type.str() +
                          " to " + op->value.type().str());
    int bytes = op->value.type().bytes(); // all lanes
    Expr dst = first_element(op->indices[0]), src = first_element(load->indices[0]);
    if (!dst.defined() || !src.defined())
      return kept(op, "the copy into '" + op->buffer.name() + "' is not of consecutive elements");
    if (bytes != 4 && bytes != 8 && bytes != 16)
      return kept(op, "the copy into '" + op->buffer.name() + "' moves " +
                          std::to_string(bytes) +
                          " bytes per thread; cp.async moves 4, 8 or 16 (vectorize the copy's "
                          "inner axis)");
    auto address = [&](const Buffer &b, const Expr &i) {
      return Call::make(Handle(), intrinsic::address_of, {BufferLoad::make(b, {i})},
                        Call::Intrinsic);
    };
    ++converted;
    return Evaluate::make(Call::make(Void(), intrinsic::cp_async,
                                     {address(op->buffer, dst), address(load->buffer, src),
                                      Expr(bytes), predicate},
                                     Call::Intrinsic));
  }

private:
  Stmt kept(const BufferStore *op, const std::string &why) {
    if (refusal.empty())
      refusal = why;
    return IRMutator::visit(op);
  }
};

} // namespace

Stmt to_async_copies(const Stmt &fill, int *converted, std::string *refusal) {
  AsyncCopyRewriter r;
  Stmt out = r.mutate(fill);
  *converted = r.converted;
  if (refusal)
    *refusal = r.refusal;
  return out;
}

} // namespace tessel

#include "compiler/ir/IREquality.h"

#include "compiler/support/Error.h"

#include <llvm/ADT/Hashing.h>

#include <bit>

namespace tessel {

namespace {

class Comparer {
public:
  explicit Comparer(bool map_free_vars) : map_free_vars_(map_free_vars) {}

  bool eq(const Expr &a, const Expr &b) {
    if (a.same_as(b))
      return true;
    if (!a.defined() || !b.defined())
      return false;
    if (a->kind() != b->kind() || a.type() != b.type())
      return false;
    switch (a->kind()) {
    case IRNodeKind::IntImm:
      return llvm::cast<IntImm>(a.get())->value == llvm::cast<IntImm>(b.get())->value;
    case IRNodeKind::FloatImm:
      return llvm::cast<FloatImm>(a.get())->value == llvm::cast<FloatImm>(b.get())->value;
    case IRNodeKind::StringImm:
      return llvm::cast<StringImm>(a.get())->value == llvm::cast<StringImm>(b.get())->value;
    case IRNodeKind::Var:
      return var_eq(llvm::cast<Variable>(a.get()), llvm::cast<Variable>(b.get()));
#define BIN(K)                                                                                     \
  case IRNodeKind::K: {                                                                            \
    const auto *x = llvm::cast<K>(a.get());                                                        \
    const auto *y = llvm::cast<K>(b.get());                                                        \
    return eq(x->a, y->a) && eq(x->b, y->b);                                                       \
  }
      BIN(Add) BIN(Sub) BIN(Mul) BIN(FloorDiv) BIN(FloorMod) BIN(Div) BIN(Mod) BIN(Min) BIN(Max)
      BIN(EQ) BIN(NE) BIN(LT) BIN(LE) BIN(GT) BIN(GE) BIN(And) BIN(Or)
#undef BIN
    case IRNodeKind::Not:
      return eq(llvm::cast<Not>(a.get())->a, llvm::cast<Not>(b.get())->a);
    case IRNodeKind::Select: {
      const auto *x = llvm::cast<Select>(a.get());
      const auto *y = llvm::cast<Select>(b.get());
      return eq(x->condition, y->condition) && eq(x->true_value, y->true_value) &&
             eq(x->false_value, y->false_value);
    }
    case IRNodeKind::Cast:
      return eq(llvm::cast<Cast>(a.get())->value, llvm::cast<Cast>(b.get())->value);
    case IRNodeKind::Let: {
      const auto *x = llvm::cast<Let>(a.get());
      const auto *y = llvm::cast<Let>(b.get());
      return eq(x->value, y->value) && bind(x->var.get(), y->var.get()) && eq(x->body, y->body);
    }
    case IRNodeKind::Call: {
      const auto *x = llvm::cast<Call>(a.get());
      const auto *y = llvm::cast<Call>(b.get());
      return x->name == y->name && x->call_kind == y->call_kind && eq_all(x->args, y->args);
    }
    case IRNodeKind::BufferLoad: {
      const auto *x = llvm::cast<BufferLoad>(a.get());
      const auto *y = llvm::cast<BufferLoad>(b.get());
      return x->buffer.same_as(y->buffer) && eq_all(x->indices, y->indices);
    }
    case IRNodeKind::TensorLoad: {
      const auto *x = llvm::cast<TensorLoad>(a.get());
      const auto *y = llvm::cast<TensorLoad>(b.get());
      return x->tensor == y->tensor && eq_all(x->indices, y->indices);
    }
    case IRNodeKind::Ramp: {
      const auto *x = llvm::cast<Ramp>(a.get());
      const auto *y = llvm::cast<Ramp>(b.get());
      return x->lanes == y->lanes && eq(x->base, y->base) && eq(x->stride, y->stride);
    }
    case IRNodeKind::Broadcast: {
      const auto *x = llvm::cast<Broadcast>(a.get());
      const auto *y = llvm::cast<Broadcast>(b.get());
      return x->lanes == y->lanes && eq(x->value, y->value);
    }
    case IRNodeKind::Reduce: {
      const auto *x = llvm::cast<Reduce>(a.get());
      const auto *y = llvm::cast<Reduce>(b.get());
      if (x->combiner != y->combiner || x->axis.size() != y->axis.size())
        return false;
      for (size_t i = 0; i < x->axis.size(); ++i) {
        if (!eq(x->axis[i]->dom.min, y->axis[i]->dom.min) ||
            !eq(x->axis[i]->dom.extent, y->axis[i]->dom.extent) ||
            !bind(x->axis[i].var().get(), y->axis[i].var().get()))
          return false;
      }
      if (x->init.defined() != y->init.defined() || (x->init.defined() && !eq(x->init, y->init)))
        return false;
      return eq(x->source, y->source) && eq(x->condition, y->condition);
    }
    default:
      internal_error << "structural_equal: not an expression";
    }
  }

  bool eq(const Stmt &a, const Stmt &b) {
    if (a.same_as(b))
      return true;
    if (!a.defined() || !b.defined() || a->kind() != b->kind())
      return false;
    switch (a->kind()) {
    case IRNodeKind::LetStmt: {
      const auto *x = llvm::cast<LetStmt>(a.get());
      const auto *y = llvm::cast<LetStmt>(b.get());
      return eq(x->value, y->value) && bind(x->var.get(), y->var.get()) && eq(x->body, y->body);
    }
    case IRNodeKind::AttrStmt: {
      const auto *x = llvm::cast<AttrStmt>(a.get());
      const auto *y = llvm::cast<AttrStmt>(b.get());
      return x->key == y->key && attr_node_eq(x->node, y->node) && eq(x->value, y->value) &&
             eq(x->body, y->body);
    }
    case IRNodeKind::AssertStmt: {
      const auto *x = llvm::cast<AssertStmt>(a.get());
      const auto *y = llvm::cast<AssertStmt>(b.get());
      return x->message == y->message && eq(x->condition, y->condition) && eq(x->body, y->body);
    }
    case IRNodeKind::For: {
      const auto *x = llvm::cast<For>(a.get());
      const auto *y = llvm::cast<For>(b.get());
      return x->for_kind == y->for_kind && x->thread_tag == y->thread_tag && eq(x->min, y->min) &&
             eq(x->extent, y->extent) && bind(x->loop_var.get(), y->loop_var.get()) &&
             eq(x->body, y->body);
    }
    case IRNodeKind::Allocate: {
      const auto *x = llvm::cast<Allocate>(a.get());
      const auto *y = llvm::cast<Allocate>(b.get());
      return x->dtype == y->dtype && x->scope == y->scope && eq_all(x->extents, y->extents) &&
             bind(x->buffer_var.get(), y->buffer_var.get()) && eq(x->body, y->body);
    }
    case IRNodeKind::BufferRealize: {
      const auto *x = llvm::cast<BufferRealize>(a.get());
      const auto *y = llvm::cast<BufferRealize>(b.get());
      if (!x->buffer.same_as(y->buffer) || x->bounds.size() != y->bounds.size())
        return false;
      for (size_t i = 0; i < x->bounds.size(); ++i)
        if (!eq(x->bounds[i].min, y->bounds[i].min) || !eq(x->bounds[i].extent, y->bounds[i].extent))
          return false;
      return eq(x->body, y->body);
    }
    case IRNodeKind::BufferStore: {
      const auto *x = llvm::cast<BufferStore>(a.get());
      const auto *y = llvm::cast<BufferStore>(b.get());
      return x->buffer.same_as(y->buffer) && eq(x->value, y->value) &&
             eq_all(x->indices, y->indices);
    }
    case IRNodeKind::IfThenElse: {
      const auto *x = llvm::cast<IfThenElse>(a.get());
      const auto *y = llvm::cast<IfThenElse>(b.get());
      return eq(x->condition, y->condition) && eq(x->then_case, y->then_case) &&
             eq(x->else_case, y->else_case);
    }
    case IRNodeKind::Seq: {
      const auto &x = llvm::cast<Seq>(a.get())->stmts;
      const auto &y = llvm::cast<Seq>(b.get())->stmts;
      if (x.size() != y.size())
        return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!eq(x[i], y[i]))
          return false;
      return true;
    }
    case IRNodeKind::Evaluate:
      return eq(llvm::cast<Evaluate>(a.get())->value, llvm::cast<Evaluate>(b.get())->value);
    default:
      internal_error << "structural_equal: not a statement";
    }
  }

private:
  bool eq_all(const std::vector<Expr> &a, const std::vector<Expr> &b) {
    if (a.size() != b.size())
      return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!eq(a[i], b[i]))
        return false;
    return true;
  }

  bool attr_node_eq(const AttrNode &a, const AttrNode &b) {
    if (a.index() != b.index())
      return false;
    if (const auto *x = std::get_if<Expr>(&a))
      return eq(*x, std::get<Expr>(b));
    if (const auto *x = std::get_if<Buffer>(&a))
      return x->same_as(std::get<Buffer>(b));
    if (const auto *x = std::get_if<IterVar>(&a))
      return x->same_as(std::get<IterVar>(b)) ||
             bind(x->var().get(), std::get<IterVar>(b).var().get());
    return true;
  }

  // A variable defined in both trees at the same place: the two stand for each other.
  bool bind(const Variable *a, const Variable *b) {
    if (a->type != b->type)
      return false;
    auto [it, inserted] = map_.try_emplace(a, b);
    return inserted ? true : it->second == b;
  }

  bool var_eq(const Variable *a, const Variable *b) {
    if (a == b)
      return !map_.count(a) || map_.lookup(a) == b;
    auto it = map_.find(a);
    if (it != map_.end())
      return it->second == b;
    if (!map_free_vars_)
      return false;
    return bind(a, b);
  }

  bool map_free_vars_;
  llvm::DenseMap<const Variable *, const Variable *> map_;
};

class Hasher {
public:
  explicit Hasher(bool map_free_vars) : map_free_vars_(map_free_vars) {}

  llvm::hash_code hash(const Expr &e) {
    if (!e.defined())
      return llvm::hash_value(0);
    llvm::hash_code h = llvm::hash_combine(static_cast<int>(e->kind()), e.type().code(),
                                           e.type().bits(), e.type().lanes());
    switch (e->kind()) {
    case IRNodeKind::IntImm:
      return llvm::hash_combine(h, llvm::cast<IntImm>(e.get())->value);
    case IRNodeKind::FloatImm:
      return llvm::hash_combine(h, std::bit_cast<uint64_t>(llvm::cast<FloatImm>(e.get())->value));
    case IRNodeKind::StringImm:
      return llvm::hash_combine(h, llvm::cast<StringImm>(e.get())->value);
    case IRNodeKind::Var:
      return map_free_vars_ ? h : llvm::hash_combine(h, static_cast<const void *>(e.get()));
    case IRNodeKind::Let: {
      const auto *op = llvm::cast<Let>(e.get());
      return llvm::hash_combine(h, hash(op->value), hash(op->body));
    }
    case IRNodeKind::Call: {
      const auto *op = llvm::cast<Call>(e.get());
      h = llvm::hash_combine(h, op->name);
      return hash_all(h, op->args);
    }
    case IRNodeKind::BufferLoad: {
      const auto *op = llvm::cast<BufferLoad>(e.get());
      return hash_all(llvm::hash_combine(h, static_cast<const void *>(op->buffer.get())),
                      op->indices);
    }
    case IRNodeKind::TensorLoad: {
      const auto *op = llvm::cast<TensorLoad>(e.get());
      h = llvm::hash_combine(h, static_cast<const void *>(op->tensor.op().get()),
                             op->tensor.value_index());
      return hash_all(h, op->indices);
    }
    case IRNodeKind::Reduce: {
      const auto *op = llvm::cast<Reduce>(e.get());
      h = llvm::hash_combine(h, static_cast<int>(op->combiner), op->axis.size());
      h = llvm::hash_combine(h, hash(op->source), hash(op->condition));
      return op->init.defined() ? llvm::hash_combine(h, hash(op->init)) : h;
    }
#define BIN(K)                                                                                     \
  case IRNodeKind::K:                                                                              \
    return llvm::hash_combine(h, hash(llvm::cast<K>(e.get())->a), hash(llvm::cast<K>(e.get())->b));
      BIN(Add) BIN(Sub) BIN(Mul) BIN(FloorDiv) BIN(FloorMod) BIN(Div) BIN(Mod) BIN(Min) BIN(Max)
      BIN(EQ) BIN(NE) BIN(LT) BIN(LE) BIN(GT) BIN(GE) BIN(And) BIN(Or)
#undef BIN
    case IRNodeKind::Not:
      return llvm::hash_combine(h, hash(llvm::cast<Not>(e.get())->a));
    case IRNodeKind::Select: {
      const auto *op = llvm::cast<Select>(e.get());
      return llvm::hash_combine(h, hash(op->condition), hash(op->true_value),
                                hash(op->false_value));
    }
    case IRNodeKind::Cast:
      return llvm::hash_combine(h, hash(llvm::cast<Cast>(e.get())->value));
    case IRNodeKind::Ramp: {
      const auto *op = llvm::cast<Ramp>(e.get());
      return llvm::hash_combine(h, hash(op->base), hash(op->stride));
    }
    case IRNodeKind::Broadcast:
      return llvm::hash_combine(h, hash(llvm::cast<Broadcast>(e.get())->value));
    default:
      internal_error << "structural_hash: not an expression";
    }
  }

  llvm::hash_code hash(const Stmt &s) {
    if (!s.defined())
      return llvm::hash_value(0);
    llvm::hash_code h = llvm::hash_value(static_cast<int>(s->kind()));
    switch (s->kind()) {
    case IRNodeKind::LetStmt: {
      const auto *op = llvm::cast<LetStmt>(s.get());
      return llvm::hash_combine(h, hash(op->value), hash(op->body));
    }
    case IRNodeKind::AttrStmt: {
      const auto *op = llvm::cast<AttrStmt>(s.get());
      return llvm::hash_combine(h, op->key, hash(op->value), hash(op->body));
    }
    case IRNodeKind::AssertStmt: {
      const auto *op = llvm::cast<AssertStmt>(s.get());
      return llvm::hash_combine(h, op->message, hash(op->condition), hash(op->body));
    }
    case IRNodeKind::For: {
      const auto *op = llvm::cast<For>(s.get());
      return llvm::hash_combine(h, static_cast<int>(op->for_kind), op->thread_tag, hash(op->min),
                                hash(op->extent), hash(op->body));
    }
    case IRNodeKind::Allocate: {
      const auto *op = llvm::cast<Allocate>(s.get());
      h = llvm::hash_combine(h, op->scope, op->dtype.bits(), op->dtype.code(), hash(op->body));
      return hash_all(h, op->extents);
    }
    case IRNodeKind::BufferRealize: {
      const auto *op = llvm::cast<BufferRealize>(s.get());
      h = llvm::hash_combine(h, static_cast<const void *>(op->buffer.get()), hash(op->body));
      for (const Range &r : op->bounds)
        h = llvm::hash_combine(h, hash(r.min), hash(r.extent));
      return h;
    }
    case IRNodeKind::BufferStore: {
      const auto *op = llvm::cast<BufferStore>(s.get());
      h = llvm::hash_combine(h, static_cast<const void *>(op->buffer.get()), hash(op->value));
      return hash_all(h, op->indices);
    }
    case IRNodeKind::IfThenElse: {
      const auto *op = llvm::cast<IfThenElse>(s.get());
      return llvm::hash_combine(h, hash(op->condition), hash(op->then_case), hash(op->else_case));
    }
    case IRNodeKind::Seq:
      for (const Stmt &st : llvm::cast<Seq>(s.get())->stmts)
        h = llvm::hash_combine(h, hash(st));
      return h;
    case IRNodeKind::Evaluate:
      return llvm::hash_combine(h, hash(llvm::cast<Evaluate>(s.get())->value));
    default:
      internal_error << "structural_hash: not a statement";
    }
  }

private:
  llvm::hash_code hash_all(llvm::hash_code h, const std::vector<Expr> &es) {
    for (const Expr &e : es)
      h = llvm::hash_combine(h, hash(e));
    return h;
  }

  bool map_free_vars_;
};

} // namespace

bool structural_equal(const Expr &a, const Expr &b, bool map_free_vars) {
  return Comparer(map_free_vars).eq(a, b);
}
bool structural_equal(const Stmt &a, const Stmt &b, bool map_free_vars) {
  return Comparer(map_free_vars).eq(a, b);
}
size_t structural_hash(const Expr &e, bool map_free_vars) { return Hasher(map_free_vars).hash(e); }
size_t structural_hash(const Stmt &s, bool map_free_vars) { return Hasher(map_free_vars).hash(s); }

} // namespace tessel

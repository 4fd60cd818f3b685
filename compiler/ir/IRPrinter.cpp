#include "compiler/ir/IRPrinter.h"

#include "compiler/ir/IROperator.h"
#include "compiler/support/Error.h"

#include <llvm/Support/Format.h>
#include <llvm/Support/raw_ostream.h>

#include <cmath>

namespace tessel {

namespace {
// Operator precedence for printing; higher binds tighter.
enum Prec { PrecLowest = 0, PrecOr, PrecAnd, PrecEq, PrecCmp, PrecAdd, PrecMul, PrecUnary, PrecAtom };
} // namespace

std::string IRPrinter::unique_name(const void *key, const std::string &base) {
  auto it = names_.find(key);
  if (it != names_.end())
    return it->second;
  std::string name = base;
  for (int k = 1; used_names_.count(name); ++k)
    name = base + "_" + std::to_string(k);
  used_names_.insert(name);
  names_[key] = name;
  return name;
}

std::string IRPrinter::name_of(const Variable *v) { return unique_name(v, v->name); }
// A buffer prints as its storage var when it has one, so the flat buffers of Form 2 read as
// the allocation they address (`allocate(A.shared, ...)` then `A.shared[...]`, not A.shared_1).
std::string IRPrinter::name_of(const BufferNode *b) {
  if (const auto *v = b->data.as<Variable>())
    if (v->name == b->name)
      return name_of(v);
  return unique_name(b, b->name);
}

void IRPrinter::do_indent() {
  for (int i = 0; i < indent_; ++i)
    os_ << "  ";
}

void IRPrinter::print(const Expr &e) { print_expr(e, PrecLowest, false); }

void IRPrinter::print(const Range &r) {
  os_ << "range(min=";
  print(r.min);
  os_ << ", ext=";
  print(r.extent);
  os_ << ")";
}

void IRPrinter::print(const IterVar &iv) {
  os_ << "IterVar(" << name_of(iv.var().get()) << ": " << iv.var().type() << ", ";
  if (iv->dom.defined())
    print(iv->dom);
  else
    os_ << "(nullptr)";
  os_ << ", \"" << to_string(iv->iter_type) << "\"";
  if (!iv->thread_tag.empty())
    os_ << ", \"" << iv->thread_tag << "\"";
  os_ << ")";
}

void IRPrinter::print_args(const std::vector<Expr> &args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (i)
      os_ << ", ";
    print(args[i]);
  }
}

void IRPrinter::print_binary(const char *op, int prec, const Expr &a, const Expr &b,
                             int parent_prec, bool is_right) {
  bool parens = prec < parent_prec || (prec == parent_prec && is_right);
  if (parens)
    os_ << "(";
  print_expr(a, prec, false);
  os_ << " " << op << " ";
  print_expr(b, prec, true);
  if (parens)
    os_ << ")";
}

void IRPrinter::print_call_like(const char *name, const Expr &a, const Expr &b) {
  os_ << name << "(";
  print(a);
  os_ << ", ";
  print(b);
  os_ << ")";
}

static void print_float(llvm::raw_ostream &os, double v, DataType t) {
  if (std::isinf(v))
    os << (v < 0 ? "-inf" : "inf");
  else if (std::isnan(v))
    os << "nan";
  else
    os << llvm::format("%.9g", v);
  if (t.is_float8())
    os << (t.code() == DataType::Float8E4M3 ? "e4m3" : "e5m2");
  else
    os << (t.is_bfloat() ? "bf" : "f") << t.bits();
}

void IRPrinter::print_expr(const Expr &e, int pp, bool right) {
  if (!e.defined()) {
    os_ << "<undefined>";
    return;
  }
  switch (e->kind()) {
  case IRNodeKind::IntImm: {
    const auto *op = llvm::cast<IntImm>(e.get());
    if (op->type.is_bool()) {
      os_ << (op->value ? "true" : "false");
    } else {
      bool neg = op->value < 0 && pp > PrecLowest;
      if (neg)
        os_ << "(";
      os_ << op->value;
      if (op->type != Int(32))
        os_ << (op->type.is_int() ? "i" : "u") << op->type.bits();
      if (neg)
        os_ << ")";
    }
    return;
  }
  case IRNodeKind::FloatImm:
    print_float(os_, llvm::cast<FloatImm>(e.get())->value, e.type());
    return;
  case IRNodeKind::StringImm:
    os_ << "\"";
    os_.write_escaped(llvm::cast<StringImm>(e.get())->value);
    os_ << "\"";
    return;
  case IRNodeKind::Var:
    os_ << name_of(llvm::cast<Variable>(e.get()));
    return;
#define BIN(K, OP, PREC)                                                                           \
  case IRNodeKind::K: {                                                                            \
    const auto *op = llvm::cast<K>(e.get());                                                       \
    return print_binary(OP, PREC, op->a, op->b, pp, right);                                        \
  }
    BIN(Add, "+", PrecAdd)
    BIN(Sub, "-", PrecAdd)
    BIN(Mul, "*", PrecMul)
    BIN(Div, "/", PrecMul)
    BIN(Mod, "%", PrecMul)
    BIN(EQ, "==", PrecEq)
    BIN(NE, "!=", PrecEq)
    BIN(LT, "<", PrecCmp)
    BIN(LE, "<=", PrecCmp)
    BIN(GT, ">", PrecCmp)
    BIN(GE, ">=", PrecCmp)
    BIN(And, "&&", PrecAnd)
    BIN(Or, "||", PrecOr)
#undef BIN
  case IRNodeKind::FloorDiv: {
    const auto *op = llvm::cast<FloorDiv>(e.get());
    return print_call_like("floordiv", op->a, op->b);
  }
  case IRNodeKind::FloorMod: {
    const auto *op = llvm::cast<FloorMod>(e.get());
    return print_call_like("floormod", op->a, op->b);
  }
  case IRNodeKind::Min: {
    const auto *op = llvm::cast<Min>(e.get());
    return print_call_like("min", op->a, op->b);
  }
  case IRNodeKind::Max: {
    const auto *op = llvm::cast<Max>(e.get());
    return print_call_like("max", op->a, op->b);
  }
  case IRNodeKind::Not:
    os_ << "!";
    print_expr(llvm::cast<Not>(e.get())->a, PrecUnary, false);
    return;
  case IRNodeKind::Select: {
    const auto *op = llvm::cast<Select>(e.get());
    os_ << "select(";
    print_args({op->condition, op->true_value, op->false_value});
    os_ << ")";
    return;
  }
  case IRNodeKind::Cast: {
    const auto *op = llvm::cast<Cast>(e.get());
    os_ << "cast(" << op->type << ", ";
    print(op->value);
    os_ << ")";
    return;
  }
  case IRNodeKind::Let: {
    const auto *op = llvm::cast<Let>(e.get());
    os_ << "(let " << name_of(op->var.get()) << " = ";
    print(op->value);
    os_ << " in ";
    print(op->body);
    os_ << ")";
    return;
  }
  case IRNodeKind::Call: {
    const auto *op = llvm::cast<Call>(e.get());
    if (op->call_kind == Call::Intrinsic)
      os_ << "@";
    os_ << op->name << "(";
    print_args(op->args);
    os_ << ")";
    return;
  }
  case IRNodeKind::BufferLoad: {
    const auto *op = llvm::cast<BufferLoad>(e.get());
    os_ << name_of(op->buffer.get()) << "[";
    print_args(op->indices);
    os_ << "]";
    return;
  }
  case IRNodeKind::TensorLoad: {
    const auto *op = llvm::cast<TensorLoad>(e.get());
    os_ << op->tensor.name() << "[";
    print_args(op->indices);
    os_ << "]";
    return;
  }
  case IRNodeKind::Ramp: {
    const auto *op = llvm::cast<Ramp>(e.get());
    os_ << "ramp(";
    print_args({op->base, op->stride});
    os_ << ", " << op->lanes << ")";
    return;
  }
  case IRNodeKind::Broadcast: {
    const auto *op = llvm::cast<Broadcast>(e.get());
    os_ << "broadcast(";
    print(op->value);
    os_ << ", " << op->lanes << ")";
    return;
  }
  case IRNodeKind::Reduce: {
    const auto *op = llvm::cast<Reduce>(e.get());
    os_ << Reduce::name(op->combiner) << "(";
    print(op->source);
    os_ << ", axis=[";
    for (size_t i = 0; i < op->axis.size(); ++i) {
      if (i)
        os_ << ", ";
      const IterVar &iv = op->axis[i];
      os_ << name_of(iv.var().get()) << ": [";
      print(iv->dom.min);
      os_ << ", ";
      print(iv->dom.min + iv->dom.extent);
      os_ << ")";
    }
    os_ << "]";
    if (!is_one(op->condition)) {
      os_ << ", where=";
      print(op->condition);
    }
    if (op->init.defined()) {
      os_ << ", init=";
      print(op->init);
    }
    os_ << ")";
    return;
  }
  default:
    internal_error << "print_expr on a statement";
  }
}

void IRPrinter::print(const Stmt &s) { print_stmt(s); }

// Prints a block body: a nested statement one level deeper.
void IRPrinter::print_body(const Stmt &s) {
  ++indent_;
  print_stmt(s);
  --indent_;
}

void IRPrinter::print_attr_node(const AttrNode &n) {
  if (const auto *e = std::get_if<Expr>(&n))
    print(*e);
  else if (const auto *b = std::get_if<Buffer>(&n))
    os_ << name_of(b->get());
  else if (const auto *iv = std::get_if<IterVar>(&n))
    print(*iv);
  else
    os_ << "0";
}

void IRPrinter::print_stmt(const Stmt &s) {
  if (!s.defined())
    return;
  switch (s->kind()) {
  case IRNodeKind::LetStmt: {
    const auto *op = llvm::cast<LetStmt>(s.get());
    do_indent();
    os_ << "let " << name_of(op->var.get()) << ": " << op->var.type() << " = ";
    print(op->value);
    os_ << "\n";
    print_stmt(op->body);
    return;
  }
  case IRNodeKind::AttrStmt: {
    const auto *op = llvm::cast<AttrStmt>(s.get());
    do_indent();
    os_ << "attr [";
    print_attr_node(op->node);
    os_ << "] \"" << op->key << "\" = ";
    print(op->value);
    os_ << ";\n";
    print_stmt(op->body);
    return;
  }
  case IRNodeKind::AssertStmt: {
    const auto *op = llvm::cast<AssertStmt>(s.get());
    do_indent();
    os_ << "assert(";
    print(op->condition);
    os_ << ", \"";
    os_.write_escaped(op->message);
    os_ << "\")\n";
    print_stmt(op->body);
    return;
  }
  case IRNodeKind::For: {
    const auto *op = llvm::cast<For>(s.get());
    do_indent();
    switch (op->for_kind) {
    case ForKind::Serial:
      os_ << "for";
      break;
    case ForKind::ThreadBinding:
      os_ << "launch_thread";
      break;
    default:
      os_ << to_string(op->for_kind);
    }
    os_ << " (" << name_of(op->loop_var.get()) << ": " << op->loop_var.type() << ", ";
    print(op->min);
    os_ << ", ";
    print(op->extent);
    if (op->for_kind == ForKind::ThreadBinding)
      os_ << ", \"" << op->thread_tag << "\"";
    os_ << ") {\n";
    print_body(op->body);
    do_indent();
    os_ << "}\n";
    return;
  }
  case IRNodeKind::Allocate: {
    const auto *op = llvm::cast<Allocate>(s.get());
    do_indent();
    os_ << "allocate(" << name_of(op->buffer_var.get()) << ", " << op->dtype << ", [";
    print_args(op->extents);
    os_ << "]), storage_scope = " << op->scope << ";\n";
    print_stmt(op->body);
    return;
  }
  case IRNodeKind::BufferRealize: {
    const auto *op = llvm::cast<BufferRealize>(s.get());
    do_indent();
    os_ << "realize(" << name_of(op->buffer.get()) << ", [";
    for (size_t i = 0; i < op->bounds.size(); ++i) {
      if (i)
        os_ << ", ";
      print(op->bounds[i].min);
      os_ << ":";
      print(op->bounds[i].min + op->bounds[i].extent);
    }
    os_ << "]), storage_scope = " << op->buffer.scope() << " {\n";
    print_body(op->body);
    do_indent();
    os_ << "}\n";
    return;
  }
  case IRNodeKind::BufferStore: {
    const auto *op = llvm::cast<BufferStore>(s.get());
    do_indent();
    os_ << name_of(op->buffer.get()) << "[";
    print_args(op->indices);
    os_ << "] = ";
    print(op->value);
    os_ << "\n";
    return;
  }
  case IRNodeKind::IfThenElse: {
    const auto *op = llvm::cast<IfThenElse>(s.get());
    do_indent();
    os_ << "if (";
    print(op->condition);
    os_ << ") {\n";
    print_body(op->then_case);
    if (op->else_case.defined()) {
      do_indent();
      os_ << "} else {\n";
      print_body(op->else_case);
    }
    do_indent();
    os_ << "}\n";
    return;
  }
  case IRNodeKind::Seq:
    for (const Stmt &st : llvm::cast<Seq>(s.get())->stmts)
      print_stmt(st);
    return;
  case IRNodeKind::Evaluate:
    do_indent();
    print(llvm::cast<Evaluate>(s.get())->value);
    os_ << "\n";
    return;
  default:
    internal_error << "print_stmt on an expression";
  }
}

std::string to_string(const Expr &e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  IRPrinter(os).print(e);
  return os.str();
}

std::string to_string(const Stmt &st) {
  std::string s;
  llvm::raw_string_ostream os(s);
  IRPrinter(os).print(st);
  return os.str();
}

std::ostream &operator<<(std::ostream &os, const Expr &e) { return os << to_string(e); }
std::ostream &operator<<(std::ostream &os, const Stmt &s) { return os << to_string(s); }
std::ostream &operator<<(std::ostream &os, const Range &r) {
  std::string s;
  llvm::raw_string_ostream rs(s);
  IRPrinter(rs).print(r);
  return os << rs.str();
}
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const Expr &e) {
  IRPrinter(os).print(e);
  return os;
}
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const Stmt &s) {
  IRPrinter(os).print(s);
  return os;
}

} // namespace tessel

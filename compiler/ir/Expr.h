// The base of every IR node and the Expr / Stmt handles.
//
// Nodes are immutable and reference counted. Each concrete node class has a static `make(...)`
// that checks its invariants, so a malformed tree cannot be built. Node classes carry LLVM-style
// RTTI (`classof`), so passes write `isa<Add>(e)`, `dyn_cast<For>(s)`, `cast<Var>(e)` on handles
// and raw pointers alike.
#pragma once

#include "compiler/ir/Type.h"

#include <llvm/ADT/IntrusiveRefCntPtr.h>
#include <llvm/Support/Casting.h>

#include <string>

namespace tessel {

enum class IRNodeKind : uint8_t {
  // Expressions.
  IntImm,
  FloatImm,
  StringImm,
  Var,
  Add,
  Sub,
  Mul,
  FloorDiv,
  FloorMod,
  Div,
  Mod,
  Min,
  Max,
  EQ,
  NE,
  LT,
  LE,
  GT,
  GE,
  And,
  Or,
  Not,
  Select,
  Cast,
  Let,
  Call,
  BufferLoad,
  TensorLoad,
  Ramp,
  Broadcast,
  Reduce,
  // Statements.
  LetStmt,
  AttrStmt,
  AssertStmt,
  For,
  Allocate,
  BufferRealize,
  BufferStore,
  IfThenElse,
  Seq,
  Evaluate,
  // Markers for range checks in classof.
  FirstExpr = IntImm,
  LastExpr = Reduce,
  FirstBinary = Add,
  LastBinary = Max,
  FirstCompare = EQ,
  LastCompare = GE,
  FirstStmt = LetStmt,
  LastStmt = Evaluate,
};

/// Base of all IR nodes (and of the few other reference-counted IR objects such as buffers).
class IRNode : public llvm::ThreadSafeRefCountedBase<IRNode> {
public:
  explicit IRNode(IRNodeKind kind) : kind_(kind) {}
  virtual ~IRNode() = default;
  IRNode(const IRNode &) = delete;
  IRNode &operator=(const IRNode &) = delete;

  IRNodeKind kind() const { return kind_; }

private:
  const IRNodeKind kind_;
};

class ExprNode : public IRNode {
public:
  ExprNode(IRNodeKind kind, DataType type) : IRNode(kind), type(type) {}
  const DataType type;

  static bool classof(const IRNode *n) {
    return n->kind() >= IRNodeKind::FirstExpr && n->kind() <= IRNodeKind::LastExpr;
  }
};

class StmtNode : public IRNode {
public:
  explicit StmtNode(IRNodeKind kind) : IRNode(kind) {}

  static bool classof(const IRNode *n) {
    return n->kind() >= IRNodeKind::FirstStmt && n->kind() <= IRNodeKind::LastStmt;
  }
};

/// A handle to an immutable expression node. May be undefined (null).
class Expr {
public:
  Expr() = default;
  Expr(const ExprNode *n) : ptr_(n) {}
  /// Integer and floating-point literals become int32 / float32 immediates.
  Expr(int value);
  Expr(int64_t value);
  Expr(double value);
  Expr(float value);

  const ExprNode *get() const { return ptr_.get(); }
  const ExprNode *operator->() const { return ptr_.get(); }
  bool defined() const { return ptr_ != nullptr; }
  DataType type() const { return ptr_->type; }

  /// This value converted to `t` (a Cast, or this expression when it already has type t).
  Expr astype(DataType t) const;

  /// Pointer identity (not structural equality; see IREquality.h).
  bool same_as(const Expr &o) const { return ptr_ == o.ptr_; }

  /// `e.as<Add>()`: shorthand for dyn_cast<Add>(e.get()).
  template <typename T> const T *as() const {
    return ptr_ ? llvm::dyn_cast<T>(ptr_.get()) : nullptr;
  }

private:
  llvm::IntrusiveRefCntPtr<const ExprNode> ptr_;
};

/// A handle to an immutable statement node. May be undefined (null).
class Stmt {
public:
  Stmt() = default;
  Stmt(const StmtNode *n) : ptr_(n) {}

  const StmtNode *get() const { return ptr_.get(); }
  const StmtNode *operator->() const { return ptr_.get(); }
  bool defined() const { return ptr_ != nullptr; }
  bool same_as(const Stmt &o) const { return ptr_ == o.ptr_; }

  template <typename T> const T *as() const {
    return ptr_ ? llvm::dyn_cast<T>(ptr_.get()) : nullptr;
  }

private:
  llvm::IntrusiveRefCntPtr<const StmtNode> ptr_;
};

} // namespace tessel

// Let isa<>/dyn_cast<>/cast<> look through Expr and Stmt handles.
namespace llvm {
template <> struct simplify_type<const tessel::Expr> {
  using SimpleType = const tessel::ExprNode *;
  static SimpleType getSimplifiedValue(const tessel::Expr &e) { return e.get(); }
};
template <> struct simplify_type<tessel::Expr> : simplify_type<const tessel::Expr> {};
template <> struct simplify_type<const tessel::Stmt> {
  using SimpleType = const tessel::StmtNode *;
  static SimpleType getSimplifiedValue(const tessel::Stmt &s) { return s.get(); }
};
template <> struct simplify_type<tessel::Stmt> : simplify_type<const tessel::Stmt> {};
} // namespace llvm

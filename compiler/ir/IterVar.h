// An iteration variable: a loop variable with its domain and what kind of iteration it is.
//
// Compute definitions have one data-parallel IterVar per output dimension and one reduction
// IterVar per reduce axis. Schedules create more by splitting and fusing, and bind some to
// GPU thread indices (threadIdx.x, blockIdx.y, vthread, ...).
#pragma once

#include "compiler/ir/Range.h"

#include <string>

namespace tessel {

class Var;

enum class IterVarType : uint8_t {
  DataPar,     ///< Data-parallel: iterations are independent.
  ThreadIndex, ///< Bound to a GPU thread or block index.
  CommReduce,  ///< A commutative reduction axis.
  Ordered,     ///< Iterations must run in order.
  Opaque,      ///< Unknown; no assumptions.
};

const char *to_string(IterVarType t);

class IterVarNode : public llvm::ThreadSafeRefCountedBase<IterVarNode> {
public:
  /// May be undefined for thread axes whose extent is set by the binding.
  Range dom;
  Expr var; ///< a Variable
  IterVarType iter_type;
  /// "threadIdx.x", "blockIdx.z", "vthread", ... for ThreadIndex; empty otherwise.
  std::string thread_tag;
};

class IterVar {
public:
  IterVar() = default;
  explicit IterVar(const IterVarNode *n) : ptr_(n) {}
  static IterVar make(Range dom, Var var, IterVarType type, std::string thread_tag = "");

  const IterVarNode *get() const { return ptr_.get(); }
  const IterVarNode *operator->() const { return ptr_.get(); }
  bool defined() const { return ptr_ != nullptr; }
  bool same_as(const IterVar &o) const { return ptr_ == o.ptr_; }

  Var var() const;
  const Range &dom() const { return ptr_->dom; }
  IterVarType iter_type() const { return ptr_->iter_type; }
  const std::string &thread_tag() const { return ptr_->thread_tag; }
  /// Whether it is bound to a thread index of the block (threadIdx.x, .y or .z).
  bool is_thread_index() const { return thread_tag().rfind("threadIdx.", 0) == 0; }
  const std::string &name() const;

  /// The loop variable, so an IterVar can be used directly in index expressions.
  operator Expr() const { return ptr_->var; }

private:
  llvm::IntrusiveRefCntPtr<const IterVarNode> ptr_;
};

/// A GPU thread axis, e.g. thread_axis("threadIdx.x"). The tag must be one of blockIdx.{x,y,z},
/// threadIdx.{x,y,z}, vthread (or vthread.*); anything else is a tessel::Error.
IterVar thread_axis(const std::string &tag);
/// A thread axis with a known extent.
IterVar thread_axis(Range dom, const std::string &tag);

} // namespace tessel

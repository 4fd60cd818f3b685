#include "compiler/ir/IterVar.h"

#include "compiler/ir/IR.h"
#include "compiler/support/Error.h"

namespace tessel {

const char *to_string(IterVarType t) {
  switch (t) {
  case IterVarType::DataPar:
    return "DataPar";
  case IterVarType::ThreadIndex:
    return "ThreadIndex";
  case IterVarType::CommReduce:
    return "CommReduce";
  case IterVarType::Ordered:
    return "Ordered";
  case IterVarType::Opaque:
    return "Opaque";
  }
  return "?";
}

IterVar IterVar::make(Range dom, Var var, IterVarType type, std::string thread_tag) {
  internal_check(var.defined()) << "IterVar without a variable";
  if (dom.defined()) {
    internal_check(dom.min.type() == var.type() && dom.extent.type() == var.type())
        << "IterVar " << var.name() << ": domain type differs from variable type";
  }
  auto *n = new IterVarNode;
  n->dom = std::move(dom);
  n->var = std::move(var);
  n->iter_type = type;
  n->thread_tag = std::move(thread_tag);
  return IterVar(n);
}

Var IterVar::var() const { return Var(llvm::cast<Variable>(ptr_->var.get())); }

const std::string &IterVar::name() const {
  return llvm::cast<Variable>(ptr_->var.get())->name;
}

static bool is_thread_tag(const std::string &tag) {
  static const char *tags[] = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z", "threadIdx.x",
                               "threadIdx.y", "threadIdx.z", "vthread"};
  for (const char *t : tags)
    if (tag == t)
      return true;
  return tag.rfind("vthread.", 0) == 0 || tag == "vthread";
}

IterVar thread_axis(Range dom, const std::string &tag) {
  user_check(is_thread_tag(tag), "thread_axis")
      << "unknown thread tag '" << tag
      << "'; expected blockIdx.x/y/z, threadIdx.x/y/z or vthread";
  return IterVar::make(std::move(dom), Var(tag), IterVarType::ThreadIndex, tag);
}

IterVar thread_axis(const std::string &tag) { return thread_axis(Range(), tag); }

} // namespace tessel

#include "compiler/passes/SplitHostDevice.h"

#include "compiler/arith/Analyzer.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/support/Error.h"

#include <llvm/ADT/StringMap.h>

namespace tessel {

namespace {

class LaunchConfigFinder : public IRVisitor {
public:
  LaunchConfig config;

protected:
  void visit(const AttrStmt *op) override {
    if (op->key == attr::thread_extent)
      if (const IterVar *iv = std::get_if<IterVar>(&op->node))
        declare(iv->thread_tag(), op->value);
    IRVisitor::visit(op);
  }
  void visit(const For *op) override {
    if (op->for_kind == ForKind::ThreadBinding)
      declare(op->thread_tag, op->extent);
    IRVisitor::visit(op);
  }

private:
  void declare(const std::string &tag, const Expr &extent) {
    int64_t *slot = slot_of(tag);
    if (!slot)
      return; // virtual threads are not launch dimensions
    auto value = as_const_int(arith::simplify(extent));
    user_check(value && *value > 0, "split_host_device")
        << "the extent of " << tag << " must be a positive constant, got " << extent;
    auto [it, fresh] = seen_.try_emplace(tag, *value);
    user_check(fresh || it->second == *value, "split_host_device")
        << tag << " is bound with extent " << it->second << " and with extent " << *value
        << " in the same kernel; all bindings of one thread axis must have the same extent";
    *slot = *value;
  }

  int64_t *slot_of(const std::string &tag) {
    static const char *const dims[] = {"x", "y", "z"};
    for (int d = 0; d < 3; ++d) {
      if (tag == std::string("blockIdx.") + dims[d])
        return &config.grid[d];
      if (tag == std::string("threadIdx.") + dims[d])
        return &config.block[d];
    }
    return nullptr;
  }

  llvm::StringMap<int64_t> seen_;
};

} // namespace

LoweredFunc split_host_device(Stmt s, std::string name, std::vector<Buffer> flat_args,
                              std::vector<std::vector<int64_t>> arg_shapes) {
  user_check(flat_args.size() == arg_shapes.size(), "split_host_device")
      << "kernel '" << name << "' has " << flat_args.size() << " arguments but "
      << arg_shapes.size() << " argument shapes";
  LaunchConfigFinder finder;
  finder.visit_stmt(s);
  LoweredFunc f;
  f.name = std::move(name);
  f.args = std::move(flat_args);
  f.arg_shapes = std::move(arg_shapes);
  f.body = std::move(s);
  f.launch = finder.config;
  f.launch.dynamic_shared_bytes = 0;
  return f;
}

} // namespace tessel

#include "compiler/passes/SplitHostDevice.h"

#include "compiler/arith/Analyzer.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/WrittenBuffers.h"
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

// The first workspace (of `workspaces`) that `s` writes, or null.
const BufferNode *written_workspace(const Stmt &s, const std::vector<Buffer> &workspaces) {
  llvm::DenseSet<const Variable *> written = written_buffers(s);
  for (const Buffer &w : workspaces)
    if (written.count(llvm::dyn_cast<Variable>(w->data.get())))
      return w.get();
  return nullptr;
}

} // namespace

std::vector<LoweredFunc> split_host_device(Stmt s, const std::string &name,
                                           const std::vector<Buffer> &flat_args,
                                           const std::vector<std::vector<int64_t>> &arg_shapes,
                                           size_t num_workspaces) {
  internal_check(flat_args.size() == arg_shapes.size() && num_workspaces <= flat_args.size())
      << "kernel '" << name << "' has " << flat_args.size() << " arguments, "
      << arg_shapes.size() << " argument shapes and " << num_workspaces << " workspaces";
  std::vector<Stmt> bodies{s};
  if (num_workspaces > 0)
    if (const auto *seq = llvm::dyn_cast<Seq>(s.get()))
      bodies = seq->stmts;
  std::vector<Buffer> workspaces(flat_args.end() - num_workspaces, flat_args.end());
  std::vector<LoweredFunc> funcs;
  llvm::StringMap<int> names;
  for (size_t i = 0; i < bodies.size(); ++i) {
    LoweredFunc f;
    f.name = name;
    if (i + 1 < bodies.size()) {
      const BufferNode *w = written_workspace(bodies[i], workspaces);
      f.name += "_" + (w ? w->name : std::to_string(i));
    }
    if (int n = names[f.name]++)
      f.name += "_" + std::to_string(n);
    LaunchConfigFinder finder;
    finder.visit_stmt(bodies[i]);
    f.args = flat_args;
    f.arg_shapes = arg_shapes;
    f.body = bodies[i];
    f.launch = finder.config;
    f.launch.dynamic_shared_bytes = 0;
    funcs.push_back(std::move(f));
  }
  return funcs;
}

} // namespace tessel

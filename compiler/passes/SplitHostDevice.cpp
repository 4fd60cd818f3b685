#include "compiler/passes/SplitHostDevice.h"

#include "compiler/arith/Analyzer.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Substitute.h"
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
    if (op->key == attr::cluster_extent)
      if (const IterVar *iv = std::get_if<IterVar>(&op->node))
        for (int d = 0; d < 3; ++d)
          if (iv->thread_tag() == std::string("blockIdx.") + "xyz"[d])
            config.cluster[d] = *as_const_int(op->value);
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

// Whether `s` reads (or writes) a buffer in `written`: directly, or through a tensor map of one.
bool touches(const Stmt &s, const llvm::DenseSet<const Variable *> &written,
             const std::vector<Buffer> &args, const std::vector<TensorMapParam> &maps) {
  for (const Variable *v : written)
    if (uses_var(s, Var(v)))
      return true;
  for (const TensorMapParam &m : maps)
    if (written.count(llvm::dyn_cast<Variable>(args.at(size_t(m.arg))->data.get())) &&
        uses_var(s, m.var))
      return true;
  return false;
}

// Declares `tag` with extent `extent` where it was declared smaller, the body guarded to the
// old extent.
class WidenThreadExtent : public IRMutator {
public:
  WidenThreadExtent(std::string tag, int64_t extent) : tag_(std::move(tag)), extent_(extent) {}
  bool found = false;

protected:
  Stmt visit(const AttrStmt *op) override {
    const IterVar *iv = std::get_if<IterVar>(&op->node);
    if (!iv || op->key != attr::thread_extent || iv->thread_tag() != tag_)
      return IRMutator::visit(op);
    found = true;
    Stmt body = mutate(op->body);
    return AttrStmt::make(*iv, op->key, Expr(int(extent_)),
                          IfThenElse::make(iv->var() < op->value, body));
  }

private:
  std::string tag_;
  int64_t extent_;
};

// Launches `s` (made for `own`) in a grid of `grid` blocks: blocks past its own grid skip it.
Stmt widen_grid(Stmt s, const LaunchConfig &own, const std::array<int64_t, 3> &grid) {
  static const char *const tags[] = {"blockIdx.x", "blockIdx.y", "blockIdx.z"};
  for (int d = 0; d < 3; ++d) {
    if (own.grid[d] == grid[d])
      continue;
    WidenThreadExtent widen(tags[d], grid[d]);
    s = widen.mutate(s);
    if (!widen.found) { // not bound: only the first block row / layer runs it
      IterVar iv = thread_axis(tags[d]);
      s = AttrStmt::make(iv, attr::thread_extent, Expr(int(grid[d])),
                         IfThenElse::make(iv.var() == Expr(0), s));
    }
  }
  return s;
}

// A kernel's body with a binding of each thread axis it uses where no binding of it encloses
// the use, around the whole body: the launch defines them for the whole kernel, and a stage
// computed outside its thread loops may still index by them (a local copy whose region
// InferBound gives per thread, read inside those loops).
class UnboundThreadAxes : public IRVisitor {
public:
  std::vector<std::pair<IterVar, Expr>> axes; // the first binding of each, in order
  llvm::DenseSet<const Variable *> used_unbound;

protected:
  void visit(const AttrStmt *op) override {
    const IterVar *iv = op->key == attr::thread_extent ? std::get_if<IterVar>(&op->node) : nullptr;
    if (!iv)
      return IRVisitor::visit(op);
    const Variable *v = iv->var().as<Variable>();
    if (known_.insert(v).second)
      axes.push_back({*iv, op->value});
    visit_expr(op->value);
    bool fresh = bound_.insert(v).second;
    visit_stmt(op->body);
    if (fresh)
      bound_.erase(v);
  }
  void visit(const Variable *op) override {
    if (!bound_.count(op))
      used_unbound.insert(op);
  }

private:
  llvm::DenseSet<const Variable *> known_, bound_;
};

Stmt bind_thread_axes_used_unbound(Stmt body) {
  UnboundThreadAxes finder;
  finder.visit_stmt(body);
  for (const auto &[iv, extent] : finder.axes)
    if (finder.used_unbound.count(iv.var().as<Variable>()))
      body = AttrStmt::make(iv, attr::thread_extent, extent, body);
  return body;
}

} // namespace

std::vector<LoweredFunc> split_host_device(Stmt s, const std::string &name,
                                           const std::vector<Buffer> &flat_args,
                                           const std::vector<std::vector<int64_t>> &arg_shapes,
                                           size_t num_workspaces,
                                           const std::vector<TensorMapParam> &tensor_maps) {
  internal_check(flat_args.size() == arg_shapes.size() && num_workspaces <= flat_args.size())
      << "kernel '" << name << "' has " << flat_args.size() << " arguments, "
      << arg_shapes.size() << " argument shapes and " << num_workspaces << " workspaces";
  std::vector<Stmt> stmts{s};
  if (num_workspaces > 0)
    if (const auto *seq = llvm::dyn_cast<Seq>(s.get()))
      stmts = seq->stmts;
  std::vector<Buffer> workspaces(flat_args.end() - num_workspaces, flat_args.end());

  // Kernels: consecutive statements share one unless a statement reads what an earlier one of
  // the kernel writes (a kernel's blocks cannot wait for each other) or the two need different
  // blocks of threads; a grid is the largest of its statements', each guarded to its own.
  struct Kernel {
    std::vector<Stmt> stmts;
    std::vector<LaunchConfig> configs;
    llvm::DenseSet<const Variable *> written;
  };
  std::vector<Kernel> kernels;
  for (const Stmt &st : stmts) {
    LaunchConfigFinder finder;
    finder.visit_stmt(st);
    Kernel *k = kernels.empty() ? nullptr : &kernels.back();
    if (!k || touches(st, k->written, flat_args, tensor_maps) ||
        k->configs.front().block != finder.config.block ||
        k->configs.front().cluster != finder.config.cluster) {
      kernels.emplace_back();
      k = &kernels.back();
    }
    k->stmts.push_back(st);
    k->configs.push_back(finder.config);
    for (const Variable *v : written_buffers(st))
      k->written.insert(v);
  }

  std::vector<LoweredFunc> funcs;
  llvm::StringMap<int> names;
  for (size_t i = 0; i < kernels.size(); ++i) {
    Kernel &k = kernels[i];
    LoweredFunc f;
    f.name = name;
    if (i + 1 < kernels.size()) {
      const BufferNode *w = written_workspace(Seq::make(k.stmts), workspaces);
      f.name += "_" + (w ? w->name : std::to_string(i));
    }
    if (int n = names[f.name]++)
      f.name += "_" + std::to_string(n);
    f.launch = k.configs.front();
    for (const LaunchConfig &c : k.configs)
      for (int d = 0; d < 3; ++d)
        f.launch.grid[d] = std::max(f.launch.grid[d], c.grid[d]);
    for (size_t j = 0; j < k.stmts.size(); ++j)
      k.stmts[j] = widen_grid(k.stmts[j], k.configs[j], f.launch.grid);
    for (int d = 0; d < 3; ++d)
      user_check(f.launch.grid[d] % f.launch.cluster[d] == 0, "split_host_device")
          << "kernel '" << f.name << "': its grid has " << f.launch.grid[d] << " blocks along "
          << "xyz"[d] << ", not a multiple of its clusters of " << f.launch.cluster[d]
          << " (a statement with a larger grid shares the kernel); launch it without clusters";
    f.body = bind_thread_axes_used_unbound(Seq::make(k.stmts));
    f.launch.dynamic_shared_bytes = 0;
    f.args = flat_args;
    f.arg_shapes = arg_shapes;
    for (const TensorMapParam &m : tensor_maps)
      if (uses_var(f.body, m.var))
        f.tensor_maps.push_back(m);
    funcs.push_back(std::move(f));
  }
  return funcs;
}

} // namespace tessel

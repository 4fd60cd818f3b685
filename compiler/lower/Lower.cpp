#include "compiler/lower/Lower.h"

#include "compiler/arith/Analyzer.h"
#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Substitute.h"
#include "compiler/lower/Cluster.h"
#include "compiler/lower/InferBound.h"
#include "compiler/lower/LaunchLimits.h"
#include "compiler/lower/Rasterize.h"
#include "compiler/lower/ScheduleOps.h"
#include "compiler/lower/StageBodies.h"
#include "compiler/passes/ClusterSync.h"
#include "compiler/passes/DistributeFragmentLoops.h"
#include "compiler/passes/InjectPipeline.h"
#include "compiler/passes/LowerBulkCopy.h"
#include "compiler/passes/InsertThreadSyncs.h"
#include "compiler/passes/ReduceLastWaveParts.h"
#include "compiler/passes/RemoveNoOp.h"
#include "compiler/passes/OrderWgmmaTurns.h"
#include "compiler/passes/OverlapWgmmaSteps.h"
#include "compiler/passes/SpecializeLoops.h"
#include "compiler/passes/SplitHostDevice.h"
#include "compiler/passes/StorageFlatten.h"
#include "compiler/passes/SplitWarpRoles.h"
#include "compiler/passes/StorageRewrite.h"
#include "compiler/passes/UnrollLoops.h"
#include "compiler/passes/VectorizeLoops.h"
#include "compiler/passes/WgmmaSync.h"
#include "compiler/support/Error.h"
#include "compiler/support/Log.h"
#include "compiler/support/Remarks.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/raw_ostream.h>

#include <cstdlib>

namespace tessel {

namespace {

// What lower() prints: the IR after the steps asked for (by the options and
// TESSEL_PRINT_AFTER), and the remarks.
class StepPrinter {
public:
  explicit StepPrinter(const LowerOptions &o)
      : os_(o.print_stream ? *o.print_stream : llvm::errs()), names_(o.print_after) {
    if (const char *env = std::getenv("TESSEL_PRINT_AFTER")) {
      llvm::SmallVector<llvm::StringRef, 8> parts;
      llvm::StringRef(env).split(parts, ',', -1, false);
      for (llvm::StringRef p : parts)
        names_.push_back(p.trim().str());
    }
    for (const std::string &n : names_) {
      const auto &steps = lowering_steps();
      user_check(n == "all" || std::find(steps.begin(), steps.end(), n) != steps.end(), "lower")
          << "unknown step '" << n << "' to print after; the steps are: "
          << llvm::join(steps, ", ") << " (or all)";
    }
  }

  void after(const std::string &step, const Stmt &s) {
    if (std::find(names_.begin(), names_.end(), "all") == names_.end() &&
        std::find(names_.begin(), names_.end(), step) == names_.end())
      return;
    os_ << "// ---- IR after " << step << " ----\n" << s;
    os_.flush();
  }

  // Every remark with print_remarks; otherwise the requests not applied, as warnings.
  void remarks(const std::vector<Remark> &list, bool all) {
    if (all) {
      os_ << "// ---- remarks ----\n";
      for (const Remark &r : list)
        os_ << r.str() << "\n";
      os_.flush();
      return;
    }
    for (const Remark &r : list)
      if (r.kind == Remark::Kind::Missed)
        log_message(LogLevel::Warning, r.message);
  }

private:
  llvm::raw_ostream &os_;
  std::vector<std::string> names_;
};

// A stage computed at a loop of its kernel's root stage (a stage at the root). Its region is
// the block's share (InferBound relaxes a global stage's over the block's threads, as shared
// memory's), computed by the block's threads as an argument computed there would be: by each
// thread all of it where its loops are unbound (each reads its own writes, the others write
// the same values), or split over the threads its loops are bound to. Such a stage may be a
// global workspace written beside another output for later kernels.
bool computed_in_root_kernel(const StageNode *s) {
  const StageNode *root = s->attach_stage;
  return s->attach_type == AttachType::Scope && root && root->attach_type == AttachType::Root;
}

} // namespace

const std::vector<std::string> &lowering_steps() {
  static const std::vector<std::string> steps = {
      "schedule_ops",      "simplify",         "lower_bulk_copy",  "distribute_fragment_loops",
      "storage_flatten",   "vectorize_loops",  "pipeline",  "reduce_last_wave_parts",
      "unroll_loops",
      "specialize_loops",  "storage_rewrite",  "insert_thread_syncs",
      "insert_wgmma_syncs", "overlap_wgmma_steps", "order_wgmma_turns", "split_warp_roles",
      "insert_cluster_syncs", "remove_no_op",     "final_simplify"};
  return steps;
}

LoweredModule lower(const Schedule &s, const std::vector<Tensor> &args,
                    const LowerOptions &options) {
  const ScheduleNode *sch = s.get();
  user_check(sch, "lower") << "the schedule is empty";
  StepPrinter printer(options);

  // Buffers: arguments in global memory, every other computed stage in its scope.
  StageBuffers buffers;
  llvm::DenseSet<const StageNode *> arg_stages;
  std::vector<Buffer> arg_buffers;
  std::vector<std::vector<int64_t>> arg_shapes, arg_strides;
  // A kernel parameter: its buffer, constant shape and strides (empty: compact).
  auto add_param = [&](const Buffer &b, std::vector<int64_t> strides = {}) {
    arg_buffers.push_back(b);
    std::vector<int64_t> shape;
    for (const Expr &e : b->shape)
      shape.push_back(*as_const_int(e));
    arg_shapes.push_back(shape);
    arg_strides.push_back(std::move(strides));
  };
  for (const Tensor &t : args) {
    StageNode *st = stage_of(sch, t);
    user_check(st, "lower") << "argument '" << t.name() << "' is not part of the schedule";
    user_check(st->attach_type != AttachType::Inline, "lower")
        << "argument '" << t.name() << "' is inlined; an argument must be stored";
    user_check(!st->op.as<FoldOpNode>(), "lower")
        << "argument '" << t.name() << "' is a state of fold '" << st->op.name()
        << "'; compute an argument from it (O = o / l) and compute the fold at that tensor's "
           "loops";
    user_check(arg_stages.insert(st).second, "lower")
        << "argument '" << t.name() << "' is listed twice";
    user_check(st->scope == "global", "lower")
        << "argument '" << t.name() << "' is stored in '" << st->scope
        << "' scope; arguments live in global memory";
    // A strided placeholder's buffer addresses its elements through its strides (int64 where
    // int32 cannot hold one; storage_flatten widens the indices of a buffer of 2^31 elements).
    std::vector<Expr> strides;
    for (int64_t v : t.strides())
      strides.push_back(make_const(v > INT32_MAX ? Int(64) : Int(32), v));
    Buffer b = Buffer::make(t.name(), t.dtype(), t.shape(), "global", strides);
    buffers[st] = {b};
    add_param(b, t.strides());
  }
  // Workspaces: stages stored in global memory that are not arguments (LoweredModule).
  size_t num_workspaces = 0;
  for (const auto &st : sch->stages) {
    if (buffers.count(st.get()) || st->attach_type == AttachType::Inline)
      continue;
    user_check(!st->is_output, "lower")
        << "output '" << st->op.name() << "' is not among the arguments; pass it to lower()";
    user_check(st->op.as<ComputeOpNode>() || st->op.as<FoldOpNode>(), "lower")
        << "input '" << st->op.name() << "' is read but not among the arguments; pass it to lower()";
    std::vector<Buffer> &bufs = buffers[st.get()];
    for (int k = 0; k < st->op->num_outputs(); ++k) {
      std::string scope = st->scope;
      for (const auto &[output, s] : st->output_scopes)
        if (output == k)
          scope = s;
      bufs.push_back(Buffer::make(st->op.output(k).name(), st->op->output_dtype(k),
                                  st->op->output_shape(k), scope));
    }
    if (st->scope != "global")
      continue;
    user_check(st->attach_type == AttachType::Root || computed_in_root_kernel(st.get()), "lower")
        << "stage '" << st->op.name() << "' is stored in global memory but computed at loop '"
        << st->attach_ivar.name() << "' of stage '"
        << (st->attach_stage ? st->attach_stage->op.name() : std::string("?"))
        << "', which is itself computed inside another stage; a global stage that is not an "
           "argument is a workspace, written by a kernel of its own or at a loop of its "
           "kernel's root stage: leave it at the root, compute it at a loop of the kernel's "
           "root stage, or give it a 'shared' or 'local' scope";
    arg_stages.insert(st.get());
    for (const Buffer &b : bufs) {
      add_param(b);
      ++num_workspaces;
    }
  }

  check_rasterizations(sch);
  StageBodies bodies = inline_stages(sch);
  DomainMap dom = infer_bound(sch, bodies);
  check_clusters(sch, dom);

  // The pipeline, in order. Each step can be printed after (LowerOptions::print_after).
  Stmt body = schedule_ops(sch, bodies, dom, buffers, arg_stages);
  printer.after("schedule_ops", body);
  body = arith::simplify(body);
  printer.after("simplify", body);
  std::vector<TensorMapParam> tensor_maps;
  body = lower_bulk_copy(body, arg_buffers, &tensor_maps);
  printer.after("lower_bulk_copy", body);
  body = distribute_fragment_loops(body);
  printer.after("distribute_fragment_loops", body);
  std::vector<Buffer> flat_args;
  body = storage_flatten(body, arg_buffers, &flat_args, options.wide_index_elements);
  body = arith::simplify(body);
  printer.after("storage_flatten", body);
  Remarks remarks; // what became of vectorize, unroll and pipeline
  body = vectorize_loops(body, &remarks);
  printer.after("vectorize_loops", body);
  body = inject_pipeline(body, &remarks);
  printer.after("pipeline", body);
  std::vector<Buffer> part_workspaces; // the last wave's parts (Stage::split_last_wave)
  body = reduce_last_wave_parts(body, &part_workspaces);
  printer.after("reduce_last_wave_parts", body);
  for (const Buffer &b : part_workspaces) {
    flat_args.push_back(b);
    arg_shapes.push_back({*as_const_int(b->shape[0])});
    arg_strides.emplace_back();
    ++num_workspaces;
  }
  body = unroll_loops(body, options.auto_unroll_max_step, &remarks);
  body = arith::simplify(body);
  printer.after("unroll_loops", body);
  body = specialize_loops(body);
  printer.after("specialize_loops", body);
  body = storage_rewrite(body);
  printer.after("storage_rewrite", body);
  body = insert_thread_syncs(body);
  printer.after("insert_thread_syncs", body);
  body = insert_wgmma_syncs(body);
  printer.after("insert_wgmma_syncs", body);
  body = overlap_wgmma_steps(body);
  printer.after("overlap_wgmma_steps", body);
  body = order_wgmma_turns(body);
  printer.after("order_wgmma_turns", body);
  body = split_warp_roles(body, &remarks);
  printer.after("split_warp_roles", body);
  body = insert_cluster_syncs(body);
  printer.after("insert_cluster_syncs", body);
  body = remove_no_op(body);
  printer.after("remove_no_op", body);
  body = arith::simplify(body);
  printer.after("final_simplify", body);

  LoweredModule m;
  m.num_workspaces = num_workspaces;
  m.remarks = remarks.list();
  printer.remarks(m.remarks, options.print_remarks);
  m.funcs =
      split_host_device(body, options.name, flat_args, arg_shapes, num_workspaces, tensor_maps);
  for (LoweredFunc &f : m.funcs) {
    f.arg_strides = arg_strides;
    // A kernel may declare at most 48 KiB of shared memory statically; beyond that (deep
    // pipelines, big tiles) it takes all of it dynamically, and the launch asks for it.
    if (int64_t smem = cuda_shared_memory_bytes(f); smem > 48 * 1024)
      f.launch.dynamic_shared_bytes = smem;
    f.launch.after_previous = &f != &m.funcs.front();
  }
  check_launch_limits(sch, dom, m, options.max_workspace_bytes);
  return m;
}

std::string to_string(const LoweredFunc &f) {
  std::string s;
  llvm::raw_string_ostream os(s);
  IRPrinter p(os, 1);
  os << "kernel " << f.name << "(";
  for (size_t i = 0; i < f.args.size(); ++i) {
    if (i)
      os << ", ";
    os << p.name_of(f.args[i].get()) << ": " << f.args[i].dtype() << "[";
    for (size_t d = 0; d < f.arg_shapes[i].size(); ++d)
      os << (d ? ", " : "") << f.arg_shapes[i][d];
    os << "]";
    if (i < f.arg_strides.size() && !f.arg_strides[i].empty()) {
      os << " strides [";
      for (size_t d = 0; d < f.arg_strides[i].size(); ++d)
        os << (d ? ", " : "") << f.arg_strides[i][d];
      os << "]";
    }
  }
  const LaunchConfig &l = f.launch;
  os << ")\n  // grid (" << l.grid[0] << ", " << l.grid[1] << ", " << l.grid[2] << "), block ("
     << l.block[0] << ", " << l.block[1] << ", " << l.block[2] << ")";
  if (l.dynamic_shared_bytes)
    os << ", dynamic shared " << l.dynamic_shared_bytes << " bytes";
  if (l.cluster_size() > 1)
    os << ", cluster (" << l.cluster[0] << ", " << l.cluster[1] << ", " << l.cluster[2] << ")";
  if (l.after_previous)
    os << ", after the previous kernel";
  os << "\n{\n";
  p.print(f.body);
  os << "}\n";
  return os.str();
}

std::string to_string(const LoweredModule &m) {
  std::string s;
  for (const LoweredFunc &f : m.funcs)
    s += to_string(f);
  return s;
}

std::ostream &operator<<(std::ostream &os, const LoweredModule &m) { return os << to_string(m); }

} // namespace tessel

#include "compiler/lower/LaunchLimits.h"

#include "compiler/ir/IROperator.h"
#include "compiler/support/Error.h"

#include <optional>

namespace tessel {

namespace {

const char *const kGridTags[3] = {"blockIdx.x", "blockIdx.y", "blockIdx.z"};
const char *const kBlockTags[3] = {"threadIdx.x", "threadIdx.y", "threadIdx.z"};

// "axis 'i.outer' of stage 'C', bound to blockIdx.y": the stage loop bound to `tag` over
// `extent` iterations, else the longest loop bound to it.
std::string bound_axis(const ScheduleNode *sch, const DomainMap &dom, const std::string &tag,
                       int64_t extent) {
  std::string exact, longest;
  int64_t longest_extent = -1;
  for (const auto &st : sch->stages)
    for (const auto &[iv, attr] : st->iter_var_attrs) {
      if (!attr.bind_thread.defined() || attr.bind_thread->thread_tag != tag)
        continue;
      auto it = dom.find(iv);
      std::optional<int64_t> e =
          it == dom.end() ? std::nullopt : as_const_int(it->second.extent);
      if (!e)
        continue;
      std::string name = "axis '" + iv->var.as<Variable>()->name + "' of stage '" +
                         st->op.name() + "', bound to " + tag;
      if (*e == extent && exact.empty())
        exact = name;
      if (*e > longest_extent) {
        longest = name;
        longest_extent = *e;
      }
    }
  return !exact.empty() ? exact : !longest.empty() ? longest : tag;
}

std::string bytes_str(int64_t b) {
  if (b >= (int64_t(1) << 30))
    return std::to_string(b >> 30) + " GiB";
  if (b >= (int64_t(1) << 20))
    return std::to_string(b >> 20) + " MiB";
  if (b >= 1024)
    return std::to_string(b / 1024) + " KiB";
  return std::to_string(b) + " bytes";
}

} // namespace

int64_t max_shared_bytes_per_block(const std::string &arch) {
  if (arch == "sm_90" || arch == "sm_90a")
    return 227 * 1024;
  if (arch == "sm_80" || arch == "sm_87")
    return 163 * 1024;
  if (arch == "sm_86" || arch == "sm_89")
    return 99 * 1024;
  if (arch == "sm_75")
    return 64 * 1024;
  if (arch == "sm_70" || arch == "sm_72")
    return 96 * 1024;
  return 0;
}

void check_launch_limits(const ScheduleNode *sch, const DomainMap &dom, const LoweredModule &m,
                         int64_t max_workspace_bytes) {
  for (const LoweredFunc &f : m.funcs) {
    const LaunchConfig &l = f.launch;
    for (int d = 0; d < 3; ++d) {
      const int64_t limit = d == 0 ? kMaxGridX : kMaxGridYZ;
      user_check(l.grid[d] <= limit, "lower")
          << "kernel '" << f.name << "' launches " << l.grid[d] << " blocks along "
          << kGridTags[d] << " (" << bound_axis(sch, dom, kGridTags[d], l.grid[d])
          << "), over CUDA's limit of " << limit << "; "
          << (d == 0 ? "split that axis and bind its outer part to blockIdx.y"
                     : "bind that axis to blockIdx.x (up to 2147483647 blocks) or split it over "
                       "two block indices")
          << ", or use a smaller shape";
      const int64_t block_limit = d == 2 ? kMaxBlockZ : kMaxBlockXY;
      user_check(l.block[d] <= block_limit, "lower")
          << "kernel '" << f.name << "' has " << l.block[d] << " threads along " << kBlockTags[d]
          << " (" << bound_axis(sch, dom, kBlockTags[d], l.block[d]) << "), over CUDA's limit of "
          << block_limit << "; split that axis and bind only a part of it to threads";
    }
    user_check(l.threads_per_block() <= kMaxThreadsPerBlock, "lower")
        << "kernel '" << f.name << "' has blocks of " << l.block[0] << " x " << l.block[1]
        << " x " << l.block[2] << " = " << l.threads_per_block()
        << " threads, over CUDA's limit of " << kMaxThreadsPerBlock
        << " per block; bind smaller tiles to threadIdx (smaller split factors)";
    // lower() asks for shared memory over 48 KiB dynamically; less is within every limit.
    const int64_t smem = l.dynamic_shared_bytes;
    user_check(smem <= kMaxSharedBytesPerBlock, "lower")
        << "kernel '" << f.name << "' needs " << smem << " bytes (" << bytes_str(smem)
        << ") of shared memory per block, over the " << bytes_str(kMaxSharedBytesPerBlock)
        << " a block can have on any GPU (sm_90); use smaller tiles or fewer pipeline stages";
  }
  if (m.funcs.empty() || m.num_workspaces == 0)
    return;
  const LoweredFunc &f = m.funcs.front();
  int64_t total = 0, largest = 0;
  size_t largest_at = 0;
  for (size_t i = f.args.size() - m.num_workspaces; i < f.args.size(); ++i) {
    int64_t bytes = f.args[i].dtype().bytes();
    for (int64_t e : f.arg_shapes[i])
      bytes = e > 0 && bytes > INT64_MAX / e ? INT64_MAX : bytes * e;
    total = bytes > INT64_MAX - total ? INT64_MAX : total + bytes;
    if (bytes > largest) {
      largest = bytes;
      largest_at = i;
    }
  }
  user_check(total <= max_workspace_bytes, "lower")
      << "the module needs " << bytes_str(total) << " of workspace (the largest, '"
      << f.args[largest_at].name() << "', " << bytes_str(largest) << "), over the limit of "
      << bytes_str(max_workspace_bytes)
      << " (LowerOptions::max_workspace_bytes); split K into fewer parts, or use a smaller shape";
}

} // namespace tessel

#include "runtime/interp/Executor.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/support/Error.h"
#include "runtime/interp/HalfFloat.h"
#include "runtime/interp/Machine.h"
#include "runtime/interp/WarpScheduler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace tessel::interp {

// ---- HostBuffer ------------------------------------------------------------------------------

namespace {

size_t element_bytes(DataType t) { return t.is_bool() ? 1 : size_t(t.bits() / 8); }

void check_host_dtype(DataType t) {
  bool ok = t.is_scalar() &&
            (t.is_bool() || (t.is_integer_like() && (t.bits() == 8 || t.bits() == 16 ||
                                                     t.bits() == 32 || t.bits() == 64)) ||
             (t.code() == DataType::Float &&
              (t.bits() == 16 || t.bits() == 32 || t.bits() == 64)) ||
             (t.is_bfloat() && t.bits() == 16) || t.is_float8());
  user_check(ok, "HostBuffer") << "unsupported element type " << t;
}

template <typename T> T load_as(const std::byte *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T> void store_as(std::byte *p, T v) { std::memcpy(p, &v, sizeof(T)); }

const Float8Format &float8_format(DataType t) {
  return t.code() == DataType::Float8E4M3 ? kE4M3 : kE5M2;
}

int64_t to_int(DataType t, double v) {
  if (std::isnan(v))
    return 0;
  double x = std::trunc(v);
  x = std::clamp(x, -0x1p63, 0x1p63 - 1024);
  return Numeric::of(t).wrap(static_cast<int64_t>(x));
}

} // namespace

HostBuffer::HostBuffer(DataType dtype, size_t elements)
    : dtype_(dtype), elements_(elements), bytes_(elements * element_bytes(dtype)) {
  check_host_dtype(dtype);
}

HostBuffer HostBuffer::from_doubles(DataType dtype, const std::vector<double> &values) {
  HostBuffer b(dtype, values.size());
  for (size_t i = 0; i < values.size(); ++i)
    b.set(i, values[i]);
  return b;
}

HostBuffer HostBuffer::from_floats(DataType dtype, const std::vector<float> &values) {
  return from_doubles(dtype, std::vector<double>(values.begin(), values.end()));
}

double HostBuffer::get(size_t i) const {
  internal_check(i < elements_) << "HostBuffer::get(" << i << ") of " << elements_;
  const std::byte *p = bytes_.data() + i * element_bytes(dtype_);
  if (dtype_.is_float8()) // the 8-bit code
    return float8_value(load_as<uint8_t>(p), float8_format(dtype_));
  if (dtype_.is_bfloat())
    return bfloat16_value(load_as<uint16_t>(p));
  if (dtype_.is_float()) {
    switch (dtype_.bits()) {
    case 16:
      return half_value(load_as<uint16_t>(p));
    case 32:
      return load_as<float>(p);
    default:
      return load_as<double>(p);
    }
  }
  return static_cast<double>(get_int(i));
}

void HostBuffer::set(size_t i, double v) {
  internal_check(i < elements_) << "HostBuffer::set(" << i << ") of " << elements_;
  std::byte *p = bytes_.data() + i * element_bytes(dtype_);
  if (dtype_.is_float8())
    return store_as(p, float8_bits(v, float8_format(dtype_)));
  if (dtype_.is_bfloat())
    return store_as(p, bfloat16_bits(v));
  if (dtype_.is_float()) {
    switch (dtype_.bits()) {
    case 16:
      return store_as(p, half_bits(v));
    case 32:
      return store_as(p, static_cast<float>(v));
    default:
      return store_as(p, v);
    }
  }
  set_int(i, dtype_.is_bool() ? int64_t(v != 0.0) : to_int(dtype_, v));
}

int64_t HostBuffer::get_int(size_t i) const {
  internal_check(i < elements_ && dtype_.is_integer_like()) << "HostBuffer::get_int";
  const std::byte *p = bytes_.data() + i * element_bytes(dtype_);
  bool s = dtype_.is_int();
  switch (element_bytes(dtype_)) {
  case 1:
    return s ? int64_t(load_as<int8_t>(p)) : int64_t(load_as<uint8_t>(p));
  case 2:
    return s ? int64_t(load_as<int16_t>(p)) : int64_t(load_as<uint16_t>(p));
  case 4:
    return s ? int64_t(load_as<int32_t>(p)) : int64_t(load_as<uint32_t>(p));
  default:
    return load_as<int64_t>(p);
  }
}

void HostBuffer::set_int(size_t i, int64_t v) {
  internal_check(i < elements_ && dtype_.is_integer_like()) << "HostBuffer::set_int";
  std::byte *p = bytes_.data() + i * element_bytes(dtype_);
  v = Numeric::of(dtype_).wrap(v);
  switch (element_bytes(dtype_)) {
  case 1:
    return store_as(p, static_cast<uint8_t>(v));
  case 2:
    return store_as(p, static_cast<uint16_t>(v));
  case 4:
    return store_as(p, static_cast<uint32_t>(v));
  default:
    return store_as(p, v);
  }
}

std::vector<double> HostBuffer::to_doubles() const {
  std::vector<double> r(elements_);
  for (size_t i = 0; i < elements_; ++i)
    r[i] = get(i);
  return r;
}

std::vector<float> HostBuffer::to_floats() const {
  std::vector<float> r(elements_);
  for (size_t i = 0; i < elements_; ++i)
    r[i] = static_cast<float>(get(i));
  return r;
}

// ---- Machine ---------------------------------------------------------------------------------

bool Mask::contains(uint32_t t) const {
  if (all)
    return t < n_threads;
  return std::binary_search(ids.begin(), ids.end(), t);
}

const char *scope_name(MemScope s) {
  switch (s) {
  case MemScope::Global:
    return "global";
  case MemScope::Shared:
    return "shared";
  case MemScope::Local:
    return "local";
  case MemScope::Fragment:
    return "fragment";
  }
  return "?";
}

std::string Machine::thread_name(uint32_t t) const {
  std::ostringstream os;
  os << "thread (" << tid[t][0] << "," << tid[t][1] << "," << tid[t][2] << ")";
  return os.str();
}

std::string Machine::agent_name(int32_t agent) const {
  if (agent >= 0)
    return thread_name(uint32_t(agent));
  if (is_async_agent(agent))
    return "the tma_load copies completing on " +
           barrier_name(uint32_t(kAsyncAgentBase - agent));
  uint32_t w = uint32_t(-2 - agent);
  uint32_t last = std::min(n_threads, 32 * w + 32) - 1;
  return "warp " + std::to_string(w) + " (" + thread_name(32 * w) + ".." + thread_name(last) +
         ", in a warp-level matrix intrinsic)";
}

std::string Machine::block_name() const {
  std::ostringstream os;
  os << "(" << block_idx[0] << "," << block_idx[1] << "," << block_idx[2] << ")";
  return os.str();
}

// ---- execute ---------------------------------------------------------------------------------

namespace {

void check_launch(const LoweredFunc &f) {
  for (int d = 0; d < 3; ++d)
    user_check(f.launch.grid[d] >= 1 && f.launch.block[d] >= 1, "interp")
        << "kernel '" << f.name << "': grid and block sizes must be at least 1";
  user_check(f.launch.threads_per_block() <= 1024, "interp")
      << "kernel '" << f.name << "' has " << f.launch.threads_per_block()
      << " threads per block; CUDA allows at most 1024";
}

int64_t expected_elements(const LoweredFunc &f, size_t i) {
  if (i < f.arg_shapes.size() && !f.arg_shapes[i].empty())
    return storage_elements(f.arg_shapes[i],
                            i < f.arg_strides.size() ? f.arg_strides[i] : std::vector<int64_t>{});
  int64_t n = 1;
  for (const Expr &e : f.args[i]->shape) {
    auto v = as_const_int(e);
    user_check(v.has_value(), "interp")
        << "argument '" << f.args[i].name() << "' has a non-constant shape " << e;
    n *= *v;
  }
  return n;
}

} // namespace

void execute(const LoweredFunc &f, const std::vector<HostBuffer *> &args,
             const ExecOptions &options) {
  check_launch(f);
  user_check(args.size() == f.args.size(), "interp")
      << "kernel '" << f.name << "' takes " << f.args.size() << " buffers, " << args.size()
      << " were given";
  const std::array<int64_t, 3> cluster = f.launch.cluster;
  const int64_t cluster_size = f.launch.cluster_size();
  for (int d = 0; d < 3; ++d)
    user_check(cluster[d] >= 1 && f.launch.grid[d] % cluster[d] == 0, "interp")
        << "kernel '" << f.name << "': its grid (" << f.launch.grid[0] << ", " << f.launch.grid[1]
        << ", " << f.launch.grid[2] << ") is not a whole number of its clusters (" << cluster[0]
        << ", " << cluster[1] << ", " << cluster[2] << ")";

  // One Machine per block of a cluster (one without clusters), each with the kernel compiled
  // against it; they share the global memories, held by the first.
  std::vector<std::unique_ptr<Machine>> blocks;
  std::vector<std::unique_ptr<Compiler>> compilers;
  for (int64_t r = 0; r < cluster_size; ++r) {
    auto M = std::make_unique<Machine>();
    M->opts = options;
    M->launch = f.launch;
    M->kernel = f.name;
    M->n_threads = static_cast<uint32_t>(f.launch.threads_per_block());
    M->n_warps = (M->n_threads + 31) / 32;
    M->cluster_rank = uint32_t(r);
    for (uint32_t t = 0; t < M->n_threads; ++t) {
      int64_t bx = f.launch.block[0], by = f.launch.block[1];
      M->tid.push_back({t % bx, (t / bx) % by, t / (bx * by)});
    }
    compilers.push_back(std::make_unique<Compiler>(*M));
    blocks.push_back(std::move(M));
  }
  Machine &M = *blocks.front();
  std::vector<std::pair<HostBuffer *, Memory *>> globals;
  std::vector<Memory *> arg_memories;
  for (size_t i = 0; i < args.size(); ++i) {
    const Buffer &b = f.args[i];
    user_check(args[i] != nullptr, "interp") << "argument '" << b.name() << "' is null";
    HostBuffer &h = *args[i];
    user_check(h.dtype() == b.dtype(), "interp")
        << "argument '" << b.name() << "' is " << b.dtype() << " but the host buffer holds "
        << h.dtype();
    int64_t n = expected_elements(f, i);
    user_check(int64_t(h.elements()) == n, "interp")
        << "argument '" << b.name() << "' has " << n << " elements but the host buffer has "
        << h.elements();
    user_check(!b->elem_offset.defined() || is_zero(b->elem_offset), "interp")
        << "argument '" << b.name() << "' has an element offset; pass the buffer it views";
    // The same host buffer passed twice is one memory, so in-place kernels see their writes.
    Memory *mem = nullptr;
    for (auto &[host, m] : globals)
      if (host == &h)
        mem = m;
    if (!mem) {
      auto owned = std::make_unique<Memory>();
      owned->name = b.name();
      owned->dtype = b.dtype();
      owned->num = Numeric::of(b.dtype());
      owned->scope = MemScope::Global;
      owned->size = n;
      owned->host = &h;
      owned->data.resize(size_t(n));
      for (int64_t j = 0; j < n; ++j) {
        if (owned->num.is_float())
          owned->data[size_t(j)].f = h.get(size_t(j));
        else
          owned->data[size_t(j)].i = h.get_int(size_t(j));
      }
      mem = owned.get();
      M.memories.push_back(std::move(owned));
      globals.push_back({&h, mem});
    }
    for (auto &C : compilers)
      C->bind_memory(Var(static_cast<const Variable *>(b->data.get())), mem);
    arg_memories.push_back(mem);
  }
  std::vector<StmtPtr> bodies;
  for (size_t r = 0; r < blocks.size(); ++r) {
    bind_tensor_maps(*blocks[r], f, arg_memories);
    bodies.push_back(compilers[r]->stmt(f.body));
  }
  const Mask all = Mask::full(M.n_threads);
  // Independent warps: a fiber per warp, each under the mask of its threads. The blocks of a
  // cluster run together (their warps interleaved), so always so.
  std::unique_ptr<WarpScheduler> warps;
  std::vector<Mask> warp_masks;
  ClusterBarrier cluster_barrier;
  std::vector<Machine *> members;
  for (auto &B : blocks)
    members.push_back(B.get());
  if (cluster_size > 1 || options.independent_warps.value_or(uses_warp_roles(f.body))) {
    warps = std::make_unique<WarpScheduler>(members);
    for (Machine *B : members) {
      B->warps = warps.get();
      if (cluster_size > 1) {
        B->cluster = members;
        B->cluster_barrier = &cluster_barrier;
      }
    }
    for (uint32_t w = 0; w < M.n_warps; ++w)
      warp_masks.push_back(all.filter([&](uint32_t t) { return t / 32 == w; }));
  }
  for (int64_t z = 0; z < f.launch.grid[2]; z += cluster[2])
    for (int64_t y = 0; y < f.launch.grid[1]; y += cluster[1])
      for (int64_t x = 0; x < f.launch.grid[0]; x += cluster[0]) {
        // Rank r of the cluster is its block (x, y, z) + (r % cx, r / cx % cy, r / (cx cy)).
        for (int64_t r = 0; r < cluster_size; ++r) {
          Machine &B = *blocks[size_t(r)];
          B.block_idx = {x + r % cluster[0], y + r / cluster[0] % cluster[1],
                         z + r / (cluster[0] * cluster[1])};
          B.epoch = 1;
          ++B.block_serial;
          B.pending_copies.assign(B.n_threads, {});
          B.committed_groups.assign(B.n_threads, 0);
          B.pending_wgmma.assign(B.n_warps, {});
          B.wgmma_groups.assign(B.n_warps, 0);
          B.barriers.clear();
          B.pending_stores.assign(B.n_threads, {});
          B.store_groups.assign(B.n_threads, 0);
          B.proxy_fences.assign(B.n_threads, 0);
          B.clocks.reset(B.n_warps);
          B.block_barrier = BlockBarrier{};
          B.named_barriers = {};
        }
        cluster_barrier = ClusterBarrier{};
        if (warps)
          warps->run_cluster(
              [&](uint32_t r, uint32_t w) { bodies[r]->exec(*blocks[r], warp_masks[w]); });
        else
          bodies[0]->exec(M, all);
        for (auto &B : blocks) {
          check_tma_landed(*B);
          check_tma_stores_done(*B);
          check_wgmma_landed(*B);
        }
      }

  for (auto &[host, mem] : globals)
    for (int64_t j = 0; j < mem->size; ++j) {
      if (mem->num.is_float())
        host->set(size_t(j), mem->data[size_t(j)].f);
      else
        host->set_int(size_t(j), mem->data[size_t(j)].i);
    }
}

void execute(const LoweredModule &m, const std::vector<HostBuffer *> &args,
             const ExecOptions &options) {
  user_check(!m.funcs.empty(), "interp") << "the module has no kernel";
  const LoweredFunc &first = m.funcs.front();
  size_t num_args = first.args.size() - m.num_workspaces;
  user_check(args.size() == num_args, "interp")
      << "kernel '" << first.name << "' takes " << num_args << " buffers, " << args.size()
      << " were given";
  // Workspaces start as NaN (floats) or -1 (integers): a read of an element no kernel wrote
  // shows up in the result.
  std::vector<HostBuffer> workspaces;
  for (size_t i = num_args; i < first.args.size(); ++i) {
    int64_t n = expected_elements(first, i);
    workspaces.emplace_back(first.args[i].dtype(), size_t(n));
    for (int64_t j = 0; j < n; ++j)
      if (first.args[i].dtype().is_float())
        workspaces.back().set(size_t(j), std::nan(""));
      else
        workspaces.back().set_int(size_t(j), -1);
  }
  std::vector<HostBuffer *> all = args;
  for (HostBuffer &w : workspaces)
    all.push_back(&w);
  for (const LoweredFunc &f : m.funcs)
    execute(f, all, options);
}

} // namespace tessel::interp

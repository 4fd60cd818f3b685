// thread_allreduce (Intrinsics.h) on the executor: the reduction across the threads along
// threadIdx.x, in the order the generated CUDA combines (CodeGenCUDAReduce.cpp): an xor
// butterfly within each warp, then the warps' results in warp order. Every thread of the block
// takes part: with independent warps it is a block collective (WarpSync.cpp), computed when the
// last warp arrives. With a count, the values acc[i], ..., acc[i + count - 1] of each thread are
// combined each on its own, in that order (the CUDA's batched exchange combines each over the
// same pairs).
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"
#include "runtime/interp/Machine.h"
#include "runtime/interp/WarpIntrinsic.h"

#include <cmath>
#include <optional>

namespace tessel::interp {

namespace {

class ThreadAllreduceCode : public StmtCode {
public:
  ThreadAllreduceCode(Expr src, PtrArg acc, std::string combiner, int64_t extent, int64_t count)
      : src_(std::move(src)), acc_(std::move(acc)), combiner_(std::move(combiner)),
        extent_(extent), count_(count) {}

  void exec(Machine &M, const Mask &m) override {
    if (!M.warps)
      user_check(m.count() == M.n_threads, "interp")
          << "thread_allreduce is reached by only " << m.count() << " of the " << M.n_threads
          << " threads of block " << M.block_name()
          << "; every thread of the block takes part in it: it must not be inside control flow "
             "that depends on threadIdx";
    Memory &mem = *acc_.mem;
    user_check(mem.scope == MemScope::Local, "interp")
        << "thread_allreduce combines a local buffer of each thread; '" << mem.name << "' is "
        << scope_name(mem.scope);
    // Each thread's element, kept until the last warp arrives (with independent warps).
    const Val *index = acc_.index->eval(M, m);
    index_.resize(M.n_threads);
    m.each([&](uint32_t t) {
      user_check(index[t].i >= 0 && index[t].i + count_ <= mem.size, "interp")
          << "thread_allreduce: elements " << index[t].i << " to " << index[t].i + count_ - 1
          << " outside '" << mem.name << "' (size " << mem.size << ") by " << M.where(t);
      index_[t] = index[t].i;
    });
    block_collective(M, m, "thread_allreduce", [&] {
      for (int64_t e = 0; e < count_; ++e)
        reduce(M, e);
    });
  }

private:
  /// Combines every thread's element `e` (of the count from its index), all threads having
  /// arrived.
  void reduce(Machine &M, int64_t e) {
    Memory &mem = *acc_.mem;
    const uint32_t n = M.n_threads, x = uint32_t(extent_);
    auto element = [&](uint32_t t) -> Val & {
      return mem.data[size_t(t) * size_t(mem.size) + size_t(index_[t] + e)];
    };
    std::vector<Val> v(n);
    for (uint32_t t = 0; t < n; ++t)
      v[t] = element(t);
    // Threads t and t ^ o (o < min(x, 32)) are in the same warp and the same group of x.
    for (uint32_t o = std::min(x, 32u) / 2; o >= 1; o /= 2) {
      std::vector<Val> next(n);
      for (uint32_t t = 0; t < n; ++t)
        next[t] = combine(mem.num, v[t], v[t ^ o]);
      v = std::move(next);
    }
    if (x > 32) {
      for (uint32_t g = 0; g < n; g += x) {
        Val r = v[g];
        for (uint32_t w = 1; w < x / 32; ++w)
          r = combine(mem.num, r, v[g + 32 * w]);
        for (uint32_t t = g; t < g + x; ++t)
          v[t] = r;
      }
      ++M.epoch; // the shared-memory step is between two barriers
    }
    for (uint32_t t = 0; t < n; ++t)
      element(t) = v[t];
  }

  Val combine(const Numeric &num, Val a, Val b) const {
    Val r;
    if (num.is_float()) {
      double s = combiner_ == "sum" ? a.f + b.f
                 : combiner_ == "max" ? std::fmax(a.f, b.f)
                                      : std::fmin(a.f, b.f);
      r.f = round_float(num.kind, s);
    } else {
      int64_t s = combiner_ == "sum" ? int64_t(uint64_t(a.i) + uint64_t(b.i))
                  : combiner_ == "max" ? std::max(a.i, b.i)
                                       : std::min(a.i, b.i);
      r.i = num.wrap(s);
    }
    return r;
  }

  Expr src_;
  PtrArg acc_;
  std::string combiner_;
  int64_t extent_;
  int64_t count_;
  std::vector<int64_t> index_; ///< per thread: the element of acc it combines
};

} // namespace

StmtPtr compile_thread_allreduce(Compiler &C, const Call *call) {
  const bool arity = call->args.size() == 3 || call->args.size() == 4;
  const auto *combiner = arity ? call->args[0].as<StringImm>() : nullptr;
  auto extent = arity ? as_const_int(call->args[2]) : std::nullopt;
  auto count = call->args.size() == 4 ? as_const_int(call->args[3]) : std::optional<int64_t>(1);
  user_check(combiner && extent && count && *count >= 1, "interp")
      << "thread_allreduce takes (\"sum\" | \"max\" | \"min\", address_of(acc[i]), extent[, "
         "count]), got "
      << Expr(call);
  const std::string &name = combiner->value;
  user_check(name == "sum" || name == "max" || name == "min", "interp")
      << "thread_allreduce combines by sum, max or min, not '" << name << "'";
  const int64_t x = *extent;
  user_check(x == C.M.launch.block[0] && x > 0 && (x & (x - 1)) == 0, "interp")
      << "kernel '" << C.M.kernel << "': thread_allreduce across " << x
      << " threads of threadIdx.x needs the whole axis (blockDim.x = " << C.M.launch.block[0]
      << ") and a power of two";
  return std::make_unique<ThreadAllreduceCode>(Expr(call), compile_pointer(C, call, call->args[1]),
                                               name, x, *count);
}

} // namespace tessel::interp

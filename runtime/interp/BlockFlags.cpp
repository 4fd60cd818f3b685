// flag_release and flag_wait (compiler/ir/Intrinsics.h): int32 flags in global memory by which
// the blocks of a kernel hand each other data, once per warp. The executor runs a kernel's
// blocks one after another, each to its end: a flag waited for must already be raised, by an
// earlier block; otherwise the GPU would have to run the waiting block beside a later one, which
// nothing guarantees here, and the executor reports it instead of waiting.
#include "runtime/interp/Machine.h"
#include "runtime/interp/WarpIntrinsic.h"

#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

#include <map>

namespace tessel::interp {

namespace {

class BlockFlagCode : public StmtCode {
public:
  BlockFlagCode(PtrArg flag, bool release, std::string name)
      : flag_(std::move(flag)), release_(release), name_(std::move(name)) {}

  void exec(Machine &M, const Mask &m) override {
    const Val *index = flag_.index->eval(M, m);
    Memory &mem = *flag_.mem;
    // Each warp among the threads of `m` makes the call once, with one pointer.
    std::map<uint32_t, int64_t> warps;
    m.each([&](uint32_t t) {
      const int64_t i = index[t].i;
      auto [it, fresh] = warps.try_emplace(t / 32, i);
      user_check(fresh || it->second == i, "interp")
          << name_ << " by " << M.where(t) << " in kernel '" << M.kernel << "': flag '"
          << mem.name << "'[" << i << "], where another thread of its warp passed [" << it->second
          << "]; a warp raises or waits for one flag";
      if (i < 0 || i >= mem.size)
        report_out_of_bounds(M, mem, release_, i, mem.size, int32_t(t));
    });
    for (auto [w, i] : warps) {
      Val &v = mem.data[size_t(i)];
      if (release_) {
        v.i = 1;
        continue;
      }
      user_check(v.i == 1, "interp")
          << name_ << " by warp " << w << " of block " << M.block_name() << " in kernel '"
          << M.kernel << "': flag '" << mem.name << "'[" << i << "] is not raised (it holds "
          << v.i << "). The executor runs the blocks in order, so the flag must be raised by an "
          << "earlier block (a lower blockIdx); on the GPU this block could wait for a block "
          << "that never runs beside it";
      v.i = 0;
    }
  }

private:
  PtrArg flag_;
  bool release_;
  std::string name_;
};

} // namespace

StmtPtr compile_block_flag(Compiler &C, const Call *call) {
  user_check(call->args.size() == 1, "interp")
      << call->name << " takes (ptr), got " << call->args.size() << " arguments";
  PtrArg p = compile_pointer(C, call, call->args[0]);
  user_check(p.mem->scope == MemScope::Global && p.mem->dtype == Int(32), "interp")
      << call->name << " in kernel '" << C.M.kernel << "': the flag '" << p.mem->name << "' is "
      << p.mem->dtype << " in " << scope_name(p.mem->scope)
      << " memory; a flag is an element of an int32 buffer in global memory";
  return std::make_unique<BlockFlagCode>(std::move(p), call->is_intrinsic(intrinsic::flag_release),
                                         call->name);
}

} // namespace tessel::interp

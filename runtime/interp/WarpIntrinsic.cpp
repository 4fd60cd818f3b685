#include "runtime/interp/WarpIntrinsic.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

namespace tessel::interp {

void WarpIntrinsicCode::add_uniform(ExprPtr e, std::string name) {
  uniform_.push_back(std::move(e));
  uniform_names_.push_back(std::move(name));
}

void WarpIntrinsicCode::add_per_lane(ExprPtr e) { per_lane_.push_back(std::move(e)); }

void WarpIntrinsicCode::exec(Machine &M, const Mask &m) {
  std::vector<const Val *> vals, lane_vals;
  for (auto &e : uniform_)
    vals.push_back(e->eval(M, m));
  for (auto &e : per_lane_)
    lane_vals.push_back(e->eval(M, m));
  std::vector<uint32_t> count(M.n_warps, 0), first(M.n_warps, 0);
  m.each([&](uint32_t t) {
    if (count[t / 32]++ == 0)
      first[t / 32] = t;
  });
  // Every check before any warp runs, so a failing call leaves no warp half done.
  std::vector<std::vector<int64_t>> args(M.n_warps);
  for (uint32_t w = 0; w < M.n_warps; ++w) {
    if (count[w] == 0)
      continue;
    check_whole_warp(M, m, w, count[w]);
    // With independent warps each warp issues its own part of a warpgroup's instruction (as on
    // the GPU), so only the warp is checked.
    const bool group = group_warps_ > 1 && !M.warps;
    if (group)
      check_whole_group(M, count, w);
    // Uniform over the group: compared with the first thread of the group's first warp.
    const uint32_t ref = group ? first[w - w % group_warps_] : first[w];
    args[w].resize(vals.size());
    for (size_t a = 0; a < vals.size(); ++a) {
      args[w][a] = vals[a][ref].i;
      for (uint32_t t = 32 * w; t < 32 * w + 32; ++t)
        user_check(vals[a][t].i == args[w][a], "interp")
            << name_ << ": argument '" << uniform_names_[a] << "' differs within "
            << (group ? "warpgroup " + std::to_string(w / group_warps_)
                                 : "warp " + std::to_string(w))
            << " of block " << M.block_name() << " (" << M.thread_name(ref) << " and "
            << M.thread_name(t) << " pass different values); all threads of a "
            << (group ? "warpgroup" : "warp") << " must pass the same arguments";
    }
  }
  std::vector<LaneValues> lanes(per_lane_.size());
  for (uint32_t w = 0; w < M.n_warps; ++w) {
    if (count[w] == 0)
      continue;
    for (size_t a = 0; a < lane_vals.size(); ++a)
      for (uint32_t l = 0; l < 32; ++l)
        lanes[a][l] = lane_vals[a][32 * w + l].i;
    run(M, w, args[w], lanes);
  }
}

void WarpIntrinsicCode::check_whole_group(const Machine &M, const std::vector<uint32_t> &count,
                                          uint32_t w) const {
  const uint32_t g = w / group_warps_, w0 = g * group_warps_;
  for (uint32_t x = w0; x < w0 + group_warps_; ++x)
    user_check(x < M.n_warps && count[x] != 0, "interp")
        << name_ << " in block " << M.block_name() << " is called by warp " << w
        << " but not by warp " << x << " of warpgroup " << g << " (warps " << w0 << ".."
        << w0 + group_warps_ - 1 << "); all " << group_warps_ * 32
        << " threads of a warpgroup must call a wgmma_* intrinsic together (not under a "
           "condition that depends on the warp)";
}

void WarpIntrinsicCode::check_whole_warp(const Machine &M, const Mask &m, uint32_t w,
                                         uint32_t count) const {
  uint32_t lanes = std::min<uint32_t>(32, M.n_threads - 32 * w);
  user_check(lanes == 32, "interp")
      << name_ << " in block " << M.block_name() << ": warp " << w << " has only " << lanes
      << " threads (the block has " << M.n_threads
      << "); warp-level intrinsics need whole warps, so use a multiple of 32 threads per block";
  if (count == 32)
    return;
  uint32_t missing = 32 * w;
  while (m.contains(missing))
    ++missing;
  user_error("interp") << name_ << " is called by only " << count << " of the 32 threads of warp "
                       << w << " in block " << M.block_name() << ": " << M.thread_name(missing)
                       << " does not call it; all threads of a warp must call a warp-level "
                          "intrinsic (wmma_*, mma_*, wgmma_*) together (not under a "
                          "threadIdx-dependent condition)";
}

const char *fragment_scope_name(FragKind f) {
  switch (f) {
  case FragKind::MatrixA:
    return "wmma.matrix_a";
  case FragKind::MatrixB:
    return "wmma.matrix_b";
  case FragKind::Accumulator:
    return "wmma.accumulator";
  case FragKind::MmaA:
    return "mma.matrix_a";
  case FragKind::MmaB:
    return "mma.matrix_b";
  case FragKind::MmaAccumulator:
    return "mma.accumulator";
  case FragKind::WgmmaAccumulator:
    return "wgmma.accumulator";
  case FragKind::WgmmaRows:
    return "wgmma.rows";
  case FragKind::WgmmaA:
    return "wgmma.matrix_a";
  case FragKind::None:
    break;
  }
  return "not a fragment";
}

Memory *compile_fragment(Compiler &C, const Call *call, const Expr &arg, FragKind want) {
  Memory *m = C.memory_of(arg, call->name.c_str());
  user_check(m->scope == MemScope::Fragment, "interp")
      << call->name << ": '" << m->name << "' is not a fragment (scope "
      << scope_name(m->scope) << ")";
  user_check(want == FragKind::None || m->frag == want, "interp")
      << call->name << ": '" << m->name << "' is a " << fragment_scope_name(m->frag)
      << " fragment but a " << fragment_scope_name(want) << " one is needed here";
  return m;
}

PtrArg compile_pointer(Compiler &C, const Call *call, const Expr &arg) {
  const auto *p = arg.as<Call>();
  if (p && p->name == intrinsic::address_of && p->args.size() == 1) {
    const auto *load = p->args[0].as<BufferLoad>();
    user_check(load && load->indices.size() == 1, "interp")
        << call->name << ": address_of needs a flat BufferLoad, got " << p->args[0];
    return {C.memory_of(load->buffer->data, call->name.c_str()), C.expr(load->indices[0])};
  }
  if (p && p->name == intrinsic::access_ptr && p->args.size() == 5)
    return {C.memory_of(p->args[1], call->name.c_str()), C.expr(p->args[2])};
  user_error("interp") << call->name << ": expected address_of(buf[index]) or access_ptr(...) "
                       << "as the pointer argument, got " << arg;
}

int64_t const_arg(const Call *call, size_t i, const char *what) {
  auto v = as_const_int(call->args[i]);
  user_check(v.has_value(), "interp")
      << call->name << ": " << what << " must be a constant, got " << call->args[i];
  return *v;
}

} // namespace tessel::interp

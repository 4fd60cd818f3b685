// cp_async / cp_async_commit / cp_async_wait, per thread, with PTX's group semantics.
//
// A cp_async reads its source when issued and writes its destination when a cp_async_wait
// completes its group (the latest point the hardware may), so a schedule that reads a tile
// without waiting for it computes with stale or uninitialized data and is caught.
#include "runtime/interp/Machine.h"
#include "runtime/interp/SharedMemoryChecker.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

#include <optional>

namespace tessel::interp {

namespace {

/// address_of(buf[index]): the memory and the index expression.
std::pair<Memory *, ExprPtr> address(Compiler &C, const Call *call, const Expr &arg) {
  const auto *p = arg.as<Call>();
  const auto *load = p && p->is_intrinsic(intrinsic::address_of) && p->args.size() == 1
                         ? p->args[0].as<BufferLoad>()
                         : nullptr;
  user_check(load && load->indices.size() == 1 && load->indices[0].type().is_scalar(), "interp")
      << "cp_async: expected address_of(buffer[index]) with a flat scalar index, got " << arg
      << " in " << Expr(call);
  return {C.memory_of(load->buffer->data, "cp_async"), C.expr(load->indices[0])};
}

class CpAsyncCode : public StmtCode {
public:
  CpAsyncCode(Compiler &C, const Call *call) {
    user_check(call->args.size() == 4, "interp")
        << "cp_async takes (dst, src, bytes, predicate), got " << Expr(call);
    std::tie(dst_, dst_index_) = address(C, call, call->args[0]);
    std::tie(src_, src_index_) = address(C, call, call->args[1]);
    user_check(dst_->scope == MemScope::Shared && src_->scope == MemScope::Global, "interp")
        << "cp_async copies global to shared memory; here '" << src_->name << "' is "
        << scope_name(src_->scope) << " and '" << dst_->name << "' is "
        << scope_name(dst_->scope);
    user_check(dst_->dtype == src_->dtype, "interp")
        << "cp_async from '" << src_->name << "' (" << src_->dtype << ") to '" << dst_->name
        << "' (" << dst_->dtype << "): the types must be the same";
    auto bytes = as_const_int(call->args[2]);
    user_check(bytes && (*bytes == 4 || *bytes == 8 || *bytes == 16) &&
                   *bytes % dst_->dtype.bytes() == 0,
               "interp")
        << "cp_async copies 4, 8 or 16 bytes (whole elements), got " << call->args[2];
    elements_ = *bytes / dst_->dtype.bytes();
    predicate_ = C.expr(call->args[3]);
  }

  void exec(Machine &M, const Mask &m) override {
    const Val *d = dst_index_->eval(M, m);
    const Val *s = src_index_->eval(M, m);
    const Val *p = predicate_->eval(M, m);
    m.each([&](uint32_t t) {
      int64_t di = d[t].i, si = s[t].i;
      for (int64_t e : {di, di + elements_ - 1})
        if (e < 0 || e >= dst_->size)
          report_out_of_bounds(M, *dst_, true, e, dst_->size, int32_t(t));
      // Both addresses must be aligned to the copy's size (buffers start aligned).
      auto check_aligned = [&](const Memory &mem, int64_t index) {
        user_check(index % elements_ == 0, "interp")
            << "cp_async of " << elements_ * mem.dtype.bytes() << " bytes at '" << mem.name
            << "'[" << index << "] by " << M.where(t) << " in kernel '" << M.kernel
            << "' is misaligned: the element index must be a "
            << "multiple of " << elements_ << " (the GPU faults on a misaligned address)";
      };
      check_aligned(*dst_, di);
      PendingCopy c{dst_, di, std::vector<Val>(size_t(elements_)), M.committed_groups[t]};
      if (p[t].i) {
        check_aligned(*src_, si);
        for (int64_t e : {si, si + elements_ - 1})
          if (e < 0 || e >= src_->size)
            report_out_of_bounds(M, *src_, false, e, src_->size, int32_t(t));
        for (int64_t e = 0; e < elements_; ++e)
          c.values[size_t(e)] = src_->data[size_t(si + e)];
      } else {
        for (Val &v : c.values)
          v = src_->num.is_float() ? Val{.f = 0.0} : Val{.i = 0};
      }
      M.pending_copies[t].push_back(std::move(c));
    });
  }

private:
  Memory *dst_ = nullptr, *src_ = nullptr;
  ExprPtr dst_index_, src_index_, predicate_;
  int64_t elements_ = 0;
};

class CommitCode : public StmtCode {
public:
  void exec(Machine &M, const Mask &m) override {
    m.each([&](uint32_t t) { ++M.committed_groups[t]; });
  }
};

class WaitCode : public StmtCode {
public:
  explicit WaitCode(uint32_t n) : n_(n) {}
  void exec(Machine &M, const Mask &m) override {
    m.each([&](uint32_t t) {
      // Groups [0, committed - n) complete; later ones (and uncommitted copies) stay pending.
      uint32_t committed = M.committed_groups[t];
      uint32_t done = committed > n_ ? committed - n_ : 0;
      land_groups(M.pending_copies[t], done, [&](const PendingCopy &c) {
        for (size_t e = 0; e < c.values.size(); ++e) {
          shared_write(M, *c.dst, c.dst_index + int64_t(e), int32_t(t));
          c.dst->data[size_t(c.dst_index) + e] = c.values[e];
        }
      });
    });
  }

private:
  uint32_t n_;
};

} // namespace

StmtPtr compile_async_copy(Compiler &C, const Call *call) {
  if (call->name == intrinsic::cp_async)
    return std::make_unique<CpAsyncCode>(C, call);
  if (call->name == intrinsic::cp_async_commit) {
    user_check(call->args.empty(), "interp") << "cp_async_commit takes no arguments";
    return std::make_unique<CommitCode>();
  }
  if (call->name == intrinsic::cp_async_wait) {
    auto n = call->args.size() == 1 ? as_const_int(call->args[0]) : std::nullopt;
    user_check(n && *n >= 0, "interp")
        << "cp_async_wait takes one non-negative constant, got " << Expr(call);
    return std::make_unique<WaitCode>(uint32_t(*n));
  }
  user_error("interp") << "unknown intrinsic '" << call->name << "'";
}

} // namespace tessel::interp

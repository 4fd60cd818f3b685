#include "compiler/ir/WrittenBuffers.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"

namespace tessel {

namespace {

// Calls `written` with each buffer variable `body` writes, in program order (repeats included).
template <typename F> void for_each_written(const Stmt &body, F written) {
  auto mark_pointer = [&](const Expr &ptr) {
    const auto *call = ptr.as<Call>();
    if (call && call->is_intrinsic(intrinsic::address_of))
      if (const auto *load = call->args[0].as<BufferLoad>())
        written(llvm::dyn_cast<Variable>(load->buffer->data.get()));
    if (call && call->is_intrinsic(intrinsic::access_ptr) && call->args.size() == 5)
      if (const auto *v = call->args[1].as<Variable>())
        if (auto mask = as_const_int(call->args[4]); !mask || (*mask & 2))
          written(v);
  };
  post_order_visit(body, [&](const IRNode *n) {
    if (const auto *store = llvm::dyn_cast<BufferStore>(n))
      written(llvm::dyn_cast<Variable>(store->buffer->data.get()));
    if (const auto *call = llvm::dyn_cast<Call>(n)) {
      if (call->is_intrinsic(intrinsic::wmma_store_matrix_sync) && call->args.size() > 5)
        mark_pointer(call->args[5]);
      if (call->is_intrinsic(intrinsic::mma_store_fragment) && call->args.size() > 2)
        mark_pointer(call->args[2]);
      if (call->is_intrinsic(intrinsic::wgmma_store) && call->args.size() > 3)
        mark_pointer(call->args[3]);
      if ((call->is_intrinsic(intrinsic::flag_release) ||
           call->is_intrinsic(intrinsic::flag_wait)) && call->args.size() == 1)
        mark_pointer(call->args[0]); // (a wait lowers the flag again)
      // Pointers handed to anything but a load may be written through.
      if (call->is_intrinsic(intrinsic::access_ptr))
        mark_pointer(call);
    }
  });
}

} // namespace

llvm::DenseSet<const Variable *> written_buffers(const Stmt &body) {
  llvm::DenseSet<const Variable *> written;
  for_each_written(body, [&](const Variable *v) { written.insert(v); });
  return written;
}

std::string first_written_buffer(const Stmt &body) {
  std::string name;
  for_each_written(body, [&](const Variable *v) {
    if (name.empty() && v)
      name = v->name;
  });
  return name;
}

} // namespace tessel

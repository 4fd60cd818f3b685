// CUDA code generation: WMMA fragments and intrinsics, and the shared memory layout.
//
// An Allocate in a wmma.* scope says only how many elements a fragment array holds. The
// fragment type also needs m, n, k (from the fill/load/store intrinsics that use it, or from
// the other operands of an mma_sync) and, for matrix_a / matrix_b, the layout its
// load_matrix_sync reads. analyze_fragments() deduces them before any code is written.
#include "compiler/codegen/CUDAKernelEmitter.h"

#include "compiler/ir/FragmentScope.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

namespace tessel::codegen {

namespace {

/// Records `m, n, k` (the shape) for a fragment, or checks it against the one recorded.
void set_shape(FragmentInfo &info, const std::string &name, int m, int n, int k,
               const std::string &use) {
  if (info.m == 0) {
    info.m = m, info.n = n, info.k = k, info.first_use = use;
    return;
  }
  user_check(info.m == m && info.n == n && info.k == k, "codegen_cuda")
      << "WMMA fragment '" << name << "' is used as " << info.m << "x" << info.n << "x"
      << info.k << " by " << info.first_use << " but as " << m << "x" << n << "x" << k << " by "
      << use;
}

/// Lays out shared allocations in the order they are declared.
class SharedPlanner : public IRVisitor {
public:
  SharedLayout layout;

protected:
  using IRVisitor::visit;
  void visit(const Allocate *op) override {
    if (op->scope == "shared" && !layout.offset.count(op)) {
      int64_t size = op->constant_size();
      int64_t elem_bytes = std::max(1, op->dtype.bits() / 8) * op->dtype.lanes();
      int64_t offset = (layout.total_bytes + layout.align - 1) / layout.align * layout.align;
      layout.offset[op] = offset;
      layout.total_bytes = offset + std::max<int64_t>(size, 0) * elem_bytes;
    }
    IRVisitor::visit(op);
  }
};

} // namespace

void check_intrinsic_args(const Call *op, size_t n, const char *signature) {
  user_check(op->args.size() == n, "codegen_cuda")
      << op->name << " takes " << n << " arguments " << signature << ", got " << op->args.size();
}

SharedLayout plan_shared_memory(const Stmt &body) {
  SharedPlanner planner;
  post_order_visit(body, [&](const IRNode *n) {
    if (const auto *c = llvm::dyn_cast<Call>(n);
        c && (c->is_intrinsic(intrinsic::wgmma_mma) || c->is_intrinsic(intrinsic::wgmma_mma_rs) ||
              c->is_intrinsic(intrinsic::tma_load) ||
              c->is_intrinsic(intrinsic::tma_load_multicast)))
      planner.layout.align = kWgmmaSharedAlign;
  });
  planner.visit_stmt(body);
  return std::move(planner.layout);
}

void CUDAKernelEmitter::analyze_fragments() {
  llvm::DenseMap<const Variable *, std::string> names;
  post_order_visit(f_.body, [&](const IRNode *n) {
    if (const auto *op = llvm::dyn_cast<Allocate>(n); op && is_wmma_scope(op->scope)) {
      fragments_[op->buffer_var.get()].scope = op->scope;
      names[op->buffer_var.get()] = op->buffer_var.name();
    }
  });
  auto info_of = [&](const Expr &e) -> FragmentInfo * {
    const auto *v = e.as<Variable>();
    auto it = v ? fragments_.find(v) : fragments_.end();
    return it == fragments_.end() ? nullptr : &it->second;
  };
  std::vector<const Call *> mmas;
  post_order_visit(f_.body, [&](const IRNode *n) {
    const auto *call = llvm::dyn_cast<Call>(n);
    if (!call || call->call_kind == Call::PureExtern)
      return;
    if (call->name == intrinsic::wmma_mma_sync && call->args.size() == 8) {
      mmas.push_back(call);
      return;
    }
    bool has_shape = call->name == intrinsic::wmma_fill_fragment ||
                     call->name == intrinsic::wmma_load_matrix_sync ||
                     call->name == intrinsic::wmma_store_matrix_sync;
    FragmentInfo *info = has_shape && call->args.size() >= 5 ? info_of(call->args[0]) : nullptr;
    if (!info)
      return; // a wrong argument is reported where the call is emitted
    const std::string &name = names[call->args[0].as<Variable>()];
    auto m = as_const_int(call->args[1]), n2 = as_const_int(call->args[2]),
         k = as_const_int(call->args[3]);
    user_check(m && n2 && k, "codegen_cuda")
        << call->name << " on fragment '" << name << "': m, n, k must be constants";
    set_shape(*info, name, int(*m), int(*n2), int(*k), call->name);
    if (call->name == intrinsic::wmma_load_matrix_sync && info->scope != "wmma.accumulator" &&
        call->args.size() == 8) {
      const auto *layout = call->args[7].as<StringImm>();
      user_check(layout && (layout->value == "row_major" || layout->value == "col_major"),
                 "codegen_cuda")
          << "wmma_load_matrix_sync into '" << name
          << "': the layout must be \"row_major\" or \"col_major\"";
      user_check(info->layout.empty() || info->layout == layout->value, "codegen_cuda")
          << "WMMA fragment '" << name << "' is loaded both as " << info->layout << " and as "
          << layout->value;
      info->layout = layout->value;
    }
  });
  // mma_sync(d, a, b, c) operands share one shape; fragments used only there take it from the
  // others. Two rounds reach fragments that share an mma with a fragment fixed in round one.
  for (int round = 0; round < 2; ++round) {
    for (const Call *call : mmas) {
      const FragmentInfo *known = nullptr;
      for (int i : {0, 2, 4, 6})
        if (FragmentInfo *info = info_of(call->args[i]); info && info->m)
          known = known ? known : info;
      if (!known)
        continue;
      FragmentInfo shape = *known;
      for (int i : {0, 2, 4, 6})
        if (FragmentInfo *info = info_of(call->args[i]))
          set_shape(*info, names[call->args[i].as<Variable>()], shape.m, shape.n, shape.k,
                    info->m ? info->first_use : shape.first_use);
    }
  }
}

std::string CUDAKernelEmitter::fragment_type(const Allocate *op, int64_t *count) {
  const std::string &name = op->buffer_var.name();
  auto it = fragments_.find(op->buffer_var.get());
  internal_check(it != fragments_.end()) << "fragment '" << name << "' was not analyzed";
  const FragmentInfo &info = it->second;
  bool is_acc = info.scope == "wmma.accumulator";
  user_check(is_acc || info.scope == "wmma.matrix_a" || info.scope == "wmma.matrix_b",
             "codegen_cuda")
      << "allocation '" << name << "' has unknown WMMA scope '" << info.scope
      << "'; expected wmma.matrix_a, wmma.matrix_b or wmma.accumulator";
  user_check(info.m > 0, "codegen_cuda")
      << "WMMA fragment '" << name << "' (" << info.scope
      << ") is never filled, loaded, stored or multiplied with a fragment of known shape, so its "
         "m, n, k are unknown";
  DataType t = op->dtype;
  bool supported = is_acc ? (t == Float(32) || t == Float(16) || t == Int(32))
                          : (t == Float(16) || t == BFloat(16) || t == Int(8) || t == UInt(8));
  user_check(supported, "codegen_cuda")
      << "WMMA fragment '" << name << "' (" << info.scope << ") has element type " << t
      << ", which WMMA does not support; use "
      << (is_acc ? "float32, float16 or int32" : "float16, bfloat16, int8 or uint8");
  int64_t tile = is_acc ? info.m * info.n
                        : info.scope == "wmma.matrix_a" ? info.m * info.k : info.k * info.n;
  int64_t size = op->constant_size();
  user_check(size % tile == 0, "codegen_cuda")
      << "WMMA fragment '" << name << "' holds " << size << " elements, which is not a multiple "
      << "of the " << tile << " elements of one " << info.m << "x" << info.n << "x" << info.k
      << " tile";
  *count = size / tile;
  needs_.wmma = true;
  std::string role = info.scope.substr(std::string("wmma.").size());
  std::string text = "nvcuda::wmma::fragment<nvcuda::wmma::" + role + ", " +
                     std::to_string(info.m) + ", " + std::to_string(info.n) + ", " +
                     std::to_string(info.k) + ", " + type_name(t);
  if (!is_acc) {
    user_check(!info.layout.empty(), "codegen_cuda")
        << "WMMA fragment '" << name << "' (" << info.scope
        << ") is never loaded with wmma_load_matrix_sync, so its layout (row_major or "
           "col_major) is unknown";
    text += ", nvcuda::wmma::" + info.layout;
  }
  return text + ">";
}

const FragmentInfo *CUDAKernelEmitter::fragment_of(const Expr &frag) const {
  const auto *v = frag.as<Variable>();
  auto it = v ? fragments_.find(v) : fragments_.end();
  return it == fragments_.end() ? nullptr : &it->second;
}

std::string CUDAKernelEmitter::fragment_ref(const Expr &frag, const Expr &index,
                                            const char *intrin, const char *expected_scope) {
  const FragmentInfo *info = fragment_of(frag);
  user_check(info, "codegen_cuda")
      << intrin << " in kernel '" << f_.name << "': " << frag
      << " is not a WMMA fragment (an allocation in scope wmma.matrix_a, wmma.matrix_b or "
         "wmma.accumulator)";
  const auto *v = frag.as<Variable>();
  user_check(!expected_scope || info->scope == expected_scope, "codegen_cuda")
      << intrin << " in kernel '" << f_.name << "' expects a " << expected_scope
      << " fragment, but '" << v->name << "' is " << info->scope;
  return var_text(v) + "[" + print(index) + "]";
}

std::string CUDAKernelEmitter::pointer_arg(const Expr &ptr, const char *intrin) {
  const auto *call = ptr.as<Call>();
  user_check(call && (call->is_intrinsic(intrinsic::address_of) ||
                      call->is_intrinsic(intrinsic::access_ptr)),
             "codegen_cuda")
      << intrin << " in kernel '" << f_.name
      << "': the pointer argument must be address_of(buffer[index]) or access_ptr(...), got "
      << ptr;
  return print(ptr);
}

bool CUDAKernelEmitter::emit_wmma(const Call *op) {
  if (op->call_kind == Call::PureExtern || op->name.rfind("wmma_", 0) != 0)
    return false;
  const std::vector<Expr> &a = op->args;
  const char *name = op->name.c_str();
  auto expect_args = [&](size_t n, const char *signature) { check_intrinsic_args(op, n, signature); };
  auto memory_layout = [&](const Expr &e) -> std::string {
    const auto *s = e.as<StringImm>();
    user_check(s && (s->value == "row_major" || s->value == "col_major"), "codegen_cuda")
        << name << ": the layout must be \"row_major\" or \"col_major\"";
    return "nvcuda::wmma::mem_" + s->value;
  };
  if (op->name == intrinsic::wmma_fill_fragment) {
    expect_args(6, "(frag, m, n, k, index, value)");
    std::string frag = fragment_ref(a[0], a[4], name, "wmma.accumulator");
    line("nvcuda::wmma::fill_fragment(" + frag + ", " + print(a[5]) + ");");
    return true;
  }
  if (op->name == intrinsic::wmma_load_matrix_sync) {
    expect_args(8, "(frag, m, n, k, index, ptr, stride, layout)");
    std::string frag = fragment_ref(a[0], a[4], name);
    std::string text = "nvcuda::wmma::load_matrix_sync(" + frag + ", " + pointer_arg(a[5], name) +
                       ", " + print(a[6]);
    // Only accumulators take the memory layout here; matrix_a/b carry it in their type.
    if (fragment_of(a[0])->scope == "wmma.accumulator")
      text += ", " + memory_layout(a[7]);
    line(text + ");");
    return true;
  }
  if (op->name == intrinsic::wmma_mma_sync) {
    expect_args(8, "(d, d_index, a, a_index, b, b_index, c, c_index)");
    std::string d = fragment_ref(a[0], a[1], name, "wmma.accumulator");
    std::string x = fragment_ref(a[2], a[3], name, "wmma.matrix_a");
    std::string y = fragment_ref(a[4], a[5], name, "wmma.matrix_b");
    std::string c = fragment_ref(a[6], a[7], name, "wmma.accumulator");
    line("nvcuda::wmma::mma_sync(" + d + ", " + x + ", " + y + ", " + c + ");");
    return true;
  }
  if (op->name == intrinsic::wmma_store_matrix_sync) {
    expect_args(8, "(frag, m, n, k, index, ptr, stride, layout)");
    std::string frag = fragment_ref(a[0], a[4], name, "wmma.accumulator");
    line("nvcuda::wmma::store_matrix_sync(" + pointer_arg(a[5], name) + ", " + frag + ", " +
         print(a[6]) + ", " + memory_layout(a[7]) + ");");
    return true;
  }
  return false; // an unknown wmma_* name: reported as an unknown intrinsic
}

} // namespace tessel::codegen

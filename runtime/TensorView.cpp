#include "runtime/TensorView.h"

#include "compiler/ir/IR.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/WrittenBuffers.h"
#include "compiler/support/Error.h"
#include "runtime/CudaDriver.h"
#include "runtime/Device.h"
#include "runtime/DeviceArray.h"

#include <llvm/Support/Casting.h>

#include <algorithm>
#include <cstdio>
#include <map>

namespace tessel {

namespace {

std::string hex(CUdeviceptr p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(p));
  return buf;
}

// The largest power of two (up to 256) that divides `p`.
int64_t alignment_of(CUdeviceptr p) {
  int64_t a = 1;
  while (a < 256 && p % static_cast<CUdeviceptr>(2 * a) == 0)
    a *= 2;
  return a;
}

// 16 bytes: what the generated code assumes of every argument pointer that it hands to an
// intrinsic it does not size here, and what a TMA tensor map needs of its global address.
constexpr int64_t kIntrinsicPointerAlignment = 16;
constexpr int64_t kTmaAlignment = 16;
// nvcuda::wmma::load_matrix_sync / store_matrix_sync: "a 256-bit aligned pointer".
constexpr int64_t kWmmaAlignment = 32;

// The alignment each parameter (by its data variable) needs, from the kernels' accesses.
class AlignmentNeeds {
public:
  AlignmentNeeds(const LoweredFunc &f, std::vector<ParamSpec> &specs) : f_(f), specs_(specs) {
    for (size_t i = 0; i < f.args.size(); ++i)
      if (const auto *v = llvm::dyn_cast_or_null<Variable>(f.args[i]->data.get()))
        index_[v] = i;
  }

  void run() {
    post_order_visit(f_.body, [&](const IRNode *n) { visit(n); });
    for (const TensorMapParam &m : f_.tensor_maps)
      if (m.arg >= 0 && size_t(m.arg) < specs_.size())
        need(size_t(m.arg), kTmaAlignment,
             std::string(m.im2col ? "TMA im2col" : "TMA") + " tensor map '" + m.var.name() +
                 "' of kernel '" + f_.name + "'");
  }

private:
  // The parameter a buffer (its data variable) is, or -1.
  int param_of(const Expr &data) const {
    const auto *v = llvm::dyn_cast_or_null<Variable>(data.get());
    auto it = v ? index_.find(v) : index_.end();
    return it == index_.end() ? -1 : int(it->second);
  }
  // The parameter a pointer argument (address_of(buf[i]) or access_ptr(t, var, ...)) points
  // into, or -1; `dtype` gets the pointed-to element type.
  int pointee(const Expr &ptr, DataType *dtype = nullptr) const {
    const auto *c = ptr.as<Call>();
    if (!c)
      return -1;
    if (c->is_intrinsic(intrinsic::address_of) && c->args.size() == 1)
      if (const auto *load = c->args[0].as<BufferLoad>()) {
        if (dtype)
          *dtype = load->buffer.dtype();
        return param_of(load->buffer->data);
      }
    if (c->is_intrinsic(intrinsic::access_ptr) && c->args.size() >= 2) {
      int p = param_of(c->args[1]);
      if (dtype && p >= 0)
        *dtype = specs_[size_t(p)].dtype;
      return p;
    }
    return -1;
  }

  void need(size_t param, int64_t bytes, const std::string &why) {
    ParamSpec &s = specs_[param];
    if (bytes > s.alignment) {
      s.alignment = bytes;
      s.alignment_reason = why;
    }
  }

  void access(const Buffer &b, const std::vector<Expr> &indices, bool store) {
    int p = param_of(b->data);
    if (p < 0 || indices.size() != 1)
      return;
    const auto *ramp = indices[0].as<Ramp>();
    if (!ramp || !is_one(ramp->stride))
      return;
    int64_t bytes = int64_t(b.dtype().bytes()) * ramp->lanes;
    // Codegen makes 4, 8 and 16-byte Ramps single vector accesses (CodeGenCUDAVector.cpp).
    if (bytes == 4 || bytes == 8 || bytes == 16)
      need(size_t(p), bytes,
           std::to_string(bytes) + "-byte vector " + (store ? "stores" : "loads") +
               " in kernel '" + f_.name + "'");
  }

  void call(const Call *c) {
    if (c->call_kind == Call::PureExtern)
      return;
    const std::vector<Expr> &a = c->args;
    auto lanes_of = [](const Expr &e) { return as_const_int(e).value_or(1); };
    DataType t;
    if (c->name == intrinsic::cp_async && a.size() >= 3) {
      if (int p = pointee(a[1]); p >= 0)
        need(size_t(p), as_const_int(a[2]).value_or(16),
             std::to_string(as_const_int(a[2]).value_or(16)) + "-byte cp.async copies in kernel '" +
                 f_.name + "'");
      return;
    }
    if ((c->name == intrinsic::wmma_load_matrix_sync ||
         c->name == intrinsic::wmma_store_matrix_sync) &&
        a.size() >= 6) {
      if (int p = pointee(a[5]); p >= 0)
        need(size_t(p), kWmmaAlignment,
             std::string("WMMA ") +
                 (c->name == intrinsic::wmma_load_matrix_sync ? "loads" : "stores") +
                 " (256-bit aligned pointers) in kernel '" + f_.name + "'");
      return;
    }
    if (c->name == intrinsic::mma_store_fragment && a.size() >= 5) {
      if (int p = pointee(a[2], &t); p >= 0)
        need(size_t(p), t.bytes() * lanes_of(a[4]),
             "mma fragment stores of " + std::to_string(lanes_of(a[4])) + " elements in kernel '" +
                 f_.name + "'");
      return;
    }
    if (c->name == intrinsic::wgmma_store && a.size() >= 6) {
      // lanes 8 stores float32 pairs placed by the pointer's own offset in its sector: each
      // store is aligned whatever the row's alignment (CodeGenCUDAWgmma.cpp).
      int64_t lanes = lanes_of(a[5]);
      if (int p = pointee(a[3], &t); p >= 0 && lanes != 8)
        need(size_t(p), t.bytes() * lanes,
             "wgmma stores of " + std::to_string(lanes) + " elements in kernel '" + f_.name + "'");
      return;
    }
    if (c->name == intrinsic::address_of || c->name == intrinsic::access_ptr)
      return;
    // Any other intrinsic given a pointer into a parameter.
    for (const Expr &e : a)
      if (int p = pointee(e); p >= 0)
        need(size_t(p), kIntrinsicPointerAlignment,
             "pointers passed to " + c->name + " in kernel '" + f_.name + "'");
  }

  void visit(const IRNode *n) {
    if (const auto *l = llvm::dyn_cast<BufferLoad>(n))
      access(l->buffer, l->indices, false);
    else if (const auto *s = llvm::dyn_cast<BufferStore>(n))
      access(s->buffer, s->indices, true);
    else if (const auto *c = llvm::dyn_cast<Call>(n))
      call(c);
  }

  const LoweredFunc &f_;
  std::vector<ParamSpec> &specs_;
  std::map<const Variable *, size_t> index_;
};

std::string argument_name(size_t i, const ParamSpec &s) {
  return "argument " + std::to_string(i) + " ('" + s.name + "')";
}

std::string describe(const ParamSpec &s) {
  return s.dtype.str() + " " + shape_str(s.shape) +
         (s.strides.empty() ? "" : " with strides " + shape_str(s.strides));
}

} // namespace

int64_t TensorView::numel() const { return storage_elements(shape, strides); }
int64_t ParamSpec::numel() const { return storage_elements(shape, strides); }

TensorView TensorView::of(const DeviceArray &array) {
  return TensorView(array.data(), array.dtype(), array.shape(), array.strides());
}

std::string shape_str(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

ModuleParams module_params(const LoweredModule &m) {
  user_check(!m.funcs.empty(), "module_params") << "the module has no kernel";
  const LoweredFunc &first = m.funcs.front();
  internal_check(first.args.size() >= m.num_workspaces && first.arg_shapes.size() == first.args.size())
      << "kernel '" << first.name << "' has " << first.args.size() << " parameters and "
      << first.arg_shapes.size() << " shapes for " << m.num_workspaces << " workspaces";
  std::vector<ParamSpec> all;
  for (size_t i = 0; i < first.args.size(); ++i) {
    ParamSpec s;
    s.name = first.args[i].name();
    s.dtype = first.args[i].dtype();
    s.shape = first.arg_shapes[i];
    if (i < first.arg_strides.size())
      s.strides = first.arg_strides[i];
    s.alignment = std::max<int64_t>(1, s.dtype.bytes());
    all.push_back(std::move(s));
  }
  for (const LoweredFunc &f : m.funcs) {
    // Every kernel takes the same parameters (the arguments, then the workspaces).
    internal_check(f.args.size() == all.size())
        << "kernel '" << f.name << "' takes " << f.args.size() << " parameters, kernel '"
        << first.name << "' " << all.size();
    for (size_t i = 0; i < all.size(); ++i)
      internal_check(f.args[i].dtype() == all[i].dtype && f.arg_shapes[i] == all[i].shape)
          << "parameter " << i << " of kernel '" << f.name << "' differs from kernel '"
          << first.name << "''s";
    AlignmentNeeds(f, all).run();
    llvm::DenseSet<const Variable *> written = written_buffers(f.body);
    for (size_t i = 0; i < all.size(); ++i)
      if (const auto *v = llvm::dyn_cast_or_null<Variable>(f.args[i]->data.get()))
        all[i].written |= written.count(v) > 0;
  }
  ModuleParams out;
  size_t num_args = all.size() - m.num_workspaces;
  out.args.assign(all.begin(), all.begin() + long(num_args));
  out.workspaces.assign(all.begin() + long(num_args), all.end());
  for (const ParamSpec &w : out.workspaces) {
    internal_check(w.alignment <= kWorkspaceAlignment)
        << "workspace '" << w.name << "' needs " << w.alignment << "-byte alignment";
    out.workspace_offsets.push_back(out.workspace_bytes);
    int64_t bytes = std::max<int64_t>(w.bytes(), 1);
    out.workspace_bytes += (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
  }
  return out;
}

void check_arguments(const ModuleParams &params, const std::vector<TensorView> &args,
                     const char *where, CUdeviceptr workspace) {
  if (args.size() != params.args.size()) {
    std::string names;
    for (const ParamSpec &s : params.args)
      names += (names.empty() ? "" : ", ") + s.name + ": " + describe(s);
    user_error(where) << "the module takes " << params.args.size() << " arguments (" << names
                      << "), got " << args.size();
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const ParamSpec &s = params.args[i];
    const TensorView &v = args[i];
    user_check(v.dtype == s.dtype, where)
        << argument_name(i, s) << " must be " << describe(s) << ", got " << v.dtype.str()
        << " elements";
    user_check(v.shape.size() == s.shape.size(), where)
        << argument_name(i, s) << " must be " << describe(s) << " (rank " << s.shape.size()
        << "), got rank " << v.shape.size() << " " << shape_str(v.shape)
        << (v.numel() == s.numel() ? "; the element count matches: give the view the module's "
                                     "shape if the layout is the same"
                                   : "");
    user_check(v.shape == s.shape, where)
        << argument_name(i, s) << " must be " << describe(s) << ", got shape "
        << shape_str(v.shape);
    // A view's strides must be the ones the kernels were compiled for (dense is dense: strides
    // that spell out the row-major ones are the same layout).
    const std::vector<int64_t> got = strides_or_row_major(v.shape, v.strides);
    user_check(got == strides_or_row_major(s.shape, s.strides), where)
        << argument_name(i, s) << " must be " << describe(s) << ", got strides " << shape_str(got)
        << "; declare the placeholder with the view's strides (placeholder(shape, dtype, name, "
           "strides)) and build for them, or pass a copy laid out as the module expects";
    user_check(v.ptr != 0 || s.bytes() == 0, where) << argument_name(i, s) << " is a null pointer";
    if (v.ptr % static_cast<CUdeviceptr>(s.alignment) != 0)
      user_error(where) << argument_name(i, s) << " at " << hex(v.ptr) << " is aligned to "
                        << alignment_of(v.ptr) << " bytes, but the kernels need " << s.alignment
                        << (s.alignment_reason.empty() ? " (its element size)"
                                                       : " (" + s.alignment_reason + ")")
                        << "; cuMemAlloc / cudaMalloc return 256-byte aligned memory: pass the "
                           "start of an allocation or an offset into one that is a multiple of "
                        << s.alignment << " bytes";
  }
  // A written argument sharing bytes with another (or with the workspace) would have the
  // kernels read what they are overwriting, or overwrite their own results.
  auto overlaps = [](CUdeviceptr a, int64_t a_bytes, CUdeviceptr b, int64_t b_bytes) {
    return a_bytes > 0 && b_bytes > 0 && a < b + static_cast<CUdeviceptr>(b_bytes) &&
           b < a + static_cast<CUdeviceptr>(a_bytes);
  };
  auto range = [](CUdeviceptr p, int64_t bytes) {
    return "[" + hex(p) + ", " + hex(p + static_cast<CUdeviceptr>(bytes)) + ")";
  };
  for (size_t i = 0; i < args.size(); ++i)
    for (size_t j = i + 1; j < args.size(); ++j) {
      const ParamSpec &a = params.args[i], &b = params.args[j];
      if ((a.written || b.written) && overlaps(args[i].ptr, a.bytes(), args[j].ptr, b.bytes()))
        user_error(where) << argument_name(i, a) << " at " << range(args[i].ptr, a.bytes())
                          << " and " << argument_name(j, b) << " at "
                          << range(args[j].ptr, b.bytes()) << " overlap, and the kernels write "
                          << (a.written ? a.name : b.name)
                          << "; the module computes out of place: give it separate memory";
    }
  if (workspace)
    for (size_t i = 0; i < args.size(); ++i)
      if (overlaps(args[i].ptr, params.args[i].bytes(), workspace, params.workspace_bytes))
        user_error(where) << "the workspace at " << range(workspace, params.workspace_bytes)
                          << " overlaps " << argument_name(i, params.args[i]) << " at "
                          << range(args[i].ptr, params.args[i].bytes())
                          << "; the kernels write the workspace: give it memory of its own "
                             "(m.params().workspace_bytes bytes)";
}

namespace {

// What the driver knows of the memory at `p`.
struct PointerInfo {
  bool known = false; // a pointer the driver handed out (or registered)
  unsigned memory_type = 0;
  CUcontext context = nullptr;
  CUdeviceptr start = 0;
  size_t size = 0;
  int ordinal = -1;
  bool managed = false;
};

PointerInfo pointer_info(CUdeviceptr p) {
  const CudaDriver &d = CudaDriver::require();
  PointerInfo info;
  unsigned memory_type = 0;
  CUcontext context = nullptr;
  CUdeviceptr start = 0;
  size_t size = 0;
  int ordinal = -1;
  uint64_t managed = 0; // a boolean of the driver's choosing width
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void *data[] = {&memory_type, &context, &start, &size, &ordinal, &managed};
  // Unlike cuPointerGetAttribute, this call succeeds on pointers the driver does not know and
  // leaves their attributes zero.
  d.check(d.cuPointerGetAttributes(sizeof(attrs) / sizeof(attrs[0]), attrs, data, p),
          "cuPointerGetAttributes");
  info.known = memory_type != 0;
  info.memory_type = memory_type;
  info.context = context;
  info.start = start;
  info.size = size;
  info.ordinal = ordinal;
  info.managed = managed != 0;
  return info;
}

void check_memory(const std::string &what, CUdeviceptr p, int64_t bytes, const Device &device,
                  const char *where) {
  PointerInfo info = pointer_info(p);
  user_check(info.known, where)
      << what << " at " << hex(p) << " is not memory the CUDA driver knows: pass a device "
      << "pointer (cuMemAlloc, cudaMalloc, cuMemAllocManaged), not host memory";
  user_check(info.memory_type != CU_MEMORYTYPE_HOST || info.managed, where)
      << what << " at " << hex(p) << " is page-locked host memory; the kernels need device "
      << "memory (cuMemAlloc, cudaMalloc)";
  user_check(info.ordinal < 0 || info.ordinal == device.ordinal(), where)
      << what << " at " << hex(p) << " is memory of device " << info.ordinal
      << ", but the module runs on device " << device.ordinal() << " (" << device.name() << ")";
  user_check(!info.context || info.context == device.context(), where)
      << what << " at " << hex(p) << " was allocated in another CUDA context than the one "
      << "the module runs in (device " << device.ordinal() << "'s primary context, which the "
      << "CUDA runtime uses too); allocate it with cudaMalloc, or cuMemAlloc with the primary "
      << "context current (cuDevicePrimaryCtxRetain)";
  if (info.size == 0 || bytes == 0)
    return;
  CUdeviceptr end = info.start + info.size;
  user_check(p >= info.start && p + static_cast<CUdeviceptr>(bytes) <= end, where)
      << what << " at " << hex(p) << " needs " << bytes << " bytes, but its allocation ("
      << hex(info.start) << ", " << info.size << " bytes) holds only "
      << (p >= info.start && p < end ? int64_t(end - p) : int64_t(0))
      << " from the pointer on";
}

} // namespace

void check_device_memory(const ModuleParams &params, const std::vector<TensorView> &args,
                         CUdeviceptr workspace, const Device &device, const char *where) {
  internal_check(args.size() == params.args.size()) << "check_arguments first";
  device.make_current();
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].bytes() > 0)
      check_memory(argument_name(i, params.args[i]) + " (" + describe(params.args[i]) + ")",
                   args[i].ptr, args[i].bytes(), device, where);
  if (workspace) {
    user_check(workspace % kWorkspaceAlignment == 0, where)
        << "the workspace at " << hex(workspace) << " is aligned to " << alignment_of(workspace)
        << " bytes; it must be aligned to " << kWorkspaceAlignment;
    check_memory("the workspace", workspace, params.workspace_bytes, device, where);
  }
}

} // namespace tessel

// CUDA code for Hopper bulk tensor copies (TMA), shared-memory barriers (mbarrier) and the
// warp roles' named barriers and register budgets (bar.sync / bar.arrive, setmaxnreg).
//
// Each intrinsic is one inline-PTX helper of the module preamble (tma_preamble): the PTX takes
// 32-bit shared-window addresses, made by __cvta_generic_to_shared from the generic pointers the
// IR passes as address_of(...). A tensor map is a kernel parameter of type tessel_tensor_map
// (CUtensorMap's 128 opaque bytes, 64-byte aligned), declared `const __grid_constant__` so its
// address is the parameter's own and TMA reads it there.
#include "compiler/codegen/CUDAKernelEmitter.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

namespace tessel::codegen {

bool CUDAKernelEmitter::emit_warp_roles(const Call *op) {
  const std::string &n = op->name;
  if (op->call_kind != Call::Intrinsic ||
      (n != intrinsic::named_barrier_sync && n != intrinsic::named_barrier_arrive &&
       n != intrinsic::setmaxnreg))
    return false;
  const std::vector<Expr> &a = op->args;
  auto constant = [&](const Expr &e, const char *what) {
    auto v = as_const_int(e);
    user_check(v.has_value(), "codegen_cuda")
        << n << " in kernel '" << f_.name << "': " << what << " must be a constant, got " << e;
    return *v;
  };
  if (n == intrinsic::setmaxnreg) {
    check_intrinsic_args(op, 2, "(registers, increase)");
    const int64_t regs = constant(a[0], "the register count");
    user_check(regs >= 24 && regs <= 256 && regs % 8 == 0, "codegen_cuda")
        << n << " in kernel '" << f_.name << "': " << regs
        << " registers; setmaxnreg takes 24 .. 256, a multiple of 8";
    needs_.wgmma = true; // setmaxnreg is sm_90a's, as wgmma
    line(std::string("asm volatile(\"setmaxnreg.") + (constant(a[1], "increase") ? "inc" : "dec") +
         ".sync.aligned.u32 " + std::to_string(regs) + ";\\n\" ::: \"memory\");");
    return true;
  }
  check_intrinsic_args(op, 2, "(id, threads)");
  if (auto id = as_const_int(a[0]))
    user_check(*id >= 1 && *id <= 15, "codegen_cuda")
        << n << " in kernel '" << f_.name << "': barrier " << *id
        << "; named barriers are 1 .. 15 (0 is syncthreads')";
  if (auto threads = as_const_int(a[1]))
    user_check(*threads > 0 && *threads % 32 == 0, "codegen_cuda")
        << n << " in kernel '" << f_.name << "': " << *threads
        << " threads; a named barrier counts whole warps (a positive multiple of 32)";
  const char *instr = n == intrinsic::named_barrier_sync ? "bar.sync" : "bar.arrive";
  line(std::string("asm volatile(\"") + instr + " %0, %1;\\n\" :: \"r\"(" + print(a[0]) +
       "), \"r\"(" + print(a[1]) + ") : \"memory\");");
  return true;
}

bool CUDAKernelEmitter::emit_tma(const Call *op) {
  const std::string &n = op->name;
  if (op->call_kind != Call::Intrinsic ||
      (n.rfind("mbarrier_", 0) != 0 && n != intrinsic::fence_barrier_init &&
       n != intrinsic::tma_load && n != intrinsic::tma_load_im2col &&
       n != intrinsic::tma_load_multicast && n != intrinsic::cluster_sync))
    return false;
  const std::vector<Expr> &a = op->args;
  // A barrier or destination: address_of(buf[i]) of a shared buffer of `dtype` (any when void).
  auto shared_ptr = [&](const Expr &p, const char *what, DataType dtype) {
    const auto *c = p.as<Call>();
    const auto *load =
        c && c->is_intrinsic(intrinsic::address_of) ? c->args[0].as<BufferLoad>() : nullptr;
    auto mem = load ? scope_of_.find(data_var(load->buffer)) : scope_of_.end();
    user_check(mem != scope_of_.end() && mem->second == "shared" &&
                   (dtype.is_void() || load->buffer.dtype() == dtype),
               "codegen_cuda")
        << n << " in kernel '" << f_.name << "': the " << what
        << " must be address_of(buffer[index]) of a shared "
        << (dtype.is_void() ? std::string("buffer") : dtype.str() + " buffer") << ", got " << p;
    return print(p);
  };
  needs_.tma = true;
  if (n == intrinsic::fence_barrier_init) {
    check_intrinsic_args(op, 0, "()");
    line("tessel_fence_barrier_init();");
    return true;
  }
  if (n == intrinsic::mbarrier_init) {
    check_intrinsic_args(op, 2, "(bar, count)");
    line("tessel_mbarrier_init(" + shared_ptr(a[0], "barrier", UInt(64)) + ", " + print(a[1]) +
         ");");
    return true;
  }
  if (n == intrinsic::cluster_sync) {
    check_intrinsic_args(op, 0, "()");
    line("tessel_cluster_sync();");
    return true;
  }
  if (n == intrinsic::mbarrier_arrive_cluster) {
    check_intrinsic_args(op, 2, "(bar, rank)");
    line("tessel_mbarrier_arrive_cluster(" + shared_ptr(a[0], "barrier", UInt(64)) + ", " +
         print(a[1]) + ");");
    return true;
  }
  if (n == intrinsic::mbarrier_arrive) {
    check_intrinsic_args(op, 1, "(bar)");
    line("tessel_mbarrier_arrive(" + shared_ptr(a[0], "barrier", UInt(64)) + ");");
    return true;
  }
  if (n == intrinsic::mbarrier_arrive_expect_tx) {
    check_intrinsic_args(op, 2, "(bar, bytes)");
    line("tessel_mbarrier_arrive_expect_tx(" + shared_ptr(a[0], "barrier", UInt(64)) + ", " +
         print(a[1]) + ");");
    return true;
  }
  if (n == intrinsic::mbarrier_wait) {
    check_intrinsic_args(op, 2, "(bar, parity)");
    line("tessel_mbarrier_wait(" + shared_ptr(a[0], "barrier", UInt(64)) + ", " + print(a[1]) +
         ");");
    return true;
  }
  if (n == intrinsic::tma_load || n == intrinsic::tma_load_im2col ||
      n == intrinsic::tma_load_multicast) {
    const bool im2col = n == intrinsic::tma_load_im2col;
    const bool multicast = n == intrinsic::tma_load_multicast;
    const auto *map = a.size() >= 4 ? a[0].as<Variable>() : nullptr;
    const TensorMapParam *param = nullptr;
    for (const TensorMapParam &m : f_.tensor_maps)
      if (map && m.var.get() == map)
        param = &m;
    user_check(param && param->im2col == im2col, "codegen_cuda")
        << n << "(map, dst, bar, coords...) in kernel '" << f_.name << "': the map must be one of "
        << "the kernel's " << (im2col ? "im2col" : "tiled") << " tensor maps, got " << Expr(op);
    if (im2col) {
      check_intrinsic_args(op, 9, "(map, dst, bar, c, w, h, n, off_w, off_h)");
      std::string call = "tessel_tma_load_im2col_4d(" + shared_ptr(a[1], "destination", Void()) +
                         ", &" + var_text(map) + ", " + shared_ptr(a[2], "barrier", UInt(64));
      for (size_t i = 3; i < 9; ++i)
        call += ", " + print(a[i]);
      line(call + ");");
      return true;
    }
    const size_t first = multicast ? 4 : 3; // the coordinates, after the mask
    size_t rank = a.size() - first;
    user_check(a.size() > first && rank == param->dims.size() && rank <= 5, "codegen_cuda")
        << n << " in kernel '" << f_.name << "': tensor map '" << map->name << "' has "
        << param->dims.size() << " dimensions but the call gives " << rank << " coordinates";
    std::string call = "tessel_tma_load_" + std::string(multicast ? "multicast_" : "") +
                       std::to_string(rank) + "d(" + shared_ptr(a[1], "destination", Void()) +
                       ", &" + var_text(map) + ", " + shared_ptr(a[2], "barrier", UInt(64));
    if (multicast) {
      auto mask = as_const_int(a[3]);
      user_check(mask && *mask > 0 && *mask < (1 << 16), "codegen_cuda")
          << n << " in kernel '" << f_.name << "': the cluster mask must be a constant of 1 to "
          << "16 bits, got " << a[3];
      call += ", (unsigned short)" + std::to_string(*mask);
    }
    for (size_t i = first; i < a.size(); ++i)
      call += ", " + print(a[i]);
    line(call + ");");
    return true;
  }
  user_error("codegen_cuda") << "unknown intrinsic '" << n << "' in kernel '" << f_.name << "'";
}

bool CUDAKernelEmitter::emit_tma_store(const Call *op) {
  const std::string &n = op->name;
  if (op->call_kind != Call::Intrinsic ||
      (n != intrinsic::tma_store && n != intrinsic::tma_store_commit &&
       n != intrinsic::tma_store_wait_read && n != intrinsic::tma_store_wait))
    return false;
  const std::vector<Expr> &a = op->args;
  needs_.tma = true;
  if (n == intrinsic::tma_store_commit) {
    check_intrinsic_args(op, 0, "()");
    line("asm volatile(\"cp.async.bulk.commit_group;\\n\" ::: \"memory\");");
    return true;
  }
  if (n == intrinsic::tma_store_wait_read || n == intrinsic::tma_store_wait) {
    check_intrinsic_args(op, 1, "(n)");
    auto groups = as_const_int(a[0]);
    user_check(groups && *groups >= 0 && *groups <= 63, "codegen_cuda")
        << n << " in kernel '" << f_.name << "': the group count must be a constant 0 .. 63 "
        << "(an immediate of cp.async.bulk.wait_group), got " << a[0];
    line(std::string("asm volatile(\"cp.async.bulk.wait_group") +
         (n == intrinsic::tma_store_wait_read ? ".read" : "") + " " + std::to_string(*groups) +
         ";\\n\" ::: \"memory\");");
    return true;
  }
  const auto *map = !a.empty() ? a[0].as<Variable>() : nullptr;
  const TensorMapParam *param = nullptr;
  for (const TensorMapParam &m : f_.tensor_maps)
    if (map && m.var.get() == map)
      param = &m;
  user_check(param && !param->im2col, "codegen_cuda")
      << n << "(map, src, coords...) in kernel '" << f_.name
      << "': the map must be one of the kernel's tiled tensor maps, got " << Expr(op);
  const size_t rank = a.size() - 2;
  user_check(a.size() >= 3 && rank == param->dims.size() && rank <= 5, "codegen_cuda")
      << n << " in kernel '" << f_.name << "': tensor map '" << map->name << "' has "
      << param->dims.size() << " dimensions but the call gives " << rank << " coordinates";
  const auto *c = a[1].as<Call>();
  const auto *load =
      c && c->is_intrinsic(intrinsic::address_of) ? c->args[0].as<BufferLoad>() : nullptr;
  auto mem = load ? scope_of_.find(data_var(load->buffer)) : scope_of_.end();
  user_check(mem != scope_of_.end() && mem->second == "shared", "codegen_cuda")
      << n << " in kernel '" << f_.name
      << "': the source must be address_of(buffer[index]) of a shared buffer, got " << a[1];
  std::string call = "tessel_tma_store_" + std::to_string(rank) + "d(&" + var_text(map) + ", " +
                     print(a[1]);
  for (size_t i = 2; i < a.size(); ++i)
    call += ", " + print(a[i]);
  line(call + ");");
  return true;
}

std::string tma_preamble() {
  std::string s = R"(struct __align__(64) tessel_tensor_map { unsigned long long opaque[16]; };
__device__ __forceinline__ unsigned tessel_smem(const void *p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void tessel_mbarrier_init(void *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(tessel_smem(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void tessel_fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void tessel_mbarrier_arrive(void *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(tessel_smem(bar)) : "memory");
}
__device__ __forceinline__ void tessel_mbarrier_arrive_expect_tx(void *bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               :: "r"(tessel_smem(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tessel_mbarrier_wait(void *bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(tessel_smem(bar)), "r"(parity) : "memory");
  } while (!done);
}
)";
  // Clusters: a remote arrival (mapa to the peer's barrier at the same offset) and the
  // cluster-wide barrier. The arrival has the default semantics (release at CTA scope): the
  // consumer's reads of the slot are wgmma's, complete at its wgmma_wait before it arrives;
  // .release.cluster made ptxas put MEMBAR.ALL.CTA and MEMBAR.ALL.GPU before every arrival.
  s += R"(__device__ __forceinline__ void tessel_mbarrier_arrive_cluster(void *bar, unsigned rank) {
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
               :: "r"(tessel_smem(bar)), "r"(rank) : "memory");
}
__device__ __forceinline__ void tessel_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n"
               ::: "memory");
}
)";
  // cp.async.bulk.tensor of 1 to 5 dimensions: coordinates innermost first; the multicast form
  // writes every block of the cluster in its 16-bit mask.
  for (int r = 1; r <= 5; ++r) {
    std::string params, coords, operands;
    for (int i = 0; i < r; ++i) {
      params += ", int c" + std::to_string(i);
      coords += (i ? ", %" : "%") + std::to_string(i + 4);
      operands += ", \"r\"(c" + std::to_string(i) + ")";
    }
    std::string d = std::to_string(r);
    s += "__device__ __forceinline__ void tessel_tma_load_multicast_" + d +
         "d(void *dst, const tessel_tensor_map *map, void *bar, unsigned short mask" + params +
         ") {\n"
         "  asm volatile(\"cp.async.bulk.tensor." +
         d +
         "d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {" +
         coords +
         "}], [%2], %3;\\n\"\n"
         "               :: \"r\"(tessel_smem(dst)), \"l\"(reinterpret_cast<unsigned long "
         "long>(map)), \"r\"(tessel_smem(bar)), \"h\"(mask)" +
         operands + " : \"memory\");\n}\n";
  }
  for (int r = 1; r <= 5; ++r) {
    std::string params, coords, operands;
    for (int i = 0; i < r; ++i) {
      params += ", int c" + std::to_string(i);
      coords += (i ? ", %" : "%") + std::to_string(i + 3);
      operands += ", \"r\"(c" + std::to_string(i) + ")";
    }
    std::string d = std::to_string(r);
    s += "__device__ __forceinline__ void tessel_tma_load_" + d +
         "d(void *dst, const tessel_tensor_map *map, void *bar" + params +
         ") {\n"
         "  asm volatile(\"cp.async.bulk.tensor." +
         d + "d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {" + coords +
         "}], [%2];\\n\"\n"
         "               :: \"r\"(tessel_smem(dst)), \"l\"(reinterpret_cast<unsigned long "
         "long>(map)), \"r\"(tessel_smem(bar))" +
         operands + " : \"memory\");\n}\n";
  }
  // The store direction, shared -> global, completing in the issuing thread's bulk groups.
  for (int r = 1; r <= 5; ++r) {
    std::string params, coords, operands;
    for (int i = 0; i < r; ++i) {
      params += ", int c" + std::to_string(i);
      coords += (i ? ", %" : "%") + std::to_string(i + 2);
      operands += ", \"r\"(c" + std::to_string(i) + ")";
    }
    std::string d = std::to_string(r);
    s += "__device__ __forceinline__ void tessel_tma_store_" + d +
         "d(const tessel_tensor_map *map, const void *src" + params +
         ") {\n"
         "  asm volatile(\"cp.async.bulk.tensor." +
         d + "d.global.shared::cta.bulk_group [%0, {" + coords +
         "}], [%1];\\n\"\n"
         "               :: \"l\"(reinterpret_cast<unsigned long long>(map)), "
         "\"r\"(tessel_smem(src))" +
         operands + " : \"memory\");\n}\n";
  }
  // The im2col form for 2-D convolutions on NHWC: coordinates (c, w, h, n), 16-bit filter
  // offsets (off_w, off_h).
  s +=
      R"(__device__ __forceinline__ void tessel_tma_load_im2col_4d(void *dst, const tessel_tensor_map *map, void *bar,
    int c, int w, int h, int n, int off_w, int off_h) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5, %6}], [%2], {%7, %8};\n"
               :: "r"(tessel_smem(dst)), "l"(reinterpret_cast<unsigned long long>(map)),
                  "r"(tessel_smem(bar)), "r"(c), "r"(w), "r"(h), "r"(n),
                  "h"(static_cast<unsigned short>(off_w)), "h"(static_cast<unsigned short>(off_h))
               : "memory");
}
)";
  return s;
}

} // namespace tessel::codegen

// CUDA code generation: the module, the kernel signature, statements and names.
#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/ir/WrittenBuffers.h"

#include "compiler/codegen/CUDAKernelEmitter.h"
#include "compiler/ir/FragmentScope.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

#include <llvm/ADT/StringSet.h>

namespace tessel {
namespace codegen {

namespace {

// Identifiers that generated names must not shadow: C++ keywords, CUDA built-ins, the math
// functions and types the code calls, and the helpers of the preamble.
const char *const kReservedNames[] = {
    "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch", "char",
    "class", "const", "constexpr", "continue", "decltype", "default", "delete", "do", "double",
    "else", "enum", "explicit", "extern", "false", "float", "for", "friend", "goto", "if",
    "inline", "int", "long", "mutable", "namespace", "new", "not", "nullptr", "operator", "or",
    "private", "protected", "public", "register", "return", "short", "signed", "sizeof",
    "static", "struct", "switch", "template", "this", "throw", "true", "try", "typedef",
    "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "while", "xor",
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "half", "half2", "nvcuda",
    "min", "max", "abs", "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "pow", "sin",
    "cos", "tan", "tanh", "erf", "floor", "ceil", "round", "trunc", "fabs", "fmod", "assert",
    "float2", "float4", "int2", "int4", "uint2", "uint4", "tessel_floordiv", "tessel_floormod",
    "tessel_fast_exp2f",
    "tessel_dynamic_smem",
};

/// A C identifier made of `name`: other characters become '_' (Apad.shared -> Apad_shared).
std::string sanitize(const std::string &name) {
  std::string s;
  for (char c : name)
    s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])))
    s = "v" + s;
  // Names starting with "__" are reserved for the implementation.
  while (s.size() > 1 && s[0] == '_' && s[1] == '_')
    s.erase(0, 1);
  return s;
}

bool is_c_identifier(const std::string &s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])))
    return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      return false;
  return true;
}

/// The grid/block dimension a thread tag names: blockIdx.y -> grid[1].
int64_t launch_extent(const LaunchConfig &l, const std::string &tag) {
  int dim = tag.back() - 'x';
  return tag.rfind("blockIdx.", 0) == 0 ? l.grid[dim] : l.block[dim];
}

bool is_cuda_thread_tag(const std::string &tag) {
  return tag == "threadIdx.x" || tag == "threadIdx.y" || tag == "threadIdx.z" ||
         tag == "blockIdx.x" || tag == "blockIdx.y" || tag == "blockIdx.z";
}


} // namespace

// ---- Names ------------------------------------------------------------------------------------

std::string CUDAKernelEmitter::fresh_name(const std::string &base) {
  std::string clean = sanitize(base);
  std::string name = clean;
  for (int k = 1; used_names_.count(name); ++k)
    name = clean + "_" + std::to_string(k);
  used_names_.insert(name);
  return name;
}

std::string CUDAKernelEmitter::bind_var(const Variable *v) {
  std::string name = fresh_name(v->name);
  var_text_[v] = name;
  return name;
}

const std::string &CUDAKernelEmitter::var_text(const Variable *v) const {
  auto it = var_text_.find(v);
  internal_check(it != var_text_.end())
      << "kernel '" << f_.name << "': variable '" << v->name
      << "' is used but never defined (kernels take only buffers; every other variable must "
         "be a loop, thread or let variable)";
  return it->second;
}

const Variable *CUDAKernelEmitter::data_var(const Buffer &b) const {
  const auto *v = llvm::dyn_cast_or_null<Variable>(b->data.get());
  internal_check(v) << "buffer '" << b.name() << "' has no data variable";
  return v;
}

const std::string &CUDAKernelEmitter::buffer_name(const Buffer &b) const {
  const Variable *v = data_var(b);
  internal_check(var_text_.count(v))
      << "kernel '" << f_.name << "': buffer '" << b.name()
      << "' is neither an argument nor allocated in the kernel";
  return var_text(v);
}

// ---- Kernel -------------------------------------------------------------------------------------

CUDAKernelEmitter::CUDAKernelEmitter(const LoweredFunc &f, ModuleNeeds &needs,
                                     llvm::raw_ostream &os)
    : f_(f), needs_(needs), os_(os) {
  for (const char *n : kReservedNames)
    used_names_.insert(n);
  used_names_.insert(f.name);
}

void CUDAKernelEmitter::emit_kernel() {
  user_check(is_c_identifier(f_.name), "codegen_cuda")
      << "kernel name '" << f_.name << "' is not a C identifier (letters, digits and '_')";
  internal_check(f_.body.defined()) << "kernel '" << f_.name << "' has no body";
  written_ = written_buffers(f_.body);
  // An argument a TMA store writes (through its tensor map) is not const either.
  post_order_visit(f_.body, [&](const IRNode *n) {
    const auto *c = llvm::dyn_cast<Call>(n);
    const auto *map = c && c->is_intrinsic(intrinsic::tma_store) && !c->args.empty()
                          ? c->args[0].as<Variable>()
                          : nullptr;
    for (const TensorMapParam &m : f_.tensor_maps)
      if (map && m.var.get() == map && size_t(m.arg) < f_.args.size())
        written_.insert(static_cast<const Variable *>(f_.args[size_t(m.arg)]->data.get()));
  });
  analyze_fragments();

  shared_ = plan_shared_memory(f_.body);
  dynamic_shared_ = f_.launch.dynamic_shared_bytes > 0;
  if (dynamic_shared_) {
    internal_check(shared_.total_bytes <= f_.launch.dynamic_shared_bytes)
        << "kernel '" << f_.name << "' needs " << shared_.total_bytes
        << " bytes of dynamic shared memory but its launch requests "
        << f_.launch.dynamic_shared_bytes;
  } else {
    user_check(shared_.total_bytes <= 48 * 1024, "codegen_cuda")
        << "kernel '" << f_.name << "' allocates " << shared_.total_bytes
        << " bytes of shared memory; static shared memory is limited to 48 KiB. Use smaller "
           "tiles, or lower with dynamic shared memory (LaunchConfig::dynamic_shared_bytes).";
  }

  std::string params;
  for (const Buffer &b : f_.args) {
    const Variable *v = data_var(b);
    internal_check(!var_text_.count(v))
        << "kernel '" << f_.name << "': buffer '" << b.name() << "' is passed twice";
    internal_check(b.dtype().is_scalar() && !b.dtype().is_handle())
        << "kernel '" << f_.name << "': argument '" << b.name() << "' has type " << b.dtype();
    std::string t = type_name(b.dtype());
    std::string name = bind_var(v);
    scope_of_[v] = "global";
    if (!params.empty())
      params += ", ";
    params += (written_.count(v) ? "" : "const ") + t + "* __restrict__ " + name;
  }
  for (const TensorMapParam &m : f_.tensor_maps) {
    internal_check(!var_text_.count(m.var.get()))
        << "kernel '" << f_.name << "': tensor map '" << m.var.name() << "' is passed twice";
    needs_.tma = true;
    params += (params.empty() ? "" : ", ") +
              std::string("const __grid_constant__ tessel_tensor_map ") + bind_var(m.var.get());
  }

  // Clusters (sm_90) fixed at compile time: a plain cuLaunchKernel launches them.
  const auto &cl = f_.launch.cluster;
  std::string cluster_dims;
  if (f_.launch.cluster_size() > 1)
    cluster_dims = "__cluster_dims__(" + std::to_string(cl[0]) + ", " + std::to_string(cl[1]) +
                   ", " + std::to_string(cl[2]) + ") ";
  os_ << "extern \"C\" __global__ void __launch_bounds__(" << f_.launch.threads_per_block()
      << ") " << cluster_dims << f_.name << "(" << params << ") {\n";
  if (dynamic_shared_)
    line("extern __shared__ __align__(" + std::to_string(shared_.align) +
         ") unsigned char tessel_dynamic_smem[];");
  if (f_.launch.after_previous) {
    // Launched as a programmatic dependent (sm_90+), the kernel may start before the previous
    // one has finished: it waits for it, and for its memory, here. Launched plainly the wait
    // returns at once.
    os_ << "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n";
    line("asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");");
    os_ << "#endif\n";
  }
  emit_stmt(f_.body);
  internal_check(hoisted_.empty()) << "hoisted definitions left over";
  os_ << "}\n";
}

// ---- Lines --------------------------------------------------------------------------------------

void CUDAKernelEmitter::flush_hoisted() {
  std::vector<std::string> defs;
  defs.swap(hoisted_);
  for (const std::string &d : defs)
    line(d);
}

void CUDAKernelEmitter::line(const std::string &text) {
  flush_hoisted();
  for (int i = 0; i < indent_; ++i)
    os_ << "  ";
  os_ << text << "\n";
}

void CUDAKernelEmitter::open_block(const std::string &head) {
  line(head + " {");
  ++indent_;
}

void CUDAKernelEmitter::close_block(const std::string &tail) {
  internal_check(hoisted_.empty()) << "definitions hoisted past the end of a block";
  --indent_;
  line(tail);
}

// ---- Statements ---------------------------------------------------------------------------------

void CUDAKernelEmitter::emit_stmt(const Stmt &s) {
  internal_check(s.defined()) << "undefined statement in kernel '" << f_.name << "'";
  switch (s->kind()) {
  case IRNodeKind::LetStmt: {
    const auto *op = llvm::cast<LetStmt>(s);
    internal_check(op->value.type().is_scalar())
        << "vector LetStmt '" << op->var.name() << "' is not supported by CUDA codegen";
    std::string value = print(op->value);
    std::string t = type_name(op->value.type());
    std::string name = bind_var(op->var.get());
    if (is_non_negative(op->value))
      non_negative_.insert(op->var.get());
    if (std::optional<int64_t> most = upper_bound(op->value))
      max_value_[op->var.get()] = *most;
    line("const " + t + " " + name + " = " + value + ";");
    return emit_stmt(op->body);
  }
  case IRNodeKind::AttrStmt:
    return emit_attr(llvm::cast<AttrStmt>(s));
  case IRNodeKind::AssertStmt: {
    // No assert.h under NVRTC; a failed check traps, which the host sees as a launch error.
    const auto *op = llvm::cast<AssertStmt>(s);
    std::string msg = op->message;
    for (char &c : msg)
      if (c == '\n' || c == '\r')
        c = ' ';
    line("if (!" + print(op->condition, PrecUnary) + ") __trap();  // assert: " + msg);
    return emit_stmt(op->body);
  }
  case IRNodeKind::For:
    return emit_for(llvm::cast<For>(s));
  case IRNodeKind::Allocate:
    return emit_allocate(llvm::cast<Allocate>(s));
  case IRNodeKind::BufferStore:
    return emit_store(llvm::cast<BufferStore>(s));
  case IRNodeKind::IfThenElse:
    return emit_if(llvm::cast<IfThenElse>(s));
  case IRNodeKind::Seq:
    for (const Stmt &x : llvm::cast<Seq>(s)->stmts)
      emit_stmt(x);
    return;
  case IRNodeKind::Evaluate:
    return emit_evaluate(llvm::cast<Evaluate>(s));
  case IRNodeKind::BufferRealize:
    internal_error << "kernel '" << f_.name << "': BufferRealize of '"
                   << llvm::cast<BufferRealize>(s)->buffer.name()
                   << "' reached CUDA codegen; storage_flatten must run first (Form 1 IR)";
  default:
    internal_error << "CUDA codegen: unsupported statement " << s;
  }
}

void CUDAKernelEmitter::emit_for(const For *op) {
  if (op->for_kind == ForKind::ThreadBinding) {
    bind_thread_index(op->loop_var.get(), op->thread_tag, op->min);
    return emit_stmt(op->body);
  }
  // Vectorized and parallel loops that survive to here run serially, which is always valid.
  std::string t = type_name(op->loop_var.type());
  std::string lo = print(op->min);
  std::string hi = print(is_zero(op->min) ? op->extent : op->min + op->extent, PrecRel, true);
  bool non_negative = is_non_negative(op->min);
  std::string name = bind_var(op->loop_var.get());
  if (non_negative)
    non_negative_.insert(op->loop_var.get());
  if (op->for_kind == ForKind::Unrolled) {
    flush_hoisted();
    line("#pragma unroll");
  }
  open_block("for (" + t + " " + name + " = " + lo + "; " + name + " < " + hi + "; ++" + name +
             ")");
  emit_stmt(op->body);
  close_block();
}

void CUDAKernelEmitter::emit_if(const IfThenElse *op) {
  open_block("if (" + print(op->condition) + ")");
  emit_stmt(op->then_case);
  Stmt rest = op->else_case;
  // Print else-if chains flat; a condition that needs hoisted definitions nests instead.
  while (rest.defined()) {
    const auto *next = rest.as<IfThenElse>();
    if (next) {
      std::string cond = print(next->condition);
      if (hoisted_.empty()) {
        close_block("} else if (" + cond + ") {");
        ++indent_;
        emit_stmt(next->then_case);
        rest = next->else_case;
        continue;
      }
      // Keep the definitions for the inner block: write "} else {" without flushing them.
      std::vector<std::string> defs;
      defs.swap(hoisted_);
      close_block("} else {");
      ++indent_;
      hoisted_ = std::move(defs);
      open_block("if (" + cond + ")");
      emit_stmt(next->then_case);
      if (next->else_case.defined()) {
        close_block("} else {");
        ++indent_;
        emit_stmt(next->else_case);
      }
      close_block();
      break;
    }
    close_block("} else {");
    ++indent_;
    emit_stmt(rest);
    break;
  }
  close_block();
}

void CUDAKernelEmitter::emit_allocate(const Allocate *op) {
  const Variable *v = op->buffer_var.get();
  int64_t size = op->constant_size();
  user_check(size > 0, "codegen_cuda")
      << "allocation '" << v->name << "' in kernel '" << f_.name
      << "' must have a constant positive size, got " << op->extents.size() << " extents";
  internal_check(op->dtype.is_scalar()) << "allocation '" << v->name << "' of vector type";
  const std::string &scope = op->scope;
  std::string t = type_name(op->dtype);
  if (is_mma_scope(scope)) {
    line(mma_fragment_decl(op));
  } else if (scope == "wgmma.rows") {
    line(wgmma_rows_decl(op));
    emit_stmt(op->body);
    return;
  } else if (is_wgmma_scope(scope)) {
    line(scope == "wgmma.matrix_a" ? wgmma_a_decl(op) : wgmma_accumulator_decl(op));
    emit_stmt(op->body);
    wgmma_registers_.pop_back();
    return;
  } else if (is_wmma_scope(scope)) {
    int64_t count = 0;
    std::string frag = fragment_type(op, &count);
    std::string name = bind_var(v);
    scope_of_[v] = scope;
    line(frag + " " + name + "[" + std::to_string(count) + "];");
  } else if (scope == "shared") {
    std::string name = bind_var(v);
    scope_of_[v] = scope;
    if (dynamic_shared_) {
      internal_check(shared_.offset.count(op)) << "shared allocation '" << v->name
                                               << "' missing from the layout";
      line(t + "* " + name + " = (" + t + "*)(tessel_dynamic_smem + " +
           std::to_string(shared_.offset.lookup(op)) + ");");
    } else {
      line("__shared__ __align__(" + std::to_string(shared_.align) + ") " + t + " " + name + "[" +
           std::to_string(size) + "];");
    }
  } else if (scope == "local") {
    std::string name = bind_var(v);
    scope_of_[v] = scope;
    // Aligned so that Ramp accesses of 16 bytes can be single vector instructions.
    line("alignas(16) " + t + " " + name + "[" + std::to_string(size) + "];");
  } else {
    user_error("codegen_cuda") << "allocation '" << v->name << "' in kernel '" << f_.name
                               << "' has storage scope '" << scope
                               << "'; CUDA kernels can allocate in shared, local, wmma.* and "
                                  "mma.* scopes only";
  }
  emit_stmt(op->body);
}

void CUDAKernelEmitter::bind_thread_index(const Variable *v, const std::string &tag,
                                          const Expr &min) {
  internal_check(tag.rfind("vthread", 0) != 0)
      << "virtual thread '" << v->name << "' reached CUDA codegen; virtual threads must be "
      << "lowered before";
  internal_check(is_cuda_thread_tag(tag)) << "unknown thread tag '" << tag << "'";
  std::string text = "((" + type_name(v->type) + ")" + tag + ")";
  if (min.defined() && !is_zero(min))
    text = "(" + text + " + " + print(min, PrecAdd, true) + ")";
  if (!min.defined() || is_non_negative(min))
    non_negative_.insert(v);
  var_text_[v] = text;
}

void CUDAKernelEmitter::emit_attr(const AttrStmt *op) {
  if (op->key == attr::thread_extent) {
    const auto *iv = std::get_if<IterVar>(&op->node);
    internal_check(iv && iv->defined()) << "thread_extent attribute without an IterVar";
    const std::string &tag = iv->thread_tag();
    bind_thread_index(iv->var().get(), tag, Expr());
    // The index lies below the launch's extent along it (which the IR's must equal).
    if (is_cuda_thread_tag(tag))
      max_value_[iv->var().get()] = launch_extent(f_.launch, tag) - 1;
    if (auto extent = as_const_int(op->value); extent && is_cuda_thread_tag(tag))
      internal_check(*extent == launch_extent(f_.launch, tag))
          << "kernel '" << f_.name << "': " << tag << " has extent " << *extent
          << " in the IR but " << launch_extent(f_.launch, tag) << " in the launch config";
    return emit_stmt(op->body);
  }
  if (op->key == attr::stream_loads) {
    ++stream_loads_;
    emit_stmt(op->body);
    --stream_loads_;
    return;
  }
  internal_check(op->key != attr::virtual_thread)
      << "virtual_thread attribute reached CUDA codegen; virtual threads must be lowered first";
  // storage_scope, storage_alignment, pragmas, pipeline_scope: nothing to emit.
  emit_stmt(op->body);
}

void CUDAKernelEmitter::emit_evaluate(const Evaluate *op) {
  const Expr &v = op->value;
  if (llvm::isa<IntImm>(v) || llvm::isa<FloatImm>(v))
    return;
  if (const auto *call = v.as<Call>()) {
    if (call->is_intrinsic(intrinsic::syncthreads))
      return line("__syncthreads();");
    if (emit_async_copy(call) || emit_thread_allreduce(call))
      return;
    if (emit_wmma(call) || emit_mma(call) || emit_wgmma(call) || emit_tma(call) ||
        emit_warp_roles(call) || emit_tma_store(call) || emit_block_flag(call))
      return;
  }
  line(print(v) + ";");
}

bool CUDAKernelEmitter::emit_async_copy(const Call *call) {
  if (call->call_kind != Call::Intrinsic)
    return false;
  if (call->name == intrinsic::cp_async_commit) {
    needs_.async_copy = true;
    line("tessel_cp_async_commit();");
    return true;
  }
  if (call->name == intrinsic::cp_async_wait) {
    auto n = call->args.size() == 1 ? as_const_int(call->args[0]) : std::nullopt;
    user_check(n && *n >= 0, "codegen_cuda")
        << "cp_async_wait takes one non-negative constant, got " << Expr(call);
    needs_.async_copy = true;
    line("tessel_cp_async_wait<" + std::to_string(*n) + ">();");
    return true;
  }
  if (call->name != intrinsic::cp_async)
    return false;
  auto bytes = call->args.size() == 4 ? as_const_int(call->args[2]) : std::nullopt;
  user_check(bytes && (*bytes == 4 || *bytes == 8 || *bytes == 16), "codegen_cuda")
      << "cp_async(dst, src, bytes, predicate) copies 4, 8 or 16 bytes, got " << Expr(call);
  needs_.async_copy = true;
  std::string args = print(call->args[0]) + ", " + print(call->args[1]);
  if (is_one(call->args[3]))
    line("tessel_cp_async<" + std::to_string(*bytes) + ">(" + args + ");");
  else
    line("tessel_cp_async_zfill<" + std::to_string(*bytes) + ">(" + args + ", " +
         print(call->args[3]) + ");");
  return true;
}

} // namespace codegen

// ---- Entry points -------------------------------------------------------------------------------

std::string codegen_cuda(const LoweredModule &m) {
  codegen::ModuleNeeds needs;
  std::string kernels;
  llvm::raw_string_ostream kos(kernels);
  llvm::StringSet<> names;
  for (const LoweredFunc &f : m.funcs) {
    user_check(names.insert(f.name).second, "codegen_cuda")
        << "two kernels are named '" << f.name << "'; kernel names must be unique in a module";
    kos << "\n";
    codegen::CUDAKernelEmitter(f, needs, kos).emit_kernel();
  }
  kos.flush();

  std::string out;
  llvm::raw_string_ostream os(out);
  os << "// Generated by tessel.\n";
  if (needs.fp16)
    os << "#include <cuda_fp16.h>\n";
  if (needs.bf16)
    os << "#include <cuda_bf16.h>\n";
  if (needs.fp8)
    os << "#include <cuda_fp8.h>\n";
  if (needs.wmma)
    os << "#include <mma.h>\n";
  if (needs.floor_helpers) {
    // Integer division rounding towards negative infinity, for operands whose signs are unknown.
    os << R"(
__device__ __forceinline__ int tessel_floordiv(int a, int b) {
  int q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ long long tessel_floordiv(long long a, long long b) {
  long long q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ int tessel_floormod(int a, int b) {
  int r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ long long tessel_floormod(long long a, long long b) {
  long long r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
)";
  }
  if (needs.async_copy) {
    // cp.async (sm_80 and later) copies global to shared memory without a register round trip;
    // before sm_80 the same helpers copy synchronously. `.cg` (bypassing L1) takes 16 bytes.
    os << R"(
template <int Bytes>
__device__ __forceinline__ void tessel_cp_async_zfill(void *dst, const void *src, bool pred) {
#if __CUDA_ARCH__ >= 800
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  int n = pred ? Bytes : 0;
  if constexpr (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(src), "r"(n));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
                 :: "r"(s), "l"(src), "n"(Bytes), "r"(n));
#else
  struct alignas(Bytes) Chunk { unsigned char b[Bytes]; };
  *static_cast<Chunk *>(dst) = pred ? *static_cast<const Chunk *>(src) : Chunk{};
#endif
}
template <int Bytes>
__device__ __forceinline__ void tessel_cp_async(void *dst, const void *src) {
  tessel_cp_async_zfill<Bytes>(dst, src, true);
}
__device__ __forceinline__ void tessel_cp_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void tessel_cp_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
#endif
}
)";
  }
  if (needs.wgmma) {
    // A wgmma shared-memory matrix descriptor: the start address, the leading and stride
    // byte offsets, each >> 4, and the layout type in bits 62-63 (1, 2, 3: 128-, 64-, 32-byte
    // swizzle, 0: none); base offset 0, the swizzled tiles being 1024-byte aligned (PTX ISA,
    // "Matrix Descriptor Format").
    os << R"(
__device__ __forceinline__ unsigned long long tessel_wgmma_desc(const void *p, unsigned lbo,
                                                               unsigned sbo, unsigned layout) {
  unsigned long long a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  return ((a & 0x3FFFF) >> 4) | (static_cast<unsigned long long>((lbo >> 4) & 0x3FFF) << 16) |
         (static_cast<unsigned long long>((sbo >> 4) & 0x3FFF) << 32) |
         (static_cast<unsigned long long>(layout) << 62);
}
)";
  }
  if (needs.pack_fp8) {
    // Four floats rounded (to nearest even, saturating) to 8-bit floats in one 32-bit register,
    // the first in the lowest byte (wgmma's 8-bit A fragment from an accumulator's registers).
    os << R"(
__device__ __forceinline__ unsigned tessel_pack_e4m3x4(float a, float b, float c, float d) {
  unsigned short lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(b), "f"(a));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(d), "f"(c));
  return unsigned(lo) | (unsigned(hi) << 16);
}
__device__ __forceinline__ unsigned tessel_pack_e5m2x4(float a, float b, float c, float d) {
  unsigned short lo, hi;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(b), "f"(a));
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(d), "f"(c));
  return unsigned(lo) | (unsigned(hi) << 16);
}
)";
  }
  if (needs.pack_halves) {
    // Two floats rounded to a pair of halves in one 32-bit register, the first in the low half
    // (wgmma's A fragment from an accumulator's registers).
    os << R"(
__device__ __forceinline__ unsigned tessel_pack_f16x2(float lo, float hi) {
  unsigned d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
__device__ __forceinline__ unsigned tessel_pack_bf16x2(float lo, float hi) {
  unsigned d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
)";
  }
  if (needs.fast_exp2) {
    // 2^x on the special-function unit alone (fast_exp2): exp2f adds a rescale for results
    // under 2^-126, which this flushes to zero.
    os << R"(
__device__ __forceinline__ float tessel_fast_exp2f(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
)";
  }
  if (needs.stream_loads) {
    // A load that does not allocate in L1 (Stage::stream_loads), from memory the kernel does
    // not write (.nc); T is a 4-, 8- or 16-byte vector type.
    os << R"(
template <typename T>
__device__ __forceinline__ T tessel_ld_stream(const void *p) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "4, 8 or 16 bytes");
  T v;
  unsigned *u = reinterpret_cast<unsigned *>(&v);
  if constexpr (sizeof(T) == 16)
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3]) : "l"(p));
  else if constexpr (sizeof(T) == 8)
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];\n" : "=r"(u[0]), "=r"(u[1]) : "l"(p));
  else
    asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];\n" : "=r"(u[0]) : "l"(p));
  return v;
}
)";
  }
  if (needs.tma)
    os << "\n" << codegen::tma_preamble();
  if (needs.block_flags)
    os << "\n" << codegen::block_flag_preamble();
  os << kernels;
  os.flush();
  return out;
}

int64_t cuda_shared_memory_bytes(const LoweredFunc &f) {
  return codegen::plan_shared_memory(f.body).total_bytes;
}

} // namespace tessel

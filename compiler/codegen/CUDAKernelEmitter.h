// The emitter of one CUDA kernel (private to compiler/codegen).
//
// Split over six files by concern: CodeGenCUDA.cpp (kernel, statements, names),
// CodeGenCUDAExpr.cpp (expressions, types, literals), CodeGenCUDAVector.cpp (vector loads and
// stores), CodeGenCUDAWmma.cpp (fragment shapes, WMMA intrinsics, shared memory layout),
// CodeGenCUDAMma.cpp (register fragments, ldmatrix / mma.sync as inline PTX) and
// CodeGenCUDAWgmma.cpp (warpgroup accumulators, wgmma.mma_async as inline PTX).
#pragma once

#include "compiler/lower/LoweredFunc.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/StringSet.h>
#include <llvm/Support/raw_ostream.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessel::codegen {

/// What the translation unit's preamble must provide; set while kernels are emitted.
struct ModuleNeeds {
  bool fp16 = false;
  bool bf16 = false;
  bool fp8 = false; ///< <cuda_fp8.h>: __nv_fp8_e4m3 / __nv_fp8_e5m2
  bool wmma = false;
  bool floor_helpers = false;
  bool async_copy = false; ///< tessel_cp_async* helpers (cp.async)
  bool wgmma = false;      ///< tessel_wgmma_desc; the module needs sm_90a
  bool pack_halves = false; ///< tessel_pack_{f16,bf16}x2 (wgmma_acc_to_a)
  bool pack_fp8 = false;    ///< tessel_pack_{e4m3,e5m2}x4 (wgmma_acc_to_a of float8)
  bool fast_exp2 = false;   ///< tessel_fast_exp2f (fast_exp2)
  bool tma = false;        ///< tessel_tensor_map, tessel_mbarrier_*, tessel_tma_load_*
  bool block_flags = false; ///< tessel_flag_release / tessel_flag_wait
  bool stream_loads = false; ///< tessel_ld_stream (Stage::stream_loads)
};

/// The module preamble of the flags between blocks (CodeGenCUDAFlags.cpp).
std::string block_flag_preamble();

/// The module preamble of the TMA and mbarrier helpers (CodeGenCUDATma.cpp).
std::string tma_preamble();

/// The nvcuda::wmma::fragment type of a `wmma.*` allocation, deduced from the intrinsics that
/// use it (Allocate carries only the scope and the element count).
struct FragmentInfo {
  std::string scope; ///< wmma.matrix_a, wmma.matrix_b or wmma.accumulator
  int m = 0, n = 0, k = 0;
  std::string layout; ///< row_major / col_major, for matrix_a and matrix_b
  std::string first_use; ///< the intrinsic that fixed the shape, for error messages
};

/// tessel::Error unless intrinsic call `op` has `n` arguments (`signature` names them).
void check_intrinsic_args(const Call *op, size_t n, const char *signature);

/// C operator precedence levels (smaller binds tighter), for printing few parentheses.
enum Prec : int {
  PrecAtom = 0,
  PrecUnary = 2,
  PrecMul = 3,
  PrecAdd = 4,
  PrecRel = 6,
  PrecEq = 7,
  PrecLAnd = 11,
  PrecLOr = 12,
  PrecLowest = 100,
};

/// A printed expression and the precedence of its outermost operator.
struct CExpr {
  std::string text;
  int prec = PrecAtom;
};

/// Alignment of every shared allocation (bytes): wmma::load_matrix_sync needs 256 bits.
inline constexpr int64_t kSharedAlign = 32;

/// Alignment of shared allocations in kernels that use wgmma or TMA: 128-byte swizzled tiles
/// are read and written through the address bits of 1024-byte atoms.
inline constexpr int64_t kWgmmaSharedAlign = 1024;

/// One `shared` allocation's place in the dynamic shared memory array.
struct SharedLayout {
  llvm::DenseMap<const StmtNode *, int64_t> offset; ///< by Allocate node
  int64_t total_bytes = 0;
  int64_t align = kSharedAlign; ///< of every allocation, and of the array
};

SharedLayout plan_shared_memory(const Stmt &body);

class CUDAKernelEmitter {
public:
  CUDAKernelEmitter(const LoweredFunc &f, ModuleNeeds &needs, llvm::raw_ostream &os);
  void emit_kernel();

private:
  // ---- Names and bindings (CodeGenCUDA.cpp) ---------------------------------------------
  /// A fresh C identifier derived from `base`, unique within the kernel.
  std::string fresh_name(const std::string &base);
  /// Binds `v` to a fresh C identifier derived from its name and returns it.
  std::string bind_var(const Variable *v);
  /// The C text a variable stands for (its identifier, or threadIdx.x for a thread index).
  const std::string &var_text(const Variable *v) const;
  /// The C name of a buffer's storage (argument, allocation or vector temporary).
  const std::string &buffer_name(const Buffer &b) const;
  const Variable *data_var(const Buffer &b) const;

  // ---- Statements (CodeGenCUDA.cpp) -------------------------------------------------------
  void emit_stmt(const Stmt &s);
  void emit_for(const For *op);
  void emit_if(const IfThenElse *op);
  void emit_allocate(const Allocate *op);
  void emit_attr(const AttrStmt *op);
  void emit_evaluate(const Evaluate *op);
  void bind_thread_index(const Variable *v, const std::string &tag, const Expr &min);
  /// Writes one line at the current indentation, after any hoisted definitions.
  void line(const std::string &text);
  void flush_hoisted();
  void open_block(const std::string &head);
  void close_block(const std::string &tail = "}");

  // ---- Expressions (CodeGenCUDAExpr.cpp) --------------------------------------------------
public:
  /// The C name of a scalar type; marks the fp16/bf16 headers as needed.
  std::string type_name(DataType t);

private:
  std::string print(const Expr &e, int parent_prec = PrecLowest, bool is_right = false);
  CExpr emit_expr(const Expr &e);
  CExpr emit_binary(const char *op, int prec, const Expr &a, const Expr &b, DataType t);
  CExpr emit_floor_div_mod(bool is_div, const Expr &a, const Expr &b);
  CExpr emit_min_max(bool is_min, const Expr &a, const Expr &b);
  CExpr emit_cast(DataType to, const Expr &v);
  CExpr emit_call(const Call *op);
  CExpr emit_math_call(const Call *op);
  CExpr emit_let(const Let *op);
  std::string literal(const Expr &e);
  std::string float_literal(DataType t, double v);
  /// `&name[index]` for address_of(BufferLoad(...)).
  std::string address_of(const Expr &load);
  std::string flat_index(const Buffer &b, const Expr &index);
  /// True when `e` is provably >= 0 (sound, not complete).
  bool is_non_negative(const Expr &e) const;
  /// The most integer expression `e` can be, where the variables' bounds (max_value_) and its
  /// form (constants, sums, products and quotients of non-negative terms) tell.
  std::optional<int64_t> upper_bound(const Expr &e) const;

  // ---- Vectors (CodeGenCUDAVector.cpp) ------------------------------------------------------
  void emit_store(const BufferStore *op);
  void emit_vector_store(const BufferStore *op, const Expr &index);
  /// Whether buffer[index] can be one aligned vector access (Ramp(base, 1, lanes), 4/8/16 bytes,
  /// base a multiple of lanes).
  bool is_vector_access(const Buffer &b, const Expr &index) const;
  /// `*(float4*)(A + base)`.
  std::string vector_ref(const Buffer &b, const Expr &index, bool is_const);
  std::string vector_type(DataType t) const;
  /// Lane `lane` of a vector expression as scalar IR (hoisted loads read their temporaries).
  Expr lane_of(const Expr &e, int lane);
  void hoist_vector_loads(const Expr &value);
  void check_not_fragment(const Buffer &b, const char *what) const;

  /// cp_async, cp_async_commit and cp_async_wait; false for other calls.
  bool emit_async_copy(const Call *op);
  /// thread_allreduce (CodeGenCUDAReduce.cpp); false for other calls.
  bool emit_thread_allreduce(const Call *op);
  /// The combiner of a thread_allreduce, as CUDA: combine(a, b).
  using Combine = std::function<std::string(const std::string &, const std::string &)>;
  /// One value (`ref`, an lvalue) across the `x` threads of threadIdx.x.
  void emit_one_allreduce(const std::string &ref, const std::string &type, int64_t x,
                          const Combine &combine);
  /// The n values base[0..n) together (n a power of two up to x, x at most 32).
  void emit_batched_allreduce(const std::string &base, const std::string &type, int64_t x,
                              int64_t n, const Combine &combine);

  // ---- WMMA (CodeGenCUDAWmma.cpp) ---------------------------------------------------------
  void analyze_fragments();
  std::string fragment_type(const Allocate *op, int64_t *count);
  bool emit_wmma(const Call *op);
  /// `name[index]` of a fragment argument of intrinsic `intrin`.
  std::string fragment_ref(const Expr &frag, const Expr &index, const char *intrin,
                           const char *expected_scope = nullptr);
  std::string pointer_arg(const Expr &ptr, const char *intrin);
  const FragmentInfo *fragment_of(const Expr &frag) const;

  // ---- PTX mma (CodeGenCUDAMma.cpp) -------------------------------------------------------
  /// The declaration of an mma.* allocation as a register array; binds its name.
  std::string mma_fragment_decl(const Allocate *op);
  bool emit_mma(const Call *op);
  /// The thread's lane in its warp.
  CExpr mma_lane_id();
  /// How a store of float32 accumulators (mma_store_fragment, wgmma_store) writes the buffer
  /// `ptr` points at: its type (float32, float16 or bfloat16; tessel::Error naming `intrin`
  /// otherwise), and the CUDA that rounds one value into it and a pair into one word.
  struct AccumulatorStore {
    DataType type;
    std::string pair_type; ///< float2, __half2 or __nv_bfloat162
    std::string pair;      ///< make_float2, __floats2half2_rn or __floats2bfloat162_rn
    std::string one(const std::string &v) const; ///< v, or v rounded to nearest
  };
  AccumulatorStore accumulator_store(const Expr &ptr, const char *intrin);
  /// `name[tile][reg]` for 32-bit register `reg` counted from the first of tile `index`.
  std::string mma_register(const Expr &frag, const Expr &index, int reg, const char *intrin,
                           const char *expected_scope);

  // ---- Hopper wgmma (CodeGenCUDAWgmma.cpp) -----------------------------------------------
  /// The declaration of a wgmma.accumulator allocation as a per-thread register array; binds
  /// its name and makes it known to wgmma_fence_registers.
  std::string wgmma_accumulator_decl(const Allocate *op);
  /// The declaration of a wgmma.rows allocation (R rows: R / 32 registers a thread).
  std::string wgmma_rows_decl(const Allocate *op);
  /// The declaration of a wgmma.matrix_a allocation (S halves: S / 256 32-bit registers a
  /// thread); known to wgmma_fence_registers.
  std::string wgmma_a_decl(const Allocate *op);
  /// The name of wgmma.matrix_a allocation `a` and the first 32-bit register of its 64 x k tile
  /// `index`, checked.
  std::pair<std::string, int64_t> wgmma_a_tile(const Expr &a, const Expr &index, int64_t k,
                                               const char *intrin);
  /// `rows[2 index + h]` for wgmma_row(rows, index, h) and wgmma_row_set(rows, index, h, v).
  std::string wgmma_row_ref(const Call *op);
  /// wgmma_*, fence_proxy_async; false for other calls.
  bool emit_wgmma(const Call *op);
  /// The thread's index in its warpgroup.
  CExpr wgmma_thread_id();
  void emit_wgmma_sector_store(const std::string &p, const std::string &acc, int64_t base,
                               int64_t cols, int64_t stride, const std::string &limit,
                               const std::string &row_inside);
  /// The same stores through shared memory: false (nothing emitted) where the kernel has no
  /// wgmma operand tile large enough to lend (see wgmma_staging_offset).
  bool emit_wgmma_staged_store(const std::string &p, const std::string &acc, int64_t base,
                               int64_t cols, int64_t stride, const std::string &limit,
                               const std::string &row_limit);
  /// The dynamic shared memory offset of the largest wgmma operand tile (A or B, dead once
  /// the accumulators are complete) if it holds `bytes`; -1 otherwise.
  int64_t wgmma_staging_offset(int64_t bytes) const;
  /// `acc[first + r]` for wgmma_reg(acc, index, n, r) and wgmma_reg_set(acc, index, n, r, v).
  std::string wgmma_register(const Call *op);
  /// Empty asm statements that claim to modify every accumulator register in scope (those of
  /// `only`, the register arrays' names, when it is not empty: a wait that leaves a group in
  /// flight must not touch that group's registers).
  void wgmma_fence_registers(const std::vector<std::string> &only = {});

  // ---- Hopper TMA and mbarrier (CodeGenCUDATma.cpp) ----------------------------------------
  /// tma_load, mbarrier_*, fence_barrier_init; false for other calls.
  bool emit_tma(const Call *op);
  /// named_barrier_sync, named_barrier_arrive, setmaxnreg; false for other calls.
  bool emit_warp_roles(const Call *op);
  /// tma_store, tma_store_commit, tma_store_wait_read, tma_store_wait; false for other calls.
  bool emit_tma_store(const Call *op);
  /// flag_release, flag_wait (CodeGenCUDAFlags.cpp); false for other calls.
  bool emit_block_flag(const Call *op);

  const LoweredFunc &f_;
  ModuleNeeds &needs_;
  llvm::raw_ostream &os_;
  int indent_ = 1;

  llvm::StringSet<> used_names_;
  llvm::DenseMap<const Variable *, std::string> var_text_;
  /// Storage scope of every buffer variable (arguments are "global").
  llvm::DenseMap<const Variable *, std::string> scope_of_;
  llvm::DenseMap<const Variable *, FragmentInfo> fragments_;
  /// Element type of every mma.* fragment (float16 or bfloat16 operands, float32 accumulators).
  llvm::DenseMap<const Variable *, DataType> mma_dtype_;
  /// Argument buffers that the kernel writes (the others are `const`).
  llvm::DenseSet<const Variable *> written_;
  int stream_loads_ = 0; ///< depth of attr::stream_loads around the statement emitted
  /// Loop, thread and let variables known to be >= 0.
  llvm::DenseSet<const Variable *> non_negative_;
  /// The most an integer variable can be, where known: thread and block indices (the launch's
  /// extents), lets of such values (a reversed block index).
  llvm::DenseMap<const Variable *, int64_t> max_value_;
  SharedLayout shared_;
  /// The register arrays in scope that a wgmma reads or writes asynchronously (accumulators,
  /// A operands): C name, registers per thread, asm constraint ("+f", "+r").
  struct WgmmaRegisters {
    std::string name;
    int64_t count;
    const char *constraint;
  };
  std::vector<WgmmaRegisters> wgmma_registers_;
  /// Element type of every wgmma.matrix_a allocation (float16 or bfloat16).
  llvm::DenseMap<const Variable *, DataType> wgmma_a_dtype_;
  bool dynamic_shared_ = false;

  /// Definitions (lets, vector temporaries) that must precede the line being built.
  std::vector<std::string> hoisted_;
  /// > 0 while printing a subexpression that C may not evaluate (a branch of if_then_else,
  /// the right side of && / ||): nothing may be hoisted out of it.
  int conditional_depth_ = 0;
  /// Vector loads of the current store held in aligned temporaries, by BufferLoad node.
  llvm::DenseMap<const ExprNode *, Buffer> vector_temps_;
};

} // namespace tessel::codegen

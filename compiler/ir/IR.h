// Every IR node: expressions and statements.
//
// Each node is a small immutable struct with public const fields and a static `make(...)` that
// checks its invariants (operand types agree, extents are integers, ...) and throws
// tessel::Error for a mistake a user can make through the DSL, InternalError otherwise.
#pragma once

#include "compiler/ir/Buffer.h"
#include "compiler/ir/Expr.h"
#include "compiler/ir/IterVar.h"
#include "compiler/ir/Range.h"
#include "compiler/ir/Tensor.h"

#include <string>
#include <variant>
#include <vector>

namespace tessel {

#define TESSEL_NODE_KIND(K)                                                                       \
  static constexpr IRNodeKind static_kind = IRNodeKind::K;                                         \
  static bool classof(const IRNode *n) { return n->kind() == IRNodeKind::K; }

// ---------------------------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------------------------

/// An integer, unsigned or boolean constant.
struct IntImm : ExprNode {
  const int64_t value;
  static Expr make(DataType t, int64_t value);
  TESSEL_NODE_KIND(IntImm)
  IntImm(DataType t, int64_t v) : ExprNode(IRNodeKind::IntImm, t), value(v) {}
};

struct FloatImm : ExprNode {
  const double value;
  static Expr make(DataType t, double value);
  TESSEL_NODE_KIND(FloatImm)
  FloatImm(DataType t, double v) : ExprNode(IRNodeKind::FloatImm, t), value(v) {}
};

struct StringImm : ExprNode {
  const std::string value;
  static Expr make(std::string value);
  TESSEL_NODE_KIND(StringImm)
  explicit StringImm(std::string v) : ExprNode(IRNodeKind::StringImm, Handle()), value(std::move(v)) {}
};

/// A variable. Two variables are the same variable only if they are the same node; the name is
/// for printing.
struct Variable : ExprNode {
  const std::string name;
  TESSEL_NODE_KIND(Var)
  Variable(DataType t, std::string name) : ExprNode(IRNodeKind::Var, t), name(std::move(name)) {}
};

/// The handle users hold for a variable: `Var i("i")`.
class Var : public Expr {
public:
  Var() = default;
  explicit Var(const std::string &name, DataType t = Int(32));
  explicit Var(const Variable *v) : Expr(v) {}
  const Variable *get() const { return static_cast<const Variable *>(Expr::get()); }
  const Variable *operator->() const { return get(); }
  const std::string &name() const { return get()->name; }
  /// A fresh variable with the same name and type.
  Var copy_with_suffix(const std::string &suffix) const;
};

/// Binary arithmetic and min/max: both operands have the same type.
template <typename T, IRNodeKind K> struct BinaryNode : ExprNode {
  const Expr a, b;
  static constexpr IRNodeKind static_kind = K;
  static bool classof(const IRNode *n) { return n->kind() == K; }
  BinaryNode(Expr a, Expr b) : ExprNode(K, a.type()), a(std::move(a)), b(std::move(b)) {}
};

struct Add : BinaryNode<Add, IRNodeKind::Add> {
  using BinaryNode::BinaryNode;
  static Expr make(Expr a, Expr b);
};
struct Sub : BinaryNode<Sub, IRNodeKind::Sub> {
  using BinaryNode::BinaryNode;
  static Expr make(Expr a, Expr b);
};
struct Mul : BinaryNode<Mul, IRNodeKind::Mul> {
  using BinaryNode::BinaryNode;
  static Expr make(Expr a, Expr b);
};
/// Integer division rounding towards negative infinity.
struct FloorDiv : BinaryNode<FloorDiv, IRNodeKind::FloorDiv> {
  using BinaryNode::BinaryNode;
  static Expr make(Expr a, Expr b);
};
/// The remainder of FloorDiv: has the sign of the divisor.
struct FloorMod : BinaryNode<FloorMod, IRNodeKind::FloorMod> {
  using BinaryNode::BinaryNode;
  static Expr make(Expr a, Expr b);
};
/// Division: truncating towards zero for integers (as in C), real division for floats.
struct Div : BinaryNode<Div, IRNodeKind::Div> {
  using BinaryNode::BinaryNode;
  static Expr make(Expr a, Expr b);
};
/// The remainder of truncating division (C's %).
struct Mod : BinaryNode<Mod, IRNodeKind::Mod> {
  using BinaryNode::BinaryNode;
  static Expr make(Expr a, Expr b);
};
struct Min : BinaryNode<Min, IRNodeKind::Min> {
  using BinaryNode::BinaryNode;
  static Expr make(Expr a, Expr b);
};
struct Max : BinaryNode<Max, IRNodeKind::Max> {
  using BinaryNode::BinaryNode;
  static Expr make(Expr a, Expr b);
};

/// Comparisons: operands of the same type, result bool with their lanes.
template <typename T, IRNodeKind K> struct CompareNode : ExprNode {
  const Expr a, b;
  static constexpr IRNodeKind static_kind = K;
  static bool classof(const IRNode *n) { return n->kind() == K; }
  CompareNode(Expr a, Expr b)
      : ExprNode(K, Bool(a.type().lanes())), a(std::move(a)), b(std::move(b)) {}
};

struct EQ : CompareNode<EQ, IRNodeKind::EQ> {
  using CompareNode::CompareNode;
  static Expr make(Expr a, Expr b);
};
struct NE : CompareNode<NE, IRNodeKind::NE> {
  using CompareNode::CompareNode;
  static Expr make(Expr a, Expr b);
};
struct LT : CompareNode<LT, IRNodeKind::LT> {
  using CompareNode::CompareNode;
  static Expr make(Expr a, Expr b);
};
struct LE : CompareNode<LE, IRNodeKind::LE> {
  using CompareNode::CompareNode;
  static Expr make(Expr a, Expr b);
};
struct GT : CompareNode<GT, IRNodeKind::GT> {
  using CompareNode::CompareNode;
  static Expr make(Expr a, Expr b);
};
struct GE : CompareNode<GE, IRNodeKind::GE> {
  using CompareNode::CompareNode;
  static Expr make(Expr a, Expr b);
};

/// Logical and/or of booleans.
struct And : BinaryNode<And, IRNodeKind::And> {
  using BinaryNode::BinaryNode;
  static Expr make(Expr a, Expr b);
};
struct Or : BinaryNode<Or, IRNodeKind::Or> {
  using BinaryNode::BinaryNode;
  static Expr make(Expr a, Expr b);
};
struct Not : ExprNode {
  const Expr a;
  static Expr make(Expr a);
  TESSEL_NODE_KIND(Not)
  explicit Not(Expr a) : ExprNode(IRNodeKind::Not, a.type()), a(std::move(a)) {}
};

/// cond ? true_value : false_value, evaluating both sides (use if_then_else to guard a load).
struct Select : ExprNode {
  const Expr condition, true_value, false_value;
  static Expr make(Expr condition, Expr true_value, Expr false_value);
  TESSEL_NODE_KIND(Select)
  Select(Expr c, Expr t, Expr f)
      : ExprNode(IRNodeKind::Select, t.type()), condition(std::move(c)), true_value(std::move(t)),
        false_value(std::move(f)) {}
};

struct Cast : ExprNode {
  const Expr value;
  static Expr make(DataType t, Expr value);
  TESSEL_NODE_KIND(Cast)
  Cast(DataType t, Expr v) : ExprNode(IRNodeKind::Cast, t), value(std::move(v)) {}
};

/// let var = value in body.
struct Let : ExprNode {
  const Var var;
  const Expr value, body;
  static Expr make(Var var, Expr value, Expr body);
  TESSEL_NODE_KIND(Let)
  Let(Var var, Expr value, Expr body)
      : ExprNode(IRNodeKind::Let, body.type()), var(std::move(var)), value(std::move(value)),
        body(std::move(body)) {}
};

/// A call: a pure math function (exp, sqrt), or an intrinsic with effects or special lowering
/// (if_then_else, wmma_*, address_of, ...). Intrinsic names are listed in Intrinsics.h.
struct Call : ExprNode {
  enum CallKind : uint8_t {
    PureExtern, ///< a pure math function that codegen emits by name
    PureIntrinsic, ///< no side effects (if_then_else, address_of, ...)
    Intrinsic,  ///< may have side effects (wmma_*, syncthreads, ...)
  };
  const std::string name;
  const std::vector<Expr> args;
  const CallKind call_kind;
  static Expr make(DataType t, std::string name, std::vector<Expr> args, CallKind kind);
  TESSEL_NODE_KIND(Call)
  Call(DataType t, std::string name, std::vector<Expr> args, CallKind k)
      : ExprNode(IRNodeKind::Call, t), name(std::move(name)), args(std::move(args)), call_kind(k) {}

  bool is_intrinsic(const char *n) const { return call_kind != PureExtern && name == n; }
};

/// A read of a buffer: one index per dimension (a single flat index after storage flattening).
/// A Ramp index loads a vector.
struct BufferLoad : ExprNode {
  const Buffer buffer;
  const std::vector<Expr> indices;
  static Expr make(Buffer buffer, std::vector<Expr> indices);
  TESSEL_NODE_KIND(BufferLoad)
  BufferLoad(DataType t, Buffer b, std::vector<Expr> idx)
      : ExprNode(IRNodeKind::BufferLoad, t), buffer(std::move(b)), indices(std::move(idx)) {}
};

/// A read of a tensor in a compute definition, before lowering turns it into a BufferLoad.
struct TensorLoad : ExprNode {
  const Tensor tensor;
  const std::vector<Expr> indices;
  static Expr make(Tensor tensor, std::vector<Expr> indices);
  TESSEL_NODE_KIND(TensorLoad)
  TensorLoad(DataType t, Tensor tensor, std::vector<Expr> idx)
      : ExprNode(IRNodeKind::TensorLoad, t), tensor(std::move(tensor)), indices(std::move(idx)) {}
};

/// The vector base, base + stride, ..., base + (lanes - 1) * stride.
struct Ramp : ExprNode {
  const Expr base, stride;
  const int lanes;
  static Expr make(Expr base, Expr stride, int lanes);
  TESSEL_NODE_KIND(Ramp)
  Ramp(Expr base, Expr stride, int lanes)
      : ExprNode(IRNodeKind::Ramp, base.type().with_lanes(lanes)), base(std::move(base)),
        stride(std::move(stride)), lanes(lanes) {}
};

/// A scalar repeated in every lane.
struct Broadcast : ExprNode {
  const Expr value;
  const int lanes;
  static Expr make(Expr value, int lanes);
  TESSEL_NODE_KIND(Broadcast)
  Broadcast(Expr value, int lanes)
      : ExprNode(IRNodeKind::Broadcast, value.type().with_lanes(lanes)), value(std::move(value)),
        lanes(lanes) {}
};

/// A commutative reduction of `source` over `axis` (sum, max or min), where `condition` holds.
struct Reduce : ExprNode {
  enum Combiner : uint8_t { Sum, Max, Min };
  const Combiner combiner;
  const Expr source;
  const std::vector<IterVar> axis;
  const Expr condition;
  /// The value the reduction starts from (TVM's init): an expression of the output's indices;
  /// undefined: the combiner's identity.
  const Expr init;
  static Expr make(Combiner combiner, Expr source, std::vector<IterVar> axis,
                   Expr condition = Expr(), Expr init = Expr());
  TESSEL_NODE_KIND(Reduce)
  Reduce(Combiner c, Expr src, std::vector<IterVar> axis, Expr cond, Expr init)
      : ExprNode(IRNodeKind::Reduce, src.type()), combiner(c), source(std::move(src)),
        axis(std::move(axis)), condition(std::move(cond)), init(std::move(init)) {}

  /// The identity of the combiner in `t`: 0 for sum, the lowest value for max, the highest for min.
  static Expr identity(Combiner c, DataType t);
  /// combiner(a, b).
  static Expr combine(Combiner c, Expr a, Expr b);
  static const char *name(Combiner c);
};

// ---------------------------------------------------------------------------------------------
// Statements
// ---------------------------------------------------------------------------------------------

struct LetStmt : StmtNode {
  const Var var;
  const Expr value;
  const Stmt body;
  static Stmt make(Var var, Expr value, Stmt body);
  TESSEL_NODE_KIND(LetStmt)
  LetStmt(Var v, Expr val, Stmt b)
      : StmtNode(IRNodeKind::LetStmt), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
};

/// What an AttrStmt annotates: nothing, an expression (usually a Var), a buffer or an IterVar.
using AttrNode = std::variant<std::monostate, Expr, Buffer, IterVar>;

/// Well-known AttrStmt keys.
namespace attr {
inline constexpr const char *thread_extent = "thread_extent";         ///< node: IterVar
inline constexpr const char *virtual_thread = "virtual_thread";       ///< node: IterVar
inline constexpr const char *storage_scope = "storage_scope";         ///< node: buffer var
inline constexpr const char *storage_align = "storage_align";         ///< node: Buffer
inline constexpr const char *storage_interleave = "storage_interleave"; ///< node: Buffer; value: chunk
inline constexpr const char *storage_swizzle = "storage_swizzle"; ///< node: Buffer; value: bytes
/// node: the buffer (Form 1) or its storage var (Form 2); value: the number of stages (>= 2), or
/// tuple(stages, slack) with Stage::pipeline's slack (iterations a TMA ring's refill runs
/// behind the release of its slot).
inline constexpr const char *pipeline_scope = "pipeline_scope";
/// node: a buffer var; around the steady-state fill of a pipelined buffer (inject_pipeline). The
/// fill writes a stage that no other statement of the iteration touches before the pipeline's
/// own synchronization orders them (a later iteration's barrier, or the ring's mbarriers);
/// insert_thread_syncs relies on that (and consumes the attr).
inline constexpr const char *pipeline_fill = "pipeline_fill";
/// node: none; around a pipelined loop whose compute reads its stages asynchronously (wgmma)
/// (inject_pipeline). Value L: each iteration may leave its last L groups of asynchronous reads
/// in flight, because the fills stay L + 1 stages behind the reads; insert_wgmma_syncs waits
/// for at most L groups in the loop and for all of them after it (and consumes the attr).
inline constexpr const char *pipeline_async_reads = "pipeline_async_reads";
/// node: the destination buffer (Form 1) or its storage var (Form 2); value: the bytes copied.
/// Around the tma_load calls of a Stage::bulk_copy fill (lower_bulk_copy), whose barrier
/// argument is 0 until inject_pipeline gives them the full barriers of its ring (and consumes the
/// attr).
inline constexpr const char *bulk_copy = "bulk_copy";
/// node: none; value: 1. Just inside a bulk_copy attr whose boxes stop at the tensor's edge
/// short of the tile (lower_bulk_copy: a tensor of fewer rows than the tile, read from its
/// first): the fill never writes the tile's other elements, the same in every fill, so
/// inject_pipeline zeroes the stage's ring once before the first fill (and consumes the attr).
inline constexpr const char *bulk_copy_clipped = "bulk_copy_clipped";
/// node: the stage's buffer; value: 1. Around the nest of a stage that asked for
/// Stage::stream_loads (schedule_ops): CUDA codegen emits its vector loads of read-only global
/// buffers as ld.global.nc.L1::no_allocate.
inline constexpr const char *stream_loads = "stream_loads";
/// node: the stage's buffer (Form 1) or storage var (Form 2); around the nest of a stage that
/// asked for Stage::warp_specialize (schedule_ops); value: 1 for ping-pong consumers
/// (ConsumerRoles::ping_pong), 0 for cooperative ones:
/// the TMA rings pipelined in its loops get a producer role (inject_pipeline), and
/// split_warp_roles splits the kernel into roles (and consumes the attr).
inline constexpr const char *warp_roles = "warp_roles";
/// node: none; around the fill of a TMA ring in one iteration of its loop, which the producer
/// role runs (inject_pipeline, under warp_roles): waiting for the slot to be empty, announcing
/// its bytes, issuing the copies. split_warp_roles moves it to the producer (and consumes it).
inline constexpr const char *warp_producer = "warp_producer";
/// node: none; around `if (role) producer else consumers` of a warp-specialized kernel
/// (warp_specialize); value: the number of producer threads. The branches run concurrently and
/// meet only through mbarriers and named barriers (the executor runs such a kernel's warps
/// independently).
inline constexpr const char *warp_specialize = "warp_specialize";
/// node: the tile loop's variable (Stage::persistent); value: the number of tiles. Around the
/// loop in which each block of a persistent kernel walks its tiles (schedule_ops): a TMA ring
/// pipelined inside it runs across the loop's iterations, its barriers initialized once before
/// it (inject_pipeline).
inline constexpr const char *tile_loop = "tile_loop";
/// node: the part's variable of a persistent stage whose last round's tiles are split
/// (Stage::split_last_wave); value: tuple(parts, tiles, slot, tail): around a tile's work
/// (schedule_ops), in which that variable is the block's part of the tile's reduction (0..parts - 1;
/// 0 in every whole round), `tiles` the tiles of the last round, `slot` the block's tile among
/// them (0..tiles - 1) and `tail` whether this is the last round. reduce_last_wave_parts
/// makes the parts past the first leave their sums in a workspace for the first (and consumes
/// the attr).
inline constexpr const char *last_wave = "last_wave";
/// node: the loop variable of a reduction split by Stage::split_last_wave; value: its steps in
/// a whole tile. Around the loop, whose range is the part's (schedule_ops): a TMA ring in it
/// counts its steps from the block's first tile as the tile iteration times `value`, the
/// split tile being a block's last (inject_pipeline, which consumes the attr).
inline constexpr const char *last_wave_steps = "last_wave_steps";
/// node: the fold axis' loop variable of a fold split by Stage::split_last_wave; value:
/// tuple(data_0, a_0, b_0, merge_0, data_1, ...): per state in the fold's store order, its
/// buffer's data variable and its merge (FoldState::merge) over the scalar variables a_k (the
/// earlier part's state k) and b_k (the later part's). Around the fold's steps
/// (schedule_ops): reduce_last_wave_parts merges the parts' states after them (and consumes
/// the attr).
inline constexpr const char *fold_merge = "fold_merge";
/// node: the blockIdx IterVar of a clustered block axis (Stage::cluster); value: the cluster's
/// size along it. Just inside that axis' thread_extent (schedule_ops): the kernel's blocks are
/// launched in clusters of `value` consecutive blocks along it (LaunchConfig::cluster). A block's
/// rank in its cluster is its index along the axis modulo the size.
inline constexpr const char *cluster_extent = "cluster_extent";
/// node: the destination buffer (Form 1); value: tuple(size, rank, v..): just inside the
/// bulk_copy attr of a stage that asked for Stage::multicast (schedule_ops), around its copy
/// nest. The tile is the same for the `size` blocks of a cluster, this block's rank being
/// `rank`; its box origin must not use the vars v (the clustered axis). lower_bulk_copy turns
/// the copy into tma_load_multicast calls, a 1/size share of each box per block (and consumes
/// the attr); inject_pipeline sees the cluster in their masks.
inline constexpr const char *cluster_multicast = "cluster_multicast";
inline constexpr const char *pragma_prefix = "pragma_";
} // namespace attr

/// Annotates `body` with key = value about `node`.
struct AttrStmt : StmtNode {
  const AttrNode node;
  const std::string key;
  const Expr value;
  const Stmt body;
  static Stmt make(AttrNode node, std::string key, Expr value, Stmt body);
  TESSEL_NODE_KIND(AttrStmt)
  AttrStmt(AttrNode n, std::string k, Expr v, Stmt b)
      : StmtNode(IRNodeKind::AttrStmt), node(std::move(n)), key(std::move(k)), value(std::move(v)),
        body(std::move(b)) {}
};

struct AssertStmt : StmtNode {
  const Expr condition;
  const std::string message;
  const Stmt body;
  static Stmt make(Expr condition, std::string message, Stmt body);
  TESSEL_NODE_KIND(AssertStmt)
  AssertStmt(Expr c, std::string m, Stmt b)
      : StmtNode(IRNodeKind::AssertStmt), condition(std::move(c)), message(std::move(m)),
        body(std::move(b)) {}
};

/// The thread index `s` binds: its IterVar where `s` is AttrStmt(IterVar, "thread_extent")
/// of a threadIdx axis, else null.
const IterVar *thread_index_bound_by(const Stmt &s);

enum class ForKind : uint8_t { Serial, Parallel, Vectorized, Unrolled, ThreadBinding };
const char *to_string(ForKind k);

/// for (loop_var = min; loop_var < min + extent; ++loop_var) body. A ThreadBinding loop names
/// the thread index it is bound to in thread_tag.
struct For : StmtNode {
  const Var loop_var;
  const Expr min, extent;
  const ForKind for_kind;
  const std::string thread_tag;
  const Stmt body;
  static Stmt make(Var loop_var, Expr min, Expr extent, ForKind kind, Stmt body,
                   std::string thread_tag = "");
  TESSEL_NODE_KIND(For)
  For(Var v, Expr min, Expr extent, ForKind k, std::string tag, Stmt b)
      : StmtNode(IRNodeKind::For), loop_var(std::move(v)), min(std::move(min)),
        extent(std::move(extent)), for_kind(k), thread_tag(std::move(tag)), body(std::move(b)) {}
};

/// Allocates storage of `dtype` with `extents` in `scope` for `buffer_var` during `body`.
struct Allocate : StmtNode {
  const Var buffer_var;
  const DataType dtype;
  const std::vector<Expr> extents;
  const std::string scope;
  const Stmt body;
  static Stmt make(Var buffer_var, DataType dtype, std::vector<Expr> extents, std::string scope,
                   Stmt body);
  TESSEL_NODE_KIND(Allocate)
  Allocate(Var v, DataType t, std::vector<Expr> e, std::string s, Stmt b)
      : StmtNode(IRNodeKind::Allocate), buffer_var(std::move(v)), dtype(t), extents(std::move(e)),
        scope(std::move(s)), body(std::move(b)) {}

  /// The product of the extents, when they are constants; -1 otherwise.
  int64_t constant_size() const;
};

/// Declares that `buffer` holds the region `bounds` during `body` (multi-dimensional; storage
/// flattening turns it into an Allocate).
struct BufferRealize : StmtNode {
  const Buffer buffer;
  const std::vector<Range> bounds;
  const Stmt body;
  static Stmt make(Buffer buffer, std::vector<Range> bounds, Stmt body);
  TESSEL_NODE_KIND(BufferRealize)
  BufferRealize(Buffer b, std::vector<Range> bounds, Stmt body)
      : StmtNode(IRNodeKind::BufferRealize), buffer(std::move(b)), bounds(std::move(bounds)),
        body(std::move(body)) {}
};

struct BufferStore : StmtNode {
  const Buffer buffer;
  const Expr value;
  const std::vector<Expr> indices;
  static Stmt make(Buffer buffer, Expr value, std::vector<Expr> indices);
  TESSEL_NODE_KIND(BufferStore)
  BufferStore(Buffer b, Expr v, std::vector<Expr> idx)
      : StmtNode(IRNodeKind::BufferStore), buffer(std::move(b)), value(std::move(v)),
        indices(std::move(idx)) {}
};

struct IfThenElse : StmtNode {
  const Expr condition;
  const Stmt then_case, else_case; ///< else_case may be undefined
  static Stmt make(Expr condition, Stmt then_case, Stmt else_case = Stmt());
  TESSEL_NODE_KIND(IfThenElse)
  IfThenElse(Expr c, Stmt t, Stmt e)
      : StmtNode(IRNodeKind::IfThenElse), condition(std::move(c)), then_case(std::move(t)),
        else_case(std::move(e)) {}
};

/// Statements in order.
struct Seq : StmtNode {
  const std::vector<Stmt> stmts;
  /// Flattens nested Seqs, drops undefined statements; one statement is returned as itself.
  static Stmt make(std::vector<Stmt> stmts);
  TESSEL_NODE_KIND(Seq)
  explicit Seq(std::vector<Stmt> s) : StmtNode(IRNodeKind::Seq), stmts(std::move(s)) {}
};

/// Evaluates an expression for its effects (an intrinsic call).
struct Evaluate : StmtNode {
  const Expr value;
  static Stmt make(Expr value);
  TESSEL_NODE_KIND(Evaluate)
  explicit Evaluate(Expr v) : StmtNode(IRNodeKind::Evaluate), value(std::move(v)) {}
};

#undef TESSEL_NODE_KIND

} // namespace tessel

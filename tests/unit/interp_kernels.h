// Hand-built Form 2 kernels for the executor tests (the lowering pipeline is not needed).
#pragma once

#include "compiler/ir/IR.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/lower/LoweredFunc.h"
#include "runtime/interp/Executor.h"

#include <random>
#include <string>
#include <vector>

namespace tessel::interp_test {

inline Buffer flat(const std::string &name, DataType t, int64_t size,
                   const std::string &scope = "global") {
  return Buffer::make(name, t, {Expr(int(size))}, scope);
}
inline Expr ld(const Buffer &b, Expr index) { return BufferLoad::make(b, {std::move(index)}); }
inline Stmt st(const Buffer &b, Expr index, Expr value) {
  return BufferStore::make(b, std::move(value), {std::move(index)});
}
inline Var data_var(const Buffer &b) { return Var(static_cast<const Variable *>(b->data.get())); }
/// Allocate(b.data, b.dtype, {size}, b.scope, body): the Form 2 declaration of a buffer.
inline Stmt allocate(const Buffer &b, Stmt body) {
  return Allocate::make(data_var(b), b.dtype(), b->shape, b.scope(), std::move(body));
}
inline Stmt loop(const Var &v, int64_t extent, Stmt body) {
  return For::make(v, Expr(0), Expr(int(extent)), ForKind::Serial, std::move(body));
}
/// Evaluate(name(args...)): an intrinsic called as a statement.
inline Stmt call(const char *name, std::vector<Expr> args = {}) {
  return Evaluate::make(Call::make(Void(), name, std::move(args), Call::Intrinsic));
}
/// address_of(b[index]): a pointer argument of an intrinsic.
inline Expr address_of(const Buffer &b, Expr index) {
  return Call::make(Handle(), intrinsic::address_of, {ld(b, std::move(index))},
                    Call::PureIntrinsic);
}
inline Stmt sync_threads() {
  return Evaluate::make(Call::make(Void(), intrinsic::syncthreads, {}, Call::Intrinsic));
}
inline Stmt bind(const IterVar &iv, int64_t extent, Stmt body) {
  return AttrStmt::make(iv, attr::thread_extent, Expr(int(extent)), std::move(body));
}

/// The four thread axes most kernels use, bound around `body` in CUDA's order.
struct Axes {
  IterVar bx = thread_axis("blockIdx.x"), by = thread_axis("blockIdx.y");
  IterVar tx = thread_axis("threadIdx.x"), ty = thread_axis("threadIdx.y");
  Stmt bind_all(const LaunchConfig &l, Stmt body) const {
    body = bind(ty, l.block[1], std::move(body));
    body = bind(tx, l.block[0], std::move(body));
    body = bind(by, l.grid[1], std::move(body));
    return bind(bx, l.grid[0], std::move(body));
  }
};

inline LaunchConfig launch(int64_t gx, int64_t gy, int64_t bx, int64_t by) {
  LaunchConfig l;
  l.grid = {gx, gy, 1};
  l.block = {bx, by, 1};
  return l;
}

inline std::vector<double> random_values(size_t n, unsigned seed, double lo = -1, double hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (double &x : v)
    x = d(rng);
  return v;
}

/// C = A * B for row-major A (M x K) and B (K x N), in double.
inline std::vector<double> gemm_reference(const std::vector<double> &a,
                                          const std::vector<double> &b, int M, int N, int K) {
  std::vector<double> c(size_t(M) * N, 0.0);
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k)
      for (int j = 0; j < N; ++j)
        c[size_t(i) * N + j] += a[size_t(i) * K + k] * b[size_t(k) * N + j];
  return c;
}

/// Knobs that break the shared-memory tiled GEMM in the ways the error tests need.
struct TiledGemmOptions {
  bool sync_after_load = true;
  bool sync_after_compute = true;
  int64_t a_row_offset = 0; ///< added to A's row: nonzero reads past the end
  int load_iterations = 4;  ///< fewer leave part of the tiles unwritten
  bool barrier_under_thread_condition = false;
};

/// C (M x N) = A (M x K) * B (K x N), float32, all multiples of 32: 32x32 output tiles per
/// block of 16x16 threads, each thread 2x2 outputs, K in steps of 32 through shared tiles.
inline LoweredFunc tiled_gemm(int M, int N, int K, const TiledGemmOptions &o = {}) {
  const DataType f32 = Float(32);
  Buffer A = flat("A", f32, int64_t(M) * K), B = flat("B", f32, int64_t(K) * N),
         C = flat("C", f32, int64_t(M) * N);
  Buffer As = flat("A_shared", f32, 32 * 32, "shared"), Bs = flat("B_shared", f32, 32 * 32, "shared");
  Buffer acc = flat("acc", f32, 4, "local");
  Axes ax;
  Expr bx = ax.bx, by = ax.by, tx = ax.tx, ty = ax.ty;
  Var ko("ko"), l("l"), ki("ki"), ii("ii"), jj("jj");

  Expr e = l * 256 + ty * 16 + tx, r = floordiv(e, 32), c = floormod(e, 32);
  Stmt load = loop(l, o.load_iterations,
                   Seq::make({st(As, e, ld(A, (by * 32 + r + int(o.a_row_offset)) * K + ko * 32 + c)),
                              st(Bs, e, ld(B, (ko * 32 + r) * N + bx * 32 + c))}));
  Expr ai = (ty * 2 + ii) * 32 + ki, bi = ki * 32 + tx * 2 + jj, ci = ii * 2 + jj;
  Stmt compute = loop(ki, 32, loop(ii, 2, loop(jj, 2, st(acc, ci, ld(acc, ci) + ld(As, ai) * ld(Bs, bi)))));
  Stmt first_sync = o.sync_after_load ? sync_threads() : Stmt();
  if (o.barrier_under_thread_condition)
    first_sync = IfThenElse::make(tx < 8, sync_threads());
  Stmt k_loop = loop(ko, K / 32, Seq::make({load, first_sync, compute,
                                            o.sync_after_compute ? sync_threads() : Stmt()}));
  Stmt init = loop(ii, 2, loop(jj, 2, st(acc, ci, make_zero(f32))));
  Stmt write = loop(ii, 2, loop(jj, 2, st(C, (by * 32 + ty * 2 + ii) * N + bx * 32 + tx * 2 + jj,
                                          ld(acc, ci))));
  Stmt body = allocate(As, allocate(Bs, allocate(acc, Seq::make({init, k_loop, write}))));

  LoweredFunc f;
  f.name = "tiled_gemm";
  f.args = {A, B, C};
  f.arg_shapes = {{M, K}, {K, N}, {M, N}};
  f.launch = launch(N / 32, M / 32, 16, 16);
  f.body = ax.bind_all(f.launch, body);
  return f;
}

} // namespace tessel::interp_test

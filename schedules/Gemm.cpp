#include "schedules/Gemm.h"

#include "compiler/te/Compute.h"

namespace tessel {

GemmTensors gemm_definition(int64_t M, int64_t N, int64_t K, DataType dtype,
                            const std::string &c_name) {
  Tensor A = placeholder({M, K}, dtype, "A");
  Tensor B = placeholder({K, N}, dtype, "B");
  IterVar k = reduce_axis({0, K}, "k");
  Tensor C = compute(
      {M, N},
      [&](Var i, Var j) { return sum(A(i, k).astype(Float(32)) * B(k, j).astype(Float(32)), {k}); },
      c_name, {"i", "j"});
  return {A, B, C};
}

ScheduledProgram gemm_program(const GemmTensors &g, Schedule s, int64_t M, int64_t N, int64_t K) {
  ScheduledProgram p;
  p.schedule = std::move(s);
  p.args = {g.A, g.B, g.C};
  p.num_inputs = 2;
  p.flops = 2.0 * double(M) * double(N) * double(K);
  return p;
}

ScheduledProgram gemm_naive(int64_t M, int64_t N, int64_t K, DataType dtype) {
  GemmTensors g = gemm_definition(M, N, K, dtype);
  Schedule s = create_schedule({g.C});
  auto [i, j] = s[g.C].axes<2>();
  auto [bi, ti] = s[g.C].split(i, 16);
  auto [bj, tj] = s[g.C].split(j, 16);
  s[g.C].reorder({bi, bj, ti, tj});
  s[g.C].bind(bi, thread_axis("blockIdx.y"));
  s[g.C].bind(bj, thread_axis("blockIdx.x"));
  s[g.C].bind(ti, thread_axis("threadIdx.y"));
  s[g.C].bind(tj, thread_axis("threadIdx.x"));
  return gemm_program(g, s, M, N, K);
}

ScheduledProgram gemm_shared(int64_t M, int64_t N, int64_t K, DataType dtype) {
  const int tile = 64, threads = 16, k_step = 16;
  GemmTensors g = gemm_definition(M, N, K, dtype);
  Schedule s = create_schedule({g.C});
  Tensor CL = s.cache_write(g.C, "local");
  Tensor AS = s.cache_read(g.A, "shared", {CL});
  Tensor BS = s.cache_read(g.B, "shared", {CL});

  IterVar ty_axis = thread_axis("threadIdx.y"), tx_axis = thread_axis("threadIdx.x");
  auto [i, j] = s[g.C].axes<2>();
  auto [bi, i_in] = s[g.C].split(i, tile);
  auto [bj, j_in] = s[g.C].split(j, tile);
  auto [ty, ii] = s[g.C].split_nparts(i_in, threads);
  auto [tx, ji] = s[g.C].split_nparts(j_in, threads);
  s[g.C].reorder({bi, bj, ty, tx, ii, ji});
  s[g.C].bind(bi, thread_axis("blockIdx.y"));
  s[g.C].bind(bj, thread_axis("blockIdx.x"));
  s[g.C].bind(ty, ty_axis);
  s[g.C].bind(tx, tx_axis);

  s[CL].compute_at(s[g.C], tx);
  auto [ci, cj] = s[CL].axes<2>();
  auto [ko, ki] = s[CL].split(s[CL].reduce_axis()[0], k_step);
  s[CL].reorder({ko, ki, ci, cj});
  s[CL].unroll(ci);
  s[CL].unroll(cj);

  // Both tiles are loaded by all 256 threads together, then double-buffered across ko.
  for (const Tensor &t : {AS, BS}) {
    s[t].compute_at(s[CL], ko);
    auto [r, c] = s[t].axes<2>();
    IterVar f = s[t].fuse(r, c);
    auto [fo, fi] = s[t].split(f, threads * threads);
    auto [fty, ftx] = s[t].split_nparts(fi, threads);
    s[t].bind(fty, ty_axis);
    s[t].bind(ftx, tx_axis);
    s[t].double_buffer();
  }
  return gemm_program(g, s, M, N, K);
}

static ScheduleEntry gemm_entry(const char *name, const char *description,
                                ScheduledProgram (*build)(int64_t, int64_t, int64_t, DataType)) {
  ScheduleEntry e;
  e.name = name;
  e.description = description;
  e.default_shape = {{"M", 1024}, {"N", 1024}, {"K", 1024}};
  e.dtypes = {Float(32), Float(16)};
  e.build = [build](const ShapeParams &p, DataType dtype) {
    return build(p.at("M"), p.at("N"), p.at("K"), dtype);
  };
  return e;
}

ScheduleEntry gemm_naive_entry() {
  return gemm_entry("gemm_naive", "GEMM, one thread per output, 16x16 threads per block",
                    gemm_naive);
}

ScheduleEntry gemm_shared_entry() {
  return gemm_entry("gemm_shared",
                    "GEMM, 64x64 block tiles, 4x4 per thread, double-buffered shared tiles",
                    gemm_shared);
}

} // namespace tessel

#include "bench/Fp8Bench.h"

#include "bench/CublasLt.h"
#include "bench/Fp8.h"
#include "runtime/Build.h"
#include "runtime/DeviceArray.h"
#include "runtime/Half.h"
#include "runtime/TensorView.h"
#include "runtime/TuningDb.h"
#include "runtime/interp/Reference.h"
#include "schedules/Registry.h"

#include <array>
#include <cmath>
#include <deque>
#include <optional>
#include <random>
#include <sstream>

namespace tessel::bench {

namespace {

constexpr int64_t kBlock = 128;

// The problem's data on the host, scales in a canonical order: sa[i * KB + kb] (per tensor:
// sa[0]), sb[nb * KB + kb] (per tensor: sb[0]).
struct Fp8Data {
  int64_t M, N, K, KB, NB;
  bool block;
  std::vector<uint8_t> a, b;
  std::vector<float> sa, sb;
  std::array<float, 256> decode;

  float sa_at(int64_t i, int64_t kb) const { return block ? sa[i * KB + kb] : sa[0]; }
  float sb_at(int64_t j, int64_t kb) const { return block ? sb[(j / kBlock) * KB + kb] : sb[0]; }

  // float64 C[i, j].
  double reference(int64_t i, int64_t j) const {
    double sum = 0;
    for (int64_t kb = 0; kb < KB; ++kb) {
      double part = 0;
      for (int64_t k = kb * kBlock; k < std::min(K, (kb + 1) * kBlock); ++k)
        part += double(decode[a[i * K + k]]) * double(decode[b[j * K + k]]);
      sum += part * sa_at(i, kb) * sb_at(j, kb);
    }
    return sum;
  }
};

// How cuBLASLt's block scales are laid out: A's (1 x 128) with rows contiguous or K blocks
// contiguous; B's (128 x 128) with K blocks contiguous (columns padded to 4) or N blocks.
struct VendorScaleLayout {
  bool a_rows_contiguous = true, b_kblocks_contiguous = true;
  std::string str() const {
    return std::string("A scales ") + (a_rows_contiguous ? "kb*M+i" : "i*KB+kb") + ", B scales " +
           (b_kblocks_contiguous ? "nb*pad4(KB)+kb" : "kb*NB+nb");
  }
};

std::vector<float> vendor_scales_a(const Fp8Data &d, VendorScaleLayout l) {
  if (!d.block)
    return d.sa;
  std::vector<float> v(d.M * d.KB);
  for (int64_t i = 0; i < d.M; ++i)
    for (int64_t kb = 0; kb < d.KB; ++kb)
      v[l.a_rows_contiguous ? kb * d.M + i : i * d.KB + kb] = d.sa[i * d.KB + kb];
  return v;
}

std::vector<float> vendor_scales_b(const Fp8Data &d, VendorScaleLayout l) {
  if (!d.block)
    return d.sb;
  const int64_t ld = (d.KB + 3) / 4 * 4;
  std::vector<float> v(l.b_kblocks_contiguous ? d.NB * ld : d.NB * d.KB, 0.0f);
  for (int64_t nb = 0; nb < d.NB; ++nb)
    for (int64_t kb = 0; kb < d.KB; ++kb)
      v[l.b_kblocks_contiguous ? nb * ld + kb : kb * d.NB + nb] = d.sb[nb * d.KB + kb];
  return v;
}

DeviceArray upload(const std::vector<float> &v) {
  DeviceArray a(Float(32), {int64_t(v.size())});
  a.copy_from_host(v.data(), a.bytes());
  return a;
}

// C as floats: bfloat16, float16 or float32 on the device.
std::vector<float> download(const DeviceArray &c) {
  if (c.dtype() == Float(32))
    return c.to_vector<float>();
  std::vector<uint16_t> h = c.to_vector<uint16_t>();
  std::vector<float> out(h.size());
  for (size_t i = 0; i < h.size(); ++i)
    out[i] = c.dtype() == BFloat(16) ? bfloat16_to_float(h[i]) : half_to_float(h[i]);
  return out;
}

// Worst |got - float64| / (1 + |float64|) at 256 sampled outputs and the corners.
double sampled_error(const Fp8Data &d, const std::vector<float> &got) {
  std::mt19937_64 rng(99);
  std::vector<std::pair<int64_t, int64_t>> at = {{0, 0}, {d.M - 1, d.N - 1}, {0, d.N - 1},
                                                 {d.M - 1, 0}};
  for (int s = 0; s < 256; ++s)
    at.push_back({int64_t(rng() % uint64_t(d.M)), int64_t(rng() % uint64_t(d.N))});
  double worst = 0;
  for (auto [i, j] : at) {
    double want = d.reference(i, j), e = std::fabs(got[i * d.N + j] - want) / (1.0 + std::fabs(want));
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

// bfloat16 keeps 8 significant bits: one rounding is within 2^-8 of the value; two results
// rounded from slightly different float32 sums may differ by an ulp (2^-7 relative) or two.
constexpr double kTolerance = 1.6e-2;

// Our scale argument of shape `shape` in our own layout, from the canonical scales; nullopt
// when the shape is none the bench knows.
std::optional<std::vector<float>> our_scales(const Fp8Data &d, bool of_a,
                                             const std::vector<int64_t> &shape) {
  int64_t numel = 1;
  for (int64_t e : shape)
    numel *= e;
  if (!d.block)
    return numel == 1 ? std::optional(of_a ? d.sa : d.sb) : std::nullopt;
  if (shape.size() != 2)
    return std::nullopt;
  const int64_t rows = of_a ? d.M : d.NB;
  std::vector<float> v(rows * d.KB);
  const bool row_major = shape[0] == rows && shape[1] == d.KB,
             col_major = shape[0] == d.KB && shape[1] == rows;
  if (!row_major && !col_major)
    return std::nullopt;
  const std::vector<float> &s = of_a ? d.sa : d.sb;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t kb = 0; kb < d.KB; ++kb)
      v[row_major ? r * d.KB + kb : kb * rows + r] = s[r * d.KB + kb];
  return v;
}

std::string shape_str(const std::vector<int64_t> &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i)
      out += ",";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

} // namespace

Row bench_fp8(int64_t M, int64_t N, int64_t K, bool block, const ScheduleSpec &ours) {
  Row r;
  r.kernel = "fp8";
  r.shape = std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
  r.ours_name = ours.name.empty() ? "(none)" : ours.str();
  r.flops = 2.0 * M * N * K;

  Fp8Data d{M, N, K, (K + kBlock - 1) / kBlock, (N + kBlock - 1) / kBlock, block, {}, {}, {}, {},
            {}};
  for (int v = 0; v < 256; ++v)
    d.decode[v] = e4m3_to_float(uint8_t(v));
  d.a = random_e4m3(size_t(M * K), 21);
  d.b = random_e4m3(size_t(N * K), 22);
  d.sa = block ? random_scales(size_t(M * d.KB), 23) : std::vector<float>{0.75f};
  d.sb = block ? random_scales(size_t(d.NB * d.KB), 24) : std::vector<float>{0.5f};
  DeviceArray dA(UInt(8), {M, K}), dB(UInt(8), {N, K}), dD(BFloat(16), {M, N});
  dA.copy_from_host(d.a.data(), dA.bytes());
  dB.copy_from_host(d.b.data(), dB.bytes());

  // cuBLASLt: block-scaled where it takes it (the layout of its scales checked against float64
  // first), else per tensor on the same A and B.
  std::ostringstream note;
  std::unique_ptr<CublasLtGemm> lt;
  DeviceArray vsa, vsb;
  LtOperands ops;
  std::vector<float> vendor;
  double vendor_err = NAN;
  std::string scale_layout;
  auto try_layout = [&](LtScaling scaling, VendorScaleLayout l, Fp8Data &data) {
    vsa = upload(vendor_scales_a(data, l));
    vsb = upload(vendor_scales_b(data, l));
    ops = {dA.data(), dB.data(), dD.data(), vsa.data(), vsb.data()};
    if (!lt)
      lt = std::make_unique<CublasLtGemm>(M, N, K, LtType::e4m3, LtType::bf16, scaling, true);
    dD.poison();
    lt->run_first(ops);
    vendor = download(dD);
    vendor_err = sampled_error(data, vendor);
    return vendor_err <= kTolerance;
  };
  Fp8Data per_tensor = d; // the block row's fallback: per-tensor scales on the same data
  per_tensor.block = false;
  per_tensor.sa = {0.75f};
  per_tensor.sb = {0.5f};
  Fp8Data *vendor_data = &d;
  try {
    bool ok = false;
    if (block) {
      try {
        for (VendorScaleLayout l : {VendorScaleLayout{true, true}, VendorScaleLayout{true, false},
                                    VendorScaleLayout{false, true},
                                    VendorScaleLayout{false, false}})
          if ((ok = try_layout(LtScaling::block, l, d))) {
            scale_layout = l.str();
            break;
          }
        if (!ok)
          note << "cuBLASLt's block-scaled result matches float64 in none of the 4 scale layouts "
               << "tried (worst " << vendor_err << "): vs per-tensor fp8; ";
      } catch (const Error &e) {
        note << "cuBLASLt refused block scaling (" << e.what() << "): vs per-tensor fp8; ";
      }
      if (!ok) {
        lt.reset();
        vendor_data = &per_tensor;
        ok = try_layout(LtScaling::tensor, {}, per_tensor);
      }
    } else {
      ok = try_layout(LtScaling::tensor, {}, d);
    }
    if (!ok)
      note << "cuBLASLt differs from float64 by " << vendor_err << "; ";
    lt->choose(ops);
    r.vendor_ms = time_launches([&] { lt->run(ops); }, timing()).median_ms;
    r.vendor_call = (vendor_data == &per_tensor ? "per-tensor scales (block refused): " : "") +
                    lt->choice() + (scale_layout.empty() ? "" : ", " + scale_layout);
    // The chosen algorithm's own result (fast accumulation may differ a little).
    dD.poison();
    lt->run(ops);
    vendor = download(dD);
    vendor_err = sampled_error(*vendor_data, vendor);
    note << "cuBLASLt vs float64 (sampled): " << vendor_err
         << (vendor_err <= kTolerance ? " ok; " : " MISMATCH; ");
  } catch (const Error &e) {
    r.note = std::string("n/a: cuBLASLt: ") + e.what();
    return r;
  }

  // Ours, looked up by name: this build may not have it yet.
  if (ours.name.empty() || !schedule_registry().count(ours.name)) {
    r.note = note.str() + "ours: not built (no schedule '" + ours.name + "' in this build)";
    return r;
  }
  try {
    const ScheduleEntry &e = find_schedule(ours.name);
    ScheduledProgram p = build_tuned(e, ours.shape(M, N, K), e.dtypes.front(), tuning_arch());
    // Its arguments, matched by element size and shape: A [M, K] and B [N, K] of one byte,
    // float32 scales (A's first), C [M, N] last.
    std::vector<TensorView> views;
    std::deque<DeviceArray> owned; // stable addresses
    int a_seen = 0, scales_seen = 0;
    const DeviceArray *out = nullptr;
    std::string args;
    for (size_t i = 0; i < p.args.size(); ++i) {
      if (i)
        args += ", ";
      args += p.args[i].name() + ":" + p.args[i].dtype().str() +
              shape_str(constant_shape(p.args[i]));
    }
    for (size_t i = 0; i < p.args.size(); ++i) {
      const Tensor &t = p.args[i];
      std::vector<int64_t> s = constant_shape(t);
      if (i >= p.num_inputs) {
        user_check(i + 1 == p.args.size() && s == (std::vector<int64_t>{M, N}), "bench fp8")
            << "expected one output C[" << M << "," << N << "], last; the arguments: " << args;
        owned.emplace_back(t.dtype(), s);
        owned.back().poison();
        out = &owned.back();
        views.push_back({out->data(), t.dtype(), s});
      } else if (t.dtype().bytes() == 1 && s.size() == 2 && s[1] == K &&
                 (s[0] == M || s[0] == N) && a_seen < 2) {
        bool is_a = s[0] == M && (a_seen == 0 || M != N);
        views.push_back({is_a ? dA.data() : dB.data(), t.dtype(), s});
        ++a_seen;
      } else if (t.dtype() == Float(32) && scales_seen < 2) {
        std::optional<std::vector<float>> v = our_scales(d, scales_seen == 0, s);
        user_check(v.has_value(), "bench fp8") << "scale argument " << t.name() << shape_str(s)
                                               << " is no layout bench knows; the arguments: "
                                               << args;
        owned.push_back(upload(*v));
        views.push_back({owned.back().data(), t.dtype(), s});
        ++scales_seen;
      } else {
        user_error("bench fp8") << "argument " << t.name() << " is not A, B, a scale or C; "
                                << "the arguments: " << args;
      }
    }
    user_check(a_seen == 2 && scales_seen == 2 && out, "bench fp8")
        << "expected A[M,K], B[N,K] (1-byte), 2 float32 scales, C[M,N]; the arguments: " << args;
    Module m = build(p.schedule, p.args);
    m.launch(views, nullptr);
    // cuBLASLt's choice again in turns with ours (it writes dD, downloaded above, again).
    time_in_turns(
        r, [&] { return m.time(views, timing()).median_ms; },
        [&] { return time_launches([&] { lt->run(ops); }, timing()).median_ms; });
    std::vector<float> got = download(*out);
    // Each side is judged against float64; their difference (every element, where both solved
    // the same problem) is shown, not judged: cuBLASLt's fast accumulation errs more than our
    // promoted sums (H100, 4096^3 per tensor: 0.0075 against 0.0031), so the two may differ
    // by more than either errs.
    const double ours_err = sampled_error(d, got);
    r.max_err = ours_err;
    note << "ours vs float64 (sampled): " << ours_err << "; ";
    if (vendor_data == &d) {
      double apart = 0;
      for (int64_t i = 0; i < M * N; ++i) {
        double e = std::fabs(double(got[i]) - vendor[i]) / (1.0 + std::fabs(vendor[i]));
        apart = std::isnan(e) ? INFINITY : std::max(apart, e);
      }
      note << "ours vs cuBLASLt (every element): " << apart << "; ";
    }
    r.note = note.str() + (ours_err <= kTolerance ? "ok" : "MISMATCH");
  } catch (const Error &e) {
    r.note = note.str() + "n/a: " + e.what();
  }
  return r;
}

} // namespace tessel::bench

// Attention as the textbook writes it, in float64: what the attention tests check the float64
// references of their definitions against.
#pragma once

#include "schedules/Attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace tessel {

/// B, Sq, Sk, H, Hkv, D, causal (schedules/Attention.h).
using AttentionShape = AttentionParams;

// Attention computed here in float64 from the logical (B, H, S, D) values of Q, K and V, as the
// textbook writes it: softmax(scale Q K^T) V per head, K and V of head h / g, keys past
// i + Sk - Sq masked where causal. Row-major (B, H, Sq, D).
inline std::vector<double> textbook_attention(const AttentionShape &a, const std::vector<double> &q,
                                       const std::vector<double> &k,
                                       const std::vector<double> &v) {
  const int64_t g = a.H / a.Hkv, off = a.Sk - a.Sq;
  const double scale = 1.0 / std::sqrt(double(float(a.D)));
  auto at = [](const std::vector<double> &t, int64_t H, int64_t S, int64_t D, int64_t b,
               int64_t h, int64_t i, int64_t d) {
    return t[size_t(((b * H + h) * S + i) * D + d)];
  };
  std::vector<double> out(size_t(a.B * a.H * a.Sq * a.D));
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t h = 0; h < a.H; ++h)
      for (int64_t i = 0; i < a.Sq; ++i) {
        std::vector<double> w(size_t(a.Sk), 0.0);
        double m = -INFINITY, l = 0;
        for (int64_t j = 0; j < a.Sk; ++j) {
          if (a.causal && j > i + off)
            continue;
          double dot = 0;
          for (int64_t d = 0; d < a.D; ++d)
            dot += at(q, a.H, a.Sq, a.D, b, h, i, d) * at(k, a.Hkv, a.Sk, a.D, b, h / g, j, d);
          w[size_t(j)] = dot * double(float(scale));
          m = std::max(m, w[size_t(j)]);
        }
        for (int64_t j = 0; j < a.Sk; ++j)
          if (!a.causal || j <= i + off)
            l += (w[size_t(j)] = std::exp(w[size_t(j)] - m));
          else
            w[size_t(j)] = 0;
        for (int64_t d = 0; d < a.D; ++d) {
          double o = 0;
          for (int64_t j = 0; j < a.Sk; ++j)
            o += w[size_t(j)] / l * at(v, a.Hkv, a.Sk, a.D, b, h / g, j, d);
          out[size_t(((b * a.H + h) * a.Sq + i) * a.D + d)] = o;
        }
      }
  return out;
}


} // namespace tessel

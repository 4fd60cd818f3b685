#!/usr/bin/env python3
"""Decoding's per-block work over two chunks, by hand, to measure it before building it.

attention_decode (SPLIT=512) pays per block a softmax, three barriers, the rf reduction and the
op store; SPLIT=256 (twice the blocks for the same bytes) is 8% slower on an H200, so that work
is several % at 512 too, and SPLIT=1024 loses by its registers (109: 4 blocks an SM). This
rewrites the SPLIT=512 kernel to run over two chunks of 512 inside SPLIT=1024's launch (its
grid and merge): the same buffers for each chunk, each chunk's (lse, op) kept in registers and
merged before the one store (O = (w0 op0 + w1 op1) / (w0 + w1), w = exp(lse - max)). Written
2026-11-29 with no device time left: NOT MEASURED. sm_90a: 96 registers and 64 bytes of stack as
is, 106 registers with the chunks' loop unrolled (#pragma unroll), 80 registers and 84 bytes
spilled with __launch_bounds__(128, 6).

  S=B=16,H=32,HKV=8,SQ=1,SK=32768,D=128
  tessel cuda attention_decode --shape $S > a512.cu
  tessel cuda attention_decode --shape $S,SPLIT=1024 > a1024.cu
  python3 bench/decode_fold_experiment.py a512.cu a1024.cu fold2.cu
  tessel run attention_decode --shape $S,SPLIT=1024 --cuda fold2.cu --no-check   # on the GPU
  (at B=2,...,SK=4096 the same steps give a kernel that `tessel run` checks against float64)
"""
import re, sys
src512 = open(sys.argv[1]).read()      # tessel cuda ... (SPLIT=512)
src1024 = open(sys.argv[2]).read()     # tessel cuda ... SPLIT=1024 (for the launch and merge)
k1 = src512[:src512.index('extern "C" __global__ void __launch_bounds__(128) attention_decode(')]
merge = src1024[src1024.index('extern "C" __global__ void __launch_bounds__(128) attention_decode('):]
k1 = k1.replace("((int)blockIdx.x) / 128 * 524288", "(((int)blockIdx.x) / 128 * 2 + half_) * 524288")
lines = k1.rstrip().split("\n")
start = next(i for i, l in enumerate(lines) if l.startswith("  for (int j_outer_outer = 0;"))
assert lines[-1] == "}"
body = lines[start:-1]
# capture each half's lse (registers) and op (registers) instead of storing op
out_body = []
for l in body:
    m = re.match(r"(\s*)op\[(.*)\] = op_local\[0\];$", l)
    if m:
        out_body.append(f"{m.group(1)}opk[half_][h_inner_i_fused_d_fused_outer] = op_local[0];")
        continue
    out_body.append(l)
    if l.strip().startswith("lse[") and "= m[h_19] + logf(l[h_19]);" in l:
        out_body.append("    lsek[half_][h_19] = m[h_19] + logf(l[h_19]);")
idx_op = re.search(r"op\[(.*)\] = op_local\[0\];", k1).group(1)
idx_lse = re.search(r"lse\[(.*) \+ h_19\] = m\[h_19\]", k1).group(1)
new = lines[:start] + ["  float lsek[2][4], opk[2][4];", "  for (int half_ = 0; half_ < 2; ++half_) {"] + \
      ["  " + l for l in out_body] + ["    __syncthreads();", "  }",
      "  for (int h_inner_i_fused_d_fused_outer = 0; h_inner_i_fused_d_fused_outer < 4; ++h_inner_i_fused_d_fused_outer) {",
      "    const int hh = h_inner_i_fused_d_fused_outer;",
      "    const float X = fmaxf(lsek[0][hh], lsek[1][hh]);",
      "    const float w0 = expf(lsek[0][hh] - X), w1 = expf(lsek[1][hh] - X);",
      f"    op[{idx_op}] = (w0 * opk[0][hh] + w1 * opk[1][hh]) / (w0 + w1);",
      f"    lse[{idx_lse} + hh] = X + logf(w0 + w1);",
      "  }", "}", ""]
open(sys.argv[3], "w").write("\n".join(new) + "\n" + merge)

#!/usr/bin/env python3
"""Fused attention against torch's SDPA backends on the GPU machine, in one run, alternating.

For each shape of issue 26 (fp16, Q/K/V as (B, S, H, D) buffers passed to SDPA as (B, H, S, D)
transposed views, as FlashAttention users do): torch's cuDNN and FlashAttention-2 backends timed
with CUDA events (median of --repeat runs after warm-up), and `tessel run attention` on the same
shape (its own process, random inputs, --no-check) between them, for --rounds rounds.

  python3 bench/attention_torch.py --tessel .gpu/tessel [--rounds 2] [--repeat 20]
"""
import argparse
import re
import subprocess

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [  # B, H, HKV, S, D, causal
    (8, 16, 16, 4096, 128, False),
    (8, 16, 16, 4096, 128, True),
    (16, 16, 16, 2048, 64, False),
]


def flops(B, H, S, D, causal):
    pairs = S * (S + 1) // 2 if causal else S * S
    return 4.0 * B * H * D * pairs


def time_sdpa(backend, B, H, HKV, S, D, causal, repeat):
    q = torch.randn(B, S, H, D, device="cuda", dtype=torch.float16)
    k = torch.randn(B, S, HKV, D, device="cuda", dtype=torch.float16)
    v = torch.randn(B, S, HKV, D, device="cuda", dtype=torch.float16)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    gqa = HKV != H
    with sdpa_kernel(backend):
        run = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal,
                                                     enable_gqa=gqa)
        for _ in range(3):
            run()
        times = []
        for _ in range(repeat):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            run()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def time_tessel(tool, B, H, HKV, S, D, causal, repeat):
    shape = f"B={B},H={H},HKV={HKV},SQ={S},SK={S},D={D},CAUSAL={int(causal)}"
    out = subprocess.run([tool, "run", "attention", "--shape", shape, "--no-check",
                          "--number", "1", "--repeat", str(repeat)],
                         capture_output=True, text=True)
    m = re.search(r"median ([0-9.]+) ms", out.stdout)
    if not m:
        return None, (out.stdout + out.stderr).strip()
    return float(m.group(1)), out.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel", default=".gpu/tessel")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for (B, H, HKV, S, D, causal) in SHAPES:
        f = flops(B, H, S, D, causal)
        name = f"B={B} H={H} HKV={HKV} S={S} D={D}{' causal' if causal else ''}"
        for r in range(args.rounds):
            row = []
            for label, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                                   ("flash2", SDPBackend.FLASH_ATTENTION)):
                try:
                    ms = time_sdpa(backend, B, H, HKV, S, D, causal, args.repeat)
                    row.append(f"{label} {ms:.4f} ms ({f / ms / 1e9:.0f} TFLOP/s)")
                except RuntimeError as e:
                    row.append(f"{label} failed: {str(e).splitlines()[0]}")
            ms, log = time_tessel(args.tessel, B, H, HKV, S, D, causal, min(args.repeat, 5))
            row.append(f"tessel {ms:.4f} ms ({f / ms / 1e9:.1f} TFLOP/s)" if ms else
                       f"tessel failed: {log}")
            print(f"{name} round {r}: " + "; ".join(row), flush=True)


if __name__ == "__main__":
    main()

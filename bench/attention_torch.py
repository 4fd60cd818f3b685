#!/usr/bin/env python3
"""Fused attention against torch's SDPA backends on the GPU machine, in one run, alternating.

For each shape of issue 26 and head dim 256 causal and not (fp16, Q/K/V as (B, S, H, D)
buffers passed to SDPA as (B, H, S, D) transposed views, as FlashAttention users do): torch's cuDNN, FlashAttention-2 and
memory-efficient backends timed with CUDA events (median of --repeat runs after warm-up), and
`tessel run attention` (prefill) or `tessel run attention_decode` (one query against a long
KV cache) on the same shape (its own process, random inputs, --no-check) between them, for
--rounds rounds. Decoding rows also give the KV cache's read rate (GB/s). Each round prints
tessel's speed over cuDNN's and over the fastest backend's of that round (x cuDNN, x best:
above 1 is faster), and each shape their min, median and max over the rounds.

Packed sequences (kind varlen: B sequences of LMAX down to MINLEN tokens, as attention_varlen's
entry makes them): torch's nested jagged tensors through SDPA's backends, and FlashAttention-2's
varlen forward (torch.ops.aten._flash_attention_forward on packed (N, H, D) tensors with the
sequences' offsets), against `tessel run attention_varlen`; TFLOP/s of the sequences' own work.

  python3 bench/attention_torch.py --tessel .gpu/tessel [--rounds 2] [--repeat 20] [--only decode]
"""
import argparse
import contextlib
import re
import statistics
import subprocess

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [  # kind, B, H, HKV, Sq, Sk, D, causal
    ("prefill", 8, 16, 16, 4096, 4096, 128, False),
    ("prefill", 8, 16, 16, 4096, 4096, 128, True),
    ("prefill", 16, 16, 16, 2048, 2048, 64, False),
    ("decode", 16, 32, 8, 1, 32768, 128, False),
    ("decode", 64, 32, 8, 1, 8192, 128, False),
    ("prefill", 4, 16, 16, 4096, 4096, 256, False),
    ("prefill", 4, 16, 16, 4096, 4096, 256, True),
    # varlen: Sq is LMAX (the first sequence's tokens), Sk MINLEN (the last's)
    ("varlen", 8, 16, 16, 4096, 1024, 128, False),  # (HKV = H: nested tensors take no GQA)
    ("varlen", 8, 16, 16, 4096, 1024, 128, True),
]


def median_ms(run, repeat):
    """The median of `repeat` CUDA-event timings of run() after 3 warm-up calls."""
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


def packed_lengths(B, longest, shortest):
    """attention_varlen's lengths (schedules/Attention.cpp packed_lengths)."""
    return [longest - (longest - shortest) * b // max(B - 1, 1) for b in range(B)]


def varlen_flops(B, H, lmax, lmin, D, causal):
    return sum(flops(1, H, n, n, D, causal) for n in packed_lengths(B, lmax, lmin))


def time_varlen(backend, B, H, HKV, lmax, lmin, D, causal, repeat):
    """backend: an SDPBackend (nested jagged tensors through SDPA) or "flash_varlen"."""
    lengths = packed_lengths(B, lmax, lmin)
    N = sum(lengths)
    q = torch.randn(N, H, D, device="cuda", dtype=torch.float16)
    k = torch.randn(N, HKV, D, device="cuda", dtype=torch.float16)
    v = torch.randn(N, HKV, D, device="cuda", dtype=torch.float16)
    offsets = torch.tensor([0] + [sum(lengths[:i + 1]) for i in range(B)], device="cuda",
                           dtype=torch.int32)
    if backend == "flash_varlen":
        context = contextlib.nullcontext()
        run = lambda: torch.ops.aten._flash_attention_forward(
            q, k, v, offsets, offsets, lmax, lmax, 0.0, causal, False)
    else:
        starts = offsets.to(torch.int64)
        qt, kt, vt = (torch.nested.nested_tensor_from_jagged(x, starts).transpose(1, 2)
                      for x in (q, k, v))
        context = sdpa_kernel(backend)
        run = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    with context:
        return median_ms(run, repeat)


def flops(B, H, Sq, Sk, D, causal):
    pairs = Sq * (Sq + 1) // 2 + Sq * (Sk - Sq) if causal else Sq * Sk
    return 4.0 * B * H * D * pairs


def kv_bytes(B, HKV, Sk, D):
    return 2.0 * B * Sk * HKV * D * 2


def time_sdpa(backend, B, H, HKV, Sq, Sk, D, causal, repeat):
    q = torch.randn(B, Sq, H, D, device="cuda", dtype=torch.float16)
    k = torch.randn(B, Sk, HKV, D, device="cuda", dtype=torch.float16)
    v = torch.randn(B, Sk, HKV, D, device="cuda", dtype=torch.float16)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    gqa = HKV != H
    with sdpa_kernel(backend):
        return median_ms(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal,
                                                                enable_gqa=gqa), repeat)


def time_tessel(tool, kind, B, H, HKV, Sq, Sk, D, causal, repeat, knobs, extra):
    shape = f"B={B},H={H},HKV={HKV},SQ={Sq},SK={Sk},D={D},CAUSAL={int(causal)}" + knobs
    entry = "attention" if kind == "prefill" else "attention_decode"
    if kind == "varlen":
        shape = f"B={B},H={H},HKV={HKV},LMAX={Sq},MINLEN={Sk},D={D},CAUSAL={int(causal)}"
        entry = "attention_varlen"
    out = subprocess.run([tool, "run", entry, "--shape", shape, "--no-check",
                          "--number", "1", "--repeat", str(repeat)] + extra.split(),
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
    ap.add_argument("--only", choices=["prefill", "decode", "varlen"], default=None)
    ap.add_argument("--knobs", default="", help="appended to tessel's --shape for decoding rows, "
                    "e.g. ,SPLIT=256")
    ap.add_argument("--prefill-knobs", default="",
                    help="appended to tessel's --shape for prefill rows, e.g. ,TC=2,BK=128")
    ap.add_argument("--tessel-args", default="",
                    help="appended to every `tessel run`, e.g. \"--cuda bench/exp/t128.cu\" (a hand "
                         "edit of the generated kernel: give one row then)")
    ap.add_argument("--rows", default="", help="indices of SHAPES to run, e.g. 3,4 (all: empty)")
    args = ap.parse_args()
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows = [int(r) for r in args.rows.split(",")] if args.rows else range(len(SHAPES))
    for (kind, B, H, HKV, Sq, Sk, D, causal) in (SHAPES[r] for r in rows):
        if args.only and kind != args.only:
            continue
        f = varlen_flops(B, H, Sq, Sk, D, causal) if kind == "varlen" else \
            flops(B, H, Sq, Sk, D, causal)
        rate = (lambda ms: f"{kv_bytes(B, HKV, Sk, D) / ms / 1e6:.0f} GB/s") if kind == "decode" \
            else (lambda ms: f"{f / ms / 1e9:.1f} TFLOP/s")
        name = f"B={B} H={H} HKV={HKV} Sq={Sq} Sk={Sk} D={D}{' causal' if causal else ''}"
        if kind == "varlen":
            name = f"varlen B={B} H={H} HKV={HKV} LMAX={Sq} MINLEN={Sk} D={D}" + \
                (" causal" if causal else "")
        to_cudnn, to_best = [], []  # tessel's speed over each round's: cuDNN's, the fastest's
        for r in range(args.rounds):
            row, torch_ms = [], {}
            backends = [("cudnn", SDPBackend.CUDNN_ATTENTION),
                        ("flash2", SDPBackend.FLASH_ATTENTION),
                        ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
            if kind == "varlen":
                backends.append(("flash2 varlen", "flash_varlen"))
            for label, backend in backends:
                try:
                    timer = time_varlen if kind == "varlen" else time_sdpa
                    ms = timer(backend, B, H, HKV, Sq, Sk, D, causal, args.repeat)
                    torch_ms[label] = ms
                    row.append(f"{label} {ms:.4f} ms ({rate(ms)})")
                except (RuntimeError, TypeError, ValueError) as e:
                    row.append(f"{label} failed: {(str(e).splitlines() or [''])[0]}")
            ms, log = time_tessel(args.tessel, kind, B, H, HKV, Sq, Sk, D, causal,
                                  min(args.repeat, 5) if kind != "decode" else args.repeat,
                                  args.knobs if kind == "decode" else args.prefill_knobs,
                                  args.tessel_args)
            row.append(f"tessel {ms:.4f} ms ({rate(ms)})" if ms else f"tessel failed: {log}")
            if ms and torch_ms:
                if "cudnn" in torch_ms:
                    to_cudnn.append(torch_ms["cudnn"] / ms)
                to_best.append(min(torch_ms.values()) / ms)
                row.append(f"x cuDNN {to_cudnn[-1]:.3f}" if "cudnn" in torch_ms else "x cuDNN -")
                row.append(f"x best {to_best[-1]:.3f}")
            print(f"{name} round {r}: " + "; ".join(row), flush=True)
        for label, ratios in (("cuDNN", to_cudnn), ("the fastest torch backend", to_best)):
            if ratios:
                ratios = sorted(ratios)
                print(f"{name}: tessel / {label} over {len(ratios)} rounds: min {ratios[0]:.3f}, "
                      f"median {statistics.median(ratios):.3f}, max {ratios[-1]:.3f}", flush=True)


if __name__ == "__main__":
    main()

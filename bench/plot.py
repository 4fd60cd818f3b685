#!/usr/bin/env python3
"""Draws a tessel_bench CSV as one SVG: for each row, our kernel's throughput against the vendor's.

    python3 bench/plot.py bench.csv -o bench/plots/2026-11-24-h100.svg \\
        --title "tessel vs cuBLAS / cuDNN" --gpu "H100 80GB HBM3" --date 2026-11-24 --commit 3dccf2e

The CSV is what `tessel_bench --csv FILE` writes (columns kind, shape, ours, ours_ms, vendor_ms,
ours_tflops, vendor_tflops, ratio, max_err, check, and since issue 25 vendor_call and
vendor_default_ms; without the TFLOP/s columns, times are drawn). One panel per kind (gemm:
cuBLAS / cuBLASLt, fp8: cuBLASLt, conv: cuDNN, norm: a device-to-device copy, whose "TFLOP/s"
columns are TB/s), one pair of bars per row, the ratio vendor ms / ours ms written beside it
(> 1: ours is faster). Where the CSV has vendor_default_ms (the vendor as bench called it before
issue 25: cuDNN's legacy Find choice, cublasGemmEx's default), a tick on the vendor's bar marks
that figure. Rows that failed, did not match the vendor, or whose schedule is not in the build
("ours: not built") are marked.
`--metric ms` draws times instead. Needs python3 and matplotlib only (not the GPU machine's:
plot here, after a session).
"""
import argparse
import csv
import math
import os
import sys

VENDOR = {"gemm": "cuBLAS", "fp8": "cuBLASLt", "conv": "cuDNN",
          "norm": "a copy"}  # norm: cuMemcpyDtoD of x
UNIT = {"norm": "TB/s"}  # bench.cpp: norm rows count bytes read + written as their "flops"


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def read_rows(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = {"kind", "shape", "ours", "ours_ms", "vendor_ms"} - set(reader.fieldnames or [])
        if missing:
            sys.exit(f"plot.py: {path} is not a tessel_bench CSV (no column {', '.join(sorted(missing))})")
        rows = []
        for r in reader:
            row = {
                "kind": r["kind"].strip(),
                "shape": r["shape"].strip(),
                "ours": r["ours"].strip(),
                "ours_ms": number(r["ours_ms"]),
                "vendor_ms": number(r["vendor_ms"]),
                "ours_tflops": number(r.get("ours_tflops")),
                "vendor_tflops": number(r.get("vendor_tflops")),
                "check": (r.get("check") or "").strip(),
                "vendor_default_ms": number(r.get("vendor_default_ms")),
            }
            row["ratio"] = row["vendor_ms"] / row["ours_ms"] if row["ours_ms"] > 0 else math.nan
            rows.append(row)
    return rows


def vendor_of(kind):
    return VENDOR.get(kind, "vendor")


def label_of(row):
    label = f'{row["shape"]}  {row["ours"]}'
    # Rows measured against one of several vendor calls say which: "vs cuDNN <call>; ok".
    check = row["check"]
    if check.startswith("vs ") and ";" in check:
        call = check[3:check.index(";")]
        vendor = vendor_of(row["kind"])
        if call.startswith(vendor + " "):
            call = call[len(vendor) + 1:]
        label += f"  (vs {call})"
    return label


def status_of(row):
    check = row["check"]
    if "ours: not built" in check:
        return "not built"
    if math.isnan(row["ours_ms"]) or "n/a" in check:
        return "failed"
    if "MISMATCH" in check:
        return "MISMATCH"
    return ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", help="a CSV written by tessel_bench --csv")
    parser.add_argument("-o", "--output", help="the SVG to write (default: the CSV's name, .svg)")
    parser.add_argument("--title", default="tessel against the vendor libraries")
    parser.add_argument("--gpu", help="the GPU, for the title")
    parser.add_argument("--date", help="the run's date, for the title")
    parser.add_argument("--commit", help="the commit measured, for the title")
    parser.add_argument("--metric", choices=["tflops", "ms"], default="tflops",
                        help="bars of throughput (default) or of time")
    parser.add_argument("--only", action="append", metavar="KIND",
                        help="only rows of this kind (gemm, conv, norm); repeatable")
    args = parser.parse_args()

    import matplotlib
    matplotlib.use("Agg")  # no display; savefig writes the SVG
    import matplotlib.pyplot as plt

    # Reproducible, diff-friendly SVG: text stays text, ids do not change from run to run.
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "tessel-bench", "font.size": 9})

    rows = read_rows(args.csv)
    if args.only:
        rows = [r for r in rows if r["kind"] in args.only]
    if not rows:
        sys.exit(f"plot.py: no rows to plot in {args.csv}")
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    panels = [[r for r in rows if r["kind"] == k] for k in kinds]

    bar_h = 0.38
    heights = [len(p) for p in panels]
    fig, axes = plt.subplots(len(panels), 1, squeeze=False,
                             figsize=(11, 1.2 + 0.34 * sum(heights) + 0.9 * len(panels)),
                             gridspec_kw={"height_ratios": [h + 1.5 for h in heights]})
    ours_color, vendor_color = "#1f77b4", "#b0b0b0"
    for ax, kind, panel in zip(axes[:, 0], kinds, panels):
        unit = UNIT.get(kind, "TFLOP/s")
        no_throughput = all(math.isnan(r["ours_tflops"]) and math.isnan(r["vendor_tflops"])
                            for r in panel)
        if args.metric == "ms" or no_throughput:
            ours = [r["ours_ms"] for r in panel]
            vendor = [r["vendor_ms"] for r in panel]
            xlabel = "median time per launch, ms (shorter is better)"
        else:
            ours = [r["ours_tflops"] for r in panel]
            vendor = [r["vendor_tflops"] for r in panel]
            xlabel = f"{unit} (longer is better)"
        ys = list(range(len(panel)))
        ax.barh([y - bar_h / 2 for y in ys], [0 if math.isnan(v) else v for v in ours], bar_h,
                color=ours_color, label="tessel")
        ax.barh([y + bar_h / 2 for y in ys], [0 if math.isnan(v) else v for v in vendor], bar_h,
                color=vendor_color, label="vendor")
        # The old vendor baseline, where the CSV has it: a tick on the vendor's bar.
        for y, r in zip(ys, panel):
            old = r["vendor_default_ms"]
            if not math.isnan(old) and old > 0 and not math.isnan(r["vendor_ms"]):
                x_old = old if args.metric == "ms" or no_throughput else \
                    r["vendor_tflops"] * r["vendor_ms"] / old
                ax.plot([x_old, x_old], [y + bar_h * 0.05, y + bar_h * 0.95], color="#555555",
                        linewidth=1.2, label="_default")
        finite = [v for v in ours + vendor if not math.isnan(v)]
        top = max(finite) if finite else 1.0
        for y, r, o, v in zip(ys, panel, ours, vendor):
            status = status_of(r)
            if status in ("failed", "not built"):
                text, color = status, "#d62728" if status == "failed" else "#7f7f7f"
            else:
                text = f'{r["ratio"]:.2f}x'
                color = "#2ca02c" if r["ratio"] >= 1 else "#333333"
                if status:
                    text += f"  {status}"
                    color = "#d62728"
            x = max(0 if math.isnan(o) else o, 0 if math.isnan(v) else v)
            ax.text(x + top * 0.01, y, text, va="center", ha="left", color=color,
                    fontweight="bold" if r["ratio"] >= 1 else "normal")
        ax.set_yticks(ys)
        ax.set_yticklabels([label_of(r) for r in panel], fontfamily="monospace", fontsize=8)
        ax.set_ylim(len(panel) - 0.5, -0.5)  # the CSV order, top down, no margins
        ax.set_xlim(0, top * (1.45 if any(status_of(r) for r in panel) else 1.14))
        ax.set_xlabel(xlabel)
        ax.set_title(f"{kind}: tessel vs {vendor_of(kind)}", loc="left", fontsize=9,
                     fontweight="bold")
        ax.grid(axis="x", color="#e0e0e0", linewidth=0.6)
        ax.set_axisbelow(True)
        # A rule between schedules where the CSV lists each schedule's shapes together.
        changes = [y for y in ys[1:] if panel[y]["ours"] != panel[y - 1]["ours"]]
        if len(changes) <= len(panel) / 3:
            for y in changes:
                ax.axhline(y - 0.5, color="#c8c8c8", linewidth=0.6)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)

    subtitle = "  ·  ".join(s for s in (args.gpu, args.date,
                                        f"commit {args.commit}" if args.commit else None) if s)
    legend = ("beside each row: vendor ms / ours ms (> 1: tessel faster"
              + ("; norm rows: against a copy of the same bytes" if "norm" in kinds else "")
              + ("; tick: the vendor's default choice" if any(
                  not math.isnan(r["vendor_default_ms"]) for r in rows) else "") + ")")
    fig.suptitle("\n".join(s for s in (args.title, subtitle, legend) if s), fontsize=10, x=0.01,
                 ha="left", linespacing=1.5)
    handles, _ = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, ["tessel", "vendor (" + ", ".join(vendor_of(k) for k in kinds) + ")"],
               loc="upper right", ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    output = args.output or os.path.splitext(args.csv)[0] + ".svg"
    if os.path.dirname(output):
        os.makedirs(os.path.dirname(output), exist_ok=True)
    if output.endswith(".png"):  # a quick look; the SVG is what RESULTS.md links
        fig.savefig(output, dpi=110)
    else:
        fig.savefig(output, format="svg", metadata={"Date": None})
    print(f"plot.py: {len(rows)} rows of {args.csv} -> {output}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Decoding's first kernel (`tessel cuda attention_decode`) with each stretch's row loads issued
before its arithmetic, each row in its own registers; `tessel run attention_decode --cuda` times
it (bench/RESULTS.md 2026-11-28, 10:15). MODE: K (the K pass), V (the V pass) or KV.

    python3 bench/decode_hoist_experiment.py MODE in.cu out.cu
"""
import re, sys
mode, src_path, out_path = sys.argv[1:4]
src = open(src_path).read()

def body_span(text, header_start):
    i = text.index("{", header_start)
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{": depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0: return i + 1, j
    raise ValueError

def hoist(text, loop_header, load_re, buf, nbuf_elems):
    start = text.index(loop_header)
    b0, b1 = body_span(text, start)
    body = text[b0:b1]
    loads = list(re.finditer(load_re, body))
    assert loads, loop_header
    pieces, hoisted = [], []
    for i, m in enumerate(loads):
        end = loads[i + 1].start() if i + 1 < len(loads) else len(body)
        hoisted.append(m.group(0).replace(buf, f"{buf}_{i}"))
        pieces.append(body[m.end():end].replace(f"{buf}[", f"{buf}_{i}["))
    new_body = body[:loads[0].start()] + "\n".join(hoisted) + "\n" + "".join(pieces)
    decl = f"alignas(16) half {buf}[{nbuf_elems}];"
    decls = decl + "".join(f"\n  alignas(16) half {buf}_{i}[{nbuf_elems}];" for i in range(len(loads)))
    text = text[:b0] + new_body + text[b1:]
    return text.replace(decl, decls, 1), len(loads)

if "K" in mode:
    src, n = hoist(src, "for (int j_outer_outer = 0;", r"\*\(uint4\*\)K_local = [^;]*;", "K_local", 8)
    print("K rows hoisted:", n, file=sys.stderr)
if "V" in mode:
    src, n = hoist(src, "for (int j3_outer_r_outer = 0;",
                   r"for \(int ax3_outer\w* = 0; ax3_outer\w* < 2; \+\+ax3_outer\w*\) \{\s*\*\(uint4\*\)\(V_local[^;]*;\s*\}",
                   "V_local", 16)
    print("V rows hoisted:", n, file=sys.stderr)
open(out_path, "w").write(src)

#!/usr/bin/env python3
"""Rewrites `tessel cuda`'s output of a wgmma kernel to measure where its epilogue's time goes;
`tessel run --cuda` on the result times it (bench/RESULTS.md 2026-11-28, third session).

    python3 bench/epilogue_cost_experiment.py MODE in.cu out.cu

MODE nostore: the epilogue's global stores of the output tile never happen (each guarded by a
test on the stored value that no finite product passes) while everything computing the values
stays: the kernel without its output traffic. MODE stream: the stores as st.global.cs (evict
first in L2). MODE keep: the operands' TMA tile loads with an L2 evict-last cache policy.
MODE stream+keep: both.
"""
import re
import sys

mode, src_path, out_path = sys.argv[1:4]
src = open(src_path).read()
store = re.compile(r"^(\s*)\*\((float4|uint2)\*\)\((wgmma_quad_out\w*)([^)]*)\) = (.*);$", re.M)


def rewrite_store(m):
    indent, ty, ptr, offset, value = m.groups()
    if mode.startswith("stream"):
        return f"{indent}__stcs(({ty}*)({ptr}{offset}), {value});"
    never = "__float_as_uint(v.x) == 0x7fc00123u" if ty == "float4" else "v.x == 0xfff1fff1u"
    return (f"{indent}{{ const {ty} v = {value}; if ({never}) "
            f"*({ty}*)({ptr}{offset}) = v; }}")


n = 0
if mode in ("nostore", "stream", "stream+keep"):
    src, n = store.subn(rewrite_store, src)
    if n == 0:
        sys.exit("no epilogue stores found")
if mode in ("keep", "stream+keep"):
    load = re.compile(r'(cp\.async\.bulk\.tensor\.(\d)d\.shared::cluster\.global\.mbarrier::'
                      r'complete_tx::bytes) \[%0\], \[%1, \{([^}]*)\}\], \[%2\];\\n"\n(\s*):: (.*) : "memory"\);')

    def rewrite_load(m):
        op, dims, coords, indent, operands = m.groups()
        k = 3 + int(dims)
        return (f'{op}.L2::cache_hint [%0], [%1, {{{coords}}}], [%2], %{k};\\n"\n'
                f'{indent}:: {operands}, "l"(tessel_evict_last()) : "memory");')

    src, m = re.subn(load, rewrite_load, src)
    if m == 0:
        sys.exit("no TMA loads found")
    policy = ("__device__ __forceinline__ unsigned long long tessel_evict_last() {\n"
              "  unsigned long long p;\n"
              "  asm volatile(\"createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\\n\" : \"=l\"(p));\n"
              "  return p;\n}\n")
    first = src.index("__device__")
    src = src[:first] + policy + src[first:]
    n += m
open(out_path, "w").write(src)
print(f"{mode}: {n} sites rewritten", file=sys.stderr)

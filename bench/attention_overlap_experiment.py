#!/usr/bin/env python3
"""FlashAttention-3's overlap inside a warpgroup, by hand, to measure it before building it.

Rewrites `tessel cuda attention --shape ...,TC=2,ACC=1,STAGES=3` (non-causal: one fold loop)
so that each key block's step issues the next block's scores S(t+1) = Q K(t+1)^T and this
block's P(t) V(t) together, waits for the scores only (wgmma.wait_group 1), runs the next
block's softmax while P V is on the Tensor Cores, then waits for P V, rescales o and packs P:

    S(0); softmax(0); o = o alpha(0)
    for t < n - 1:  issue S(t + 1), P(t) V(t) | wait 1 | softmax(t + 1) | wait 0 | o *= alpha(t + 1); pack P(t + 1)
    P(n - 1) V(n - 1)

ptxas moves arithmetic across wgmma.wait_group (it hoisted the wait above the softmax's
exponentials), so the softmax's sums are stored to shared memory before the wait: memory
operations keep their side of it. Run the result with `tessel run attention --shape <same>
--cuda OUT` (checked against float64 at small shapes, timed with --no-check at large ones).

  python3 bench/attention_overlap_experiment.py IN.cu OUT.cu
"""
import re
import sys


def rotate(src):
    src = src.split("\n")

    def find(pred, start=0):
        for i in range(start, len(src)):
            if pred(src[i]):
                return i
        raise SystemExit("not the expected kernel: a marker is missing")

    sizes = {m.group(2): int(m.group(3))
             for m in (re.match(r"  (float|unsigned) (\w+)\[(\d+)\];", l) for l in src) if m}

    def fence(name, kind="f"):
        return ["    #pragma unroll",
                f'    for (int r = 0; r < {sizes[name]}; ++r) asm volatile("" : "+{kind}"({name}[r]) :: "memory");']

    def at(lines, t):  # the ring's slot and phase of block t instead of the loop's
        return [l.replace("t % 3", f"({t}) % 3").replace("t / 3 % 2", f"({t}) / 3 % 2")
                for l in lines]

    loop = find(lambda l: re.match(r"  for \(int t = 0; t < \d+; \+\+t\) \{", l))
    n = int(re.match(r"  for \(int t = 0; t < (\d+);", src[loop]).group(1))
    full = find(lambda l: "tessel_mbarrier_wait(&t_full[t % 3]" in l, loop)
    producer = src[loop + 1:full]
    commit_s = find(lambda l: "wgmma.commit_group" in l, full)
    s_issue = src[full + 1:commit_s + 1]
    softmax_at = find(lambda l: l.startswith("    rowmax[0 + 0] = "), commit_s)
    alpha_end = find(lambda l: l.startswith("    alpha[0 + 1] = "), softmax_at)
    softmax = src[softmax_at:alpha_end + 1]
    pack_at = next(i for i, l in enumerate(softmax) if "Pq[0 + r] = tessel_pack" in l)
    pack = softmax[pack_at - 1:pack_at + 1]  # with its #pragma unroll
    softmax = softmax[:pack_at - 1] + softmax[pack_at + 1:]
    pv_fence = find(lambda l: "wgmma.fence.sync.aligned" in l, alpha_end)
    rescale = [l for l in src[alpha_end + 1:pv_fence] if re.match(r"    PV\[0 \+ \d+\] = o\[", l)]
    commit_pv = find(lambda l: "wgmma.commit_group" in l, pv_fence)
    pv_issue = src[pv_fence:commit_pv + 1]
    update = find(lambda l: l.startswith("    l[0 + 0] = l[0 + 0] *"), commit_pv)
    release = find(lambda l: "tessel_mbarrier_arrive(&t_empty[t % 3])" in l, update)
    scalars = [l for l in src[update:release] if re.match(r"    [lm]\[", l)]
    o_copies = [l for l in src[update:release] if re.match(r"    o\[0 \+ \d+\] = PV", l)]
    if src[release + 1] != "  }":
        raise SystemExit("not the expected kernel: the loop does not end after the release")
    wait = lambda k: [f'    asm volatile("wgmma.wait_group.sync.aligned {k};\\n" ::: "memory");']

    out = src[:loop]
    out += ["  __shared__ unsigned tessel_pin;", "  {  // block 0: its scores and softmax"]
    out += at([src[full]] + s_issue, "0") + wait(0) + fence("S")
    out += softmax + pack + scalars + rescale + ["  }"]
    out += [f"  for (int t = 0; t < {n - 1}; ++t) {{"] + producer
    out += at([src[full]] + s_issue, "t + 1")
    out += [l for l in pv_issue if "wgmma.fence" not in l]
    out += wait(1) + fence("S") + softmax + scalars
    out += ['    asm volatile("st.shared.b32 [%0], %1;\\n" :: "r"(tessel_smem(&tessel_pin)), '
            '"r"(__float_as_uint(l[0] + l[1])) : "memory");']
    out += wait(0) + fence("PV") + fence("Pq", "r")
    out += ["    tessel_mbarrier_arrive(&t_empty[t % 3]);"]
    out += [re.sub(r"= o\[(0 \+ \d+)\]", r"= PV[\1]", l) for l in rescale] + pack + ["  }"]
    out += ["  {  // the last block's P V"] + at(pv_issue, str(n - 1)) + wait(0) + fence("PV")
    out += o_copies + ["  }"]
    out += src[release + 2:]
    return "\n".join(out)


if __name__ == "__main__":
    open(sys.argv[2], "w").write(rotate(open(sys.argv[1]).read()))

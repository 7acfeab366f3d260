#!/usr/bin/env python3
"""Where a replayed decode step's GPU time goes, from an nsys kernel trace.

usage: nsys_step.py TRACE.csv [SEQ.txt]   (nsys stats --report cuda_gpu_trace --format csv;
       SEQ.txt: one median step kernel by kernel: idle before it, duration, name)

A decode step ends with the sampler's argmax kernel; the last steps (all but the
first three, which may still capture graphs) are taken, but for spans over
twice the median (a prefill between them). Printed: a step's wall
time (argmax end to argmax end), the time some kernel runs (union of the
kernels' intervals: PDL lets kernels overlap), the idle time between them, the
kernel count, and the kernels by time a step, each with its launches a step and
the idle time before its launches (time the GPU waited for it to start) and the
time it adds to the step (its end past all earlier ends: with programmatic
launches a kernel's duration includes its wait for the one before, this does not).
"""
import csv
import sys
from collections import defaultdict


def main():
    rows = list(csv.reader(open(sys.argv[1])))
    while rows and "Name" not in rows[0]:
        rows.pop(0)
    if not rows:
        print("  no kernel trace")
        return
    h = rows[0]
    si, di, ni = h.index("Start (ns)"), h.index("Duration (ns)"), h.index("Name")
    ks, cps = [], []  # kernels; copies and sets (the step's edge, below)
    for r in rows[1:]:
        if len(r) <= max(si, di, ni) or not r[si].isdigit():
            continue
        name = r[ni]
        if "memcpy" in name.lower() or "memset" in name.lower():
            cps.append((int(r[si]), int(r[di]), name))
            continue
        ks.append((int(r[si]), int(r[di]), name))
    ks.sort()
    cps.sort()
    ends = [i for i, k in enumerate(ks) if "argmax" in k[2].lower()]
    if len(ends) < 6:
        print("  fewer than 6 argmax kernels: no decode steps found")
        return
    steps = list(zip(ends[3:-1], ends[4:]))
    # a span over a prefill (a bench's next repeat) is not a decode step
    walls = sorted(ks[b][0] - ks[a][0] for a, b in steps)
    med = walls[len(walls) // 2]
    steps = [(a, b) for a, b in steps if ks[b][0] - ks[a][0] <= 2 * med]
    n = len(steps)
    wall = busy = cnt = 0
    per = defaultdict(lambda: [0, 0, 0, 0])   # name -> [duration, launches, idle before, step time added]
    for a, b in steps:
        t0 = ks[a][0] + ks[a][1]
        wall += ks[b][0] + ks[b][1] - t0
        cur = t0
        for s, d, name in ks[a + 1:b + 1]:
            e = s + d
            idle = max(0, s - cur)
            busy += max(0, e - max(s, cur))
            p = per[short(name)]
            p[3] += max(cur, e) - cur
            cur = max(cur, e)
            p[0] += d
            p[1] += 1
            p[2] += idle
            cnt += 1
    print("  %d steps: %.1f us a step, kernels running %.1f us, idle %.1f us, %.1f kernels a step"
          % (n, wall / n / 1e3, busy / n / 1e3, (wall - busy) / n / 1e3, cnt / n))
    if len(sys.argv) > 2:  # the sequence of one step (the median one)
        a, b = sorted(steps, key=lambda ab: ks[ab[1]][0] - ks[ab[0]][0])[n // 2]
        cur = ks[a][0] + ks[a][1]
        with open(sys.argv[2], "w") as f:
            for s_, d, name in ks[a + 1:b + 1]:
                f.write("%8.2f %8.2f  %s\n" % ((s_ - cur) / 1e3, d / 1e3, short(name)[:100]))
                cur = max(cur, s_ + d)
    if cps:  # what the GPU runs between a step's argmax and the next step's first kernel (copies included)
        gap = gcount = 0
        names = defaultdict(lambda: [0, 0])
        for a, b in steps:
            t0, t1 = ks[a][0] + ks[a][1], ks[a + 1][0]
            gap += t1 - t0
            gcount += 1
            for s_, d, name in cps:
                if t0 <= s_ < t1:
                    names[name][0] += 1
                    names[name][1] += d
        print("  the edge (argmax end to the next step's first kernel): %.1f us a step; copies in it a step:"
              % (gap / gcount / 1e3) + "".join(" %s x%.1f (%.2f us each)" % (k, c / gcount, d / max(c, 1) / 1e3)
                                             for k, (c, d) in sorted(names.items())))
    # adds: how far each launch moves the step's end (its end past every earlier kernel's end, the
    # idle before it included): these sum to the step's wall time, whatever the overlap
    print("  %-60s %8s %7s %8s %8s %8s %8s" % ("kernel", "us/step", "n/step", "us each", "idle us", "adds us",
                                               "adds each"))
    for name, (d, c, idle, add) in sorted(per.items(), key=lambda kv: -kv[1][3])[:26]:
        print("  %-60s %8.1f %7.1f %8.2f %8.1f %8.1f %8.2f" % (name[:60], d / n / 1e3, c / n, d / c / 1e3, idle / n / 1e3,
                                                             add / n / 1e3, add / c / 1e3))


def short(name):
    # template arguments kept (they tell the variants apart), parameters dropped
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            return name[:i]
    return name


if __name__ == "__main__":
    main()

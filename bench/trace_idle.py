#!/usr/bin/env python3
"""Where the threads of an AXLE_TRACE timeline waited (docs/runtime.md, "Timeline").

    AXLE_TRACE=trace.json build/axle train --config small --steps 200 ...
    bench/trace_idle.py trace.json [--skip 40] [--runs 140] [--top 25]

Takes the executable runs longer than --min-ms (the training steps), skips the first --skip and
looks at the next --runs of them. Prints each thread's busy time a step (its spans), then, for
each kernel on axle-exec, the time a step during which no pool worker ran anything: kernels that
ran on one thread (too small to split, or inline while the host traced the next step) and the
waits for the slower half of a split one.
"""
import argparse
import bisect
import collections
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--skip", type=int, default=40, help="training runs to skip (compile, warm-up)")
    ap.add_argument("--runs", type=int, default=140, help="runs to look at after those")
    ap.add_argument("--min-ms", type=float, default=5.0, help="runs at least this long are steps")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    doc = json.load(open(a.trace))
    thread = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"}
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    runs = sorted((e for e in spans if e["name"].startswith("run @") and e["dur"] >= a.min_ms * 1e3),
                  key=lambda e: e["ts"])
    if len(runs) < a.skip + 2:
        raise SystemExit(f"{a.trace}: {len(runs)} runs of at least {a.min_ms} ms; lower --skip or --min-ms")
    window = runs[a.skip:a.skip + a.runs + 1]
    t0, t1, n = window[0]["ts"], window[-1]["ts"], len(window) - 1
    inside = [e for e in spans if t0 <= e["ts"] < t1 and not e["name"].startswith("run @")]
    print(f"{n} runs, {(t1 - t0) / 1e3 / n:.2f} ms each (runs {a.skip}..{a.skip + n} of {len(runs)})")
    busy, waits = collections.Counter(), collections.Counter()
    for e in inside:
        (waits if e["name"].startswith("wait for") else busy)[thread[e["tid"]]] += e["dur"]
    for name in sorted(set(busy) | set(waits)):
        us = busy[name]
        print(f"  {name:14s} in spans {us / 1e3 / n:6.2f} ms a run ({100 * us / (t1 - t0):.0f}%)"
              + (f", waiting for results {waits[name] / 1e3 / n:.2f}" if waits[name] else ""))

    pool = sorted((e["ts"], e["ts"] + e["dur"]) for e in inside if thread[e["tid"]].startswith("axle-pool"))
    starts = [p[0] for p in pool]

    def pool_busy(lo, hi):  # worker time inside [lo, hi); with one worker, spans do not overlap
        i, s = max(0, bisect.bisect_left(starts, lo) - 1), 0.0
        while i < len(pool) and pool[i][0] < hi:
            s += max(0.0, min(hi, pool[i][1]) - max(lo, pool[i][0]))
            i += 1
        return s

    exe = sorted((e for e in inside if thread[e["tid"]] == "axle-exec"), key=lambda e: e["ts"])
    idle, total, calls = collections.Counter(), collections.Counter(), collections.Counter()
    gap = gap_idle = 0.0
    end = None
    for e in exe:
        lo, hi = e["ts"], e["ts"] + e["dur"]
        if end is not None and lo > end:
            gap += lo - end
            gap_idle += (lo - end) - pool_busy(end, lo)
        end = max(end or hi, hi)
        idle[e["name"]] += e["dur"] - pool_busy(lo, hi)
        total[e["name"]] += e["dur"]
        calls[e["name"]] += 1
    print(f"axle-exec between kernels: {gap / 1e3 / n:.2f} ms a run (pool idle {gap_idle / 1e3 / n:.2f})")
    print(f"pool idle during axle-exec's kernels: {sum(idle.values()) / 1e3 / n:.2f} ms a run")
    print(f"{'idle ms':>8} {'of ms':>7} {'calls':>6}  kernel (per run)")
    for name, us in idle.most_common(a.top):
        print(f"{us / 1e3 / n:8.3f} {total[name] / 1e3 / n:7.3f} {calls[name] / n:6.1f}  {name[:110]}")


if __name__ == "__main__":
    main()

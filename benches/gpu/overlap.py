"""Overlap across streams in an offload-sched Chrome trace (ph "X" events, tid = stream+1,
tid 0 = host; the "critical path" track repeats ops and is left out). Prints per-stream busy time, the time >= 2 streams are busy, and the time a
copy (h2d/d2h) on one stream runs while a kernel runs on another."""
import json, sys

def union(iv):
    iv = sorted(iv); out = []
    for a, b in iv:
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out

def total(iv):
    return sum(b - a for a, b in iv)

def inter(x, y):
    i = j = 0; out = []
    while i < len(x) and j < len(y):
        a = max(x[i][0], y[j][0]); b = min(x[i][1], y[j][1])
        if a < b: out.append([a, b])
        if x[i][1] < y[j][1]: i += 1
        else: j += 1
    return out

for path in sys.argv[1:]:
    d = json.load(open(path))
    ev = [e for e in d["traceEvents"] if e.get("ph") == "X" and e.get("tid", 0) > 0 and e.get("dur", 0) > 0
          and e.get("cat") != "critical path"]
    streams = sorted({e["tid"] for e in ev})
    busy = {s: union([(e["ts"], e["ts"] + e["dur"]) for e in ev if e["tid"] == s]) for s in streams}
    span = (min(e["ts"] for e in ev), max(e["ts"] + e["dur"] for e in ev)) if ev else (0, 0)
    # time with >= 2 streams busy
    pts = []
    for s in streams:
        for a, b in busy[s]:
            pts += [(a, 1), (b, -1)]
    pts.sort(); n = 0; last = None; multi = 0.0
    for t, dlt in pts:
        if last is not None and n >= 2: multi += t - last
        n += dlt; last = t
    cp_k = 0.0; pairs = 0
    for s in streams:
        cps = union([(e["ts"], e["ts"] + e["dur"]) for e in ev if e["tid"] == s and e["cat"] in ("h2d", "d2h")])
        ks = union([(e["ts"], e["ts"] + e["dur"]) for e in ev if e["tid"] != s and e["cat"] == "kernel"])
        ov = inter(cps, ks); cp_k += total(ov); pairs += len(ov)
    kinds = {}
    for e in ev: kinds[e["cat"]] = kinds.get(e["cat"], 0) + 1
    print(f"{path}: {len(ev)} timed stream ops {dict(sorted(kinds.items()))} on {len(streams)} streams; span {span[1]-span[0]:.1f} us")
    for s in streams:
        print(f"  stream tid {s}: busy {total(busy[s]):.1f} us in {len(busy[s])} intervals")
    print(f"  >= 2 streams busy at once: {multi:.1f} us ({100*multi/max(span[1]-span[0],1e-9):.1f}% of span)")
    print(f"  copy on one stream overlapping a kernel on another: {cp_k:.1f} us in {pairs} overlapping intervals")

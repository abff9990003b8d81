#!/usr/bin/env python3
"""PyTorch baseline for offload-bench: R saxpy regions, each copying x and y (pinned host
tensors, allocated once) to freshly allocated device tensors with non_blocking copies,
y = a*x + y on the device, y copied back non_blocking; device tensors freed per region
(the caching allocator reuses them, as torch does); one synchronize at the end.
Prints one line per size: `torch_regions bytes=B us_per_region=U` (median of reps; sizes of
8 MiB and more use --reps-large).

--graph: the same R regions captured once as a torch.cuda.CUDAGraph (device tensors
allocated before capture and kept, as a graph needs static addresses) and replayed per
repetition: the PyTorch counterpart of offload-sched's replay (`bench replay`)."""
import argparse, statistics, time
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--regions", type=int, default=64)
ap.add_argument("--sizes", default="4096,1048576,16777216")
ap.add_argument("--reps", type=int, default=20)
ap.add_argument("--reps-large", type=int, default=10)
ap.add_argument("--warmup", type=int, default=2)
ap.add_argument("--graph", action="store_true")
a = ap.parse_args()
dev = torch.device("cuda")
print("torch", torch.__version__, torch.cuda.get_device_name(0), flush=True)
for b in [int(s) for s in a.sizes.split(",")]:
    n = b // 4
    xs = [torch.full((n,), 0.5, dtype=torch.float32).pin_memory() for _ in range(a.regions)]
    ys = [torch.full((n,), 1.0, dtype=torch.float32).pin_memory() for _ in range(a.regions)]
    reps = a.reps if b < (8 << 20) else a.reps_large
    if a.graph:
        dxs = [torch.empty((n,), dtype=torch.float32, device=dev) for _ in range(a.regions)]
        dys = [torch.empty((n,), dtype=torch.float32, device=dev) for _ in range(a.regions)]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        g = torch.cuda.CUDAGraph()
        with torch.cuda.stream(s):
            with torch.cuda.graph(g, stream=s):
                for r in range(a.regions):
                    dxs[r].copy_(xs[r], non_blocking=True)
                    dys[r].copy_(ys[r], non_blocking=True)
                    dys[r].add_(dxs[r], alpha=2.0)
                    ys[r].copy_(dys[r], non_blocking=True)
        torch.cuda.synchronize()
        times = []
        for rep in range(a.warmup + reps):
            torch.cuda.synchronize()
            t = time.perf_counter()
            g.replay()
            torch.cuda.synchronize()
            if rep >= a.warmup:
                times.append((time.perf_counter() - t) * 1e6 / a.regions)
        exp = 1.0 + (a.warmup + reps) * 1.0
        ok = abs(ys[3 % a.regions][0].item() - exp) < 1e-3 * exp
        print(f"torch_graph bytes={b} us_per_region={statistics.median(times):.2f} check={'ok' if ok else 'WRONG'}", flush=True)
        continue
    times = []
    for rep in range(a.warmup + reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for r in range(a.regions):
            dx = xs[r].to(dev, non_blocking=True)
            dy = ys[r].to(dev, non_blocking=True)
            dy.add_(dx, alpha=2.0)
            ys[r].copy_(dy, non_blocking=True)
            del dx, dy
        torch.cuda.synchronize()
        if rep >= a.warmup:
            times.append((time.perf_counter() - t) * 1e6 / a.regions)
    # check one region: y after (warmup+reps) applications of y += 2*0.5
    exp = 1.0 + (a.warmup + reps) * 1.0
    ok = abs(ys[3 % a.regions][0].item() - exp) < 1e-3 * exp
    print(f"torch_regions bytes={b} us_per_region={statistics.median(times):.2f} check={'ok' if ok else 'WRONG'}", flush=True)

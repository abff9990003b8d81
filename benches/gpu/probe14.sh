#!/bin/bash
# Run 14, call 1: what bounds small regions? copy_probe (copy engines vs SM copies, serial /
# threads / graph) at 4 KiB, 64 KiB, 1 MiB, and the bench's 4 KiB rows for comparison.
set -u
D=$(cd "$(dirname "$0")" && pwd); L=/tmp/logs; mkdir -p $L; S=$(date +%s)
stamp(){ echo "[$(( $(date +%s) - S ))s] $*" | tee -a $L/steps.txt; }
pack(){ cp $L/* $OUT/ 2>/dev/null; true; }
trap pack EXIT
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,pstate --format=csv; nvidia-smi topo -m; uname -a; nproc; } > $L/device.txt 2>&1
stamp "device: $(head -2 $L/device.txt | tail -1)"
nvcc -O2 -arch=sm_90 -o /tmp/copy_probe $D/copy_probe.cu -lpthread > $L/nvcc.txt 2>&1; stamp "nvcc rc=$?"
for b in 4096 65536 1048576; do timeout 60 /tmp/copy_probe $b >> $L/probe.txt 2>&1; stamp "probe $b rc=$?"; done
cat $L/probe.txt
B=/tmp/offload-bench; cp $D/offload-bench $B && chmod +x $B
timeout 120 $B --plugin cuda --sizes 4096 --reps 30 --out $L/bench-4k.md > /dev/null 2> $L/bench-4k.err; stamp "bench 4k rc=$?"
grep -E '^\| \((a|c1|c4|c8|e|e0|e1)' $L/bench-4k.md | head -20; grep -iE 'copies alone|bandwidth' $L/bench-4k.md | head

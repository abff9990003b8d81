#!/bin/bash
# Run 14, call A (copy batching): correctness on the GPU — bench --check (now with the
# batch_edges program), every graph x 4 configurations, compute-sanitizer memcheck and
# racecheck on small graphs — then 4 KiB against libomptarget (11 processes x 10 reps).
# From the repo root on the GPU machine: OUT=$OUT bash .devbin/run14a.sh (about 4 minutes).
# Needs .devbin/{offload-sched,offload-bench,wtime_shim.so,libomptarget-16,graphs,common.sh}.
set -u
D=$(cd "$(dirname "$0")" && pwd); L=/tmp/logs; mkdir -p $L; S=$(date +%s)
. "$D"/common.sh
stamp(){ echo "[$(( $(date +%s) - S ))s] $*" | tee -a $L/steps.txt; }
pack(){ cp $L/steps.txt $L/check.txt $L/graphs.txt $L/bench-*.md $L/bench-*.err $OUT/ 2>/dev/null; true; }
trap pack EXIT
B=/tmp/offload-bench; cp $D/offload-bench $B && chmod +x $B
O=/tmp/os; cp $D/offload-sched $O && chmod +x $O
SHIM=/tmp/wtime_shim.so; cp $D/wtime_shim.so $SHIM
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,pstate --format=csv; uname -a; nproc; } > $L/device.txt 2>&1
stamp "device: $(tr '\n' ' ' < $L/device.txt | cut -c1-200)"
correctness_checks
omp_bundle
timeout 300 $B --plugin cuda --sizes 4096 --reps 30 --baselines /tmp/omp --baseline-runs 11 --baseline-reps 10 --wtime-shim $SHIM --out $L/bench-4k.md > /dev/null 2> $L/bench-4k.err
stamp "4k rc=$?"
grep -E '^\| \((a|b1|c1|c4|d|e|e0 g|g)\) ' $L/bench-4k.md | head -12; grep -E '^\| \((c1 ce|c4 ce|c4 s|e0 t)\)' $L/bench-4k.md
sed -n '/^Targets/,$p' $L/bench-4k.md

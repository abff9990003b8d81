#!/bin/bash
# Run 13, call 2: correctness on the GPU (bench --check, every graph x 4 configurations,
# sanitizers on small graphs), then the whole benchmark with libomptarget timed per
# repetition (omp_get_wtime shim, 3 runs x 10 reps), then 4 KiB once more if time is left.
# From the repo root on the GPU machine: OUT=$OUT bash .devbin/gpu13.sh (about 9 minutes).
# Needs .devbin/{common.sh,offload-sched,offload-bench,torch_regions.py,wtime_shim.so,
# libomptarget-16,graphs,overlap.py}.
set -u
D=$(cd "$(dirname "$0")" && pwd); L=/tmp/logs; mkdir -p $L; S=$(date +%s)
. "$D/common.sh"
stamp(){ echo "[$(( $(date +%s) - S ))s] $*" | tee -a $L/steps.txt; }
left(){ echo $(( ${BUDGET:-560} - ($(date +%s) - S) )); }
pack(){ cp $L/steps.txt $L/check.txt $L/graphs.txt $L/bench-*.md $L/bench-*.err $OUT/ 2>/dev/null; true; }
trap pack EXIT
B=/tmp/offload-bench; cp $D/offload-bench $B && chmod +x $B
O=/tmp/os; cp $D/offload-sched $O && chmod +x $O
SHIM=/tmp/wtime_shim.so; cp $D/wtime_shim.so $SHIM
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,pstate --format=csv; uname -a; nproc; } > $L/device.txt 2>&1
stamp "device: $(tr '\n' ' ' < $L/device.txt | cut -c1-200)"
correctness_checks
omp_bundle
OMP="--baselines /tmp/omp --baseline-runs 3 --baseline-reps 10 --wtime-shim $SHIM"
t=$(left); [ $t -gt 420 ] && t=420
stamp "full bench with ${t}s"
timeout $t $B --plugin cuda --sizes 4096,1048576,16777216 --reps 30 --reps-large 10 --warmup 2 $OMP --python $D/torch_regions.py --out $L/bench-full.md > /dev/null 2> $L/bench-full.err
stamp "full rc=$?"
sed -n '/^Targets/,$p' $L/bench-full.md
t=$(left); if [ $t -gt 70 ]; then [ $t -gt 100 ] && t=100
  timeout $t $B --plugin cuda --sizes 4096 --reps 50 $OMP --out $L/bench-4k.md > /dev/null 2> $L/bench-4k.err
  stamp "4k rc=$?"; sed -n '/^Targets/,$p' $L/bench-4k.md
fi

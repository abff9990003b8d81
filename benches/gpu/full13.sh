#!/bin/bash
# Run 13, call 1: the whole benchmark in one process, all sizes, ≥ 10 repetitions at every
# size (30 below 8 MiB, 10 from 8 MiB), PyTorch and 11 libomptarget runs. From the repo
# root on the GPU machine: OUT=$OUT bash .devbin/full13.sh (about 7 minutes).
set -u
D=$(cd "$(dirname "$0")" && pwd); S=$(date +%s)
. "$D/common.sh"
B=/tmp/offload-bench; cp $D/offload-bench $B && chmod +x $B
omp_bundle
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,pstate --format=csv; uname -a; nproc; } > $OUT/device.txt 2>&1
timeout ${LIMIT:-540} $B --plugin cuda --sizes 4096,1048576,16777216 --reps 30 --reps-large 10 --warmup 2 \
  --baselines /tmp/omp --baseline-runs 11 --python $D/torch_regions.py --out $OUT/bench-full.md > /dev/null 2> $OUT/bench-full.err
echo "rc=$? after $(( $(date +%s) - S )) s" >> $OUT/device.txt
cat $OUT/device.txt; sed -n '/^Targets/,$p' $OUT/bench-full.md

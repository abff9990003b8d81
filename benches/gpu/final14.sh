#!/bin/bash
# Run 14, call B (copy batching, final code): bench --check, then the whole benchmark in
# one process:
# all sizes, 30 reps below 8 MiB and 10 from 8 MiB, PyTorch, and libomptarget timed per
# repetition over 11 processes x 10 reps (omp_get_wtime shim).
# OUT=$OUT LIMIT=520 bash .devbin/final14.sh (about 8 minutes).
set -u
D=$(cd "$(dirname "$0")" && pwd); S=$(date +%s)
B=/tmp/offload-bench; cp $D/offload-bench $B && chmod +x $B; SHIM=/tmp/wtime_shim.so; cp $D/wtime_shim.so $SHIM
. "$D"/common.sh; omp_bundle
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,pstate --format=csv; uname -a; nproc; } > $OUT/device.txt 2>&1
timeout 60 $B --plugin cuda --check > $OUT/check.txt 2>&1; echo "check rc=$?: $(tail -1 $OUT/check.txt | cut -c1-200)"
timeout ${LIMIT:-520} $B --plugin cuda --sizes 4096,1048576,16777216 --reps 30 --reps-large 10 --warmup 2 \
  --baselines /tmp/omp --baseline-runs 11 --baseline-reps 10 --wtime-shim $SHIM \
  --python $D/torch_regions.py --out $OUT/bench-full.md > /dev/null 2> $OUT/bench-full.err
echo "bench rc=$? after $(( $(date +%s) - S )) s"
grep -E '^libomptarget nowait' $OUT/bench-full.md; sed -n '/^Targets/,$p' $OUT/bench-full.md

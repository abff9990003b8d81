#!/bin/bash
# Run 13, call 3: 4 KiB with libomptarget timed per repetition over 11 processes (10 reps
# each), to see its run-to-run spread. OUT=$OUT bash .devbin/omp13.sh (about 4 minutes).
set -u
D=$(cd "$(dirname "$0")" && pwd)
. "$D/common.sh"
B=/tmp/offload-bench; cp $D/offload-bench $B && chmod +x $B; SHIM=/tmp/wtime_shim.so; cp $D/wtime_shim.so $SHIM
omp_bundle
S=$(date +%s)
timeout ${LIMIT:-290} $B --plugin cuda --sizes 4096 --reps 50 --baselines /tmp/omp --baseline-runs 11 --baseline-reps 10 --wtime-shim $SHIM --out $OUT/bench-4k-omp11.md > /dev/null 2> $OUT/bench-4k-omp11.err
echo "rc=$? after $(( $(date +%s) - S )) s"
grep -E '^\| \((c4|c8|e0 g|e0 t|g|g best)\)|^libomptarget nowait' $OUT/bench-4k-omp11.md; sed -n '/^Targets/,$p' $OUT/bench-4k-omp11.md

#!/bin/bash
# Final check of the session's code on the GPU (run 11; one call, about 2 minutes):
# bench --check (both issue modes + fault check), every graph x 4 configurations with
# --check (per-stream issue where Auto picks it), compute-sanitizer, one 4 KiB benchmark
# with libomptarget. Needs .devbin/{offload-sched,offload-bench,graphs,libomptarget-16}.
set -u
D=$(cd "$(dirname "$0")" && pwd); B=/tmp/ob; O=/tmp/os
. "$D/common.sh"
cp $D/offload-bench $B; cp $D/offload-sched $O; chmod +x $B $O
R=$OUT/final2.txt
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== bench --check"; timeout 90 $B --plugin cuda --check 2>&1 | tail -3
echo "== graphs"
graph_checks $O
echo "== compute-sanitizer (--random-streams 3)"
for n in saxpy pipeline case_e02 regions64; do
  for t in memcheck racecheck; do
    timeout 60 compute-sanitizer --tool $t --error-exitcode 9 $O run $D/graphs/$n.toml --plugin cuda --check --random-streams 3 > /tmp/cs.txt 2>&1
    echo "$n $t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/cs.txt | tail -1)"
  done
done
echo "== 4 KiB benchmark"
omp_bundle
timeout 90 $B --plugin cuda --sizes 4096 --reps 50 --baselines /tmp/omp --out $OUT/bench-4k.md > /dev/null 2> /tmp/b.err || tail -3 /tmp/b.err
grep -E '^\| \(|^- 4 KiB' $OUT/bench-4k.md
} > $R 2>&1
cat $R

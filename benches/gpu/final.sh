#!/bin/bash
# Final check of main on the GPU (one call, ~4 minutes): CUDA correctness, every graph
# under every policy and random streams against the reference (and the host plugin for
# the non-workflow graphs), compute-sanitizer on small graphs. Needs
# .devbin/{offload-sched,graphs}. Writes $OUT/final.txt.
set -u
D=$(cd "$(dirname "$0")" && pwd); B=/tmp/os; cp $D/offload-sched $B; chmod +x $B
. "$D/common.sh"
R=$OUT/final.txt
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== bench --check"; timeout 90 $B bench --plugin cuda --check 2>&1 | tail -3
echo "== graphs"
graph_checks $B
echo "== compute-sanitizer"
for n in saxpy pipeline case_e01 case_e02; do
  for t in memcheck racecheck; do
    timeout 60 compute-sanitizer --tool $t --error-exitcode 9 $B run $D/graphs/$n.toml --plugin cuda --check > /tmp/cs.txt 2>&1
    echo "$n $t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/cs.txt | tail -1)"
  done
done
} > $R 2>&1
cat $R

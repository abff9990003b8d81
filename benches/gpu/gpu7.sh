#!/bin/bash
# Runs 7-10 (per-stream issue): one call, about 6 minutes. From the repo root on the GPU
# machine: OUT=$OUT bash .devbin/gpu7.sh. Needs .devbin/{offload-sched,offload-bench,
# torch_regions.py,libomptarget-16,graphs}. Files back: steps.txt, check.txt, graphs.txt,
# bench-4k-{1,2}.md, bench-full.md, logs.tar.gz.
set -u
D=$(cd "$(dirname "$0")" && pwd); L=/tmp/logs; mkdir -p $L; S=$(date +%s)
. "$D/common.sh"
stamp(){ echo "[$(( $(date +%s) - S ))s] $*" | tee -a $L/steps.txt; }
left(){ echo $(( ${BUDGET:-560} - ($(date +%s) - S) )); }
pack(){ cp $L/steps.txt $L/check.txt $L/graphs.txt $L/bench-4k-*.md $L/bench-full.md $OUT/ 2>/dev/null; (cd $L && tar czf $OUT/logs.tar.gz .); true; }
trap pack EXIT
B=/tmp/offload-bench; cp $D/offload-bench $B && chmod +x $B
O=/tmp/os; cp $D/offload-sched $O && chmod +x $O
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,pstate --format=csv; uname -a; nproc; lscpu | grep -E 'Model name|MHz'; } > $L/device.txt 2>&1
stamp "device: $(tr '\n' ' ' < $L/device.txt | cut -c1-300)"
timeout 150 $B --plugin cuda --check > $L/check.txt 2>&1; echo "rc=$?" >> $L/check.txt
stamp "check: $(tail -4 $L/check.txt | cut -c1-400 | tr '\n' ' ')"
# Every graph, every policy + random streams, default (per-stream) issue on the GPU.
{
VERBOSE=1 graph_checks $O
for n in saxpy pipeline case_e01 case_e02 regions64; do
  for t in memcheck racecheck synccheck; do
    timeout 60 compute-sanitizer --tool $t --error-exitcode 9 $O run $D/graphs/$n.toml --plugin cuda --check --random-streams 3 > /tmp/cs.txt 2>&1
    echo "sanitizer $n $t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|issued by' /tmp/cs.txt | tr '\n' ' ' | cut -c1-300)"
  done
done
# A workflow's trace with per-stream issue: copies and kernels overlapping across streams.
timeout 60 $O run $D/graphs/montage-2mass-005d.toml --plugin cuda --check --trace $L/trace-montage.json > $L/trace-run.txt 2>&1
echo "trace montage rc=$? $(head -1 $L/trace-run.txt | cut -c1-250)"
python3 $D/overlap.py $L/trace-montage.json 2>&1 | tail -4
} > $L/graphs.txt 2>&1
stamp "graphs: $(grep -E '^graphs:' $L/graphs.txt) sanitizer: $(grep -c 'rc=0' $L/graphs.txt)/15 rc=0; $(grep FAIL $L/graphs.txt | head -3)"
omp_bundle
timeout 90 $B --plugin cuda --sizes 4096 --reps 50 --baselines /tmp/omp --out $L/bench-4k-1.md > /dev/null 2> $L/bench-4k-1.err
stamp "4k run 1: $(grep -E '^\| \(' $L/bench-4k-1.md | tr '\n' ' ')"
t=$(left); [ $t -gt 300 ] && t=300
stamp "full bench with ${t}s"
timeout $t $B --plugin cuda --sizes 4096,1048576,16777216 --reps 30 --reps-large 3 --warmup 2 --baselines /tmp/omp --python $D/torch_regions.py --out $L/bench-full.md > /dev/null 2> $L/bench-full.err
stamp "full rc=$?: $(grep -E '^\| \(' $L/bench-full.md | tr '\n' ' ')"
t=$(left); if [ $t -gt 40 ]; then [ $t -gt 90 ] && t=90
  timeout $t $B --plugin cuda --sizes 4096 --reps 50 --baselines /tmp/omp --out $L/bench-4k-2.md > /dev/null 2> $L/bench-4k-2.err
  stamp "4k run 2: $(grep -E '^\| \(' $L/bench-4k-2.md | tr '\n' ' ')"
fi

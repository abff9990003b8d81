#!/bin/bash
# Run 5 (issue-path work): one call, about 5.5 minutes. From the repo root on the GPU
# machine: OUT=$OUT bash .devbin/gpu5.sh. Needs .devbin/{offload-bench,torch_regions.py,
# libomptarget-16}. At most 8 files come back: steps.txt, null.md, check.txt,
# bench-4k-{1,2,3}.md, bench-full.md, logs.tar.gz.
set -u
D=$(cd "$(dirname "$0")" && pwd); L=/tmp/logs; mkdir -p $L; S=$(date +%s)
. "$D/common.sh"
stamp(){ echo "[$(( $(date +%s) - S ))s] $*" | tee -a $L/steps.txt; }
left(){ echo $(( ${BUDGET:-320} - ($(date +%s) - S) )); }
pack(){ cp $L/steps.txt $L/null.md $L/check.txt $L/bench-4k-*.md $L/bench-full.md $OUT/ 2>/dev/null; (cd $L && tar czf $OUT/logs.tar.gz .); true; }
trap pack EXIT
B=/tmp/offload-bench; cp $D/offload-bench $B && chmod +x $B
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,pstate --format=csv; uname -a; nproc; lscpu | grep -E 'Model name|MHz'; cat /sys/devices/system/clocksource/clocksource0/current_clocksource; } > $L/device.txt 2>&1
stamp "device: $(tr '\n' ' ' < $L/device.txt | cut -c1-400)"
# The executor's own cost on this machine's CPU (no device work).
timeout 60 $B --plugin null --sizes 4096 --reps 300 --out $L/null.md > /dev/null 2> $L/null.err
stamp "null: $(grep -E '^\| \(c?[a-c][0-9]?\)' $L/null.md | tr '\n' ' ')"
timeout 90 $B --plugin cuda --check > $L/check.txt 2>&1; echo "rc=$?" >> $L/check.txt
stamp "check: $(tail -4 $L/check.txt | cut -c1-300 | tr '\n' ' ')"
# libomptarget bundle: restore the two flattened symlinks (see README-gpu.md, runs 3-4).
omp_bundle
timeout 60 $B --plugin cuda --sizes 4096 --reps 50 --out $L/bench-4k-1.md > /dev/null 2> $L/bench-4k-1.err
stamp "4k run 1: $(grep -E '^\| \((a|b|c1|c4|c8|e0|e|e1|d)\)' $L/bench-4k-1.md | tr '\n' ' ')"
t=$(left); [ $t -gt 200 ] && t=200
stamp "full bench with ${t}s"
timeout $t $B --plugin cuda --sizes 4096,1048576,16777216 --reps 30 --baselines /tmp/omp --python $D/torch_regions.py --out $L/bench-full.md > /dev/null 2> $L/bench-full.err
stamp "full rc=$?: $(grep -E '^\| \(' $L/bench-full.md | tr '\n' ' ')"
for i in 2 3; do
  t=$(left); [ $t -lt 25 ] && break; [ $t -gt 60 ] && t=60
  timeout $t $B --plugin cuda --sizes 4096 --reps 50 --out $L/bench-4k-$i.md > /dev/null 2> $L/bench-4k-$i.err
  stamp "4k run $i: $(grep -E '^\| \((a|b|c1|c4|c8|e0|e|e1|d)\)' $L/bench-4k-$i.md | tr '\n' ' ')"
done

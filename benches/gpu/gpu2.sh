#!/bin/bash
# Second call: fault/correctness check again (fixed fault-check logic) and the 4 KiB
# figures three more times (run-to-run spread), plus a 1 MiB/16 MiB repeat.
set -u
D=$(cd "$(dirname "$0")" && pwd); L=/tmp/logs; mkdir -p $L; S=$(date +%s)
stamp(){ echo "[$(( $(date +%s) - S ))s] $*" | tee -a $L/steps.txt; }
trap 'cd $L && tar czf $OUT/logs2.tar.gz . ; cp $L/steps.txt $OUT/steps2.txt; cp $L/a-check.txt $L/bench-4k-*.md $OUT/ 2>/dev/null' EXIT
timeout 200 $D/offload-bench --plugin cuda --check > $L/a-check.txt 2>&1; echo "rc=$?" >> $L/a-check.txt
stamp "(a) $(cut -c1-400 $L/a-check.txt | tr '\n' ' ')"
for i in 1 2 3; do
  timeout 100 $D/offload-bench --plugin cuda --sizes 4096 --reps 50 --out $L/bench-4k-$i.md > /dev/null 2> $L/bench-4k-$i.err
  stamp "4k run $i: $(grep -E '^\| \((a|c1|c4|a-|c1-|c4-|e0|e)\)' $L/bench-4k-$i.md | tr '\n' ' ')"
done
timeout 200 $D/offload-bench --plugin cuda --sizes 1048576,16777216 --out $L/bench-big.md > /dev/null 2> $L/bench-big.err
stamp "big: $(grep -E '^\| \(' $L/bench-big.md | tr '\n' ' ')"
cp $L/bench-big.md $OUT/ 2>/dev/null

#!/bin/bash
set -u
D=$(cd "$(dirname "$0")" && pwd); B=/tmp/ob; O=/tmp/os
cp $D/offload-bench $B; cp $D/offload-sched $O; chmod +x $B $O
R=$OUT/last.txt
{
timeout 60 $B --plugin cuda --check 2>&1 | tail -2
pass=0; fail=0
for n in saxpy pipeline case_e01 case_e02 case_e03 regions64 jacobi fanout case_m10; do
  for p in "--policy per-op" "--policy minimal" "--random-streams 7"; do
    if out=$(timeout 30 $O run $D/graphs/$n.toml --plugin cuda --check --compare-host --rel-tol 1e-5 $p 2>&1); then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL $n $p: $(echo "$out" | tail -2)"; fi
  done
done
echo "graphs: $pass passed, $fail failed"
timeout 40 $B --plugin cuda --sizes 4096 --reps 30 --out $OUT/b.md > /dev/null 2>&1
grep -E '^\| \((a|b|c1|c4|c8|e0 t|e)\)|^- 4 KiB: [0-9]' $OUT/b.md
} > $R 2>&1
cat $R

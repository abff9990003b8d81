#!/bin/bash
# One graph run on the GPU: g1.sh GRAPH CFGNAME ARGS...  -> one summary line on stdout
g=$1; c=$2; shift 2
log=/tmp/logs/graphs/$(basename $g .toml)__$c.txt
t0=$(date +%s.%N)
timeout 240 /work/dev/offload-sched run "$g" --plugin cuda "$@" > $log 2>&1
rc=$?
t1=$(date +%s.%N)
printf "%-34s %-14s rc=%s %6.1fs  %s\n" "$(basename $g .toml)" "$c" "$rc" "$(awk "BEGIN{print $t1-$t0}")" "$(grep -E 'check|compare|error|FAIL' $log | tr '\n' ' ' | head -c 200)"

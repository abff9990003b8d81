#!/bin/bash
# Run 14, call 2: copy_probe.cu again with cudaMemcpyBatchAsync (-DBATCH) and the smx
# variant, at 4 KiB (twice), 64 KiB and 256 KiB. OUT=$OUT bash .devbin/probe14b.sh
set -u
D=$(cd "$(dirname "$0")" && pwd); L=/tmp/logs; mkdir -p $L; S=$(date +%s)
stamp(){ echo "[$(( $(date +%s) - S ))s] $*" | tee -a $L/steps.txt; }
pack(){ cp $L/* $OUT/ 2>/dev/null; true; }
trap pack EXIT
nvcc -O2 -arch=sm_90 -DBATCH -o /tmp/copy_probe $D/copy_probe.cu -lpthread > $L/nvcc.txt 2>&1 || nvcc -O2 -arch=sm_90 -o /tmp/copy_probe $D/copy_probe.cu -lpthread >> $L/nvcc.txt 2>&1; stamp "nvcc rc=$?"
head -c 3000 $L/nvcc.txt
for b in 4096 4096 65536 262144; do timeout 90 /tmp/copy_probe $b >> $L/probe.txt 2>&1; stamp "probe $b rc=$?"; done
cat $L/probe.txt

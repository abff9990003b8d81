#!/bin/bash
# The project's GPU script: one call runs the steps named on the command line, in order,
# and leaves steps.txt (one line per step) and logs.tgz (every table and log) under $OUT.
#
#   OUT=$OUT bash .devbin/run.sh device check dag dag-host graphs
#
# .devbin/ (ignored by git; named in `carry`) is prepared here by
# `bash benches/gpu/prepare.sh`: the `--features cuda` release binaries (stripped), this
# script and common.sh, graphs/, and copies of ../shared/baselines/libomptarget-{16,19}.
#
# Steps:
#   device    GPU, driver, clocks, CPU count                         -> device.txt
#   check     bench --check (built-in kernels, fault injection), every graph under
#             every policy with --check, compute-sanitizer on small graphs -> check.txt graphs.txt
#   dag       `bench dag` on the CUDA plugin (matmul, fan-out, wavefront, Montage and every
#             graph in graphs/ as a DAG), LLVM 19 blocked_matmul in the same call,
#             REPEAT times (default 3)                               -> dag-cuda-N.md
#   dag-host  the same on the host plugin (this machine's CPUs), REPEAT times -> dag-host-N.md
#   graphs    every graph in graphs/ under each policy on the CUDA plugin, REPEAT processes
#             each (spins scaled by SPIN, default 0.05), wall ms per run (setup included)
#                                                                    -> graphs-time.txt
#   saxpy     the saxpy bench at 4 KiB against libomptarget 16 (regression check) -> saxpy-4k.md
# Every step prints one summary line; steps.txt collects them with elapsed seconds.
set -u
D=$(cd "$(dirname "$0")" && pwd); S=$(date +%s); L=/tmp/logs; mkdir -p $L
. "$D"/common.sh
stamp() { echo "[$(( $(date +%s) - S ))s] $*" | tee -a $L/steps.txt; }
# $OUT takes at most 8 files: steps.txt, and everything in one archive.
pack() { cp $L/steps.txt "$OUT"/ 2>/dev/null; tar czf "$OUT"/logs.tgz -C $L . 2>/dev/null; true; }
trap pack EXIT
B=/tmp/offload-bench; cp "$D"/offload-bench $B && chmod +x $B
O=/tmp/offload-sched; cp "$D"/offload-sched $O && chmod +x $O
REPEAT=${REPEAT:-3}
GRAPHS=$(ls "$D"/graphs/*.toml | tr '\n' ',' | sed 's/,$//')
DAG="--montage $D/graphs/montage-2mass-005d.toml --graphs $GRAPHS --reps ${REPS:-10}"

omp19() {
  rm -rf /tmp/omp19 && cp -r "$D"/libomptarget-19 /tmp/omp19 && chmod -R u+w /tmp/omp19
}

for step in "$@"; do
  case $step in
    device)
      { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,pstate --format=csv; uname -a; nproc; } > $L/device.txt 2>&1
      stamp "device: $(tr '\n' ' ' < $L/device.txt | cut -c1-200)";;
    check)
      correctness_checks;;
    dag)
      omp19
      for i in $(seq 1 $REPEAT); do
        timeout 500 $B dag --plugin cuda --baselines /tmp/omp19 $DAG ${DAG_ARGS:-} --out $L/dag-cuda-$i.md > /dev/null 2> $L/dag-cuda-$i.err
        stamp "dag cuda $i rc=$?: $(grep -E '^- matmul minimal|MISSED' $L/dag-cuda-$i.md | tr '\n' ' ' | cut -c1-600)"
      done;;
    dag-host)
      for i in $(seq 1 $REPEAT); do
        timeout 300 $B dag --plugin host $DAG ${DAG_ARGS:-} --out $L/dag-host-$i.md > /dev/null 2> $L/dag-host-$i.err
        stamp "dag host $i rc=$?: $(grep -E 'MISSED' $L/dag-host-$i.md | tr '\n' ' ' | cut -c1-600)"
      done;;
    graphs)
      graph_times $O > $L/graphs-time.txt 2>&1
      stamp "graphs: $(grep -c . $L/graphs-time.txt) rows; slower under minimal: $(grep -c SLOWER $L/graphs-time.txt)";;
    saxpy)
      omp_bundle
      timeout 300 $B --plugin cuda --sizes 4096 --reps 30 --baselines /tmp/omp --baseline-runs 5 --out $L/saxpy-4k.md > /dev/null 2> $L/saxpy-4k.err
      stamp "saxpy 4k rc=$?: $(sed -n '/^Targets/,$p' $L/saxpy-4k.md | tr '\n' ' ' | cut -c1-300)";;
    *) stamp "unknown step $step";;
  esac
done

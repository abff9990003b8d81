#!/usr/bin/env bash
# Stress: every graph in graphs/, 100 runs each on the host plugin with delay jitter and
# random streams (run i: seeds S+i), each checked against the sequential reference.
# Workflow spins are scaled by SPIN (default 0.01) so the whole sweep takes minutes.
# Usage: scripts/stress.sh [RUNS] [BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-100}
bin=${2:-${CARGO_TARGET_DIR:-target}/release/offload-sched}
spin=${SPIN:-0.01}
[ -x "$bin" ] || cargo build --release --quiet
for f in graphs/*.toml; do
  for p in per-op per-region minimal; do
    "$bin" run "$f" --plugin host --policy "$p" --check --repeat "$runs" \
      --delay-jitter 1 --random-streams 1 --spin-scale "$spin" | tail -1 | sed "s|^|$f $p: |"
  done
done

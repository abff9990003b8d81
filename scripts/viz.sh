#!/usr/bin/env bash
# Regenerates viz/: the DOT and SVG of every graph in graphs/ (default policy).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release --quiet
mkdir -p viz
for f in graphs/*.toml; do
  n=$(basename "$f" .toml)
  "${CARGO_TARGET_DIR:-target}"/release/offload-sched dot "$f" -o "viz/$n.dot"
  if [ "$(grep -c -- "->" "viz/$n.dot")" -gt 3000 ]; then
    # Large graphs: straight edges and bounded crossing minimisation, so the layout
    # finishes in seconds rather than hours.
    dot -Gnslimit=1 -Gnslimit1=1 -Gmclimit=0.05 -Gsplines=line -Gremincross=false \
      -Tsvg "viz/$n.dot" -o "viz/$n.svg"
  else
    dot -Tsvg "viz/$n.dot" -o "viz/$n.svg"
  fi
done

#!/usr/bin/env bash
# Regenerates viz/: the DOT and SVG of every graph in graphs/ (default policy).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release --quiet
mkdir -p viz
for f in graphs/*.toml; do
  n=$(basename "$f" .toml)
  ./target/release/offload-sched dot "$f" -o "viz/$n.dot"
  dot -Tsvg "viz/$n.dot" -o "viz/$n.svg"
done

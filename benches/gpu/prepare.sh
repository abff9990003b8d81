#!/bin/bash
# Fills .devbin/ (ignored by git, see .git/info/exclude) for benches/gpu/run.sh on the GPU
# machine, which has no cargo: the `--features cuda` release binaries (stripped), the
# scripts, graphs/ and copies of the libomptarget baselines from ../shared/baselines.
# Usage, from the repo root: bash benches/gpu/prepare.sh   (then carry .devbin)
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '.devbin/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '.devbin/' >> .git/info/exclude; }
T=${CARGO_TARGET_DIR:-target}
cargo build --release --features cuda --bins
rm -rf .devbin && mkdir -p .devbin
for b in offload-sched offload-bench; do strip -o .devbin/$b "$T"/release/$b; done
cp benches/gpu/run.sh benches/gpu/common.sh .devbin/
cp -r graphs .devbin/graphs
for v in 16 19; do cp -r ../shared/baselines/libomptarget-$v .devbin/; done
chmod -R u+w .devbin
du -sh .devbin

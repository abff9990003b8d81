#!/bin/bash
# Fills .devbin/ (ignored by git through info/exclude) for benches/gpu/run.sh on the GPU
# machine, which has no cargo: the `--features cuda` release binaries (stripped), run.sh
# and common.sh, the sources some steps build or run there (copy_probe.cu, wtime_shim.c,
# torch_regions.py, overlap.py), graphs/, the CUDA library-kernel test binary
# (tests/cuda_library, for the linalg step) and tests/cuda_cap (gputest), the heat and pipeline examples, and copies of the libomptarget 16 and 19
# bundles from ../shared/baselines. Works in the main checkout and in a git worktree.
# Usage, from anywhere in the repo: bash benches/gpu/prepare.sh   (then carry .devbin)
set -euo pipefail
cd "$(dirname "$0")/../.."
EX=$(git rev-parse --git-path info/exclude)
grep -qx '.devbin/' "$EX" 2>/dev/null || { mkdir -p "$(dirname "$EX")"; echo '.devbin/' >> "$EX"; }
T=${CARGO_TARGET_DIR:-target}
# Without the CLI's default `mpi` feature: the GPU machine has no MPI library.
cargo build --release --no-default-features --features cuda --bins
rm -rf .devbin && mkdir -p .devbin
for b in offload-sched offload-bench; do strip -o .devbin/$b "$T"/release/$b; done
for f in run.sh common.sh copy_probe.cu hostnode_probe.cu timing_probe.cu wtime_shim.c torch_regions.py overlap.py; do
  cp benches/gpu/$f .devbin/
done
cp -r graphs .devbin/graphs
# The CUDA library-kernel test (run.sh's linalg step) and the default device memory cap
# test (tests/cuda_cap.rs; run.sh's gputest step runs both): always.
mkdir -p .devbin/tests
cargo test --release --no-default-features --features cuda --no-run --test cuda_library --test cuda_cap
for t in cuda_library cuda_cap; do
  bin=$(ls -t "$T"/release/deps/$t-* 2>/dev/null | grep -v '\.d$' | head -1)
  [ -n "$bin" ] && strip -o .devbin/tests/$t "$bin"
done
# The application examples (run.sh's examples step): heat and pipeline, which take their
# plugin from OFFLOAD_PLUGIN.
cargo build --release --no-default-features --features cuda --example heat --example pipeline
mkdir -p .devbin/examples
for e in heat pipeline; do strip -o .devbin/examples/$e "$T"/release/examples/$e; done
# TESTS="name ...": test binaries of `cargo test --release --features cuda --no-run` for
# run.sh's gputest step (the newest binary of each name).
if [ -n "${TESTS:-}" ]; then
  cargo test --release --no-default-features --features cuda --no-run
  for t in $TESTS; do
    bin=$(ls -t "$T"/release/deps/$t-* 2>/dev/null | grep -v '\.d$' | head -1)
    [ -n "$bin" ] && strip -o .devbin/tests/$t "$bin"
  done
fi
for v in 16 19; do cp -r ../shared/baselines/libomptarget-$v .devbin/; done
chmod -R u+w .devbin
du -sh .devbin

#!/usr/bin/env bash
# Regenerates the Task Bench reference dumps of this folder from Task Bench's own code
# (StanfordLegion/task-bench, core/; commit bf4ad19 was used): builds core/ with dump.cc,
# whose main is `App app(argc, argv); app.verbose = 2; app.display();`, and writes each
# configuration's display (points, dependencies and reverse dependencies per timestep) to
# NAME.txt, the first line being the flags. tests/taskbench_patterns.rs compares
# model::taskbench against them.
# Usage: gen.sh TASK_BENCH_CHECKOUT   (needs g++ and gcc)
set -euo pipefail
src=${1:?usage: gen.sh TASK_BENCH_CHECKOUT}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$src"/core/*.cc "$src"/core/*.c "$src"/core/*.h "$tmp"/
cp "$here/dump.cc" "$tmp"/
(cd "$tmp" && gcc -O1 -c core_random.c siphash.c &&
  g++ -O1 -std=c++11 -o dump dump.cc core.cc core_c.cc core_kernel.cc timer.cc core_random.o siphash.o)
while read -r name flags; do
  [ -z "$name" ] && continue
  { echo "$flags"; "$tmp/dump" $flags; } > "$here/$name.txt"
done <<'LIST'
trivial -type trivial -width 4 -steps 4
no_comm -type no_comm -width 5 -steps 4
stencil_1d -type stencil_1d -width 6 -steps 4
stencil_1d_periodic -type stencil_1d_periodic -width 5 -steps 4
dom -type dom -width 4 -steps 6
dom_wide -type dom -width 6 -steps 5
tree -type tree -width 8 -steps 5
tree_odd -type tree -width 6 -steps 4
fft -type fft -width 8 -steps 6
fft_odd -type fft -width 5 -steps 5
all_to_all -type all_to_all -width 4 -steps 4
nearest -type nearest -width 7 -steps 4 -radix 3
nearest_even -type nearest -width 7 -steps 4 -radix 4
nearest_none -type nearest -width 4 -steps 4 -radix 0
spread -type spread -width 8 -steps 6 -radix 3 -period 3
spread_2 -type spread -width 6 -steps 5 -radix 2 -period 2
random_nearest -type random_nearest -width 8 -steps 6 -radix 5 -period 3 -fraction 0.5
random_nearest_sparse -type random_nearest -width 8 -steps 5 -radix 7 -period 2 -fraction 0.25
random_nearest_g1 -type trivial -width 4 -steps 4 -and -type random_nearest -width 8 -steps 5 -radix 5 -period 3 -fraction 0.5
LIST

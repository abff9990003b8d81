#!/usr/bin/env bash
# Regenerates viz/: the DOT and SVG of every graph in graphs/ (default policy), and prints
# how long Graphviz's `dot` takes to lay out each one.
#
#   viz/NAME.dot, .svg          the view `offload-sched dot` picks by default (`--view
#                               auto`): the op view up to 300 ops, the region view above
#   viz/NAME.regions.dot, .svg  also the region view of each WfCommons workflow whose
#                               default view is the op view (so viz/ holds the region
#                               view of every workflow)
#
# The list and the DOT text come from one place, tests/viz_drift.rs (which CI runs to
# check that viz/ is not stale): with UPDATE_VIZ=1 it writes every DOT file that differs
# and removes those no graph makes; this script then renders every DOT file to SVG.
#
# Every layout should take under 10 s of CPU time (user + system of `dot`, so the figure
# does not depend on what else the machine runs; the wall time is printed beside it); a
# slower one is reported (and the script exits 1). This limit is the script's own check
# of the DOT writer's layout limits, not a test: no test times Graphviz.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p viz
UPDATE_VIZ=1 cargo test --release --quiet -p offload-sched --test viz_drift -- --nocapture
# An SVG whose DOT file is gone.
for svg in viz/*.svg; do
  [ -e "${svg%.svg}.dot" ] || rm -f "$svg"
done
slow=0

# render NAME.dot NAME.svg: lays out with `dot -Tsvg`, prints the CPU and wall seconds
# it took.
render() {
  local in=$1 out=$2 flags=()
  if [ "$(grep -c -- "->" "$in")" -gt 3000 ]; then
    # Large graphs: straight edges and bounded crossing minimisation, so the layout
    # finishes in seconds rather than minutes.
    flags=(-Gnslimit=1 -Gnslimit1=1 -Gmclimit=0.05 -Gsplines=line -Gremincross=false)
  fi
  local times secs wall
  # bash's `time` reports the child's user and system CPU seconds and the wall seconds.
  times=$({ TIMEFORMAT='%U %S %R'; time dot "${flags[@]}" -Tsvg "$in" -o "$out"; } 2>&1)
  secs=$(awk -v t="$times" 'BEGIN { split(t, a, " "); printf "%.2f", a[1] + a[2] }')
  wall=$(awk -v t="$times" 'BEGIN { split(t, a, " "); printf "%.2f", a[3] }')
  local view
  view=$(sed -n 's/.*policy=[a-z-]* (\([a-z]*\) view).*/\1/p' "$in" | head -n1)
  printf '%-40s %-8s %6d lines %7s s CPU %7s s wall%s\n' "$out" "${view:-ops}" \
    "$(wc -l <"$in")" "$secs" "$wall" "${flags[*]:+  (fast layout)}"
  if awk -v s="$secs" 'BEGIN { exit !(s >= 10) }'; then
    echo "  ^ over 10 s of CPU time" >&2
    slow=1
  fi
}

for f in viz/*.dot; do
  render "$f" "${f%.dot}.svg"
done
exit $slow

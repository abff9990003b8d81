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
# Every layout should take under 10 s; a slower one is reported (and the script exits 1).
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

# render NAME.dot NAME.svg: lays out with `dot -Tsvg`, prints the seconds it took.
render() {
  local in=$1 out=$2 flags=()
  if [ "$(grep -c -- "->" "$in")" -gt 3000 ]; then
    # Large graphs: straight edges and bounded crossing minimisation, so the layout
    # finishes in seconds rather than minutes.
    flags=(-Gnslimit=1 -Gnslimit1=1 -Gmclimit=0.05 -Gsplines=line -Gremincross=false)
  fi
  local t0 t1 secs
  t0=$(date +%s%N)
  dot "${flags[@]}" -Tsvg "$in" -o "$out"
  t1=$(date +%s%N)
  secs=$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.2f", ns / 1e9 }')
  local view
  view=$(sed -n 's/.*policy=[a-z-]* (\([a-z]*\) view).*/\1/p' "$in" | head -n1)
  printf '%-40s %-8s %6d lines %7s s%s\n' "$out" "${view:-ops}" "$(wc -l <"$in")" "$secs" \
    "${flags[*]:+  (fast layout)}"
  if awk -v s="$secs" 'BEGIN { exit !(s >= 10) }'; then
    echo "  ^ slower than 10 s" >&2
    slow=1
  fi
}

for f in viz/*.dot; do
  render "$f" "${f%.dot}.svg"
done
exit $slow

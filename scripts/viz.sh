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
# Every layout should take under 10 s; a slower one is reported (and the script exits 1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release --quiet
bin="${CARGO_TARGET_DIR:-target}"/release/offload-sched
mkdir -p viz
rm -f viz/*.regions.dot viz/*.regions.svg
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

for f in graphs/*.toml; do
  n=$(basename "$f" .toml)
  "$bin" dot "$f" -o "viz/$n.dot"
  render "viz/$n.dot" "viz/$n.svg"
  case "$n" in
  montage-* | 1000genome-* | srasearch-* | helloworld-*)
    if ! grep -q '(regions view)' "viz/$n.dot"; then
      "$bin" dot "$f" --view regions -o "viz/$n.regions.dot"
      render "viz/$n.regions.dot" "viz/$n.regions.svg"
    fi
    ;;
  esac
done
exit $slow

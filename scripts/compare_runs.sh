#!/usr/bin/env bash
# Compares two builds of the CLI on every graph in graphs/ that both trees have:
# `offload-sched run --plugin host GRAPH [EXTRA...]` (default options otherwise), REPS runs
# per build, the two builds alternating (before, after, before, after, ...), and prints
# the median (or minimum, STAT) wall and span of each, with after/before ratios (> 1: after
# is slower).
#
#   scripts/compare_runs.sh BEFORE_BIN AFTER_BIN [BEFORE_GRAPHS_DIR] [-- EXTRA ARGS]
#
# BEFORE_BIN / AFTER_BIN: two `offload-sched` binaries (e.g. a worktree of the base
# commit built with `cargo build --release -p offload-sched-cli --bin offload-sched`, and
# this tree's target/release/offload-sched). BEFORE_GRAPHS_DIR: the base tree's graphs/
# (a graph only this tree has is skipped); default: this tree's. REPS (env, default 3);
# GRAPHS (env): a space-separated list of graph names to restrict to (e.g. "jacobi saxpy").
# STAT (env): `median` (default) or `min` of the runs (the minimum is the steadier figure
# on a machine shared with other work: load only ever adds time).
# A run that fails prints `fail` in its column. Each run's figures are the run summary's
# first two lines ("wall X ms", "span Y ms"), converted to ms.
set -euo pipefail
cd "$(dirname "$0")/.."
before=$1
after=$2
shift 2
base_graphs=graphs
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  base_graphs=$1
  shift
fi
[ "${1:-}" = "--" ] && shift
extra=("$@")
reps=${REPS:-3}

# ms VALUE UNIT: the value in ms.
to_ms() {
  awk -v v="$1" -v u="$2" 'BEGIN {
    f = (u == "s") ? 1000 : (u == "µs" || u == "us") ? 0.001 : (u == "ns") ? 1e-6 : 1;
    printf "%.3f", v * f }'
}

# one BIN GRAPH: prints "WALL SPAN" in ms, or "fail fail"; SPAN is "-" for a replayed run
# (its summary has no span: ops are not timed one by one).
one() {
  local out wall span
  if ! out=$("$1" run --plugin host "$2" "${extra[@]}" 2>&1); then
    echo "fail fail"
    return
  fi
  wall=$(grep -o 'wall [0-9.]* [µmun]*s' <<<"$out" | head -1 | awk '{print $2, $3}' || true)
  span=$(grep -o '^span [0-9.]* [µmun]*s' <<<"$out" | head -1 | awk '{print $2, $3}' || true)
  [ -n "$wall" ] || { echo "fail fail"; return; }
  if [ -n "$span" ]; then span=$(to_ms $span); else span=-; fi
  echo "$(to_ms $wall) $span"
}

median() { tr ' ' '\n' | { grep -v -e '^$' -e '^-$' || true; } | sort -g | awk -v stat="${STAT:-median}" '{a[NR]=$1} END {
  if (NR == 0) print "-"; else if (stat == "min") print a[1]; else if (NR % 2) print a[(NR+1)/2];
  else printf "%.3f\n", (a[NR/2] + a[NR/2+1]) / 2 }'; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {
  if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/ || a == 0) print "-"; else printf "%.2f", b / a }'; }

printf '| graph | wall before ms | wall after ms | ratio | span before ms | span after ms | ratio |\n'
printf '|---|---|---|---|---|---|---|\n'
for g in graphs/*.toml; do
  name=$(basename "$g" .toml)
  [ -e "$base_graphs/$name.toml" ] || continue
  if [ -n "${GRAPHS:-}" ] && ! grep -qw -- "$name" <<<"$GRAPHS"; then continue; fi
  bw=() bs=() aw=() as=()
  for _ in $(seq "$reps"); do
    read -r w s < <(one "$before" "$base_graphs/$name.toml")
    [ "$w" = fail ] || { bw+=("$w"); bs+=("$s"); }
    read -r w s < <(one "$after" "$g")
    [ "$w" = fail ] || { aw+=("$w"); as+=("$s"); }
  done
  mbw=$(echo "${bw[*]:-}" | median) mbs=$(echo "${bs[*]:-}" | median)
  maw=$(echo "${aw[*]:-}" | median) mas=$(echo "${as[*]:-}" | median)
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$mbw" "$maw" \
    "$(ratio "$mbw" "$maw")" "$mbs" "$mas" "$(ratio "$mbs" "$mas")"
done

# Sourced by the GPU scripts in this folder (they are run from a copy of it, .devbin/).
# omp_bundle: the libomptarget-16 bundle from ../shared/baselines, copied next to the
# script, to /tmp/omp, with the two plugin symlinks that the copy into .devbin flattened
# into small text files made links again (run.sh then finds the CUDA plugins).
omp_bundle() {
  rm -rf /tmp/omp && cp -r "$D"/libomptarget-16 /tmp/omp && chmod -R u+w /tmp/omp
  (cd /tmp/omp && rm -f libomptarget.rtl.cuda.nextgen.so && ln -s libomptarget.rtl.cuda.nextgen.so.16 libomptarget.rtl.cuda.nextgen.so && cd legacy && rm -f libomptarget.rtl.cuda.so && ln -s libomptarget.rtl.cuda.so.16 libomptarget.rtl.cuda.so)
}

# graph_checks BIN: every graph in $D/graphs under per-op, per-region, minimal and
# --random-streams 7 on ${PLUGIN:-cuda} with --check (and --compare-host, except for the
# WfCommons workflows, whose spins are scaled down); prints a FAIL line per failure (and
# an ok line per pass with VERBOSE=1), then "graphs: P passed, F failed".
graph_checks() {
  local bin=$1 pass=0 fail=0 f n extra p out
  for f in "$D"/graphs/*.toml; do
    n=$(basename "$f" .toml)
    extra="--compare-host --rel-tol 1e-5"
    case $n in helloworld*|srasearch*|1000genome*|montage*) extra="--spin-scale 0.05 --rel-tol 1e-5";; esac
    for p in "--policy per-op" "--policy per-region" "--policy minimal" "--random-streams 7"; do
      if out=$(timeout 60 "$bin" run "$f" --plugin "${PLUGIN:-cuda}" --check $extra $p 2>&1); then
        pass=$((pass+1)); [ "${VERBOSE:-0}" = 1 ] && echo "ok $n $p: $(echo "$out" | head -1 | cut -c1-200)"
      else
        fail=$((fail+1)); echo "FAIL $n $p: $(echo "$out" | tail -2)"
      fi
    done
  done
  echo "graphs: $pass passed, $fail failed"
}

# correctness_checks: with $B (offload-bench), $O (offload-sched), $L (log folder) and a
# `stamp` function set, on ${PLUGIN:-cuda}: bench --check (built-in kernels, fault
# injection) into $L/check.txt, then graph_checks and compute-sanitizer memcheck and
# racecheck on three small graphs into $L/graphs.txt, each summarised by one stamp line.
correctness_checks() {
  timeout 150 "$B" --plugin "${PLUGIN:-cuda}" --check > "$L"/check.txt 2>&1; echo "rc=$?" >> "$L"/check.txt
  stamp "check: $(grep -E 'batch_edges|fault check|rc=' "$L"/check.txt | cut -c1-300 | tr '\n' ' ')"
  {
    graph_checks "$O"
    local n t
    for n in saxpy case_e02 regions64; do
      for t in memcheck racecheck; do
        timeout 60 compute-sanitizer --tool $t --error-exitcode 9 "$O" run "$D"/graphs/$n.toml --plugin "${PLUGIN:-cuda}" --check --random-streams 3 > /tmp/cs.txt 2>&1
        echo "sanitizer $n $t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/cs.txt | tr '\n' ' ' | cut -c1-200)"
      done
    done
  } > "$L"/graphs.txt 2>&1
  stamp "$(grep -E '^graphs:' "$L"/graphs.txt); sanitizer rc=0: $(grep -c 'rc=0' "$L"/graphs.txt)/6; $(grep FAIL "$L"/graphs.txt | head -3)"
}

# graph_times BIN: every graph in $D/graphs under per-op, per-region and minimal on
# ${PLUGIN:-cuda}, ${REPEAT:-3} runs each (a process per run; WfCommons spins scaled by
# ${SPIN:-0.05}); one line per graph and policy with the run's wall ms (setup included,
# from the run summary), then "SLOWER" lines where minimal's median is above another
# policy's.
graph_times() {
  local bin=$1 f n p i out ms spin
  for f in "$D"/graphs/*.toml; do
    n=$(basename "$f" .toml); spin=""
    case $n in helloworld*|srasearch*|1000genome*|montage*) spin="--spin-scale ${SPIN:-0.05}";; esac
    declare -A med=()
    for p in per-op per-region minimal; do
      ms=""
      for i in $(seq 1 "${REPEAT:-3}"); do
        out=$(timeout 120 "$bin" run "$f" --plugin "${PLUGIN:-cuda}" --policy $p $spin 2>&1 | head -1)
        ms="$ms $(echo "$out" | sed -n 's/.*wall \([0-9.]*\) ms.*/\1/p')"
      done
      med[$p]=$(echo $ms | tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
      echo "$n $p wall_ms:$ms median ${med[$p]}"
    done
    awk -v m="${med[minimal]}" -v a="${med[per-op]}" -v b="${med[per-region]}" -v n="$n" \
      'BEGIN{ if (m > a || m > b) print "SLOWER " n ": minimal " m " per-op " a " per-region " b }'
    unset med
  done
}

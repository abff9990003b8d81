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

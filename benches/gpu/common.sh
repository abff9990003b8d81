# Helpers sourced by run.sh (both run from the copy in .devbin/ on the GPU machine).
# They expect $D (the folder holding the binaries, graphs/ and the baselines), $L (the log
# folder), $B (offload-bench), $O (offload-sched) and a `stamp` function (one summary line
# into $L/steps.txt); ${PLUGIN:-cuda} picks the plugin. Nothing here names a machine path
# other than /tmp.

# omp_bundle: the libomptarget-16 bundle (../shared/baselines, copied into .devbin by
# prepare.sh) to /tmp/omp, with its two plugin symlinks made links again: the copy into
# shared/ flattened them into small text files holding their targets, and LLVM 16
# libomptarget dlopens exactly those unversioned names (then finds 0 devices).
omp_bundle() {
  rm -rf /tmp/omp && cp -r "$D"/libomptarget-16 /tmp/omp && chmod -R u+w /tmp/omp
  (cd /tmp/omp && rm -f libomptarget.rtl.cuda.nextgen.so && ln -s libomptarget.rtl.cuda.nextgen.so.16 libomptarget.rtl.cuda.nextgen.so && cd legacy && rm -f libomptarget.rtl.cuda.so && ln -s libomptarget.rtl.cuda.so.16 libomptarget.rtl.cuda.so)
}

# omp19_bundle: the libomptarget-19 bundle (blocked_matmul for `bench dag`) to /tmp/omp19.
omp19_bundle() {
  rm -rf /tmp/omp19 && cp -r "$D"/libomptarget-19 /tmp/omp19 && chmod -R u+w /tmp/omp19
}

# graph_args NAME: the extra `run` arguments for a graph: the WfCommons workflows
# (their spin kernels take seconds, on the host plugin far longer) are scaled by
# ${SPIN:-0.05} and checked against the reference interpreter only; every other graph is
# also compared with the host plugin.
graph_args() {
  case $1 in
    helloworld*|srasearch*|1000genome*|montage*) echo "--spin-scale ${SPIN:-0.05} --rel-tol 1e-5";;
    *) echo "--compare-host --rel-tol 1e-5";;
  esac
}

# graph_checks BIN: every graph in $D/graphs under per-op, per-region, minimal,
# --random-streams 7 and traced (--trace: the CUDA plugin's op timing, its stamped copy
# batches and built-in kernels) with --check (graph_args added); a graph that declares
# more `devices` than the machine has GPUs is skipped (a SKIP line); prints a FAIL line
# per failure (and an ok line per pass with VERBOSE=1), then "graphs: P passed, F failed,
# S skipped".
graph_checks() {
  local bin=$1 pass=0 fail=0 skip=0 f n p out want gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  for f in "$D"/graphs/*.toml; do
    n=$(basename "$f" .toml)
    want=$(sed -n 's/^devices *= *\([0-9]*\).*/\1/p' "$f" | head -1)
    if [ -n "$want" ] && [ "$want" -gt "$gpus" ]; then
      skip=$((skip+1)); echo "SKIP $n: needs $want devices, this machine has $gpus"; continue
    fi
    for p in "--policy per-op" "--policy per-region" "--policy minimal" "--random-streams 7" \
             "--trace /tmp/graph-check-trace.json"; do
      # shellcheck disable=SC2046
      if out=$(timeout 60 "$bin" run "$f" --plugin "${PLUGIN:-cuda}" --check $(graph_args "$n") $p 2>&1); then
        pass=$((pass+1)); [ "${VERBOSE:-0}" = 1 ] && echo "ok $n $p: $(echo "$out" | head -1 | cut -c1-200)"
      else
        fail=$((fail+1)); echo "FAIL $n $p: $(echo "$out" | tail -2)"
      fi
    done
  done
  echo "graphs: $pass passed, $fail failed, $skip skipped"
}

# correctness_checks: bench --check (every built-in kernel × 5 element types and the
# batch_edges program, 3 policies × {1, 4} streams × {serial, per-stream} issue, then the
# fault-injection check) into $L/check.txt, then graph_checks into $L/graphs.txt; one
# stamp line each.
correctness_checks() {
  timeout 150 "$B" --plugin "${PLUGIN:-cuda}" --check > "$L"/check.txt 2>&1; echo "rc=$?" >> "$L"/check.txt
  stamp "check: $(grep -E 'batch_edges|fault check|rc=' "$L"/check.txt | cut -c1-300 | tr '\n' ' ')"
  graph_checks "$O" > "$L"/graphs.txt 2>&1
  stamp "$(grep -E '^graphs:' "$L"/graphs.txt) $(grep FAIL "$L"/graphs.txt | head -3)"
}

# sanitizer_checks: compute-sanitizer on ${SANITIZE_GRAPHS:-saxpy case_e02 regions64}, each
# run `--check --random-streams 3 ${SANITIZE_ARGS}` (e.g. "--trace /tmp/t.json"): memcheck, memcheck with the device-block cache off
# (OFFLOAD_CUDA_DEV_CACHE=0, so that freed blocks really are freed), racecheck, synccheck.
# One line per run into $L/sanitize.txt (rc 0: no error and the check passed; 9: the tool
# found errors), each run's whole output in $L/cs-GRAPH-TOOL.txt; one stamp line.
sanitizer_checks() {
  local n t tool env ok=0 all=0 log rc
  : > "$L"/sanitize.txt
  for n in ${SANITIZE_GRAPHS:-saxpy case_e02 regions64}; do
    for t in memcheck memcheck-nocache racecheck synccheck; do
      tool=${t%-nocache}; env=""; [ "$t" != "$tool" ] && env="OFFLOAD_CUDA_DEV_CACHE=0"
      log="$L"/cs-$n-$t.txt
      env $env timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$O" run "$D"/graphs/$n.toml --plugin "${PLUGIN:-cuda}" --check --random-streams 3 ${SANITIZE_ARGS:-} > "$log" 2>&1
      rc=$?
      all=$((all+1)); [ $rc = 0 ] && ok=$((ok+1))
      echo "$n $t rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tr '\n' ' ' | cut -c1-200)" >> "$L"/sanitize.txt
    done
  done
  stamp "sanitize: rc=0 in $ok/$all runs; $(grep -v ' rc=0 ' "$L"/sanitize.txt | head -3 | tr '\n' ' ')"
}

# graph_times BIN: every graph in $D/graphs under per-op, per-region and minimal on
# ${PLUGIN:-cuda}, ${REPEAT:-3} runs each (a process per run; WfCommons spins scaled by
# ${SPIN:-0.05}); one line per graph and policy with the run's wall ms (setup included,
# from the run summary), then "SLOWER" lines where minimal's median is above another
# policy's.
graph_times() {
  local bin=$1 f n p out ms spin
  for f in "$D"/graphs/*.toml; do
    n=$(basename "$f" .toml); spin=""
    case $n in helloworld*|srasearch*|1000genome*|montage*) spin="--spin-scale ${SPIN:-0.05}";; esac
    declare -A med=()
    for p in per-op per-region minimal; do
      ms=""
      for _ in $(seq 1 "${REPEAT:-3}"); do
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

# hostwait_times: graphs/host_write_during_kernel.toml (issue 15 point 9: a 64 MiB H2D, a
# 30 ms spin kernel behind it on the same stream, then a host task that rewrites the
# H2D's source) timed by `bench dag` on ${PLUGIN:-cuda}: first op issued → final host
# wait, median of ${REPS:-10} runs after one warm-up, spins unscaled, under each policy
# (and, on CUDA, without copy batching), in ${REPEAT:-3} processes. This build (the
# binaries in $D) and, with BINS=DIR, the build in DIR (e.g. the base commit's, where the
# host task waits for the whole stream, the spin included), alternating process by
# process. Each process's report goes to $L/hostwait-{new,old}-N.md; prints one line per
# process and variant, then a table: variant, this build's median ms (over the
# processes' medians), BINS's, BINS / this (> 1: this build is faster).
hostwait_times() {
  local g="$D"/graphs/host_write_during_kernel.toml builds=new b i md rows=/tmp/hostwait-rows.txt
  cp "$D"/offload-bench /tmp/offload-bench-new && chmod +x /tmp/offload-bench-new
  if [ -n "${BINS:-}" ]; then
    builds="new old"
    cp "$BINS"/offload-bench /tmp/offload-bench-old && chmod +x /tmp/offload-bench-old
  fi
  : > $rows
  for i in $(seq 1 "${REPEAT:-3}"); do
    for b in $builds; do
      md=$L/hostwait-$b-$i.md
      # fanout at width 1 is the smallest built-in DAG (`--dags` takes no empty list).
      timeout 300 /tmp/offload-bench-$b dag --plugin "${PLUGIN:-cuda}" --dags fanout --width 1 \
        --graphs "$g" --spin-scale 1 --reps "${REPS:-10}" --out "$md" > /dev/null 2> "${md%.md}.err"
      echo "$b process $i rc=$?"
      # The table rows of the graph (11 fields; the ratio rows have 7): variant, µs/region.
      awk -F'|' -v b=$b 'NF == 11 && $2 ~ /host_write_during_kernel/ {
          v = $3; gsub(/^ +| +$/, "", v); ms = $9 / 1000
          printf "%s|%s|%.3f\n", b, v, ms }' "$md" | tee -a $rows
    done
  done
  echo
  echo "| variant | this build ms | BINS ms | BINS / this |"
  echo "|---|---|---|---|"
  awk -F'|' '
    function med(s,  a, n, t, i, j) { n = split(s, a, " ")
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n ? a[int((n + 1) / 2)] : "" }
    { ms[$1 SUBSEP $2] = ms[$1 SUBSEP $2] " " $3; if (!($2 in seen)) { seen[$2] = 1; order[++k] = $2 } }
    END { for (i = 1; i <= k; i++) { v = order[i]; n = med(ms["new" SUBSEP v]); o = med(ms["old" SUBSEP v])
        printf "| %s | %s | %s | %s |\n", v, n, (o == "" ? "–" : o), (o == "" || n == 0 ? "–" : sprintf("%.2f", o / n)) } }' $rows
}

# trace_overhead: what tracing costs (issue 16 point 2): the blocked-matmul DAG (`bench
# dag --dags matmul`, n 256, bs 16: 4096 regions) on the CUDA plugin untraced (`--plugin
# cuda`) and with the timing `run --trace` turns on (`--plugin cuda-timing`: every kernel,
# engine copy and copy batch timed with events, copy batching on), alternating process by
# process, ${REPEAT:-3} processes each, ${REPS:-10} runs per process (first op issued →
# final host wait, median). Each process's report goes to $L/trace-dag-{untraced,traced}-N.md
# (the `, no copy batching` rows run untimed in both and are left out); prints one line
# per process and policy, then a table: policy, untraced median ms per run (over the
# processes' medians), traced, traced / untraced (the target: ≤ 1.10).
trace_overhead() {
  local v p i md rows=/tmp/trace-overhead-rows.txt
  : > $rows
  for i in $(seq 1 "${REPEAT:-3}"); do
    for v in untraced traced; do
      p=cuda; [ $v = traced ] && p=cuda-timing
      md=$L/trace-dag-$v-$i.md
      timeout 300 $B dag --plugin $p --dags matmul --reps "${REPS:-10}" --out "$md" \
        > /dev/null 2> "${md%.md}.err"
      echo "$v process $i rc=$?"
      # The matmul rows (11 fields): policy, ms per run = regions × µs/region / 1000.
      awk -F'|' -v v=$v 'NF == 11 && $2 ~ /matmul/ && $3 !~ /no copy batching/ {
          p = $3; gsub(/^ +| +$/, "", p); ms = $4 * $9 / 1000
          printf "%s|%s|%.3f\n", v, p, ms }' "$md" | tee -a $rows
    done
  done
  echo
  echo "| policy | untraced ms | traced ms | traced / untraced |"
  echo "|---|---|---|---|"
  awk -F'|' '
    function med(s,  a, n, t, i, j) { n = split(s, a, " ")
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n ? a[int((n + 1) / 2)] : "" }
    { ms[$1 SUBSEP $2] = ms[$1 SUBSEP $2] " " $3; if (!($2 in seen)) { seen[$2] = 1; order[++k] = $2 } }
    END { for (i = 1; i <= k; i++) { p = order[i]; u = med(ms["untraced" SUBSEP p]); t = med(ms["traced" SUBSEP p])
        printf "| %s | %s | %s | %s |\n", p, (u == "" ? "–" : u), (t == "" ? "–" : t), (u == "" || t == "" || u == 0 ? "–" : sprintf("%.2f", t / u)) } }' $rows
}

# cupti_paths: sets CUPTI_INC and CUPTI_LIB (the folders of cupti.h and libcupti.so under
# the CUDA toolkit, or a pip wheel's), and CUPTI_TYPES (-D flags naming the newest kernel,
# memcpy and memset activity record types its cupti_activity.h defines); prints them.
cupti_paths() {
  local h l
  h=$(find /usr/local/cuda* /usr/lib/python3* /usr/local/lib/python3* -name cupti.h 2>/dev/null | head -1)
  l=$(find /usr/local/cuda* /usr/lib/python3* /usr/local/lib/python3* /usr/lib/x86_64-linux-gnu -name 'libcupti.so*' 2>/dev/null | sort | head -1)
  CUPTI_INC=$(dirname "$h" 2>/dev/null); CUPTI_LIB=$(dirname "$l" 2>/dev/null); CUPTI_TYPES=""
  [ -n "$h" ] || CUPTI_INC=""
  if [ -n "$CUPTI_INC" ]; then
    local a=$CUPTI_INC/cupti_activity.h
    for t in Kernel Memcpy Memset; do
      CUPTI_TYPES="$CUPTI_TYPES -D$(echo $t | tr a-z A-Z)_T=$(grep -oE "CUpti_Activity$t[0-9]+\b" $a | sort -V | tail -1)"
    done
  fi
  echo "cupti.h: ${h:-none}; libcupti: ${l:-none}; types:$CUPTI_TYPES"
}

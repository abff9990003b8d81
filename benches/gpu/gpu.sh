#!/bin/bash
# All GPU work of one call. Logs under /tmp/logs, packed into $OUT at the end.
set -u
D=$(cd "$(dirname "$0")" && pwd)
mkdir -p /work/dev /tmp/logs/graphs && cp $D/offload-sched $D/offload-bench $D/g1.sh /work/dev/ && chmod +x /work/dev/*
L=/tmp/logs; S=$(date +%s); STEPS=${STEPS:-abcde}
stamp(){ echo "[$(( $(date +%s) - S ))s] $*" | tee -a $L/steps.txt; }
pack(){ cd $L && tar czf $OUT/logs.tar.gz . ; cp $L/steps.txt $L/summary.txt $OUT/ 2>/dev/null; cp $L/bench.md $OUT/ 2>/dev/null; cp $L/a-check.txt $OUT/ 2>/dev/null; true; }
trap pack EXIT
{ nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,pstate --format=csv; uname -a; nproc; which compute-sanitizer; compute-sanitizer --version; python3 -c 'import torch; print(torch.__version__)'; } > $L/device.txt 2>&1
stamp "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
cp -r $D/graphs /tmp/graphs
if [[ $STEPS == *a* ]]; then
  timeout 150 /work/dev/offload-bench --plugin cuda --check > $L/a-check.txt 2>&1; echo "rc=$?" >> $L/a-check.txt
  stamp "(a) check: $(tail -3 $L/a-check.txt | tr '\n' ' ')"
fi
if [[ $STEPS == *b* ]]; then
  : > /tmp/jobs
  for g in /tmp/graphs/*.toml; do
    case $(basename $g) in 1000genome*|helloworld*|montage*|srasearch*) cmp="--check";; *) cmp="--check --compare-host";; esac
    echo "$g per-op --policy per-op $cmp --rel-tol 1e-5" >> /tmp/jobs
    echo "$g per-region --policy per-region $cmp --rel-tol 1e-5" >> /tmp/jobs
    echo "$g minimal --policy minimal $cmp --rel-tol 1e-5" >> /tmp/jobs
    echo "$g random7 --policy minimal --random-streams 7 $cmp --rel-tol 1e-5" >> /tmp/jobs
  done
  xargs -P 10 -L 1 /work/dev/g1.sh < /tmp/jobs | sort > $L/b-graphs.txt
  stamp "(b) graphs: $(wc -l < $L/b-graphs.txt) runs, $(grep -c ' rc=0 ' $L/b-graphs.txt) rc=0"
  grep -v ' rc=0 ' $L/b-graphs.txt | head -20 | tee -a $L/steps.txt
fi
if [[ $STEPS == *c* ]]; then
  : > /tmp/sjobs
  for g in saxpy pipeline case_e01; do
    echo "memcheck $g" >> /tmp/sjobs; echo "memcheck-nocache $g" >> /tmp/sjobs; echo "racecheck $g" >> /tmp/sjobs; echo "synccheck $g" >> /tmp/sjobs
  done
  cat > /work/dev/san.sh <<'EOS'
#!/bin/bash
t=$1; g=$2; tool=${t%-nocache}; env=""; [ "$t" != "$tool" ] && export OFFLOAD_CUDA_DEV_CACHE=0
timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 /work/dev/offload-sched run /tmp/graphs/$g.toml --plugin cuda --check --random-streams 3 > /tmp/logs/san_${t}_$g.txt 2>&1
echo "$t $g rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|check: ok|Error' /tmp/logs/san_${t}_$g.txt | tr '\n' ' ' | head -c 200)"
EOS
  chmod +x /work/dev/san.sh
  xargs -P 12 -L 1 /work/dev/san.sh < /tmp/sjobs | sort > $L/c-sanitizer.txt
  stamp "(c) sanitizer:"; cat $L/c-sanitizer.txt | tee -a $L/steps.txt
fi
if [[ $STEPS == *d* ]]; then
  for g in montage-2mass-005d regions64; do
    timeout 120 /work/dev/offload-sched run /tmp/graphs/$g.toml --plugin cuda --check --trace $L/trace-$g.json > $L/d-trace-$g.txt 2>&1
    echo "rc=$?" >> $L/d-trace-$g.txt
  done
  python3 $D/overlap.py $L/trace-montage-2mass-005d.json $L/trace-regions64.json > $L/d-overlap.txt 2>&1
  stamp "(d) trace:"; cat $L/d-trace-*.txt $L/d-overlap.txt | tee -a $L/steps.txt
fi
if [[ $STEPS == *e* ]]; then
  rm -rf /tmp/omp && cp -r $D/libomptarget-16 /tmp/omp && chmod -R u+w /tmp/omp
  { echo "before the fix (35-byte files holding the link target as text):"; ls -la $D/libomptarget-16/libomptarget.rtl.cuda.nextgen.so $D/libomptarget-16/legacy/libomptarget.rtl.cuda.so; cat $D/libomptarget-16/libomptarget.rtl.cuda.nextgen.so; echo; } > $L/e-omp-diag.txt 2>&1
  (cd /tmp/omp && rm -f libomptarget.rtl.cuda.nextgen.so && ln -s libomptarget.rtl.cuda.nextgen.so.16 libomptarget.rtl.cuda.nextgen.so && cd legacy && rm -f libomptarget.rtl.cuda.so && ln -s libomptarget.rtl.cuda.so.16 libomptarget.rtl.cuda.so)
  { echo "after the fix:"; ls -la /tmp/omp /tmp/omp/legacy; LIBOMPTARGET_DEBUG=1 INFO=1 SAXPY_R=2 SAXPY_REPS=1 timeout 60 bash /tmp/omp/run.sh 2>&1 | head -80; } >> $L/e-omp-diag.txt 2>&1
  stamp "(e) libomptarget probe: $(grep -E 'omp_get_num_devices|probe target|fatal' $L/e-omp-diag.txt | tr '\n' ' ')"
  left=$(( 570 - ($(date +%s) - S) ))
  stamp "(e) bench with ${left}s left"
  timeout $left /work/dev/offload-bench --plugin cuda --baselines /tmp/omp --python $D/torch_regions.py --out $L/bench.md > $L/e-bench-stdout.md 2> $L/e-bench-stderr.txt
  stamp "(e) bench rc=$?"
fi
{ cat $L/steps.txt; echo; cat $L/bench.md 2>/dev/null; } > $L/summary.txt

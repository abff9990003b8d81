#!/bin/bash
# The project's one GPU script: runs the steps named on the command line, in order, on the
# GPU machine, from the copy that `bash benches/gpu/prepare.sh` puts into .devbin/ (the
# `--features cuda` release binaries, this script, common.sh, graphs/, the libomptarget 16
# and 19 bundles, and the sources below). With the device `run` call (carry [".devbin"]):
#
#   OUT=$OUT bash .devbin/run.sh device check sanitize probe trace
#   OUT=$OUT REPEAT=3 bash .devbin/run.sh device dag dag-host saxpy
#   OUT=$OUT bash .devbin/run.sh device bench               (about 8 minutes: alone)
#
# Every step writes its files into /tmp/logs and prints one summary line. At exit $OUT
# gets steps.txt (the summary lines with elapsed seconds) and logs.tgz (all of /tmp/logs).
#
# Steps, and what each leaves in logs.tgz:
#   device    GPU, driver, CUDA, clocks, kernel, CPU count, tool versions -> device.txt
#   check     bench --check (every built-in kernel × f32/f64/i32/i64/u8 and batch_edges,
#             3 policies × {1, 4} streams × {serial, per-stream} issue, then fault
#             injection with and without copy batching) -> check.txt; every graph in
#             graphs/ under per-op, per-region, minimal, --random-streams 7 and --trace
#             with --check (and --compare-host except for the WfCommons workflows;
#             graphs needing more GPUs than there are skipped) -> graphs.txt
#   sanitize  compute-sanitizer memcheck, memcheck with the device-block cache off,
#             racecheck and synccheck on SANITIZE_GRAPHS (default saxpy case_e02
#             regions64), --check --random-streams 3 and SANITIZE_ARGS (e.g. --trace
#             /tmp/t.json) -> sanitize.txt (a line per run),
#             cs-GRAPH-TOOL.txt (each run's output)
#   probe     copy_probe.cu built with nvcc (-arch=${CUDA_ARCH:-sm_90}; -DBATCH adds
#             cudaMemcpyBatchAsync where the CUDA has it) and run at PROBE_SIZES (default
#             4096 65536 262144 1048576 bytes): µs per region of 64 saxpy regions with the
#             copies on the copy engines or on the SMs, issued serially, by a thread per
#             stream or replayed as a CUDA graph -> probe.txt, nvcc.txt
#   trace     offload-sched run --check --trace on TRACE_GRAPHS (default
#             montage-2mass-005d regions64), then overlap.py on the traces (busy time per
#             stream, time with >= 2 streams busy, copies overlapping kernels on other
#             streams) -> trace-GRAPH.json, trace-GRAPH.txt (the run summary), overlap.txt;
#             then what tracing costs: `bench dag --dags matmul` untraced (--plugin cuda)
#             and with the trace's timing (--plugin cuda-timing), alternating, REPEAT
#             processes each (default 3), median ms per run per policy and the ratio
#             (target <= 1.10)  -> trace-overhead.md, trace-dag-{untraced,traced}-N.md
#   dag       `bench dag` on the CUDA plugin (matmul, fan-out, wavefront, Montage and every
#             graph in graphs/ as a DAG), LLVM 19 blocked_matmul in the same call,
#             REPEAT times (default 3)                               -> dag-cuda-N.md
#   dag-host  the same on the host plugin (this machine's CPUs), REPEAT times -> dag-host-N.md
#   graphs    every graph in graphs/ under each policy on the CUDA plugin, REPEAT processes
#             each (spins scaled by SPIN, default 0.05), wall ms per run (setup included)
#                                                                    -> graphs-time.txt
#   session   `bench session` (one-shot Plan::run against Session runs: nothing bound,
#             bound slices (staged on CUDA), PinnedBuf, submit + wait; plain Rust) on the
#             CUDA plugin at 4 KiB, 4 MiB, 16 MiB and on the host plugin at 4 KiB, 4 MiB
#                                                     -> session-cuda.md, session-host.md
#   saxpy     the saxpy bench at 4 KiB, 30 reps, against libomptarget 16 (5 processes,
#             1 repetition each): a quick regression check           -> saxpy-4k.md
#   hostwait  graphs/host_write_during_kernel.toml (a 64 MiB H2D, a 30 ms kernel behind it,
#             a host task rewriting the H2D's source: issue 15 point 9) by `bench dag`
#             under each policy, REPEAT processes; with BINS=DIR also the build in DIR,
#             alternating, and a table of both (this build's binaries are .devbin's here,
#             whatever BINS says)                                    -> hostwait.txt,
#             hostwait-{new,old}-N.md
#   bench     the whole saxpy bench: 4 KiB, 1 MiB, 16 MiB, 30 reps (10 from 8 MiB), 2
#             warm-up, PyTorch (torch_regions.py, if python3 imports torch), libomptarget
#             16 over 11 processes × 10 repetitions each, every repetition timed through
#             wtime_shim.c (built here with cc; without it, 1 repetition per process);
#             stopped after LIMIT seconds (default 540)             -> bench-full.md
#   replay    `bench replay` on the CUDA plugin: saxpy 4 KiB and 1 MiB on 4 and 1 streams,
#             the Jacobi 128x128 x 1000 iterations, the blocked matmul n=256 bs=16, each by
#             a session with stream issue and replayed (bit-identical check), every graph
#             in graphs/ replayed against stream issue, and PyTorch's CUDAGraph of the saxpy
#             regions (if python3 imports torch); then compute-sanitizer memcheck,
#             racecheck and synccheck on a small replay               -> replay.md,
#             replay-cs.txt (a line per tool), replay-cs-TOOL.txt
#   hostnode  hostnode_probe.cu built with nvcc: 64 saxpy regions of 4 KiB with 1, 4 or 16
#             host steps between them, replayed as graph segments (launch, synchronize,
#             host step, next launch: what src/replay does) or as one graph with host nodes
#                                                                    -> hostnode.txt
#   timingprobe  timing_probe.cu built with nvcc against the CUPTI found on the machine
#             (cupti.h, libcupti.so; the newest kernel, memcpy and memset record types its
#             cupti_activity.h defines): the blocked-matmul issue pattern untimed, with
#             timing events (as the plugin's event timing) and with CUPTI activity records;
#             µs per region issued and to completion, the records counted, and the record
#             layouts (field offsets) of that CUPTI                   -> timingprobe.txt
#   linalg    issue 27 on the GPU: the CUDA library-kernel test binary (tests/cuda_library:
#             cuBLAS / cuSOLVER against the host plugin, replay bit-identical, non-SPD
#             potrf at its region) -> linalg-test.txt; `bench linalg` dpotrf N=32768,
#             cuSOLVER dpotrf first, then tiles 1024 and 2048, minimal, LINALG_STREAMS
#             streams (default 8), live and replayed
#             -> linalg-dpotrf.md; sgemm N=16384, cuBLAS sgemm first, then tiles 2048 and
#             4096 -> linalg-sgemm.md; both at N=8192, tile 1024, f64, residuals checked
#             -> linalg-check.md (LINALG_REPS, default 5; each .md is rewritten after
#             every row, so a timeout keeps the rows before it; .err files list each
#             row's wall time). Expected about 3 minutes; the timeouts bound it at 6.
#   linalg-tune  issue 27 point 4: dpotrf N=32768 tile 1024 under 4, 8, 16 streams x
#             look-ahead 0, 1, 2 (model::tiled::tiled_cholesky_lookahead), live, against
#             cuSOLVER dpotrf in the same call -> linalg-tune.md (.err: each row's wall
#             time). Expected about 3 min (10 rows of ~17 s); timeout 7 min.
#   linalg-prio issue 27: dpotrf N=32768 tile 1024, minimal, 8 and 16 streams x look-ahead
#             0, 1 x the panel (potrf, trsm, with look-ahead the updates feeding the next
#             panel) without and with OpenMP priority(1) (model::tiled_cholesky_priority:
#             the panel on a stream made at the greatest CUDA priority), live and replayed,
#             cuSOLVER dpotrf in the same call -> linalg-prio.md (its Targets section: the
#             priority panel's best row >= 0.90x cuSOLVER). About 5 min (16 rows of ~17 s);
#             timeout 560 s.
#   linalg-lu tiled dgetrf (no pivoting) tiles 1024, 2048, look-ahead 0 and 2, live and
#             replayed, against cuSOLVER dgetrf without pivoting, n=8192 (residuals
#             checked) and 32768 -> linalg-lu.md. Expected 3-4 min; timeout 400 s.
#   data      issue 28 on the GPU: `bench dag` blocked matmul (n 256, bs 16) with transfer
#             elision and `minimal, no-elide` in the same call (target: >= 1.3x)
#             -> data-dag.md; dpotrf N=32768 tile 2048 entered vs per-task-map (target:
#             mapped within 1.1x) -> data-styles.md; dpotrf N=65536 tile 2048, mapped,
#             uncapped and under a 16 GiB device memory cap with Belady and LRU (target:
#             capped >= 0.8x uncapped; holds ~69 GB of page-locked host memory)
#             -> data-cap.md. Expected 5-7 min; timeouts bound it at 9.5.
#   examples  issue 26's application examples on the CUDA plugin against plain Rust on
#             this machine's CPU, each checking that both give the same bits: heat at 512²
#             and 64² (1000 steps, a checkpoint every 100), the batch pipeline (100 and 20
#             batches of 4 MiB)                                       -> examples.txt
#   lanes     issue 26's 8-batch shape (graphs/batch_host_consumers.toml: 8 regions of a 20 ms
#             spin, each read by a 20 ms host task) on the host plugin (this machine's
#             CPUs) and the CUDA plugin, host lanes 1, 2, 8 × streams 4, 8, REPEAT runs
#             each: the run summary's span and bound lines              -> lanes.txt
#   taskbench issue 30 on the GPU: `bench taskbench` stencil_1d (TASKBENCH_STEPS steps, default 1000 as Task Bench's METG scripts; compute_bound,
#             iterations 2^TASKBENCH_TOP (default 18: about 0.5 ms per task since 212fd55
#             made the kernel do its rounds; 2^24 runs past the timeout) down to 1, runs min(step+1, 5)) on the CUDA plugin at width
#             4, 8 and 16 with as many streams, minimal, live and replayed, granularity
#             counted on 1 core (one GPU, as Task Bench's GPU figures); no peers (no MPI
#             or StarPU here) -> taskbench-wW.md, .err (per-count medians). Targets in
#             each .md: METG <= 5 us live, <= 2 us replayed. Expected ~1-3 min; timeout
#             TASKBENCH_TIMEOUT (240 s) per width. TASKBENCH_WIDTHS picks the widths (default "4 8 16");
#             TASKBENCH_ARGS adds `bench taskbench` options (e.g. `--entered`: the fields
#             entered once, so a task is its kernel and its events) and a suffix to the
#             file names (taskbench-w4-entered.md).
#   ranks     issue 29 point 5: distributed runs on the CUDA plugin, ranks as threads of
#             one process (sends and receives through the plugin's pinned host buffers),
#             each checked against the one-process reference (--check) with delay jitter:
#             graphs/cholesky_mapped.toml on 2 and 4 ranks, graphs/distributed/chain_ranks.toml
#             on 4; then the test binary tests/distribute_cuda when prepare.sh copied it
#             (TESTS="distribute_cuda")                               -> ranks.txt
#   mpi       issue 29 on this machine's CPUs: `bash benches/gpu/mpi-bundle.sh` (run here,
#             after prepare.sh) packs Debian's OpenMPI 4.1, StarPU-MPI's mpi_cholesky,
#             OpenBLAS and the MPI-enabled offload-bench into .devbin (this machine has
#             no MPI); the step unpacks them under /tmp/mpi (OPAL_PREFIX,
#             PMIX_INSTALL_PREFIX), checks `mpirun -np 2`, then `bench linalg --plugin
#             host --algorithms cholesky --ranks MPI_RANKS (default 1,2,4) --n MPI_N
#             (default 8192) --tiles 512`: ours beside mpi_cholesky, one BLAS worker per
#             rank, and weak scaling                                  -> mpi.txt, mpi-linalg.md
#   gputest   every test binary prepare.sh copied into tests/ (TESTS="name ..." there:
#             `cargo test --release --features cuda --no-run` binaries), run with
#             --test-threads 1                                        -> gputest.txt
# A/B of two builds in one call: BINS=DIR takes offload-sched and offload-bench from DIR
# instead of .devbin (e.g. a base commit's, copied there by hand); run the script once per
# build with its own OUT subfolder, alternating, and rm -rf /tmp/logs between runs.
# Other settings: PLUGIN (default cuda) for check, sanitize and graphs; REPS (bench dag
# --reps, default 10); DAG_ARGS (more `bench dag` arguments).
set -u
: "${OUT:?set OUT to the folder whose files come back}"
STEPS="device check sanitize probe trace dag dag-host graphs hostwait session saxpy bench replay hostnode timingprobe linalg linalg-tune linalg-prio linalg-lu data examples lanes taskbench ranks mpi gputest"
[ $# -gt 0 ] || { echo "usage: OUT=DIR bash run.sh STEP... (steps: $STEPS)" >&2; exit 2; }
for step in "$@"; do
  case " $STEPS " in *" $step "*) ;; *) echo "unknown step $step (steps: $STEPS)" >&2; exit 2;; esac
done
D=$(cd "$(dirname "$0")" && pwd); S=$(date +%s); L=/tmp/logs; mkdir -p $L
. "$D"/common.sh
stamp() { echo "[$(( $(date +%s) - S ))s] $*" | tee -a $L/steps.txt; }
# $OUT takes at most 8 files: steps.txt, and everything in one archive.
pack() { cp $L/steps.txt "$OUT"/ 2>/dev/null; tar czf "$OUT"/logs.tgz -C $L . 2>/dev/null; true; }
trap pack EXIT
B=/tmp/offload-bench; cp "${BINS:-$D}"/offload-bench $B && chmod +x $B
O=/tmp/offload-sched; cp "${BINS:-$D}"/offload-sched $O && chmod +x $O
REPEAT=${REPEAT:-3}
GRAPHS=$(ls "$D"/graphs/*.toml | tr '\n' ',' | sed 's/,$//')
DAG="--montage $D/graphs/montage-2mass-005d.toml --graphs $GRAPHS --reps ${REPS:-10}"

for step in "$@"; do
  case $step in
    device)
      { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,pstate --format=csv
        nvidia-smi | grep -m1 'CUDA Version'; uname -a; nproc
        compute-sanitizer --version | tail -1; ${NVCC:-nvcc} --version | tail -1
        python3 -c 'import torch; print("torch", torch.__version__)'; } > $L/device.txt 2>&1
      stamp "device: $(head -3 $L/device.txt | tr '\n' ' ' | cut -c1-300)";;
    check)
      correctness_checks;;
    sanitize)
      sanitizer_checks;;
    probe)
      A=${CUDA_ARCH:-sm_90}; N=${NVCC:-nvcc}
      if $N -O2 -arch=$A -DBATCH -o /tmp/copy_probe "$D"/copy_probe.cu -lpthread > $L/nvcc.txt 2>&1 ||
         $N -O2 -arch=$A -o /tmp/copy_probe "$D"/copy_probe.cu -lpthread >> $L/nvcc.txt 2>&1; then
        : > $L/probe.txt
        for b in ${PROBE_SIZES:-4096 65536 262144 1048576}; do
          timeout 120 /tmp/copy_probe $b >> $L/probe.txt 2>&1; echo "rc=$?" >> $L/probe.txt
        done
        stamp "probe: $(grep -E '^bytes|^(ce|smx) ' $L/probe.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-600)"
      else
        stamp "probe: nvcc failed: $(tail -2 $L/nvcc.txt | tr '\n' ' ')"
      fi;;
    trace)
      for g in ${TRACE_GRAPHS:-montage-2mass-005d regions64}; do
        timeout 120 $O run "$D"/graphs/$g.toml --plugin cuda --check --trace $L/trace-$g.json > $L/trace-$g.txt 2>&1
        echo "rc=$?" >> $L/trace-$g.txt
      done
      python3 "$D"/overlap.py $L/trace-*.json > $L/overlap.txt 2>&1
      stamp "trace: $(grep -hE '^rc=' $L/trace-*.txt | tr '\n' ' ')$(grep -E 'json:|>= 2 streams|copy on one' $L/overlap.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-500)"
      trace_overhead > $L/trace-overhead.md 2>&1
      stamp "trace overhead (matmul, traced / untraced): $(grep -E '^\| (per-op|per-region|minimal) ' $L/trace-overhead.md | tr -s ' ' | tr '\n' ' ' | cut -c1-400)";;
    dag)
      omp19_bundle
      for i in $(seq 1 $REPEAT); do
        timeout 500 $B dag --plugin cuda --baselines /tmp/omp19 $DAG ${DAG_ARGS:-} --out $L/dag-cuda-$i.md > /dev/null 2> $L/dag-cuda-$i.err
        stamp "dag cuda $i rc=$?: $(grep -E '^- matmul minimal|MISSED' $L/dag-cuda-$i.md | tr '\n' ' ' | cut -c1-600)"
      done;;
    dag-host)
      for i in $(seq 1 $REPEAT); do
        timeout 300 $B dag --plugin host $DAG ${DAG_ARGS:-} --out $L/dag-host-$i.md > /dev/null 2> $L/dag-host-$i.err
        stamp "dag host $i rc=$?: $(grep -E 'MISSED' $L/dag-host-$i.md | tr '\n' ' ' | cut -c1-600)"
      done;;
    graphs)
      graph_times $O > $L/graphs-time.txt 2>&1
      stamp "graphs: $(grep -c . $L/graphs-time.txt) rows; slower under minimal: $(grep -c SLOWER $L/graphs-time.txt)";;
    session)
      timeout 300 $B session --plugin cuda --sizes 1024,1048576,4194304 --reps 30 > $L/session-cuda.md 2> $L/session-cuda.err
      rc=$?
      timeout 200 $B session --plugin host --sizes 1024,1048576 --reps 30 > $L/session-host.md 2> $L/session-host.err
      stamp "session rc=$rc/$?: $(grep -c '^| ' $L/session-cuda.md) cuda rows, $(grep -c '^| ' $L/session-host.md) host rows";;
    hostwait)
      hostwait_times > $L/hostwait.txt 2>&1
      stamp "hostwait: $(grep -E '^\| (per-op|per-region|minimal)' $L/hostwait.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-600)";;
    saxpy)
      omp_bundle
      timeout 300 $B --plugin cuda --sizes 4096 --reps 30 --baselines /tmp/omp --baseline-runs 5 --out $L/saxpy-4k.md > /dev/null 2> $L/saxpy-4k.err
      stamp "saxpy 4k rc=$?: $(sed -n '/^Targets/,$p' $L/saxpy-4k.md | tr '\n' ' ' | cut -c1-300)";;
    replay)
      py=""; python3 -c 'import torch' > $L/torch.txt 2>&1 && py="--python $D/torch_regions.py"
      timeout 400 $B replay --plugin cuda --sizes 4096,1048576 --reps 30 --graphs "$D"/graphs $py > $L/replay.md 2> $L/replay.err
      rc=$?
      for tool in memcheck racecheck synccheck; do
        timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $B replay --plugin cuda --sizes 4096 \
          --regions 8 --iterations 20 --n 64 --bs 16 --reps 2 --warmup 1 > $L/replay-cs-$tool.txt 2>&1
        echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|errors' $L/replay-cs-$tool.txt | tail -1)" >> $L/replay-cs.txt
      done
      stamp "replay rc=$rc: $(grep -E '^\| (saxpy|jacobi|matmul)' $L/replay.md | cut -d'|' -f2,4,5,6,7 | tr -s ' ' | tr '\n' ' ' | cut -c1-700) $(grep -E 'replayed bit-identical' $L/replay.md) $(tr '\n' ' ' < $L/replay-cs.txt)";;
    hostnode)
      if ${NVCC:-nvcc} -O2 -arch=${CUDA_ARCH:-sm_90} -o /tmp/hostnode_probe "$D"/hostnode_probe.cu > $L/hostnode-nvcc.txt 2>&1; then
        timeout 120 /tmp/hostnode_probe > $L/hostnode.txt 2>&1
        stamp "hostnode rc=$?: $(tr '\n' ' ' < $L/hostnode.txt | cut -c1-400)"
      else
        stamp "hostnode: nvcc failed: $(tail -2 $L/hostnode-nvcc.txt | tr '\n' ' ')"
      fi;;
    timingprobe)
      cupti_paths > $L/timingprobe.txt 2>&1
      if [ -n "$CUPTI_INC" ] && ${NVCC:-nvcc} -O2 -arch=${CUDA_ARCH:-sm_90} -I"$CUPTI_INC" $CUPTI_TYPES \
           -o /tmp/timing_probe "$D"/timing_probe.cu -L"$CUPTI_LIB" -lcupti -Xlinker -rpath -Xlinker "$CUPTI_LIB" \
           >> $L/timingprobe.txt 2>&1; then
        timeout 200 /tmp/timing_probe ${PROBE_REPS:-15} >> $L/timingprobe.txt 2>&1
        stamp "timingprobe rc=$?: $(grep -E '^\| |CUPTI' $L/timingprobe.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-900)"
      else
        stamp "timingprobe: no CUPTI or nvcc failed: $(tail -3 $L/timingprobe.txt | tr '\n' ' ')"
      fi;;
    linalg)
      t="$D"/tests/cuda_library
      if [ -x "$t" ]; then
        (cd "$D" && timeout 150 "$t" --test-threads 1 > $L/linalg-test.txt 2>&1); echo "rc=$?" >> $L/linalg-test.txt
      else
        echo "no tests/cuda_library in .devbin (bash benches/gpu/prepare.sh builds it)" > $L/linalg-test.txt
      fi
      stamp "linalg test: $(grep -E '^(test result|rc=|no tests)|panicked' $L/linalg-test.txt | tr '\n' ' ' | cut -c1-400)"
      R="--reps ${LINALG_REPS:-5} --warmup 1"
      # Expected (benches/README-gpu.md, linalg): dpotrf ~85 s, sgemm ~20 s, check ~20 s.
      # dpotrf on LINALG_STREAMS streams (default 8: run 24 measured tile 1024 at 0.85x
      # cuSOLVER on 4 streams, 0.90-0.91x on 8, 0.88x on 16).
      timeout 170 $B linalg --plugin cuda --algorithms cholesky --precision f64 --n 32768 --tiles 1024,2048 \
        --streams ${LINALG_STREAMS:-8} --policies minimal --residual-max-n 0 $R --out $L/linalg-dpotrf.md > /dev/null 2> $L/linalg-dpotrf.err
      stamp "linalg dpotrf rc=$?: $(grep -E '^- GPU: dpotrf|^- wall time|^- note: incomplete' $L/linalg-dpotrf.md | tr '\n' ' ' | cut -c1-800) $(tail -2 $L/linalg-dpotrf.err | tr '\n' ' ' | cut -c1-300)"
      timeout 50 $B linalg --plugin cuda --algorithms gemm --precision f32 --n 16384 --tiles 2048,4096 \
        --policies minimal --residual-max-n 0 $R --out $L/linalg-sgemm.md > /dev/null 2> $L/linalg-sgemm.err
      stamp "linalg sgemm rc=$?: $(grep -E 'sgemm N=16384|^- wall time|^- note: incomplete' $L/linalg-sgemm.md | tr '\n' ' ' | cut -c1-500) $(tail -2 $L/linalg-sgemm.err | tr '\n' ' ' | cut -c1-300)"
      timeout 60 $B linalg --plugin cuda --algorithms cholesky,gemm --precision f64 --n 8192 --tiles 1024 \
        --policies minimal $R --out $L/linalg-check.md > /dev/null 2> $L/linalg-check.err
      stamp "linalg check (n=8192, residuals) rc=$?: $(grep -E '^\| d' $L/linalg-check.md | cut -d'|' -f2,4,5,6,9,10 | tr -s ' ' | tr '\n' ' ' | cut -c1-700) $(grep -E '^- wall time' $L/linalg-check.md)";;
    linalg-tune)
      # Issue 27 point 4: dpotrf N=32768, tile 1024 (0.85x cuSOLVER in run 21) under
      # 4, 8, 16 streams x look-ahead 0, 1, 2, live, cuSOLVER dpotrf first.
      R="--reps ${LINALG_REPS:-5} --warmup 1"
      timeout 420 $B linalg --plugin cuda --algorithms cholesky --precision f64 --n 32768 --tiles 1024 \
        --policies minimal --streams 4,8,16 --lookahead 0,1,2 --no-replay --residual-max-n 0 $R \
        --out $L/linalg-tune.md > /dev/null 2> $L/linalg-tune.err
      stamp "linalg tune rc=$?: $(grep -E '^\| dpotrf' $L/linalg-tune.md | cut -d'|' -f4,5,6 | tr -s ' ' | tr '\n' ' ' | cut -c1-1600)";;
    linalg-prio)
      # Issue 27: the panel at priority(1) on a high-priority stream against the same
      # rows without it, 8 and 16 streams x look-ahead 0, 1, live and replayed.
      R="--reps ${LINALG_REPS:-5} --warmup 1"
      timeout 560 $B linalg --plugin cuda --algorithms cholesky --precision f64 --n 32768 --tiles 1024 \
        --policies minimal --streams 8,16 --lookahead 0,1 --priority-panel 0,1 --residual-max-n 0 $R \
        --out $L/linalg-prio.md > /dev/null 2> $L/linalg-prio.err
      stamp "linalg prio rc=$?: $(grep -E '^\| dpotrf|priority panel \(best' $L/linalg-prio.md | cut -d'|' -f4,5,6 | tr -s ' ' | tr '\n' ' ' | cut -c1-2000)";;
    linalg-lu)
      # Issue 27: tiled dgetrf without pivoting against cuSOLVER dgetrf (devIpiv NULL);
      # n=8192 with residuals, n=32768 unchecked; live and replayed.
      R="--reps ${LINALG_REPS:-5} --warmup 1"
      timeout 400 $B linalg --plugin cuda --algorithms lu --precision f64 --n 8192,32768 --tiles 1024,2048 \
        --policies minimal --lookahead 0,2 --residual-max-n 8192 $R \
        --out $L/linalg-lu.md > /dev/null 2> $L/linalg-lu.err
      stamp "linalg lu rc=$?: $(grep -E '^\| dgetrf' $L/linalg-lu.md | cut -d'|' -f3,4,5,6,9 | tr -s ' ' | tr '\n' ' ' | cut -c1-1600)";;
    data)
      R="--reps ${LINALG_REPS:-5} --warmup 1"
      timeout 120 $B dag --plugin cuda --dags matmul --n 256 --bs 16 --reps ${REPS:-10} \
        --out $L/data-dag.md > /dev/null 2> $L/data-dag.err
      stamp "data dag rc=$?: $(grep -E 'matmul|MET|MISSED' $L/data-dag.md | grep -iE 'elide|H2D|MET|MISSED' | tr -s ' ' | tr '\n' ' ' | cut -c1-900)"
      timeout 150 $B linalg --plugin cuda --algorithms cholesky --precision f64 --n 32768 --tiles 2048 \
        --style entered,mapped --policies minimal --no-replay --residual-max-n 0 $R \
        --out $L/data-styles.md > /dev/null 2> $L/data-styles.err
      stamp "data styles rc=$?: $(grep -E '^\| dpotrf|mapped' $L/data-styles.md | cut -d'|' -f4,5,6 | tr -s ' ' | tr '\n' ' ' | cut -c1-900)"
      timeout 300 $B linalg --plugin cuda --algorithms cholesky --precision f64 --n 65536 --tiles 2048 \
        --style mapped --policies minimal --device-memory 16GiB --no-starpu --no-replay --residual-max-n 0 $R \
        --out $L/data-cap.md > /dev/null 2> $L/data-cap.err
      stamp "data cap rc=$?: $(grep -E '^\| dpotrf|cap|MET|MISSED' $L/data-cap.md | tr -s ' ' | tr '\n' ' ' | cut -c1-1400) $(tail -2 $L/data-cap.err | tr '\n' ' ' | cut -c1-300)";;
    examples)
      : > $L/examples.txt
      for a in "heat 512 1000 100" "heat 64 1000 100" "pipeline 100 1048576" "pipeline 20 1048576"; do
        read -r e args <<< "$a"
        (OFFLOAD_PLUGIN=${PLUGIN:-cuda} timeout 120 "$D"/examples/$e $args >> $L/examples.txt 2>&1); echo "rc=$?" >> $L/examples.txt
      done
      stamp "examples: $(tr '\n' ' ' < $L/examples.txt | cut -c1-900)";;
    lanes)
      : > $L/lanes.txt
      for p in host cuda; do pp=$p; [ $p = cuda ] && pp=cuda-timing   # span needs the op times
        for l in 1 2 8; do for st in 4 8; do for i in $(seq $REPEAT); do
        echo "== plugin $p lanes $l streams $st run $i" >> $L/lanes.txt
        timeout 60 $O run "$D"/graphs/batch_host_consumers.toml --plugin $pp --host-lanes $l --streams $st \
          --check 2>&1 | grep -E '^(span|busy)|rc=|error' >> $L/lanes.txt
      done; done; done; done
      stamp "lanes: $(grep -c '^span' $L/lanes.txt) runs; $(grep '^span' $L/lanes.txt | cut -d, -f1 | tr '\n' ' ' | cut -c1-700)";;
    taskbench)
      sfx=$(echo "$TASKBENCH_ARGS" | tr -s ' -' '-' | sed 's/-$//')
      for w in ${TASKBENCH_WIDTHS:-4 8 16}; do
        timeout ${TASKBENCH_TIMEOUT:-240} $B taskbench --plugin cuda --patterns stencil_1d --width $w --streams $w \
          --steps ${TASKBENCH_STEPS:-1000} --top-log2 ${TASKBENCH_TOP:-18} --points $(( ${TASKBENCH_TOP:-18} + 1 )) --max-reps 5 --no-peers $TASKBENCH_ARGS \
          --out $L/taskbench-w$w$sfx.md > /dev/null 2> $L/taskbench-w$w$sfx.err
        stamp "taskbench width $w $TASKBENCH_ARGS rc=$?: $(grep -E '^\| offload-sched [^|]* \| [^|]* µs|^- GPU' $L/taskbench-w$w$sfx.md | tr '\n' ' ' | cut -c1-600)"
      done;;
    ranks)
      : > $L/ranks.txt
      for a in "cholesky_mapped.toml 2" "cholesky_mapped.toml 4" "distributed/chain_ranks.toml 4"; do
        read -r g r <<< "$a"
        echo "== $g --ranks $r" >> $L/ranks.txt
        timeout 120 $O run "$D"/graphs/$g --plugin cuda --ranks $r --check --delay-jitter 5 >> $L/ranks.txt 2>&1
        echo "rc=$?" >> $L/ranks.txt
      done
      if [ -x "$D"/tests/distribute_cuda ]; then
        echo "== tests/distribute_cuda" >> $L/ranks.txt
        (cd "$D" && timeout 200 "$D"/tests/distribute_cuda --test-threads 1 >> $L/ranks.txt 2>&1); echo "rc=$?" >> $L/ranks.txt
      fi
      stamp "ranks: $(grep -E '^(== |rc=|test result)|check ok' $L/ranks.txt | tr '\n' ' ' | cut -c1-700)";;
    mpi)
      M=/tmp/mpi; : > $L/mpi.txt
      if [ ! -f "$D"/mpi.tar.xz ] || [ ! -x "$D"/mpi-bench ]; then
        stamp "mpi: no mpi.tar.xz / mpi-bench in .devbin (bash benches/gpu/mpi-bundle.sh)"; continue
      fi
      rm -rf $M && mkdir -p $M && tar xJf "$D"/mpi.tar.xz -C $M
      ln -sf orterun $M/usr/bin/mpirun
      export PATH=$M/usr/bin:$PATH OPAL_PREFIX=$M/usr PMIX_INSTALL_PREFIX=$M/usr/lib/x86_64-linux-gnu/pmix2
      export LD_LIBRARY_PATH=$M/usr/lib/x86_64-linux-gnu/openmpi/lib:$M/usr/lib/x86_64-linux-gnu/openblas-pthread:$M/usr/lib/x86_64-linux-gnu:$M/lib/x86_64-linux-gnu
      export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
      cp "$D"/mpi-bench $M/offload-bench && chmod +x $M/offload-bench
      { ldd --version | head -1; nproc; ldd $M/offload-bench 2>&1 | grep -E 'not found|mpi|openblas'; } >> $L/mpi.txt 2>&1
      timeout 60 mpirun --oversubscribe --bind-to none -np 2 --mca btl self,vader /bin/echo mpirun-ok >> $L/mpi.txt 2>&1
      echo "smoke rc=$?" >> $L/mpi.txt
      # A 2-rank run moves 1 MiB tiles through vader's single-copy (CMA) path; where the
      # sandbox refuses process_vm_readv, again with single copy off (both peers alike).
      sm() { timeout 120 $M/offload-bench linalg --plugin host --algorithms cholesky --precision f32 \
        --ranks 2 --n 2048 --tiles 512 --reps 5 --warmup 0 --starpu $M/usr/lib/x86_64-linux-gnu/starpu/examples >> $L/mpi.txt 2>&1; }
      sm; r=$?; echo "smoke linalg rc=$r" >> $L/mpi.txt
      if [ $r -ne 0 ]; then export OMPI_MCA_btl_vader_single_copy_mechanism=none; sm; echo "smoke linalg (single copy none) rc=$?" >> $L/mpi.txt; fi
      timeout ${MPI_TIMEOUT:-400} $M/offload-bench linalg --plugin host --algorithms cholesky --precision f32 \
        --ranks ${MPI_RANKS:-1,2,4} --n ${MPI_N:-8192} --tiles 512 --reps 5 --warmup 1 \
        --starpu $M/usr/lib/x86_64-linux-gnu/starpu/examples --out $L/mpi-linalg.md >> $L/mpi.txt 2>&1
      echo "linalg rc=$?" >> $L/mpi.txt
      stamp "mpi: $(grep -E 'rc=|GLIBC|not found' $L/mpi.txt | tr '\n' ' ' | cut -c1-300) $(grep -E 'MET|MISSED|^\| [0-9]' $L/mpi-linalg.md 2>/dev/null | tr -s ' ' | tr '\n' ' ' | cut -c1-1200)";;
    gputest)
      : > $L/gputest.txt
      for t in "$D"/tests/*; do
        [ -x "$t" ] || continue
        echo "== $(basename $t)" >> $L/gputest.txt
        (cd "$D" && timeout 200 "$t" --test-threads 1 >> $L/gputest.txt 2>&1); echo "rc=$?" >> $L/gputest.txt
      done
      stamp "gputest: $(grep -E '^(== |rc=|test result)' $L/gputest.txt | tr '\n' ' ' | cut -c1-600)";;
    bench)
      omp_bundle
      shim=""; py=""
      cc -O2 -shared -fPIC -o /tmp/wtime_shim.so "$D"/wtime_shim.c -ldl > $L/wtime_shim.txt 2>&1 &&
        shim="--wtime-shim /tmp/wtime_shim.so --baseline-reps 10"
      python3 -c 'import torch' > $L/torch.txt 2>&1 && py="--python $D/torch_regions.py"
      timeout ${LIMIT:-540} $B --plugin cuda --sizes 4096,1048576,16777216 --reps 30 --reps-large 10 --warmup 2 \
        --baselines /tmp/omp --baseline-runs 11 $shim $py --out $L/bench-full.md > /dev/null 2> $L/bench-full.err
      rc=$?; [ -n "$shim" ] && shim=yes || shim=no; [ -n "$py" ] && py=yes || py=no
      stamp "bench rc=$rc (wtime shim: $shim, PyTorch: $py): $(sed -n '/^Targets/,$p' $L/bench-full.md | tr '\n' ' ' | cut -c1-600)";;
  esac
done

#!/usr/bin/env bash
# Builds the peers `offload-bench taskbench` runs beside offload-sched: Task Bench's own
# MPI (nonblock, bulk_synchronous), OpenMP (main) and StarPU (main) implementations, from
# the sources vendored in third_party/task-bench (upstream commit bf4ad19, see its NOTICE),
# against Debian's OpenMPI 4.1 and StarPU 1.3 (libstarpu-dev), with the flags of the
# upstream Makefiles (-O3; core with -mavx2 -mfma where the CPU has them; OpenMP with
# -march=native; no BLAS kernel, ENABLE_BLAS=0 as upstream's default).
#
# Differences from upstream's build_all.sh, said here rather than hidden: StarPU is
# Debian's package (1.3.10, its generic configure), not a StarPU 1.3.4 built with
# --enable-fast --enable-maxnodes=1 --disable-cuda; the StarPU Makefile's
# $(STARPU_DIR)/lib paths are replaced by Debian's multiarch library folder.
#
# Output: target/task-bench/{mpi/nonblock,mpi/bulk_synchronous,openmp/main,starpu/main}
# (target/ is ignored by git). The sources are copied there and built there; nothing is
# written into third_party/. A peer that does not build is reported as FAILED with the
# tail of its log (target/task-bench/logs/*.log) and the script exits 1 after trying the
# others; nothing is faked. Not needed by the tests (scripts/setup.sh does not run it);
# without these binaries the bench reports the peers as missing.
#
# Usage: bash scripts/taskbench-peers.sh [BUILD_DIR]   (as root, or with sudo, for apt)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src="$root/third_party/task-bench"
out=${1:-"$root/target/task-bench"}
jobs=${JOBS:-2}

need=()
command -v mpicxx >/dev/null 2>&1 || need+=(libopenmpi-dev)
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v make >/dev/null 2>&1 || need+=(make)
[ -e /usr/include/starpu/1.3/starpu.h ] || need+=(libstarpu-dev)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "taskbench-peers: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
libdir="/usr/lib/$multiarch"

rm -rf "$out"
mkdir -p "$out/logs"
cp -r "$src/core" "$src/mpi" "$src/openmp" "$src/starpu" "$src/LICENSE.txt" "$src/NOTICE" "$out/"

failed=()
# build NAME LOG COMMAND...: runs COMMAND with its output in LOG; reports the outcome.
build() {
  local name=$1 log="$out/logs/$2.log"
  shift 2
  if "$@" >"$log" 2>&1; then
    echo "taskbench-peers: built $name"
  else
    echo "taskbench-peers: FAILED $name (log $log):"
    tail -n 15 "$log" | sed 's/^/    /'
    failed+=("$name")
  fi
}

build core core make -C "$out/core" -j"$jobs" DEBUG=0
if [ ! -e "$out/core/libcore_s.a" ]; then
  echo "taskbench-peers: core did not build, so no peer can; stopping"
  exit 1
fi
build "mpi/nonblock, mpi/bulk_synchronous" mpi \
  make -C "$out/mpi" -j"$jobs" DEBUG=0 MPICXX=mpicxx nonblock bulk_synchronous
build openmp/main openmp make -C "$out/openmp" -j"$jobs" DEBUG=0 CXX=g++ main
# The upstream StarPU Makefile links $(STARPU_DIR)/lib/libstarpu{,mpi}-1.3.so; Debian's
# are in the multiarch folder, so LIB is given whole (the same libraries, same order).
build starpu/main starpu make -C "$out/starpu" -j"$jobs" DEBUG=0 STARPU_DIR=/usr \
  STARPU_VERSION=1.3 \
  "LIB=$libdir/libstarpu-1.3.so $libdir/libstarpumpi-1.3.so -L../core -lcore_s" main

for bin in mpi/nonblock mpi/bulk_synchronous openmp/main starpu/main; do
  if [ -x "$out/$bin" ]; then
    # Each binary must start and run a tiny graph (1 step, width 1), not only link.
    case $bin in
      mpi/*) run=(mpirun --allow-run-as-root --oversubscribe -np 1 "$out/$bin") ;;
      starpu/*) run=(env STARPU_NCPU=1 STARPU_NCUDA=0 STARPU_NOPENCL=0 STARPU_SILENT=1 \
        mpirun --allow-run-as-root --oversubscribe -np 1 "$out/$bin" -core 1) ;;
      *) run=(env OMP_NUM_THREADS=1 "$out/$bin" -worker 1) ;;
    esac
    if "${run[@]}" -steps 1 -width 1 -type stencil_1d >"$out/logs/smoke-${bin//\//-}.log" 2>&1 \
      && grep -q '^Elapsed Time' "$out/logs/smoke-${bin//\//-}.log"; then
      echo "taskbench-peers: ok $out/$bin"
    else
      echo "taskbench-peers: FAILED $bin: does not run (log $out/logs/smoke-${bin//\//-}.log):"
      tail -n 10 "$out/logs/smoke-${bin//\//-}.log" | sed 's/^/    /'
      failed+=("$bin (run)")
    fi
  else
    echo "taskbench-peers: missing $out/$bin"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "taskbench-peers: not built or not running: ${failed[*]}"
  exit 1
fi
echo "taskbench-peers: all peers in $out"

#!/usr/bin/env bash
# Installs what the project needs beyond cargo: libffi (host plugin kernels through
# libffi, linked from the system), OpenBLAS (the library tile kernels gemm/syrk/trsm/
# potrf on the host: runtime/blas.rs links -lopenblas; Debian's libopenblas-dev, the
# BLAS StarPU's packages use), graphviz's `dot` (viz/ and the DOT test), and for the
# `mpi` feature (distributed runs, crates/cli/tests/cli_ranks.rs under mpirun) Debian's
# OpenMPI 4.1 (`mpirun`, the headers and libmpi) and libclang (rsmpi's bindgen).
# Idempotent; does nothing when all are present.
set -euo pipefail
need=()
[ -e /usr/include/ffi.h ] || [ -e /usr/include/x86_64-linux-gnu/ffi.h ] || need+=(libffi-dev)
command -v dot >/dev/null 2>&1 || need+=(graphviz)
[ -e /usr/lib/x86_64-linux-gnu/libopenblas.so ] || [ -e /usr/lib/libopenblas.so ] || need+=(libopenblas-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
[ -e /usr/include/x86_64-linux-gnu/mpi/mpi.h ] || [ -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] || need+=(libopenmpi-dev)
# bindgen loads libclang.so or libclang-N.so; libclang-cpp (another library, which some
# images carry without libclang) does not count.
ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* >/dev/null 2>&1 \
  || ls /usr/lib/x86_64-linux-gnu/libclang.so* /usr/lib/x86_64-linux-gnu/libclang-[0-9]*.so* >/dev/null 2>&1 \
  || need+=(libclang-dev)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

#!/usr/bin/env bash
# Installs what the project needs beyond cargo: libffi (host plugin kernels through
# libffi, linked from the system), OpenBLAS (the library tile kernels gemm/syrk/trsm/
# potrf on the host: runtime/blas.rs links -lopenblas; Debian's libopenblas-dev, the
# BLAS StarPU's packages use) and graphviz's `dot` (viz/ and the DOT test).
# Idempotent; does nothing when all are present.
set -euo pipefail
need=()
[ -e /usr/include/ffi.h ] || [ -e /usr/include/x86_64-linux-gnu/ffi.h ] || need+=(libffi-dev)
command -v dot >/dev/null 2>&1 || need+=(graphviz)
[ -e /usr/lib/x86_64-linux-gnu/libopenblas.so ] || [ -e /usr/lib/libopenblas.so ] || need+=(libopenblas-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

#!/bin/bash
# Installs the peers `offload-bench linalg` runs beside offload-sched on the host:
# StarPU 1.3's examples from Debian (`starpu-examples`: cholesky_implicit, sgemm, dgemm in
# /usr/lib/x86_64-linux-gnu/starpu/examples, linked to the system BLAS, which
# scripts/setup.sh makes OpenBLAS). Not needed by the tests (scripts/setup.sh does not
# install it); without it the bench reports StarPU as missing.
# Usage: bash benches/setup-linalg.sh   (as root, or with sudo)
set -euo pipefail
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get install -y --no-install-recommends starpu-examples
dpkg -L starpu-examples | grep -E '/examples/(cholesky_implicit|sgemm|dgemm)$'
readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3

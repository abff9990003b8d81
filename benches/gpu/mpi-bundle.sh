#!/bin/bash
# Packs Debian's OpenMPI 4.1, StarPU-MPI's `mpi_cholesky`, OpenBLAS and the shared
# libraries they and this build's MPI-enabled `offload-bench` load into
# .devbin/mpi.tar.xz, for run.sh's `mpi` step on the GPU machine, which has no MPI
# (issue 29: `-np 4` beside StarPU-MPI on that machine's 16 cores).
#
# The paths inside are this machine's (usr/bin/orterun, usr/lib/x86_64-linux-gnu/...);
# run.sh unpacks them under /tmp/mpi and relocates OpenMPI with OPAL_PREFIX and PMIx with
# PMIX_INSTALL_PREFIX, the variables both document for a moved installation. glibc's own
# libraries (libc, libm, libpthread, libdl, librt, ld-linux) are left out: the GPU
# machine's are used, which must be at least as new as this machine's (run.sh prints both).
#
# Also copies the MPI-enabled release `offload-bench` (default features, built by this
# script) to .devbin/mpi-bench. Usage, from the repo: bash benches/gpu/mpi-bundle.sh
# (after prepare.sh, which empties .devbin).
set -euo pipefail
cd "$(dirname "$0")/../.."
T=${CARGO_TARGET_DIR:-target}
cargo build --release -p offload-sched-cli --bin offload-bench
mkdir -p .devbin
strip -o .devbin/mpi-bench "$T"/release/offload-bench
L=/usr/lib/x86_64-linux-gnu
files=(/usr/bin/orterun /usr/bin/orted "$L"/starpu/mpi/mpi_cholesky)
mapfile -t -O ${#files[@]} files < <(find "$L"/openmpi "$L"/pmix2 /usr/share/openmpi /etc/openmpi -type f 2>/dev/null)
# The dynamic closure of every ELF above and of the bench.
closure=$( { for f in "${files[@]}" .devbin/mpi-bench; do
  file -L "$f" | grep -q ELF && ldd "$f" 2>/dev/null | awk '/=> \//{print $3}'
done; } | sort -u | grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libresolv|libutil)\.so')
list=$(mktemp)
printf '%s\n' "${files[@]}" > "$list"
for so in $closure; do
  # The library under its soname path and the file it links to.
  echo "$so" >> "$list"; readlink -f "$so" >> "$list"
done
# OpenBLAS through the alternatives link that libblas.so.3 / liblapack.so.3 resolve to.
readlink -f "$L"/libblas.so.3 "$L"/liblapack.so.3 >> "$list"
sort -u "$list" | sed 's|^/||' > "$list.s"
tar cJf .devbin/mpi.tar.xz -C / --dereference -T "$list.s"
rm -f "$list" "$list.s"
du -sh .devbin/mpi.tar.xz .devbin/mpi-bench

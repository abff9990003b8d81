# Sourced by the GPU scripts in this folder (they are run from a copy of it, .devbin/).
# omp_bundle: the libomptarget-16 bundle from ../shared/baselines, copied next to the
# script, to /tmp/omp, with the two plugin symlinks that the copy into .devbin flattened
# into small text files made links again (run.sh then finds the CUDA plugins).
omp_bundle() {
  rm -rf /tmp/omp && cp -r "$D"/libomptarget-16 /tmp/omp && chmod -R u+w /tmp/omp
  (cd /tmp/omp && rm -f libomptarget.rtl.cuda.nextgen.so && ln -s libomptarget.rtl.cuda.nextgen.so.16 libomptarget.rtl.cuda.nextgen.so && cd legacy && rm -f libomptarget.rtl.cuda.so && ln -s libomptarget.rtl.cuda.so.16 libomptarget.rtl.cuda.so)
}

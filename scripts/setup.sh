#!/usr/bin/env bash
# Installs what the project needs beyond cargo: libffi (host plugin kernels through
# libffi, linked from the system) and graphviz's `dot` (viz/ and the DOT test).
# Idempotent; does nothing when both are present.
set -euo pipefail
need=()
[ -e /usr/include/ffi.h ] || [ -e /usr/include/x86_64-linux-gnu/ffi.h ] || need+=(libffi-dev)
command -v dot >/dev/null 2>&1 || need+=(graphviz)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

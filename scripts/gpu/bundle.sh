#!/usr/bin/env bash
# bundle.sh DEST BIN...: ../shared/scripts/gpu-bundle plus anvil's own shared libraries
# (build/lib/libanvil_engine.so, libanvil_ops.so: every CUDA kernel once), which gpu-bundle's
# library filter leaves out. The binaries find them through LD_LIBRARY_PATH (DEST/run) or their
# RUNPATH $ORIGIN/../lib, i.e. DEST/lib.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: scripts/gpu/bundle.sh DEST BIN..." >&2; exit 2; }
here=$(cd "$(dirname "$0")/../.." && pwd)
"$here/../shared/scripts/gpu-bundle" "$@"
build=${BUILD:-$here/build}
cp -L "$build"/lib/libanvil_*.so "$1/lib/"

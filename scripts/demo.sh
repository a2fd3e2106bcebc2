#!/usr/bin/env bash
# `make demo`: from a fresh Debian 12 checkout to a GPT whose validation loss visibly falls.
#   1. installs the dependencies (scripts/install-deps.sh, apt; a no-op when present),
#   2. configures and builds build/ (Release, Ninja when available),
#   3. tokenizes the King James Bible with GPT-2's BPE into
#      data/demo/kjv_gpt2_text_document.{bin,idx} (scripts/prepare-demo-data.sh),
#   4. trains configs/demo_gpu.ini on a GPU, else configs/tiny_cpu.ini on the CPU
#      (bin/train --print-device decides, as [train] device = auto would).
# MODEL=t5 (`make demo MODEL=t5`): a small T5 instead, configs/tiny_t5_cpu.ini on the T5 demo
# corpus (scripts/prepare-demo-t5-data.sh), on the GPU or the CPU as [train] device = auto picks.
# Extra arguments go to bin/train as overrides, e.g. `scripts/demo.sh train.steps=50`.
# BUILD=dir selects another build directory; JOBS=n the build parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."

export BUILD=${BUILD:-build}
JOBS=${JOBS:-$(nproc)}

scripts/install-deps.sh

if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$BUILD" -j "$JOBS" --target train preprocess

MODEL=${MODEL:-gpt}
if [[ "$MODEL" == t5 ]]; then
  scripts/prepare-demo-t5-data.sh
  echo "demo: training configs/tiny_t5_cpu.ini (the validation loss should fall from ~10.7" \
    "to ~6.8 in ~3 minutes on 2 CPU cores)"
  exec "$BUILD/bin/train" configs/tiny_t5_cpu.ini "$@"
elif [[ "$MODEL" != gpt ]]; then
  echo "demo: unknown MODEL=$MODEL (gpt or t5)" >&2
  exit 2
fi

scripts/prepare-demo-data.sh

device=$("$BUILD/bin/train" --print-device)
if [[ "$device" == cuda ]]; then
  config=configs/demo_gpu.ini
else
  config=configs/tiny_cpu.ini
fi
echo "demo: training $config on $device (the validation loss should fall from ~10.8 to ~5.6 on a CPU, lower on a GPU)"
exec "$BUILD/bin/train" "$config" "$@"

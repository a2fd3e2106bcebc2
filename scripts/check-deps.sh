#!/usr/bin/env bash
# Fails when an #include goes against DESIGN.md's dependency arrows.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A forbidden=(
  [engine]='"(ops|parallel|model|io)/'
  [ops]='"(parallel|model|io)/'
  [parallel]='"(model|io)/'
  [model]='"io/'
  [io]='"(ops|model)/'
)
bad=0
for dir in "${!forbidden[@]}"; do
  [[ -d $dir ]] || continue
  if hits=$(grep -rnE "#include ${forbidden[$dir]}" "$dir" 2>/dev/null); then
    echo "check-deps: $dir/ must not include these:"; echo "$hits"; bad=1
  fi
done
exit $bad

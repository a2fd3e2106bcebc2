#!/usr/bin/env bash
# Fails when an #include goes against DESIGN.md's dependency arrows:
#   between the top folders: engine <- ops <- parallel <- model; io depends on engine only;
#   inside model/ (DESIGN.md §4), from the bottom up: model/*.{h,cc} (the shared core:
#   ParamTable, the stage interface, the Hugging Face name registry) <- blocks/ (attention, MLP,
#   norms, embeddings, heads, the transformer layer) <- stack/ (the token-stream transformer GPT
#   and BERT share, assembled from blocks: GptConfig, GptModel, its layout, pass and [model]
#   architecture keys; no trainer) <- train/ (the one trainer, its config and checkpoint core,
#   the Model interface's pipeline runner and the model-family registry train/family.h) <-
#   stack_train/ (the shared stack as a trainable family: its Model adapter and the Family hooks
#   GPT and BERT share) <- the family folders gpt/, bert/, t5/ (wiring only: they set the
#   stack's features or build their own model from blocks, implement and register a family) <-
#   tasks/, infer/ <- families/ (builtin_families.cc: the one list that names every family).
#   An include runs down only; blocks/, stack/, train/, stack_train/, tasks/ and infer/ never
#   include a family folder (they reach a family through the registry), families never include
#   each other, and only families/ includes them all.
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

# A model/ file's folder (core: model/*.{h,cc}) and the folder's rank from the bottom up.
folder() {
  if [[ $1 =~ ^model/([a-z0-9_]+)/ ]]; then echo "${BASH_REMATCH[1]}"; else echo core; fi
}
rank() {
  case $1 in
    core) echo 0 ;;
    blocks) echo 1 ;;
    stack) echo 2 ;;
    train) echo 3 ;;
    stack_train) echo 4 ;;
    gpt | bert | t5) echo 5 ;;
    families) echo 7 ;;
    *) echo 6 ;;  # tasks, infer
  esac
}
is_family() { [[ $1 == gpt || $1 == bert || $1 == t5 ]]; }

# Known exceptions ("file -> included file"), each with the step that removes it: none today.
kKnown=()
declare -A known=() seen=()
for k in "${kKnown[@]+"${kKnown[@]}"}"; do known[$k]=1; done
while IFS=: read -r file _ inc; do
  inc=${inc#*\"}; inc=${inc%%\"*}
  [[ $inc == model/* ]] || continue
  from=$(folder "$file"); to=$(folder "$inc")
  why=""
  if is_family "$to" && is_family "$from" && [[ $to != "$from" ]]; then
    why="a family ($from/) must not include another ($to/)"
  elif is_family "$to" && ! is_family "$from" && [[ $from != families ]]; then
    why="$from/ must not include a family folder ($to/)"
  elif (($(rank "$to") > $(rank "$from"))); then
    why="runs back up ($from -> $to/)"
  fi
  [[ -z $why ]] && continue
  key="$file -> $inc"
  if [[ -n ${known[$key]:-} ]]; then seen[$key]=1; continue; fi
  echo "check-deps: $key: $why"; bad=1
done < <(grep -rnE '^#include "model/' model)
for k in "${kKnown[@]+"${kKnown[@]}"}"; do
  if [[ -z ${seen[$k]:-} ]]; then
    echo "check-deps: '$k' is listed as a known exception but no longer occurs: remove it"; bad=1
  fi
done
exit $bad

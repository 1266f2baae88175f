#!/usr/bin/env bash
# What each choice of the default translation preset buys: trains the default
# preset once as it is and once per row with one thing changed, all for the
# same number of steps (but one, which gets the default's time), and prints
# one table row per run (validation BLEU-4 with beam 4 and greedily, training
# seconds, padding). docs/training.md's table "What each choice bought" comes from it.
#
#   bash scripts/ablation.sh [JOBS] [extra flags for every run]
#
# JOBS runs go side by side, each on one thread (default 2: one per core), so
# the times are the seconds of one core. BLEU does not depend on them.
# Everything goes to runs/ablation/<row>/. The seed rows show how much BLEU
# moves between runs that differ only in their random choices.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-2}
shift || true
tf=build/release/apps/tformer
[ -x "$tf" ] || { cmake --preset release >/dev/null && cmake --build --preset release -j"$(nproc)" --target tformer; }

rows=(
  "default|"
  "word|--tokenizer word"
  "random-batches|--batching random"
  "no-label-smoothing|--label-smoothing 0"
  "untied|--no-tie-embeddings"
  "averaging|--average 5"
  "dropout-0.1|--dropout 0.1"
  "random-batches-same-time|--batching random --steps 1090"
  "seed-2|--seed 2"
  "seed-3|--seed 3"
)
# ONLY="seed-2 seed-3" runs just those rows (the table still lists every row that has a summary)
only=" ${ONLY:-} "
mkdir -p runs/ablation
run_row() {
  local name=$1 flags=$2
  # shellcheck disable=SC2086
  "$tf" train translate --threads 1 --quiet --overwrite --out "runs/ablation/$name" $flags "${@:3}" \
    > "runs/ablation/$name.log" 2>&1 || echo "ablation: $name failed (runs/ablation/$name.log)" >&2
}
running=0
for row in "${rows[@]}"; do
  [ -z "${ONLY:-}" ] || [[ "$only" == *" ${row%%|*} "* ]] || continue
  run_row "${row%%|*}" "${row#*|}" "$@" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait

printf '| run | flags | BLEU-4 beam 4 | greedy | training (1 core) | padding |\n|---|---|---:|---:|---:|---:|\n'
for row in "${rows[@]}"; do
  name=${row%%|*}; flags=${row#*|}; s=runs/ablation/$name/summary.txt; log=runs/ablation/$name.log
  beam=$(grep -oP 'BLEU-4, beam 4: \K[0-9.]+' "$s" 2>/dev/null || echo '?')
  greedy=$(grep -oP 'BLEU-4, greedy: \K[0-9.]+' "$s" 2>/dev/null || echo '?')
  secs=$(grep -oP 'steps in \K[0-9.]+ s' "$s" 2>/dev/null || echo '?')
  pad=$(grep -oP '[0-9.]+% padding' "$log" 2>/dev/null | head -1 || echo '?')
  printf '| %s | `%s` | %s | %s | %s | %s |\n' "$name" "${flags:-(none)}" "$beam" "$greedy" "$secs" "$pad"
done

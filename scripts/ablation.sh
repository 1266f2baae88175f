#!/usr/bin/env bash
# Reruns the tables of docs/training.md: trains one run per row and prints
# one table row per run (validation BLEU-4 with beam 4 and greedily, chrF2,
# BLEU-4 on sources of 11-20 words, the loss on the validation pairs and on
# as many training pairs, training seconds).
#
#   bash scripts/ablation.sh [TABLE] [JOBS] [extra flags for every run]
#
# TABLE default (the default): what each choice of the default translation
#   preset buys. The default preset once as it is and once per row with one
#   thing changed, all for the same number of steps (but one, which gets the
#   default's time). The seed rows show how much BLEU moves between runs that
#   differ only in their random choices. Runs go to runs/ablation/<row>/.
# TABLE recipe: the search for `--preset long`, models and schedules that
#   train in about 15 minutes on two threads of the 2-core machine of the
#   docs. Each row's step count fills that budget at the row's own speed
#   (TABLE rates measures it). Runs go to runs/recipe/<row>/.
# TABLE short: the search for the default preset itself, schedules and models
#   that train in the default's time (1,800 steps of the default model on two
#   threads): each row's step count is 1,800 scaled by the default's step time
#   over the row's (TABLE rates). Runs go to runs/short/<row>/.
# TABLE rates: each recipe row's seconds per training step on two threads
#   (steps 50-200 of a short run alone on the machine), from which the recipe
#   rows' step counts come: measure on an idle machine.
#
# Every row starts from the recipe the tables were measured with, the
# 8,000-piece model of two blocks a side in batches of 2,000 tokens at peak
# rate 0.003 with Adam's beta2 0.999 for 1,800 steps (the default preset now
# trains one block a side over 4,000 pieces in batches of 1,500 tokens for
# 5,150 steps at 0.0025 and beta2 0.98: the short table's last rows); a row's
# own flags replace those it names.
#
# JOBS runs go side by side, each on one thread (default 2: one per core), so
# the times are the seconds of one core. BLEU does not depend on them.
# ONLY="seed-2 seed-3" runs just those rows (the table still lists every row
# that has a summary).
set -euo pipefail
cd "$(dirname "$0")/.."
table=default
case "${1:-}" in default | recipe | short | rates) table=$1 && shift ;; esac
jobs=${1:-2}
shift || true
tf=build/release/apps/tformer
[ -x "$tf" ] || { bash scripts/configure.sh release && cmake --build --preset release -j"$(nproc)" --target tformer; }

# the recipe every row starts from, flag by flag
measured_with=("--num-layers 2" "--vocab-size 8000" "--batch-tokens 2000" "--steps 1800" "--lr 0.003" "--adam-beta2 0.999")
# a row's flags after those of measured_with that it does not name
row_flags() {
  local flags=$1 out="" f
  for f in "${measured_with[@]}"; do
    [[ " $flags " == *" ${f%% *} "* ]] || out+="$f "
  done
  echo "$out$flags"
}

default_rows=(
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
# the same 15 minutes for each: steps = 900 s / the row's seconds per step (TABLE rates);
# 5400-steps is the same model for 9 minutes
recipe_rows=(
  "5400-steps|--steps 5400"
  "base-9000|--steps 9000"
  "d256-3800-lr0.0015|--steps 3800 --num-hiddens 256 --ffn-num-hiddens 1024 --lr 0.0015 --warmup 400"
  "d128-l3-7200|--steps 7200 --num-layers 3"
  "v4000-11500|--steps 11500 --vocab-size 4000"
  "d128-l3-7200-lr0.0015|--steps 7200 --num-layers 3 --lr 0.0015 --warmup 400"
  "batch4000-4750|--steps 4750 --batch-tokens 4000"
  "ffn1024-7350|--steps 7350 --ffn-num-hiddens 1024"
  "heads8-9000|--steps 9000 --num-heads 8"
  "lr0.002-9000|--steps 9000 --lr 0.002"
  "lr0.002-9000-beta2-0.98|--steps 9000 --lr 0.002 --adam-beta2 0.98"
  "lr0.002-9000-average5|--steps 9000 --lr 0.002 --average 5"
  "v16000-5800-lr0.002|--steps 5800 --vocab-size 16000 --lr 0.002"
  "default-recipe-12500|--steps 12500 --vocab-size 4000 --lr 0.0025 --adam-beta2 0.98"
  "batch1500-11600-lr0.002|--steps 11600 --batch-tokens 1500 --lr 0.002"
  "l1-11700-lr0.002|--steps 11700 --num-layers 1 --lr 0.002"
  "lr0.0015-9000|--steps 9000 --lr 0.0015"
  "lr0.002-9000-no-label-smoothing|--steps 9000 --lr 0.002 --label-smoothing 0"
  "lr0.002-9000-dropout0.1|--steps 9000 --lr 0.002 --dropout 0.1"
  "lr0.002-9000-dropout0.05|--steps 9000 --lr 0.002 --dropout 0.05"
  # BPE-dropout 0.1 spells a pair in about a quarter more pieces: 0.147 s a step against 0.122, so 7,500 steps
  "lr0.002-7500-subword-dropout0.1|--steps 7500 --lr 0.002 --subword-dropout 0.1"
)
# the default's time for each: steps = 1,800 x 0.100 s / the row's seconds per step
short_rows=(
  "default|"
  "lr0.002|--lr 0.002"
  "lr0.0025|--lr 0.0025"
  "lr0.004|--lr 0.004"
  "lr0.005-warmup400|--lr 0.005 --warmup 400"
  "warmup100|--warmup 100"
  "heads8|--num-heads 8"
  "v4000-2300|--vocab-size 4000 --steps 2300"
  "v4000-2300-lr0.0025|--vocab-size 4000 --steps 2300 --lr 0.0025"
  "v4000-2300-lr0.004|--vocab-size 4000 --steps 2300 --lr 0.004"
  "v4000-2300-heads8|--vocab-size 4000 --steps 2300 --num-heads 8"
  "beta2-0.98|--adam-beta2 0.98"
  "v4000-2300-lr0.0025-beta2-0.98|--vocab-size 4000 --steps 2300 --lr 0.0025 --adam-beta2 0.98"
  "v4000-2750-lr0.0025-beta2-0.98|--vocab-size 4000 --steps 2750 --lr 0.0025 --adam-beta2 0.98"
  "v4000-2750-lr0.0025-beta2-0.98-seed2|--vocab-size 4000 --steps 2750 --lr 0.0025 --adam-beta2 0.98 --seed 2"
  # from there, the same time again: the vocabulary, the warm-up and the batch size
  "v3000-3000-lr0.0025-beta2-0.98|--vocab-size 3000 --steps 3000 --lr 0.0025 --adam-beta2 0.98"
  "v2000-3300-lr0.0025-beta2-0.98|--vocab-size 2000 --steps 3300 --lr 0.0025 --adam-beta2 0.98"
  "v4000-2750-lr0.0025-beta2-0.98-warmup400|--vocab-size 4000 --steps 2750 --lr 0.0025 --adam-beta2 0.98 --warmup 400"
  "v4000-batch1000-5000-lr0.0025-beta2-0.98|--vocab-size 4000 --batch-tokens 1000 --steps 5000 --lr 0.0025 --adam-beta2 0.98"
  "v4000-batch1500-3600-lr0.002-beta2-0.98|--vocab-size 4000 --batch-tokens 1500 --steps 3600 --lr 0.002 --adam-beta2 0.98"
  "v4000-batch1500-3600-lr0.003-beta2-0.98|--vocab-size 4000 --batch-tokens 1500 --steps 3600 --lr 0.003 --adam-beta2 0.98"
  "v4000-batch1500-3600-lr0.0025-beta2-0.98|--vocab-size 4000 --batch-tokens 1500 --steps 3600 --lr 0.0025 --adam-beta2 0.98"
  "v4000-batch1500-3600-lr0.0025-beta2-0.98-seed2|--vocab-size 4000 --batch-tokens 1500 --steps 3600 --lr 0.0025 --adam-beta2 0.98 --seed 2"
  "v4000-batch1500-3600-lr0.0025-beta2-0.98-seed3|--vocab-size 4000 --batch-tokens 1500 --steps 3600 --lr 0.0025 --adam-beta2 0.98 --seed 3"
  "v4000-batch1500-3600-lr0.0025-beta2-0.95|--vocab-size 4000 --batch-tokens 1500 --steps 3600 --lr 0.0025 --adam-beta2 0.95"
  "v4000-batch1500-3600-lr0.0025-beta2-0.98-ls0.05|--vocab-size 4000 --batch-tokens 1500 --steps 3600 --lr 0.0025 --adam-beta2 0.98 --label-smoothing 0.05"
  # one block a side: a step costs 0.7 of one of two, so 5,150 steps take the time of 3,600
  "l1-v4000-batch1500-5150-lr0.0025-beta2-0.98|--num-layers 1 --vocab-size 4000 --batch-tokens 1500 --steps 5150 --lr 0.0025 --adam-beta2 0.98"
  "l1-v4000-batch1500-5150-lr0.0025-beta2-0.98-seed2|--num-layers 1 --vocab-size 4000 --batch-tokens 1500 --steps 5150 --lr 0.0025 --adam-beta2 0.98 --seed 2"
  "l1-v4000-batch1500-5150-lr0.0025-beta2-0.98-seed3|--num-layers 1 --vocab-size 4000 --batch-tokens 1500 --steps 5150 --lr 0.0025 --adam-beta2 0.98 --seed 3"
)

if [ "$table" = rates ]; then
  mkdir -p runs/recipe/rates
  printf '| run | flags | s per step, 2 threads | steps in 900 s |\n|---|---|---:|---:|\n'
  for row in "${recipe_rows[@]}"; do
    name=${row%%|*}
    [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || continue
    # the row's run stopped after 200 steps (the step time does not depend on the schedule)
    # shellcheck disable=SC2046
    "$tf" train translate --quiet --overwrite --out "runs/recipe/rates/$name" $(row_flags "${row#*|}") \
      --stop-after-steps 200 "$@" > "runs/recipe/rates/$name.log" 2>&1 || {
      echo "ablation: $name failed (runs/recipe/rates/$name.log)" >&2
      continue
    }
    awk -F, -v name="$name" -v flags="${row#*|}" '$1 == 50 {a = $4} $1 == 200 {b = $4}
      END {s = (b - a) / 150; printf "| %s | `%s` | %.4f | %d |\n", name, flags, s, 900 / s}' \
      "runs/recipe/rates/$name/progress.csv"
  done
  exit 0
fi

case $table in
  recipe) rows=("${recipe_rows[@]}") dir=runs/recipe ;;
  short) rows=("${short_rows[@]}") dir=runs/short ;;
  *) rows=("${default_rows[@]}") dir=runs/ablation ;;
esac
only=" ${ONLY:-} "
mkdir -p "$dir"
run_row() {
  local name=$1 flags=$2
  # shellcheck disable=SC2046
  "$tf" train translate --threads 1 --quiet --overwrite --out "$dir/$name" $(row_flags "$flags") "${@:3}" \
    > "$dir/$name.log" 2>&1 || echo "ablation: $name failed ($dir/$name.log)" >&2
}
running=0
for row in "${rows[@]}"; do
  [ -z "${ONLY:-}" ] || [[ "$only" == *" ${row%%|*} "* ]] || continue
  run_row "${row%%|*}" "${row#*|}" "$@" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait

printf '| run | flags | BLEU-4 beam 4 | greedy | chrF2 beam 4 | 11-20 words, beam 4 | loss: validation / training pairs | training (1 core) |\n'
printf '|---|---|---:|---:|---:|---:|---:|---:|\n'
for row in "${rows[@]}"; do
  name=${row%%|*}; flags=${row#*|}; s=$dir/$name/summary.txt
  beam=$(grep -oP 'BLEU-4, beam 4: \K[0-9.]+' "$s" 2>/dev/null || echo '?')
  greedy=$(grep -oP 'BLEU-4, greedy: \K[0-9.]+' "$s" 2>/dev/null || echo '?')
  chrf=$(grep -oP 'chrF2 \K[0-9.]+' "$s" 2>/dev/null | head -1 || echo '?')
  mid=$(grep -oP '11-20 words \K[0-9.]+' "$s" 2>/dev/null | head -1 || echo '?')
  secs=$(grep -oP 'steps in \K[0-9.]+ s' "$s" 2>/dev/null || echo '?')
  loss=$(grep -oP 'teacher-forced\): validation \K[0-9.]+' "$s" 2>/dev/null || echo '?')
  loss+=" / $(grep -oP 'a sample of the training pairs \K[0-9.]+' "$s" 2>/dev/null || echo '?')"
  # shellcheck disable=SC2016
  printf '| %s | `%s` | %s | %s | %s | %s | %s | %s |\n' "$name" "${flags:-(none)}" "$beam" "$greedy" "$chrf" "$mid" \
    "$loss" "$secs"
done

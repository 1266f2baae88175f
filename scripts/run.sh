#!/usr/bin/env bash
# The main job: install what is missing, build, train the default
# English→French Transformer on the bundled corpus, then show translations,
# validation BLEU and where the pictures are.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)" --target tformer
out=${1:-runs/translate}
./build/release/apps/tformer train translate --out "$out"
echo
echo "== your own sentences:"
./build/release/apps/tformer translate --checkpoint "$out/checkpoint.safetensors" "i'm home ." "he's calm ." "we are friends ." "i like cats ."
echo
echo "pictures: $out/loss.png and $out/attention-*.png; summary: $out/summary.txt"

#!/usr/bin/env bash
# The main job: install what is missing, build, train the default
# English→French Transformer on the bundled corpus, then show translations,
# validation BLEU, where the pictures are, and the command that opens the
# studio (tformer serve, docs/serve.md) on the checkpoint just trained.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/configure.sh release
cmake --build --preset release -j"$(nproc)" --target tformer
out=${1:-runs/translate}
./build/release/apps/tformer train translate --out "$out" --overwrite
echo
echo "== your own sentences:"
./build/release/apps/tformer translate --checkpoint "$out/checkpoint.safetensors" \
  "I'm home." "He's calm." "We are friends." "I like cats." \
  "If you want to learn a language well, you have to speak it every day."
echo
echo "pictures: $out/loss.png and $out/attention-*.png; summary: $out/summary.txt"
echo
echo "the studio: translate and look inside this model in your browser (docs/serve.md):"
echo "  ./build/release/apps/tformer serve --checkpoint $out/checkpoint.safetensors --run $out"
echo "then open http://127.0.0.1:8080/ (Ctrl-C stops the server)"

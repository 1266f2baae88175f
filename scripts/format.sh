#!/usr/bin/env bash
# Formats tformer's C++ sources with .clang-format (clang-format-14).
#   bash scripts/format.sh           rewrite every tracked .cpp/.hpp in place
#   bash scripts/format.sh --check   change nothing; list the files that differ and exit 1 if any does (for CI)
set -euo pipefail
cd "$(dirname "$0")/.."
cf=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$cf" ]; then
  echo "format: clang-format-14 is missing (bash scripts/install-deps.sh installs it)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! "$cf" --style=file "$f" | cmp -s - "$f"; then
      echo "format: $f differs from .clang-format (bash scripts/format.sh fixes it)"
      bad=$((bad + 1))
    fi
  done
  echo "format: $bad of ${#files[@]} files differ"
  [ "$bad" -eq 0 ]
else
  "$cf" --style=file -i "${files[@]}"
  echo "format: formatted ${#files[@]} files"
fi

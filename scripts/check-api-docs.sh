#!/usr/bin/env bash
# Builds the API reference (the `docs` target, docs/api.md) and fails on any
# Doxygen warning: a public declaration of core, autograd, nn, optim or tasks
# without a /// description, or a comment Doxygen cannot read.
#   bash scripts/check-api-docs.sh [build dir, default build/release]
# Configures the build folder first when it has not been configured (with the
# preset of the same name when there is one, e.g. build/release -> release).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}

if ! command -v doxygen >/dev/null; then
  echo "check-api-docs: doxygen is missing (bash scripts/install-deps.sh installs it)" >&2
  exit 2
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  preset=$(basename "$build")
  if [ "$build" = "build/$preset" ] && grep -q "\"name\": \"$preset\"" CMakePresets.json; then
    cmake --preset "$preset" >/dev/null
  else
    cmake -S . -B "$build" >/dev/null
  fi
fi
# Doxygen may have been installed after the folder was configured: configure again to find it.
if ! cmake --build "$build" --target help 2>/dev/null | grep '\bdocs\b' >/dev/null; then
  cmake "$build" >/dev/null
fi

log=$build/docs/warnings.log
status=0
cmake --build "$build" --target docs >/dev/null 2>&1 || status=$?
if [ -s "$log" ]; then
  cat "$log"
  echo "check-api-docs: $(wc -l <"$log") Doxygen warnings (above); a public declaration needs a /// description"
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "check-api-docs: building the docs target failed (exit $status) without a warning in $log" >&2
  cmake --build "$build" --target docs
  exit 1
fi
echo "check-api-docs: no Doxygen warning; the reference is $build/docs/html/index.html"

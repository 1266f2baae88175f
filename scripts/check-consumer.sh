#!/usr/bin/env bash
# Installs a built tformer into a scratch prefix, then configures, builds and
# runs examples/consumer/ against that installed package, as another project
# would use it. CI runs it after the release build.
#   bash scripts/check-consumer.sh [build dir, default build/release]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
prefix=$PWD/$build/consumer-install
out=$PWD/$build/consumer
rm -rf "$prefix" "$out"
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S examples/consumer -B "$out" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$out" -j"${JOBS:-2}" >/dev/null
"$out/consumer" | tee "$out/output.txt"
grep -q "d loss / d W_o.weight" "$out/output.txt"

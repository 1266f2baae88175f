#!/usr/bin/env bash
# Installs what is missing (the browser test's Chromium too), builds the release preset and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --browser
bash scripts/configure.sh release
cmake --build --preset release -j"$(nproc)"
ctest --preset release -j"$(nproc)" "$@"

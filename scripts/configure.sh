#!/usr/bin/env bash
# Configures a preset's build folder (cmake --preset PRESET, quietly).
# The presets build with Ninja; a folder an older tformer configured for Make
# is started afresh (its CMake cache removed), since CMake refuses to switch
# a folder's generator.
#   bash scripts/configure.sh [PRESET]   (default release)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
cache=build/$preset/CMakeCache.txt
if [ -f "$cache" ] && ! grep -qx 'CMAKE_GENERATOR:INTERNAL=Ninja' "$cache"; then
  echo "configure: build/$preset was configured for another build tool; configuring it afresh for Ninja"
  rm -rf "$cache" "build/$preset/CMakeFiles"
fi
cmake --preset "$preset" >/dev/null

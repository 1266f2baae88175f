#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test tformer.
# Idempotent: packages already present are skipped, and the script says what it installs.
#   --fuzz: also what the fuzz targets need (clang 14, libFuzzer, LLVM's OpenMP: fuzz/README.md)
#   --browser: also what the studio's browser test needs (tests/apps/studio_browser.py: Chromium, its
#              WebDriver, Selenium); scripts/test.sh and CI pass it
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config   # compiler and build system (Ninja: keeps both cores busy across targets)
  libopenblas-openmp-dev             # BLAS, OpenMP build: one thread pool shared with our loops
  libxsmm-dev                        # small float products with kernels made for the CPU (AVX-512 where there is one)
  libfmt-dev                         # printing and error messages
  catch2                             # unit tests (Catch2 v2)
  libbenchmark-dev                   # micro-benchmarks in bench/
  nlohmann-json3-dev                 # the JSON header of safetensors checkpoints
  libcli11-dev                       # the tformer command line
  libcairo2-dev                      # loss curves, heatmaps and the tutorials' plots as PNG or SVG (tasks/canvas.cpp)
  fonts-dejavu-core                  # the font of the pictures' text (DejaVu Sans, found by cairo through fontconfig)
  libsentencepiece-dev               # the subword tokenizer of the translation task
  libutf8proc-dev                    # UTF-8 validation and Python's str.lower() (core/utf8.cpp)
  clang-format-14                    # the code's layout, .clang-format (scripts/format.sh --check)
  doxygen                            # the API reference from the headers' /// comments (docs/api.md, scripts/check-api-docs.sh)
  libopenmpi-dev openmpi-bin         # data-parallel training over MPI (mpirun -np N tformer train ...)
  libcpp-httplib-dev                 # the HTTP server of `tformer serve` (apps/serve.cpp)
)
for flag in "$@"; do
  case $flag in
    --fuzz)
      packages+=(
        clang-14                     # the fuzz preset compiles everything with clang ...
        libfuzzer-14-dev             # ... and links libFuzzer (-fsanitize=fuzzer)
        libomp-14-dev                # OpenMP for clang
      ) ;;
    --browser)
      packages+=(
        chromium chromium-driver     # headless Chromium and its WebDriver ...
        python3-selenium             # ... driven from Python, by the studio's browser test
        fonts-wqy-zenhei             # Chinese glyphs for the page's quotes of the documents' headings
      ) ;;
    *) echo "install-deps: unknown flag $flag (expected --fuzz or --browser)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's alternatives may still point libblas/liblapack at another build;
# we link libopenblas directly, so nothing to switch here.
echo "install-deps: done"

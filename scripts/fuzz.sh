#!/usr/bin/env bash
# Runs a libFuzzer target of fuzz/ (fuzz/README.md).
#
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#       TARGET: safetensors | checkpoint | corpus | translate | all (each in turn)
#       SECONDS: how long to fuzz each target (0: no time limit, e.g. with -runs=N)
#   scripts/fuzz.sh seeds      rewrites the committed seeds fuzz/corpus/<target>/seed-*
#
# Builds the fuzz preset first (clang 14, ASan + UBSan; installs clang-14 and
# libFuzzer when missing). Inputs the fuzzer finds interesting go to
# build/fuzz/corpus/TARGET (the committed seeds in fuzz/corpus/TARGET are read,
# never written); a crash, a hang (an input taking over 10 s), a leak, UB or an
# allocation above 2 GB is a finding: the input is written to
# build/fuzz/findings/TARGET/ and the script exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(safetensors checkpoint corpus translate)
usage() {
    echo "usage: scripts/fuzz.sh {safetensors|checkpoint|corpus|translate|all} SECONDS [libFuzzer flags...] | scripts/fuzz.sh seeds" >&2
    exit 2
}
[ $# -ge 1 ] || usage
target=$1
shift

if ! command -v clang++-14 >/dev/null || [ ! -f /usr/lib/llvm-14/lib/libFuzzer.a ]; then
    bash scripts/install-deps.sh --fuzz
fi
if [ ! -f build/fuzz/CMakeCache.txt ]; then
    cmake --preset fuzz >/dev/null
fi
cmake --build --preset fuzz -j"${FUZZ_BUILD_JOBS:-2}" >/dev/null

if [ "$target" = seeds ]; then
    for t in "${targets[@]}"; do rm -f fuzz/corpus/"$t"/seed-*; done
    build/fuzz/fuzz/fuzz_make_seeds fuzz/corpus
    exit 0
fi

[ $# -ge 1 ] || usage
seconds=$1
shift
case "$seconds" in '' | *[!0-9]*) usage ;; esac

run() {
    local t=$1
    shift
    local work=build/fuzz/corpus/$t findings=build/fuzz/findings/$t
    mkdir -p "$work" "$findings"
    local flags=(
        -rss_limit_mb=2048 -malloc_limit_mb=2048  # a loader must refuse absurd sizes, not try them
        -timeout=10                               # an input that takes longer is a hang
        -max_total_time="$seconds"
        -print_final_stats=1
        -close_fd_mask=1                          # the translations the targets print
        -dict=fuzz/dict/"$t".dict
        -artifact_prefix="$findings"/
    )
    if [ "$t" = checkpoint ]; then flags+=(-max_len=65536); fi  # the seeds are checkpoints of up to ~20 KB
    echo "== fuzz_$t for ${seconds}s: build/fuzz/fuzz/fuzz_$t ${flags[*]} $* $work fuzz/corpus/$t"
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        build/fuzz/fuzz/fuzz_"$t" "${flags[@]}" "$@" "$work" fuzz/corpus/"$t"
}

if [ "$target" = all ]; then
    status=0
    for t in "${targets[@]}"; do
        run "$t" "$@" || { status=$?; echo "fuzz_$t: FINDING (exit $status), see build/fuzz/findings/$t/"; }
    done
    exit $status
fi
for t in "${targets[@]}"; do
    if [ "$t" = "$target" ]; then
        run "$t" "$@" || { status=$?; echo "fuzz_$t: FINDING (exit $status), see build/fuzz/findings/$t/"; exit $status; }
        exit 0
    fi
done
usage

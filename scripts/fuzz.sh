#!/usr/bin/env bash
# Runs a libFuzzer target of fuzz/ (fuzz/README.md).
#
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#       TARGET: safetensors | checkpoint | corpus | translate | serve | all (every target, as many
#               at once as there are cores: FUZZ_PARALLEL=N sets how many)
#       SECONDS: how long to fuzz each target (0: no time limit, e.g. with -runs=N)
#   scripts/fuzz.sh seeds      rewrites the committed seeds fuzz/corpus/<target>/seed-*
#
# libFuzzer's own flags pass through, e.g. `-jobs=2 -workers=2 -runs=5000000`:
# two processes fuzzing one corpus, 10 million inputs in all; their logs go to
# build/fuzz/logs/TARGET/fuzz-N.log (the fuzzer runs in that folder: give any
# path in a flag as an absolute one).
#
# Builds the fuzz preset first (clang 14, ASan + UBSan; installs clang-14 and
# libFuzzer when missing; FUZZ_NO_BUILD=1 skips the build). Inputs the fuzzer finds interesting go to
# build/fuzz/corpus/TARGET (the committed seeds in fuzz/corpus/TARGET are read,
# never written); a crash, a hang (an input taking over 120 s), a leak, UB or an
# allocation above 2 GB is a finding: the input is written to
# build/fuzz/findings/TARGET/ and the script exits non-zero. libFuzzer also
# writes slow-unit-* files there, inputs that took over 10 s (on a paused or
# overloaded machine, say): not findings; replay one to see how long it takes.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(safetensors checkpoint corpus translate serve)
usage() {
    echo "usage: scripts/fuzz.sh {safetensors|checkpoint|corpus|translate|serve|all} SECONDS [libFuzzer flags...] | scripts/fuzz.sh seeds" >&2
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
# FUZZ_NO_BUILD=1 fuzzes the binaries already built, e.g. to go on with a long
# run on the code it started on while the sources move on
[ "${FUZZ_NO_BUILD:-0}" = 1 ] || cmake --build --preset fuzz -j"${FUZZ_BUILD_JOBS:-2}" >/dev/null

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
    # absolute paths: the fuzzer runs in build/fuzz/logs/TARGET, where -jobs=N writes its fuzz-N.log files
    local work=$PWD/build/fuzz/corpus/$t findings=$PWD/build/fuzz/findings/$t logs=$PWD/build/fuzz/logs/$t
    mkdir -p "$work" "$findings" "$logs"
    # -jobs=N writes fuzz-K.log afresh: keep an earlier run's logs under the time they were last written
    local old
    for old in "$logs"/fuzz-*.log; do
        [[ -f $old && $old =~ /fuzz-[0-9]+\.log$ ]] || continue
        mv "$old" "${old%.log}.$(date -r "$old" +%Y%m%d-%H%M%S).log"
    done
    # a finding is a crash-, leak-, timeout- or oom- file; libFuzzer's slow-unit- files (an input that
    # took over 10 s, as on a paused or overloaded machine) are not: replay one to see
    count_findings() { find "$findings" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l; }
    local findings_before
    findings_before=$(count_findings)
    local flags=(
        -malloc_limit_mb=2048                     # one allocation above 2 GB is a finding: a loader must refuse
                                                  # absurd sizes, not try them
        -rss_limit_mb=4096                        # the whole process: ASan keeps freed memory in its quarantine
                                                  # and free lists, so fuzz_checkpoint's RSS climbs from 1.0 to
                                                  # 1.6-1.8 GB in the first hour (docs/reliability.md); 2 GB would
                                                  # stop a long run with a false "out of memory"
        -purge_allocator_interval=60              # libFuzzer purges (empties ASan's quarantine, hands free memory
                                                  # to the kernel) once the *peak* RSS passes half of -rss_limit_mb,
                                                  # at this interval, forever, since the peak never falls; at the
                                                  # default 1 s fuzz_checkpoint spends 71% of its time in the kernel
                                                  # and slows from 199 to 57 inputs/s. Once a minute costs nothing
                                                  # measurable (136-142 inputs/s; 135-136 with it off, same corpus)
        -timeout=120                              # an input that takes longer is a hang (inputs take milliseconds,
                                                  # fuzz_checkpoint's slowest a few seconds of CPU; the margin is for
                                                  # a shared machine that may pause us; libFuzzer measures wall time,
                                                  # so under `nice -n 19` beside a build a slow input can pass 120 s
                                                  # without hanging: replay a timeout- file alone before calling it one)
        -max_total_time="$seconds"
        -print_final_stats=1
        -close_fd_mask=1                          # the translations the targets print
        -dict="$PWD"/fuzz/dict/"$t".dict
        -artifact_prefix="$findings"/
    )
    case $t in  # room to grow beyond the largest seed
        checkpoint) flags+=(-max_len=65536) ;;  # checkpoints of 6-23 KB
        safetensors) flags+=(-max_len=16384) ;;
        translate) flags+=(-max_len=4096) ;;  # lines longer than the model's limit
        serve) flags+=(-max_len=17000) ;;     # past the 16 KB a request may hold
    esac
    echo "== fuzz_$t for $([ "$seconds" = 0 ] && echo "as long as the flags say" || echo "${seconds}s"): build/fuzz/fuzz/fuzz_$t ${flags[*]} $* $work fuzz/corpus/$t (in $logs)"
    # malloc_context_size=0: no stack trace recorded per allocation (a tenth of the time); a report
    # still shows where the bad access happened, and replaying the input with the default shows the rest
    # a copy of the binary runs, so that a rebuild during a long run does not touch it
    mkdir -p build/fuzz/run
    local binary=$PWD/build/fuzz/run/fuzz_$t.$$
    cp build/fuzz/fuzz/fuzz_"$t" "$binary"
    local status=0
    (
        cd "$logs"
        ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:malloc_context_size=0} \
            UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
            exec "$binary" "${flags[@]}" "$@" "$work" "$OLDPWD"/fuzz/corpus/"$t"
    ) || status=$?
    rm -f "$binary"
    if [ "$status" != 0 ]; then
        if [ "$(count_findings)" = "$findings_before" ]; then
            # stopped by Ctrl-C or `kill -INT` (under -jobs libFuzzer then exits 1), or killed from outside
            echo "fuzz_$t: stopped (exit $status) without writing a finding; the logs are in $logs"
        else
            echo "fuzz_$t: FINDING (exit $status), see build/fuzz/findings/$t/"
        fi
    fi
    return $status
}

if [ "$target" = all ]; then
    # FUZZ_PARALLEL targets at a time (default: one per core; each fuzzer is one process on one thread),
    # each target's output kept in build/fuzz/logs/TARGET.out and printed when it ends
    parallel=${FUZZ_PARALLEL:-$(nproc)}
    case "$parallel" in '' | *[!0-9]* | 0) echo "fuzz.sh: FUZZ_PARALLEL must be a positive number" >&2 && exit 2 ;; esac
    status=0
    mkdir -p build/fuzz/logs
    for ((first = 0; first < ${#targets[@]}; first += parallel)); do
        group=("${targets[@]:first:parallel}")
        pids=()
        for t in "${group[@]}"; do
            run "$t" "$@" >build/fuzz/logs/"$t".out 2>&1 &
            pids+=($!)
        done
        for i in "${!group[@]}"; do
            code=0
            wait "${pids[$i]}" || code=$?
            cat build/fuzz/logs/"${group[$i]}".out
            [ "$code" = 0 ] || status=$code
        done
    done
    exit $status
fi
for t in "${targets[@]}"; do
    if [ "$t" = "$target" ]; then
        run "$t" "$@" || exit $?
        exit 0
    fi
done
usage

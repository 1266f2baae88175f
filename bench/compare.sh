#!/usr/bin/env bash
# tformer against PyTorch eager on the same models (see docs/bench.md).
#
#   bash bench/compare.sh [--threads "1 2"] [--repeats N] [--rounds N] [PRESET ...]
#   bash bench/compare.sh --table FILE    the table of an earlier run's raw figures
#
# For every preset (default: d2l copy small base translate) and every thread
# count, one after the other, it runs `tformer bench` and then
# bench/torch_bench.py twice right after it, so
# the three are measured under the same machine load: PyTorch as installed,
# and PyTorch at its best on this machine ("pytorch-tuned": glibc malloc
# keeps freed memory instead of unmapping it, GLIBC_TUNABLES
# glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=..., which removes its
# page faults, and OMP_WAIT_POLICY=PASSIVE, which stops its idle threads
# spinning). It prints a Markdown table with the ratio best pytorch / tformer
# per figure, the better of the two PyTorch runs counting: above 1, tformer
# is faster (or, for peak_rss_mb, smaller). For train_tokens_per_s the ratio
# is inverted (tformer / pytorch) so that above 1 still means tformer is better.
#
# --rounds N runs the three N times in turn (tformer, pytorch, pytorch-tuned,
# then again), and each engine's best round counts (its lowest time, highest
# rate, lowest memory): on a machine whose speed drifts from minute to minute
# every engine gets the same number of tries under the same drift. Default 1.
# A preset's thread counts run next to each other in every round, and a last
# table gives each engine's thread scaling (best time at the fewest threads ÷
# best time at more) from those neighbouring runs.
#
# The translate preset is the default translation model on real batches of
# the corpus: tformer writes the batches it measured (--save-batches) and
# PyTorch runs on the same ones (--batches).
#
# The decode preset (not in the default list: it needs a trained checkpoint,
# runs/translate/checkpoint.safetensors) translates the first 1,000
# validation sentences with beam 4 and greedily: tformer writes them
# (--save-sentences) and bench/torch_decode.py translates the same ones with
# the same weights, batched and KV-cached.
#
# GFLOP/s: tformer counts the GEMM work of each run (2mnk per product) and
# prints what the run achieved and what its bare products achieve on the same
# shapes called one after the other through core::blas::gemm (the limit:
# libxsmm's kernels or OpenBLAS's sgemm, as core/blas.cpp picks them, the
# "sgemm" columns); PyTorch's column is the same work divided by PyTorch's
# time (both engines run the same products; PyTorch on OpenBLAS alone).
# The ceiling column is the ratio tformer would reach with its products at
# that bare speed and no time spent outside them: a target above it needs
# faster products, not less overhead.
#
# Environment: TFORMER (default build/release/apps/tformer), PYTHON (default
# /usr/bin/python3, which must import torch), OUT (the raw JSON lines;
# default build/bench/compare-<date>.jsonl).
set -euo pipefail
cd "$(dirname "$0")/.."

threads="1 2"
rounds=1
repeats=()
presets=()
table=""
while (($#)); do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --repeats) repeats=(--repeats "$2"); shift 2 ;;  # default: each preset's own count
    --rounds) rounds="$2"; shift 2 ;;
    --table) table="$2"; shift 2 ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    -*) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
    *) presets+=("$1"); shift ;;
  esac
done
((${#presets[@]})) || presets=(d2l copy small base translate)

PYTHON=${PYTHON:-/usr/bin/python3}

# PyTorch as installed, then tuned (see above); and when the environment
# chooses OpenBLAS's kernels (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE), tuned once
# more with those unset, so that OpenBLAS picks the CPU's own kernel set
# ("pytorch-native"). The fastest of them counts: PyTorch at its best. Only
# this command changes those variables, and only for PyTorch's runs.
torch_runs() {
  local tuned=(env GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184 OMP_WAIT_POLICY=PASSIVE)
  "$PYTHON" "$@" --engine pytorch >> "$OUT"
  "${tuned[@]}" "$PYTHON" "$@" --engine pytorch-tuned >> "$OUT"
  if [[ -n ${OPENBLAS_CORETYPE:-} || -n ${OPENBLAS_L2_SIZE:-} ]]; then
    "${tuned[@]}" -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PYTHON" "$@" --engine pytorch-native >> "$OUT"
  fi
}

# runs every preset at every thread count, each engine in turn, into $OUT
measure() {
  TFORMER=${TFORMER:-build/release/apps/tformer}
  OUT=${OUT:-build/bench/compare-$(date +%Y%m%d-%H%M%S).jsonl}
  [[ -x $TFORMER ]] || { echo "compare.sh: $TFORMER not built (cmake --build build/release --target tformer)" >&2; exit 1; }
  "$PYTHON" -c 'import torch' 2>/dev/null || { echo "compare.sh: $PYTHON cannot import torch" >&2; exit 1; }
  mkdir -p "$(dirname "$OUT")"
  : > "$OUT"

  # Per preset, round by round, every thread count in turn: the runs whose
  # ratio is the thread scaling (and "no slower with more threads") sit
  # minutes apart, not a whole pass over the presets apart, so the machine's
  # drift (5-20% within minutes here) falls on both alike.
  for p in "${presets[@]}"; do
    tformer_batches=() torch_batches=()
    if [[ $p == translate ]]; then  # PyTorch runs on the batches tformer measured
      batches="$(dirname "$OUT")/translate-batches.json"
      tformer_batches=(--save-batches "$batches") torch_batches=(--batches "$batches")
    fi
    if [[ $p == decode ]]; then  # PyTorch translates the sentences tformer measured
      sentences="$(dirname "$OUT")/decode-sentences.txt"
      tformer_batches=(--save-sentences "$sentences")
    fi
    for ((r = 1; r <= rounds; r++)); do
      for t in $threads; do
        load=$(cut -d' ' -f1 /proc/loadavg)
        echo "compare.sh: $p at $t thread(s), round $r of $rounds, load $load" >&2
        # the load line tags the pair, so the table can show what it was measured under (the last round's)
        printf '{"engine":"machine","preset":"%s","threads":%s,"figure":"load_1min","value":%s}\n' "$p" "$t" "$load" >> "$OUT"
        "$TFORMER" bench --preset "$p" --threads "$t" "${repeats[@]}" "${tformer_batches[@]}" >> "$OUT"
        if [[ $p == decode ]]; then
          torch_runs bench/torch_decode.py --sentences "$sentences" --threads "$t" "${repeats[@]}"
          continue
        fi
        # every later run measures the batches the first one saved
        ((${#tformer_batches[@]} == 0)) || tformer_batches=(--load-batches "$batches")
        torch_runs bench/torch_bench.py --preset "$p" --threads "$t" "${repeats[@]}" "${torch_batches[@]}"
      done
    done
  done

  echo "compare.sh: raw figures in $OUT" >&2
}

if [[ -n $table ]]; then  # no measuring: the table of figures already written
  [[ -f $table ]] || { echo "compare.sh: --table $table: no such file" >&2; exit 1; }
  OUT=$table
else
  measure
fi
"$PYTHON" - "$OUT" <<'EOF'
import json, sys

TORCH = ("pytorch", "pytorch-tuned", "pytorch-native")  # PyTorch's runs: the best counts
rows, load, info = {}, {}, {}
for text in open(sys.argv[1]):
    r = json.loads(text)
    key = (r["preset"], r["threads"])
    if r["engine"] == "machine":
        load[key] = r["value"]
    elif r["figure"] == "info":
        info.setdefault(r["engine"], r)
    else:  # every round's value; best_of keeps each engine's best
        rows.setdefault(key, {}).setdefault(r["figure"], {}).setdefault(r["engine"], []).append(r["value"])

order = ["train_step_ms", "train_step_cpu_ms", "forward_eval_ms", "greedy_decode_ms", "train_tokens_per_s", "peak_rss_mb",
         "train_step_gflops", "forward_eval_gflops", "greedy_decode_gflops",
         "beam4_ms", "greedy_ms", "beam4_sentences_per_s", "greedy_sentences_per_s"]  # the last four: preset decode
higher_is_better = {"train_tokens_per_s", "train_step_gflops", "forward_eval_gflops", "greedy_decode_gflops",
                    "beam4_sentences_per_s", "greedy_sentences_per_s"}

# each engine's best round: the lowest time or memory, the highest rate
for figs in rows.values():
    for f, by_engine in figs.items():
        lower = f.endswith("_ms") or f == "peak_rss_mb"
        for engine, values in by_engine.items():
            by_engine[engine] = min(values) if lower else max(values)

# PyTorch's GFLOP/s: tformer's count of the same products over PyTorch's time
for (preset, threads), figs in rows.items():
    for run in ("train_step", "forward_eval", "greedy_decode"):
        work = figs.get(f"{run}_gflop", {}).get("tformer")
        for engine, ms in figs.get(f"{run}_ms", {}).items():
            if work is not None and engine != "tformer" and ms:
                figs.setdefault(f"{run}_gflops", {})[engine] = round(work / (ms * 1e-3), 2)
if "tformer" in info:
    print(f"OpenBLAS core: {info['tformer'].get('openblas_core')}, "
          f"OPENBLAS_CORETYPE: {info['tformer'].get('openblas_coretype') or '(not set)'}, "
          f"tformer's libxsmm kernels: {info['tformer'].get('libxsmm_target', '(none: before libxsmm)')}")
for engine in TORCH:
    if engine in info:
        r = info[engine]
        print(f"{engine}: PyTorch {r.get('torch')}, {r.get('blas')}, OpenBLAS core: {r.get('openblas_core', '?')}, "
              f"OPENBLAS_CORETYPE: {r.get('openblas_coretype') or '(not set)'}, decoding: {r.get('decode')}")
print()
# The ceiling: the ratio tformer would reach if it ran its products at their
# bare speed (core::blas::gemm: libxsmm or OpenBLAS) on the same shapes and
# spent no time outside them, so a target above the ceiling cannot be met by
# work outside the GEMMs; only faster products (or fewer) would.
def ceiling(figs, f):
    run = next((r for r in ("train_step", "forward_eval", "greedy_decode") if f.startswith(r)), None)
    if f == "train_tokens_per_s":
        run = "train_step"
    if run is None or f == f"{run}_cpu_ms":
        return ""
    work = figs.get(f"{run}_gflop", {}).get("tformer")
    bare = figs.get(f"{run}_sgemm_gflops", {}).get("tformer")
    torch_ms = [x for x in (figs.get(f"{run}_ms", {}).get(e) for e in TORCH) if x]
    if not work or not bare or not torch_ms:
        return ""
    floor_ms = work / bare * 1e3
    return f"{min(torch_ms) / floor_ms:.2f}"

print("| preset | threads | load | figure | tformer | pytorch | pytorch tuned | pytorch native kernels | ratio (best pytorch) | bare sgemm | ceiling |")
print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for (preset, threads), figs in rows.items():
    for f in order:
        v = figs.get(f, {})
        if not v:  # a figure this preset does not measure (decode has no training step)
            continue
        t = v.get("tformer")
        torch_runs = [x for x in (v.get(e) for e in TORCH) if x is not None]
        if t is None or not torch_runs:
            ratio = "n/a"
        elif f in higher_is_better:
            ratio = f"{t / max(torch_runs):.2f}"
        else:
            ratio = f"{min(torch_runs) / t:.2f}"
        # GFLOP/s rows: what bare sgemm reaches on the same shapes, the limit
        bare = figs.get(f.replace("_gflops", "_sgemm_gflops"), {}).get("tformer", "") if f.endswith("_gflops") else ""
        print(f"| {preset} | {threads} | {load.get((preset, threads), '')} | {f} | {t} | {v.get('pytorch')} | "
              f"{v.get('pytorch-tuned')} | {v.get('pytorch-native', '')} | {ratio} | {bare} | {ceiling(figs, f)} |")

# Thread scaling: each engine's best time at the fewest threads measured ÷ its
# best at more (above 1: faster with more threads; below 1: slower). For
# PyTorch, the faster of its two configurations at each count.
counts = {}
for (preset, threads) in rows:
    counts.setdefault(preset, []).append(threads)
scaling = [(p, min(ts), t) for p, ts in counts.items() for t in sorted(ts) if t != min(ts)]
def best(figs, f, engines):
    xs = [figs.get(f, {}).get(e) for e in engines]
    xs = [x for x in xs if x]
    return min(xs) if xs else None
if [x for x in scaling if x[0] != "decode"]:
    print()
    print("| preset | threads | tformer train | eval | decode | pytorch train | eval | decode |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for preset, lo, hi in scaling:
        if preset == "decode":
            continue
        cells = []
        for engines in (("tformer",), TORCH):
            for f in ("train_step_ms", "forward_eval_ms", "greedy_decode_ms"):
                a, b = best(rows[(preset, lo)], f, engines), best(rows[(preset, hi)], f, engines)
                cells.append(f"{a / b:.2f}" if a and b else "n/a")
        print(f"| {preset} | {lo} → {hi} | " + " | ".join(cells) + " |")
decode = [(lo, hi) for p, lo, hi in scaling if p == "decode"]
if decode:
    print()
    print("| preset | threads | tformer beam 4 | greedy | pytorch beam 4 | greedy |")
    print("|---|---|---:|---:|---:|---:|")
    for lo, hi in decode:
        cells = []
        for engines in (("tformer",), TORCH):
            for f in ("beam4_ms", "greedy_ms"):
                a, b = best(rows[("decode", lo)], f, engines), best(rows[("decode", hi)], f, engines)
                cells.append(f"{a / b:.2f}" if a and b else "n/a")
        print(f"| decode | {lo} → {hi} | " + " | ".join(cells) + " |")
EOF

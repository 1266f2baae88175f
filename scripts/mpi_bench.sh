#!/usr/bin/env bash
# Measures data-parallel training on this machine, for docs/distributed.md:
#   1. the default translation preset's throughput: one process at --threads 1,
#      two ranks at --threads 1 each (the same global batch, so the same
#      steps), and two ranks without overlapping the all-reduce with backward;
#   2. the gradient all-reduce for the default and base models (bench/bench_allreduce);
#   3. one training step on every core (a whole machine) of the default
#      model on its real batches and of the base model (tformer bench);
#   4. from those, the scaling estimate at 4, 16 and 64 machines on 10 and
#      100 Gb/s networks (ring all-reduce model, see docs/distributed.md),
#      and every figure as the rows of docs/distributed.md's tables;
#   5. the commands of the BLEU check (the whole default preset, 1 process vs
#      2 ranks), which it runs too with MPI_BENCH_BLEU=1.
# Every figure is wall-clock time: run it on an otherwise IDLE machine.
#
#   bash scripts/mpi_bench.sh                    # roughly 6 minutes on 2 idle cores
#   MPI_BENCH_BLEU=1 bash scripts/mpi_bench.sh   # and the BLEU check: roughly 10 minutes more
#   MPI_BENCH_QUICK=1 bash scripts/mpi_bench.sh   # a smoke run (a few minutes): checks the script, figures mean nothing
#
# Settings (environment): MPI_BENCH_STEPS (steps per training run, default
# 300), MPI_BENCH_OUT (default runs/mpi-bench). Everything is written there:
# each run's output, throughput.txt, allreduce.jsonl, steps.jsonl, report.md.
# Needs a release build with MPI (cmake --preset release finds Open MPI when
# scripts/install-deps.sh installed it) and python3 for the estimate.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=${MPI_BENCH_QUICK:-0}
steps=${MPI_BENCH_STEPS:-$([ "$quick" = 1 ] && echo 12 || echo 300)}
out=${MPI_BENCH_OUT:-runs/mpi-bench}
tf=build/release/apps/tformer
ar=build/release/bench/bench_allreduce
for exe in "$tf" "$ar"; do
  [ -x "$exe" ] || { echo "mpi_bench: $exe is missing: cmake --preset release && cmake --build --preset release" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "mpi_bench: no mpirun (apt-get install openmpi-bin)" >&2; exit 1; }
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1  # everything said here is kept beside the figures

if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# Open MPI's single-copy shared memory (CMA) needs ptrace rights between the
# ranks, which containers often forbid; the tests turn it off, and so do we
# unless told otherwise (export OMPI_MCA_btl_vader_single_copy_mechanism=cma to measure with it)
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
cores=$(nproc)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "mpi_bench: $(date -u '+%F %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $cores cores ($cpu)"
echo "mpi_bench: load average $(cut -d' ' -f1-3 /proc/loadavg) (should be near 0), $steps steps per training run" \
     "$([ "$quick" = 1 ] && echo '(MPI_BENCH_QUICK: a smoke run, the figures mean nothing)')"
echo "mpi_bench: single-copy mechanism: $OMPI_MCA_btl_vader_single_copy_mechanism; output in $out"

# The same global batch everywhere: the preset's 2,000-token buckets, cut by rows across the ranks.
warmup=$(( steps < 400 ? steps / 2 : 200 ))  # the preset's 200 warm-up steps, or fewer in a short run
val=$([ "$quick" = 1 ] && echo 20 || echo 200)
common=(train translate --steps "$steps" --warmup "$warmup" --val-sentences "$val" --quiet --overwrite --threads 1)
mpi2=(mpirun -np 2 --bind-to core)
[ "$cores" -ge 2 ] || mpi2=(mpirun -np 2 --oversubscribe --bind-to none)
trained() {  # "trained N steps in X s (Y target tokens/s; ..." -> "X Y"
  sed -n 's/^trained \([0-9]*\) steps in \([0-9.]*\) s (\([0-9]*\) target tokens\/s.*/\2 \3/p' "$1"
}
run() {  # name, then the command
  local name=$1; shift
  echo "== $name: $*"
  "$@" < /dev/null > "$out/$name.txt" 2>&1 || { cat "$out/$name.txt"; exit 1; }
  read -r seconds rate < <(trained "$out/$name.txt")
  echo "   $seconds s, $rate target tokens/s"
  echo "$name $seconds $rate" >> "$out/throughput.txt"
}
rm -f "$out/throughput.txt"
run one-rank   "$tf" "${common[@]}" --out "$out/one-rank"
run two-ranks  "${mpi2[@]}" "$tf" "${common[@]}" --out "$out/two-ranks"
run no-overlap env TFORMER_OVERLAP=0 "${mpi2[@]}" "$tf" "${common[@]}" --out "$out/no-overlap"
grep -h "data-parallel: the gradient all-reduce" "$out"/two-ranks.txt "$out"/no-overlap.txt | sed 's/^/   /'
# the two runs trained the same steps on the same batches: their losses agree to float rounding
paste -d, "$out/one-rank/loss-steps.csv" "$out/two-ranks/loss-steps.csv" | awk -F, 'NR > 1 {
    d = $2 - $4; if (d < 0) d = -d; if (d > worst) worst = d } END {
    printf "   largest per-step loss difference, 1 vs 2 ranks, over %d steps: %.2g\n", NR - 1, worst }'

echo "== all-reduce times (bench/bench_allreduce, 2 ranks)"
"${mpi2[@]}" "$ar" --models default,base --repeats "$([ "$quick" = 1 ] && echo 3 || echo 20)" < /dev/null | tee "$out/allreduce.jsonl"

echo "== one training step on every core: the default model on its real batches, and the base model (tformer bench)"
repeats=(); [ "$quick" = 1 ] && repeats=(--repeats 1)
"$tf" bench --preset translate --threads "$cores" --train-only "${repeats[@]}" | tee "$out/steps.jsonl"
"$tf" bench --preset base --threads "$cores" --train-only --repeats "$([ "$quick" = 1 ] && echo 1 || echo 5)" | tee -a "$out/steps.jsonl"

echo "== the figures for docs/distributed.md (also in $out/report.md)"
python3 - "$out" "$cores" <<'EOF' | tee "$out/report.md"
import json, sys
out, cores = sys.argv[1], int(sys.argv[2])
runs = {}
for line in open(f"{out}/throughput.txt"):
    name, seconds, rate = line.split()
    runs[name] = (float(seconds), float(rate))
one = runs["one-rank"][1]

print("Throughput, default preset, same global batch (`--threads 1` per rank):\n")
print("| run | target tokens/s | speed-up |\n| --- | ---: | ---: |")
labels = {"one-rank": "1 process, `--threads 1`", "two-ranks": "`mpirun -np 2`, `--threads 1`",
          "no-overlap": "`mpirun -np 2`, `--threads 1`, `TFORMER_OVERLAP=0`"}
for name, label in labels.items():
    print(f"| {label} | {runs[name][1]:,.0f} | {runs[name][1] / one:.2f} |")
print(f"\nspeed-up of 2 ranks over 1: {runs['two-ranks'][1] / one:.2f}x (the goal: at least 1.6x)\n")

ar = {}
for line in open(f"{out}/allreduce.jsonl"):
    d = json.loads(line)
    if "figure" in d:
        ar.setdefault(d["model"], {"params": d["params"], "mb": d["mb"]})[d["figure"]] = d["value"]
print("The gradient all-reduce between 2 ranks on this machine, median (ms):\n")
print("| model | parameters | gradient (float32) | buckets of 1 MB | one flat all-reduce | bucketed, as training does it |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for m, v in ar.items():
    print(f"| {m} | {v['params'] / 1e6:.2f} M | {v['mb']:.1f} MB | {v['buckets']:.0f} | {v['flat_ms']:.2f} ms | {v['reducer_ms']:.2f} ms |")

compute = {}  # seconds per training step on every core: tformer bench's translate (the default model) and base
for line in open(f"{out}/steps.jsonl"):
    d = json.loads(line)
    if d.get("figure") == "train_step_ms":
        compute["default" if d["preset"] == "translate" else d["preset"]] = d["value"] / 1000
print(f"\nCompute per step, one machine ({cores} cores): "
      f"default {compute['default'] * 1000:.1f} ms, base {compute['base'] * 1000:.1f} ms\n")

# The ring all-reduce of b bytes over N machines: each machine sends and receives 2(N-1)/N·b bytes in
# 2(N-1) messages per bucket; t = 2(N-1)·k·α + 2(N-1)/N·b/β + t_packing, efficiency c / (c + t), no overlap.
networks = {"10 Gb/s": (10e9 / 8, 30e-6), "100 Gb/s": (100e9 / 8, 5e-6)}  # β (bytes/s), α (s)
print("The estimate (α = 30 µs and 5 µs, β the nominal rate; k, b, t_packing and c measured above):\n")
print("| model | machines | network | all-reduce (ms) | compute (ms) | efficiency |")
print("| --- | ---: | --- | ---: | ---: | ---: |")
for model in ("default", "base"):
    v = ar[model]
    nbytes = 4 * v["params"]
    packing = max(0.0, v["reducer_ms"] - v["flat_ms"]) / 1000  # copies into and out of the buckets, measured here
    c = compute[model]
    for n in (4, 16, 64):
        for net, (bandwidth, latency) in networks.items():
            t = 2 * (n - 1) * v["buckets"] * latency + 2 * (n - 1) / n * nbytes / bandwidth + packing
            print(f"| {model} | {n} | {net} | {t * 1000:.1f} | {c * 1000:.0f} | {c / (c + t):.1%} |")
EOF

# The BLEU check: the whole default preset, one process against two ranks, the same global batch.
bleu1=("$tf" train translate --threads 1 --overwrite --out "$out/bleu-1")
bleu2=("${mpi2[@]}" "$tf" train translate --threads 1 --overwrite --out "$out/bleu-2")
echo "== the BLEU check (the whole default preset; roughly 6 minutes for one process and 4 for two ranks on 2 idle cores)"
echo "   ${bleu1[*]}"
echo "   ${bleu2[*]}"
echo "   grep -H -e BLEU -e '^trained' $out/bleu-1/summary.txt $out/bleu-2/summary.txt"
if [ "${MPI_BENCH_BLEU:-0}" = 1 ]; then
  extra=(); [ "$quick" = 1 ] && extra=(--steps 12 --warmup 6 --val-sentences 20)
  "${bleu1[@]}" "${extra[@]}" < /dev/null > "$out/bleu-1.txt" 2>&1 || { cat "$out/bleu-1.txt"; exit 1; }
  "${bleu2[@]}" "${extra[@]}" < /dev/null > "$out/bleu-2.txt" 2>&1 || { cat "$out/bleu-2.txt"; exit 1; }
  for n in 1 2; do  # rank 0's summary of each run
    grep -h -e '^trained' -e 'validation corpus BLEU-4' "$out/bleu-$n/summary.txt" | sed "s/^/   $n: /"
  done
  paste -d, "$out/bleu-1/loss-steps.csv" "$out/bleu-2/loss-steps.csv" | awk -F, 'NR > 1 {
      d = $2 - $4; if (d < 0) d = -d; if (d > worst) worst = d } END {
      printf "   largest per-step loss difference, 1 vs 2 ranks, over %d steps: %.2g\n", NR - 1, worst }'
else
  echo "   (MPI_BENCH_BLEU=1 runs them here)"
fi
echo "mpi_bench: done; load average now $(cut -d' ' -f1-3 /proc/loadavg)"

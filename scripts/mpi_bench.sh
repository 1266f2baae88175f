#!/usr/bin/env bash
# Measures data-parallel training on this machine, for docs/distributed.md:
#   1. the default translation preset's throughput: one process at --threads 1,
#      two ranks at --threads 1 each (the same global batch, so the same
#      steps), and two ranks without overlapping the all-reduce with backward;
#   2. the gradient all-reduce for our model sizes (bench/bench_allreduce);
#   3. one training step on every core (a whole machine) of the default
#      model on its real batches and of the base model (tformer bench);
#   4. from those, the scaling estimate at 4, 16 and 64 machines on 10 and
#      100 Gb/s networks (ring all-reduce model, see docs/distributed.md).
# Every figure is wall-clock time: run it on an otherwise IDLE machine.
#
#   bash scripts/mpi_bench.sh [STEPS]     # STEPS per training run, default 300
#
# Needs a release build with MPI (cmake --preset release finds Open MPI when
# scripts/install-deps.sh installed it) and python3 for the estimate table.
set -euo pipefail
cd "$(dirname "$0")/.."

steps=${1:-300}
tf=build/release/apps/tformer
ar=build/release/bench/bench_allreduce
out=build/mpi-bench
mkdir -p "$out"
for exe in "$tf" "$ar"; do
  [ -x "$exe" ] || { echo "mpi_bench: $exe is missing: cmake --preset release && cmake --build --preset release" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "mpi_bench: no mpirun (apt-get install openmpi-bin)" >&2; exit 1; }
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
cores=$(nproc)
echo "mpi_bench: $cores cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (should be near 0), $steps steps per run"

# the same global batch everywhere: the preset's 2,000-token buckets, cut by rows across the ranks
warmup=$(( steps < 400 ? steps / 2 : 200 ))  # the preset's 200 warm-up steps, or fewer in a short check
common=(train translate --steps "$steps" --warmup "$warmup" --val-sentences 200 --quiet --overwrite)
trained() {  # "trained N steps in X s (Y target tokens/s; ..." -> "X Y"
  sed -n 's/^trained \([0-9]*\) steps in \([0-9.]*\) s (\([0-9]*\) target tokens\/s.*/\2 \3/p' "$1"
}
run() {  # name, then the command
  local name=$1; shift
  echo "== $name: $*"
  "$@" > "$out/$name.txt" 2>&1 || { cat "$out/$name.txt"; exit 1; }
  read -r seconds rate < <(trained "$out/$name.txt")
  echo "   $seconds s, $rate target tokens/s"
  echo "$name $seconds $rate" >> "$out/throughput.txt"
}
rm -f "$out/throughput.txt"
run one-rank   "$tf" "${common[@]}" --threads 1 --out "$out/one-rank"
run two-ranks  mpirun -np 2 --bind-to core "$tf" "${common[@]}" --threads 1 --out "$out/two-ranks"
run no-overlap env TFORMER_OVERLAP=0 mpirun -np 2 --bind-to core "$tf" "${common[@]}" --threads 1 --out "$out/no-overlap"
grep -h "validation corpus BLEU-4, beam 4" "$out"/one-rank.txt "$out"/two-ranks.txt | sed 's/^/   /'
# the two runs trained the same steps on the same batches: their losses agree to float rounding
paste -d, "$out/one-rank/loss-steps.csv" "$out/two-ranks/loss-steps.csv" | awk -F, 'NR > 1 {
    d = $2 - $4; if (d < 0) d = -d; if (d > worst) worst = d } END { printf "   largest per-step loss difference, 1 vs 2 ranks: %.2g\n", worst }'

echo "== all-reduce times (bench/bench_allreduce, 2 ranks)"
mpirun -np 2 --bind-to core "$ar" --repeats 20 | tee "$out/allreduce.jsonl"

echo "== one training step on every core: the default model on its real batches, and the base model (tformer bench)"
"$tf" bench --preset translate --threads "$cores" | tee "$out/steps.jsonl"
"$tf" bench --preset base --threads "$cores" --repeats 5 | tee -a "$out/steps.jsonl"

echo "== the estimate (docs/distributed.md explains the model)"
python3 - "$out" <<'EOF'
import json, os, sys
out = sys.argv[1]
runs = {}
for line in open(f"{out}/throughput.txt"):
    name, seconds, rate = line.split()
    runs[name] = (float(seconds), float(rate))
one, two, no_overlap = runs["one-rank"][1], runs["two-ranks"][1], runs["no-overlap"][1]
print(f"throughput: 1 rank {one:.0f}, 2 ranks {two:.0f} ({two / one:.2f}x), "
      f"2 ranks without overlap {no_overlap:.0f} ({no_overlap / one:.2f}x) target tokens/s")

ar = {}
for line in open(f"{out}/allreduce.jsonl"):
    d = json.loads(line)
    if "figure" in d:
        ar.setdefault(d["model"], {"params": d["params"]})[d["figure"]] = d["value"]
compute = {}  # seconds per training step on every core: tformer bench's translate (the default model) and base
for line in open(f"{out}/steps.jsonl"):
    d = json.loads(line)
    if d.get("figure") == "train_step_ms":
        compute["default" if d["preset"] == "translate" else d["preset"]] = d["value"] / 1000
print("all-reduce on this machine, 2 ranks (ms): " + ", ".join(
    f"{m} ({v['params'] / 1e6:.1f} M params) flat {v['flat_ms']:.2f}, bucketed {v['reducer_ms']:.2f} in {v['buckets']:.0f} buckets"
    for m, v in ar.items()))
print(f"compute per step, one machine ({os.cpu_count()} cores): "
      f"default {compute['default'] * 1000:.0f} ms, base {compute['base'] * 1000:.0f} ms")

# ring all-reduce: 2(N-1) messages per bucket, each rank sends and receives 2(N-1)/N of the bytes
networks = {"10 Gb/s": (10e9 / 8, 30e-6), "100 Gb/s": (100e9 / 8, 5e-6)}
print("\n| model | machines | network | all-reduce (ms) | compute (ms) | efficiency |")
print("| --- | ---: | --- | ---: | ---: | ---: |")
for model in ("default", "base"):
    v = ar[model]
    nbytes = 4 * v["params"]
    packing = max(0.0, v["reducer_ms"] - v["flat_ms"]) / 1000  # copies into and out of the buckets, measured here
    for n in (4, 16, 64):
        for net, (bandwidth, latency) in networks.items():
            t = 2 * (n - 1) * latency * v["buckets"] + 2 * (n - 1) / n * nbytes / bandwidth + packing
            c = compute[model]
            print(f"| {model} | {n} | {net} | {t * 1000:.1f} | {c * 1000:.0f} | {c / (c + t):.0%} |")
EOF

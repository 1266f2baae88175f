#!/usr/bin/env bash
# Probes a built tformer with what a careless user and an attacker would try,
# in groups: 1. no shell between tformer and a path, ... 11. clear
# messages, a group of hostile files, and 12. hostile metadata, files, runs
# and input (mpirun's ranks too, when there is an mpirun). For each case it prints the
# exit status (or the signal that killed the program), the first line of
# stderr, and a flag:
#   ok        the outcome wanted (an error exit, or success)
#   SIGNAL    killed by a signal (a crash): always wrong
#   EXIT-0    exit 0 where an error was expected (a value silently accepted)
#   FAILED    an error where success was expected
#   CHECK     the exit status was right but a check on the output failed
#   TIMEOUT   still running after the case's time limit
# and ends with the counts. Exit status: 0 when every case is ok.
#
#   scripts/probe.sh [path/to/tformer]      (default build/release/apps/tformer)
#
# Everything it writes goes to build/probe/ (removed first). It needs
# python3 to craft hostile checkpoints. tformer exits with 130 / 143 only
# after Ctrl-C / SIGTERM, which are the expected outcomes of group 8's cases;
# any other status above 128 is a death by signal.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$PWD
TF=${1:-build/release/apps/tformer}
TF=$(realpath "$TF")
[ -x "$TF" ] || { echo "probe: no tformer at $TF (build it: cmake --build --preset release)" >&2; exit 2; }
W=$root/build/probe
rm -rf "$W"
mkdir -p "$W/out"
cd "$W" || exit 2
PY=$(command -v python3) || { echo "probe: python3 is needed to craft checkpoints" >&2; exit 2; }

total=0 good=0 flagged=0
declare -a flagged_names=()

# report NAME EXPECT RC [CHECK_OK]: one line per case
report() {
    local name=$1 expect=$2 rc=$3 check=${4:-1} flag=ok status
    local first
    first=$(grep -v '^\s*$' "$W/out/$name.stderr" 2>/dev/null | head -1 | cut -c1-150)
    if [ "$rc" -eq 124 ]; then
        status="timeout"; flag=TIMEOUT
    elif [ "$rc" -gt 128 ] && ! [[ "$expect" == exit:* && "$rc" -eq "${expect#exit:}" ]]; then
        status="signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null))"; flag=SIGNAL
    else
        status="exit $rc"
        case $expect in
            error) [ "$rc" -ne 0 ] || flag=EXIT-0 ;;
            ok) [ "$rc" -eq 0 ] || flag=FAILED ;;
            exit:*) [ "$rc" -eq "${expect#exit:}" ] || flag=FAILED ;;
            any) ;;
        esac
        [ "$flag" = ok ] && [ "$check" != 1 ] && flag=CHECK
    fi
    total=$((total + 1))
    if [ "$flag" = ok ]; then good=$((good + 1)); else flagged=$((flagged + 1)); flagged_names+=("$name"); fi
    printf '%-8s %-34s %-14s %s\n' "$flag" "$name" "$status" "${first:-(no stderr)}"
}

# t NAME EXPECT [--stdin FILE] [--limit SECONDS] -- ARGS...: runs tformer ARGS
t() {
    local name=$1 expect=$2 stdin=/dev/null limit=300
    shift 2
    while [ "$1" != -- ]; do
        case $1 in
            --stdin) stdin=$2; shift 2 ;;
            --limit) limit=$2; shift 2 ;;
        esac
    done
    shift
    timeout -k 5 "$limit" "$TF" "$@" <"$stdin" >"$W/out/$name.stdout" 2>"$W/out/$name.stderr"
    RC=$?
    LAST=$name
    report "$name" "$expect" "$RC" "${CHECK:-1}"
    CHECK=1
}
CHECK=1
stderr_has() { grep -q -- "$1" "$W/out/$LAST.stderr"; }
lines_of() { wc -l <"$W/out/$1.stdout"; }

# python helpers that craft hostile checkpoints from a real one
craft() {
    # a file that could not be crafted would make its cases pass or fail for the wrong reason
    "$PY" - "$@" <<'EOF' || { echo "probe: could not craft $3 from $2 ($1)" >&2; exit 2; }
import json, struct, sys, math
def read(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]
def write(path, header, data):
    h = json.dumps(header, separators=(',', ':')).encode()
    open(path, 'wb').write(struct.pack('<Q', len(h)) + h + data)
what, src, dst = sys.argv[1:4]
header, data = read(src)
meta = header['__metadata__']
# tformer-checkpoint-2: everything tformer saves is one JSON object under
# "tformer" (config, step, epoch, rng, vocabularies or tokenizer, and the
# "extra" strings that recreate the data split)
state = json.loads(meta['tformer'])
if what == 'bomb':        # a 78 KB file: a config asking for num_hiddens 20000, no tensors
    c = state['config']
    for k in ('key_size', 'query_size', 'value_size', 'num_hiddens', 'norm_shape', 'ffn_num_input'):
        c[k] = 20000
    c['ffn_num_hiddens'] = 20000
    meta['tformer'] = json.dumps(state)
    write(dst, {'__metadata__': meta}, b'')
elif what == 'meta':      # one value replaced: x.KEY is extra's KEY (a string), else a JSON value or a string
    key, value = sys.argv[4], sys.argv[5]
    if key.startswith('x.'):
        state['extra'][key[2:]] = value
    else:
        try:
            state[key] = json.loads(value)
        except ValueError:
            state[key] = value
    meta['tformer'] = json.dumps(state)
    write(dst, header, data)
elif what == 'deep':      # a member of "extra" nested N levels deep (the JSON text written by hand)
    levels = int(sys.argv[4])
    text = json.dumps(state)
    at = text.index('"extra": {') + len('"extra": {')
    meta['tformer'] = text[:at] + '"deep": ' + '[' * levels + ']' * levels + ', ' + text[at:]
    write(dst, header, data)
elif what in ('tied-huge', 'tied-nan', 'tied-differ'):  # the three copies of tied embeddings changed
    b = bytearray(data)
    copies = ['model.encoder.embedding.weight', 'model.decoder.embedding.weight', 'model.decoder.dense.weight']
    for name in copies if what != 'tied-differ' else copies[2:]:
        begin, end = header[name]['data_offsets']
        if what == 'tied-huge':
            b[begin:end] = struct.pack('<f', 3e38) * ((end - begin) // 4)
        else:
            b[begin + 40:begin + 44] = struct.pack('<f', math.nan if what == 'tied-nan' else 0.5)
    write(dst, header, bytes(b))
elif what == 'nan':       # a model weight set to NaN
    name = sorted(k for k in header if k.startswith('model.') and header[k]['dtype'] == 'F32')[0]
    b = bytearray(data)
    off = header[name]['data_offsets'][0]
    b[off:off + 4] = struct.pack('<f', math.nan)
    write(dst, header, bytes(b))
EOF
}

echo "probe: $TF"
echo "probe: setting up (tiny data and checkpoints in $W)"
head -300 "$root/data/fra-eng/fra.txt" >tiny.txt
printf 'hello world\nno tabs on this line\nnor on this one\n' >notabs.txt
mkdir -p adir
tiny=(--num-hiddens 8 --ffn-num-hiddens 16 --num-heads 2 --num-layers 1 --threads 1 --quiet)
if ! { "$TF" train copy --epochs 1 --batches-per-epoch 2 --threads 1 --quiet --out copy >/dev/null 2>&1 &&
    "$TF" train translate --preset d2l --data tiny.txt --num-examples 0 --epochs 1 "${tiny[@]}" --out d2l >/dev/null 2>&1 &&
    "$TF" train translate --data tiny.txt --steps 2 --vocab-size 120 --val-sentences 5 --warmup 1 "${tiny[@]}" \
        --out sp >/dev/null 2>&1; }; then
    echo "probe: could not train the small checkpoints the cases need" >&2
    exit 2
fi
craft bomb d2l/checkpoint.safetensors bomb.safetensors
craft nan copy/checkpoint.safetensors nan.safetensors
head -c 3000 sp/checkpoint.safetensors >truncated.safetensors
head -c 5000 /dev/urandom >random.safetensors
printf '\n' >empty-line.txt

printf '%-8s %-34s %-14s %s\n' flag case status "first line of stderr"
echo "-- 1. no shell between tformer and a path"
t tutorial-injection ok -- tutorial 4 --out "$W/x'; touch $W/INJECTED; echo '"
CHECK=$([ ! -e "$W/INJECTED" ] && echo 1 || echo 0)
report tutorial-no-injected-file ok 0 "$CHECK"
t tutorial-apostrophe-dir ok -- tutorial 4 --out "$W/it's here"

echo "-- 2. a crafted checkpoint must not make us allocate its config"
t crafted-config-translate error --limit 60 -- translate --checkpoint bomb.safetensors "Go."
t crafted-config-eval error --limit 60 -- eval --checkpoint bomb.safetensors --data tiny.txt

echo "-- 3. crashes"
t num-layers-0 error -- train translate --num-layers 0 --out n0
t train-threads-100000 ok -- train translate --preset d2l --data tiny.txt --epochs 1 --num-hiddens 8 --ffn-num-hiddens 16 \
    --num-heads 2 --num-layers 1 --quiet --threads 100000 --out th
t translate-threads-1000000 ok -- translate --checkpoint sp/checkpoint.safetensors --threads 1000000 "Go."

echo "-- 4. NaN"
t lr-1e20 error -- train copy --epochs 1 --lr 1e20 --threads 1 --quiet --out nan1
CHECK=$([ ! -e nan1/checkpoint.safetensors ] && echo 1 || echo 0)
report lr-1e20-saved-nothing ok 0 "$CHECK"
cp copy/checkpoint.safetensors before.safetensors
t resume-lr-1e20 error -- train copy --epochs 3 --batches-per-epoch 2 --lr 1e20 --threads 1 --quiet --resume --out copy
CHECK=$(cmp -s before.safetensors copy/checkpoint.safetensors && echo 1 || echo 0)
report resume-lr-1e20-kept-checkpoint ok 0 "$CHECK"
t lr-1000-warns ok -- train copy --epochs 1 --lr 1000 --threads 1 --quiet --out div
CHECK=$(grep -q "diverging" out/lr-1000-warns.stderr && echo 1 || echo 0)
report lr-1000-warning-printed ok 0 "$CHECK"
t nan-weights-eval error -- eval --checkpoint nan.safetensors --threads 1
CHECK=$(stderr_has "hold values that are not finite (NaN or infinity)" && echo 1 || echo 0)
report nan-weights-named ok 0 "$CHECK"

echo "-- 5. memory"
t num-hiddens-20000 error --limit 60 -- train copy --num-hiddens 20000 --threads 1 --out m1
t num-hiddens-100000 error --limit 60 -- train copy --num-hiddens 100000 --threads 1 --out m2
t num-steps-1000 any --limit 120 -- train translate --preset d2l --data tiny.txt --num-steps 1000 --steps 1 --threads 1 --quiet --out m3
t beam-100000 error -- translate --checkpoint sp/checkpoint.safetensors --beam 100000 "Go."
t max-memory-tiny error -- train copy --max-memory 0.001 --threads 1 --out m4

echo "-- 6. negative values are refused, not taken for 'not given'"
for flag in "--epochs -5" "--batch-size -1" "--num-steps -3" "--num-hiddens -4" "--num-heads -2" "--num-layers -1" \
    "--dropout -1" "--lr -1" "--lr -inf" "--clip -3" "--seed -7" "--val-fraction -1" "--num-examples -5" \
    "--sample-size -5" "--warmup -1" "--label-smoothing -0.1" "--vocab-size -1" "--batch-tokens -1" "--average -1"; do
    read -r -a f <<<"$flag"
    t "train${f[0]}=${f[1]}" error -- train translate --preset d2l "${f[@]}" --out neg
done
t translate-beam-0 error -- translate --checkpoint sp/checkpoint.safetensors --beam 0 "Go."
t translate-length-penalty-nan error -- translate --checkpoint sp/checkpoint.safetensors --length-penalty nan "Go."
t eval-max-sentences-5 error -- eval --checkpoint sp/checkpoint.safetensors --max-sentences -5
t eval-copy-with-beam error -- eval --checkpoint copy/checkpoint.safetensors --beam 2
t eval-d2l-with-beam error -- eval --checkpoint d2l/checkpoint.safetensors --data tiny.txt --beam 4

echo "-- 7. overflow"
t epochs-overflow-constant error -- train translate --schedule constant --epochs 99999999999999999999 --out o1
t epochs-overflow-cosine error -- train translate --schedule cosine --epochs 99999999999999999999 --out o2
t steps-overflow error -- train copy --steps 99999999999999999999 --out o3
t bench-repeats-overflow error --limit 30 -- bench --repeats 99999999999999999999

echo "-- 8. Ctrl-C and SIGTERM keep the run"
for sig in INT TERM; do
    code=$([ $sig = INT ] && echo 130 || echo 143)
    rm -rf "sig$sig"
    "$TF" train copy --epochs 100000 --threads 1 --quiet --out "sig$sig" >"out/sig$sig.stdout" 2>"out/sig$sig.stderr" &
    pid=$!
    sleep 3
    kill -s $sig $pid
    wait $pid
    RC=$?
    LAST=sig$sig
    report "sig$sig" "exit:$code" "$RC"
    t "sig$sig-checkpoint-loads" ok -- eval --checkpoint "sig$sig/checkpoint.safetensors" --threads 1
done

echo "-- 9. disks"
cp copy/checkpoint.safetensors before.safetensors
size=$(stat -c %s copy/checkpoint.safetensors)
(ulimit -f $((size / 2048)); exec "$TF" train copy --epochs 1 --seed 9 --threads 1 --quiet --overwrite --out copy) \
    >out/ulimit-f.stdout 2>out/ulimit-f.stderr
RC=$?
LAST=ulimit-f
report ulimit-f error "$RC" "$(cmp -s before.safetensors copy/checkpoint.safetensors && echo 1 || echo 0)"
touch copy/.checkpoint.safetensors.tmp-999999999-0
t stale-temporary-save ok -- train copy --epochs 1 --batches-per-epoch 2 --threads 1 --quiet --overwrite --out copy
CHECK=$([ ! -e copy/.checkpoint.safetensors.tmp-999999999-0 ] && echo 1 || echo 0)
report stale-temporary-removed ok 0 "$CHECK"
t summary-written ok -- train copy --epochs 1 --batches-per-epoch 2 --threads 1 --quiet --out sum
CHECK=$([ -s sum/summary.txt ] && echo 1 || echo 0)
report summary-not-empty ok 0 "$CHECK"

echo "-- 10. translate on stdin: one line out per line in"
printf 'Go.\n\nI lost.\n\n' >blank-lines.txt
t stdin-blank-lines ok --stdin blank-lines.txt -- translate --checkpoint sp/checkpoint.safetensors --beam 1
CHECK=$([ "$(lines_of stdin-blank-lines)" -eq 4 ] && echo 1 || echo 0)
report stdin-blank-lines-kept ok 0 "$CHECK"
"$PY" -c "print('the cat sat on the mat ' * 45000)" >long-line.txt
t stdin-1mb-line ok -- translate --checkpoint sp/checkpoint.safetensors --beam 1 --threads 1 "$(head -c 100000 long-line.txt)"
CHECK=$(stderr_has "longer than the model's limit" && echo 1 || echo 0)
report stdin-1mb-line-warned ok 0 "$CHECK"
t stdin-1mb-line-stdin ok --stdin long-line.txt -- translate --checkpoint sp/checkpoint.safetensors --beam 1 --threads 1
printf 'Go.\nbad \xff byte\nI lost.\n' >bad-utf8.txt
t stdin-invalid-utf8 error --stdin bad-utf8.txt -- translate --checkpoint sp/checkpoint.safetensors --beam 1
CHECK=$([ "$(lines_of stdin-invalid-utf8)" -eq 3 ] && stderr_has "line 2" && echo 1 || echo 0)
report stdin-invalid-utf8-lines-kept ok 0 "$CHECK"
t stdin-empty-input ok --stdin empty-line.txt -- translate --checkpoint sp/checkpoint.safetensors --beam 1

echo "-- 11. clear messages"
t data-is-directory error -- train translate --data adir --out c1
t data-without-tabs error -- train translate --data notabs.txt --out c2
t data-without-tabs-d2l error -- train translate --preset d2l --data notabs.txt --out c2
t data-bin-ls error -- train translate --preset d2l --data /bin/ls --epochs 1 --out c3
t data-missing error -- train translate --data nonexistent.txt --out c4
t ffn-num-hiddens-0 error -- train translate --ffn-num-hiddens 0 --out c5
for kv in "step=abc" "epoch=1e99" "rng=garbage" "x.num_examples=stoll" "x.sample_size=-5" "x.data_seed=x" \
    "x.val_fraction=nan" "x.num_steps=99999999999999999999" "config={" "src_vocab=tformer-vocab 1 99"; do
    key=${kv%%=*}
    craft meta d2l/checkpoint.safetensors "tampered-$key.safetensors" "$key" "${kv#*=}"
    t "tampered-$key" error -- eval --checkpoint "tampered-$key.safetensors" --data tiny.txt --threads 1
done
for kv in "x.val_sentences=-1" "x.sample_size=abc" "tokenizer={\"type\":\"sentencepiece\",\"model\":\"AAAA\"}"; do
    key=${kv%%=*}
    craft meta sp/checkpoint.safetensors "tampered-sp-$key.safetensors" "$key" "${kv#*=}"
    t "tampered-sp-$key" error -- eval --checkpoint "tampered-sp-$key.safetensors" --data tiny.txt --threads 1
done
t train-translat error -- train translat
CHECK=$(stderr_has "translat" && echo 1 || echo 0)
report train-translat-named ok 0 "$CHECK"
t warmup-too-long error -- train copy --schedule cosine --warmup 5000 --steps 10 --threads 1 --quiet --out c6
CHECK=$(stderr_has "--warmup" && echo 1 || echo 0)
report warmup-error-names-flag ok 0 "$CHECK"
touch out-is-a-file
t out-is-a-file error --limit 20 -- train translate --out out-is-a-file
CHECK=$(grep -q "fra-eng:" out/out-is-a-file.stdout && echo 0 || echo 1)
report out-checked-before-data ok 0 "$CHECK"
t out-not-writable error --limit 20 -- train translate --preset d2l --data tiny.txt --out /proc/tformer-probe
CHECK=$(grep -q "fra-eng:" out/out-not-writable.stdout && echo 0 || echo 1)
report out-writability-before-data ok 0 "$CHECK"
t resume-other-batch-size error -- train translate --preset d2l --data tiny.txt --num-examples 0 --epochs 2 \
    "${tiny[@]}" --batch-size 32 --resume --out d2l
t resume-other-seed error -- train translate --preset d2l --data tiny.txt --num-examples 0 --epochs 2 \
    "${tiny[@]}" --seed 5 --resume --out d2l
t sample-size-with-num-examples error -- train translate --preset d2l --data tiny.txt --num-examples 100 \
    --sample-size 50 --out c7
t show-attention-with-beam error -- translate --checkpoint sp/checkpoint.safetensors --beam 4 --show-attention pics "Go."
t new-run-over-checkpoint error -- train copy --epochs 1 --threads 1 --quiet --out copy
t resume-and-overwrite error -- train copy --epochs 1 --threads 1 --quiet --resume --overwrite --out copy
t warmup-with-constant error -- train translate --preset d2l --schedule constant --warmup 100 --out c8

echo "-- hostile files"
t checkpoint-missing error -- translate --checkpoint nope.safetensors "Go."
t checkpoint-truncated error -- translate --checkpoint truncated.safetensors "Go."
t checkpoint-random error -- translate --checkpoint random.safetensors "Go."
t checkpoint-directory error -- translate --checkpoint adir "Go."
t checkpoint-copy-to-translate error -- translate --checkpoint copy/checkpoint.safetensors "Go."
t eval-data-directory error -- eval --checkpoint d2l/checkpoint.safetensors --data adir

echo "-- 12. hostile metadata, files, runs and input"
for levels in 100000 1000000; do
    craft deep d2l/checkpoint.safetensors "deep-$levels.safetensors" "$levels"
    t "deep-$levels-translate" error -- translate --checkpoint "deep-$levels.safetensors" "go ."
    CHECK=$(stderr_has "nested more than 8 levels deep" && echo 1 || echo 0)
    report "deep-$levels-named" ok 0 "$CHECK"
    t "deep-$levels-eval" error -- eval --checkpoint "deep-$levels.safetensors" --data tiny.txt --threads 1
    rm -rf "deep-$levels" && mkdir "deep-$levels" && cp "deep-$levels.safetensors" "deep-$levels/checkpoint.safetensors"
    t "deep-$levels-resume" error -- train translate --preset d2l --data tiny.txt --num-examples 0 --epochs 2 \
        "${tiny[@]}" --resume --out "deep-$levels"
done
craft meta sp/checkpoint.safetensors format-number.safetensors format 2
t metadata-format-number error -- translate --checkpoint format-number.safetensors "Go."
craft meta sp/checkpoint.safetensors tokenizer-type-number.safetensors tokenizer '{"type": 2, "model": "AAAA"}'
t tokenizer-type-number error -- translate --checkpoint tokenizer-type-number.safetensors "Go."
CHECK=$(stderr_has "field 'tokenizer.type' should be a string, got number 2" && echo 1 || echo 0)
report tokenizer-type-named ok 0 "$CHECK"
craft meta sp/checkpoint.safetensors tokenizer-not-base64.safetensors tokenizer '{"type": "sentencepiece", "model": "!!!!"}'
t tokenizer-not-base64 error -- translate --checkpoint tokenizer-not-base64.safetensors "Go."
CHECK=$(stderr_has "field 'tokenizer.model' is not base64" && echo 1 || echo 0)
report tokenizer-base64-named ok 0 "$CHECK"
mkfifo fifo
t checkpoint-fifo error --limit 20 -- translate --checkpoint fifo "Go."
t data-fifo error --limit 20 -- train translate --data fifo --threads 1 --out fifo-run
t checkpoint-device error --limit 20 -- translate --checkpoint /dev/zero "Go."
CHECK=$(stderr_has "is a character device, not a regular file" && echo 1 || echo 0)
report checkpoint-device-named ok 0 "$CHECK"
for what in tied-huge tied-nan tied-differ; do craft "$what" sp/checkpoint.safetensors "$what.safetensors"; done
t weights-huge ok -- translate --checkpoint tied-huge.safetensors --beam 1 --threads 1 "Go."
CHECK=$(stderr_has "beyond what training produces" && echo 1 || echo 0)
report weights-huge-warned ok 0 "$CHECK"
t weights-tied-nan error -- translate --checkpoint tied-nan.safetensors "Go."
CHECK=$(stderr_has "3 tensor(s) hold values that are not finite" && echo 1 || echo 0)
report weights-tied-nan-named ok 0 "$CHECK"
t weights-tied-differ error -- translate --checkpoint tied-differ.safetensors "Go."
CHECK=$(stderr_has "values differ: decoder.dense.weight differs from encoder.embedding.weight" && echo 1 || echo 0)
report weights-tied-differ-named ok 0 "$CHECK"
ln -s nowhere dangling
t out-dangling-link error -- train copy --epochs 1 --threads 1 --out dangling
CHECK=$(stderr_has "symbolic link to 'nowhere', which does not exist" && echo 1 || echo 0)
report out-dangling-link-explained ok 0 "$CHECK"
t argument-error-makes-nothing error -- train translate --num-hiddens 30 --num-heads 4 --out made/new
CHECK=$([ ! -e made ] && echo 1 || echo 0)
report argument-error-made-nothing ok 0 "$CHECK"
"$TF" train copy --epochs 100000 --threads 1 --quiet --out locked >/dev/null 2>&1 &
first=$!
for _ in $(seq 100); do [ -s locked/.tformer.lock ] && break; sleep 0.1; done
t second-run-same-out error -- train copy --epochs 1 --threads 1 --quiet --overwrite --out locked
CHECK=$(stderr_has "is in use by another run (PID $first" && echo 1 || echo 0)
report second-run-names-pid ok 0 "$CHECK"
kill -KILL "$first"
wait "$first" 2>/dev/null
t stale-lock-taken-over ok -- train copy --epochs 1 --batches-per-epoch 2 --threads 1 --quiet --overwrite --out locked
CHECK=$(stderr_has "ended without unlocking it; taking it over" && echo 1 || echo 0)
report stale-lock-said ok 0 "$CHECK"
printf 'Go.\nbad\0byte\nI lost.\n' >nul.txt
t stdin-nul-byte error --stdin nul.txt -- translate --checkpoint sp/checkpoint.safetensors --beam 1
CHECK=$([ "$(lines_of stdin-nul-byte)" -eq 3 ] && stderr_has "line 2: translate: the sentence holds a NUL byte" && echo 1 || echo 0)
report stdin-nul-byte-lines-kept ok 0 "$CHECK"
printf 'Go.\rI lost.\r' >cr-only.txt
t stdin-cr-only ok --stdin cr-only.txt -- translate --checkpoint sp/checkpoint.safetensors --beam 1
CHECK=$([ "$(lines_of stdin-cr-only)" -eq 2 ] && echo 1 || echo 0)
report stdin-cr-only-two-lines ok 0 "$CHECK"
if command -v mpirun >/dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    mpi=(train translate --data tiny.txt --steps 2 --val-sentences 5 --warmup 1 "${tiny[@]}" --out mpi)
    timeout -k 5 120 mpirun --oversubscribe --bind-to none -np 1 "$TF" "${mpi[@]}" --vocab-size 120 : \
        -np 1 "$TF" "${mpi[@]}" --vocab-size 100 </dev/null >out/mpi-settings.stdout 2>out/mpi-settings.stderr
    RC=$?
    LAST="mpi-settings"
    report mpi-settings error "$RC" "$(stderr_has "vocab-size is 100 on rank 1 but 120 on rank 0" && echo 1 || echo 0)"
fi

echo
echo "probe: $total cases: $good with the outcome wanted, $flagged flagged"
if [ "$flagged" -gt 0 ]; then
    echo "probe: flagged: ${flagged_names[*]}"
    exit 1
fi

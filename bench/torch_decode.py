#!/usr/bin/env python3
"""The decoding benchmark of `tformer bench --preset decode`, in PyTorch eager mode on the CPU.

    build/release/apps/tformer bench --preset decode --save-sentences build/bench/val1000.txt
    /usr/bin/python3 bench/torch_decode.py --checkpoint runs/translate/checkpoint.safetensors \\
        --sentences build/bench/val1000.txt --threads 2 [--repeats N] [--out FILE]

The model is bench/torch_bench.py's seed 000 Transformer (d2l's names, a KV
cache per decoder block) with the checkpoint's weights. The sentences are
decoded as tformer decodes them: sorted by length, batches of up to
--batch-tokens source tokens, every live hypothesis of a batch one row of
each product, under torch.no_grad. The beam search is tformer's: per
sentence the K best continuations of all its rows; those ending in <eos>
leave with score log p / length^alpha (the length counting <eos>); the
sentence stops when its K best all end, or at the step limit. Finished rows
leave the batch and the caches are gathered (index_select) to follow the
survivors. Greedy decoding drops each row at its <eos> likewise.

Figures are JSON lines like tformer's, e.g.
    {"engine":"pytorch","preset":"decode","threads":2,"figure":"beam4_ms","value":1234.5}
--out writes the beam-4 translations (one per line) to compare with `tformer translate`.
"""
import argparse
import base64
import json
import math
import os
import pathlib
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "scripts"))
from torch_bench import EncoderDecoder, blas_kernels  # noqa: E402  seed 000's model with a KV cache
from torch_translate import load_safetensors, tokenizers  # noqa: E402

PAD, BOS, EOS = 1, 2, 3


def load(path):
    """torch_bench's model with the checkpoint's weights (blks.blockN -> blks.N), its tokenizers and step limit."""
    tensors, meta = load_safetensors(path)
    info = json.loads(meta["tformer"])
    c = info["config"]
    p = dict(task="translate", src_vocab=c["src_vocab_size"], tgt_vocab=c["tgt_vocab_size"], d=c["num_hiddens"],
             ffn=c["ffn_num_hiddens"], heads=c["num_heads"], layers=c["num_layers"], dropout=0.0)
    net = EncoderDecoder(p)
    state = {name[len("model."):].replace(".blks.block", ".blks."): t
             for name, t in tensors.items() if name.startswith("model.")}
    net.load_state_dict(state, strict=False)  # the positional encodings P are computed, not stored
    missing = [k for k in net.state_dict() if k not in state and not k.endswith("pos_encoding.P")]
    if missing:
        sys.exit(f"torch_decode.py: {path} lacks {missing}")
    net.eval()
    src, tgt = tokenizers(info)
    return net, src, tgt, c["num_steps"]


def batches(sources, batch_tokens):
    """Indices of the sources, shortest first, cut where rows x longest would pass batch_tokens."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    out, steps = [], 0
    for i in order:
        n = len(sources[i])
        if not out or (len(out[-1]) + 1) * max(n, steps) > batch_tokens:
            out.append([])
            steps = 0
        out[-1].append(i)
        steps = max(steps, n)
    return out


class Search:
    """The decoder's side of one batch: per block the self-attention K/V of every row, the encoder's K/V per row."""

    def __init__(self, net, ids):
        S = max(len(x) for x in ids)
        enc_X = torch.tensor([x + [PAD] * (S - len(x)) for x in ids])
        self.net, self.valid = net, torch.tensor([len(x) for x in ids])
        enc = net.encoder(enc_X, self.valid)
        self.cross = [blk.attention2.project_kv(enc, enc) for blk in net.decoder.blks]
        self.caches = [{"cross": kv} for kv in self.cross]
        self.steps = 0

    def step(self, tokens, rows):
        """Last tokens (n) of rows whose sentences are `rows` (n) -> log-probabilities (n, V)."""
        dec = self.net.decoder
        X = dec.pos_encoding(dec.embedding(tokens[:, None]) * math.sqrt(dec.d), start=self.steps)
        for blk, cache in zip(dec.blks, self.caches):
            X = blk.step_kv(X, cache, self.valid[rows])
        self.steps += 1
        return F.log_softmax(dec.dense(X[:, 0]), dim=-1)

    def follow(self, parents, rows):
        """Rows i continue rows parents[i]; the encoder's K/V rows follow their sentences."""
        H = self.net.decoder.blks[0].attention1.num_heads
        heads = lambda r: (r[:, None] * H + torch.arange(H)).reshape(-1)  # noqa: E731
        for cache, (K, V) in zip(self.caches, self.cross):
            cache["K"], cache["V"] = cache["K"][heads(parents)], cache["V"][heads(parents)]
            cache["cross"] = (K[heads(rows)], V[heads(rows)])


@torch.no_grad()
def greedy(net, ids, max_steps):
    s = Search(net, ids)
    B = len(ids)
    rows, tokens = torch.arange(B), torch.full((B,), BOS)
    out = [[] for _ in range(B)]
    for step in range(max_steps):
        tokens = s.step(tokens, rows).argmax(dim=-1)
        keep = tokens != EOS
        for r, t in zip(rows.tolist(), tokens.tolist()):
            if t != EOS:
                out[r].append(t)
        if not keep.any() or step + 1 == max_steps:
            break
        parents = keep.nonzero()[:, 0]
        rows, tokens = rows[parents], tokens[parents]
        s.follow(parents, rows)
    return out


@torch.no_grad()
def beam(net, ids, K, alpha, max_steps, exhaustive=False):
    s = Search(net, ids)
    B = len(ids)
    rows = torch.arange(B)  # each row's sentence
    hist = torch.full((B, 0), BOS)  # (n, t): each row's tokens
    logp = torch.zeros(B, dtype=torch.float64)
    finished = [[] for _ in range(B)]
    for step in range(max_steps):
        tokens = hist[:, -1] if step > 0 else torch.full((len(rows),), BOS)
        total = logp[:, None] + s.step(tokens, rows).double()  # (n, V)
        top, ids_ = total.topk(K, dim=-1)  # (n, K), each row's K best
        # per sentence, the K best of its rows' candidates: rows -> (B, K rows, K) padded with -inf
        first = torch.searchsorted(rows, torch.arange(B))  # each sentence's first row (rows are in sentence order)
        pos = torch.arange(len(rows)) - first[rows]
        grid = torch.full((B, K, K), -math.inf, dtype=torch.float64)
        grid[rows, pos] = top
        best, flat = grid.reshape(B, K * K).topk(K, dim=-1)  # (B, K)
        ok = best > -math.inf
        sent = torch.arange(B)[:, None].expand(B, K)[ok]
        parent = first[sent] + flat[ok] // K
        token = ids_[parent, flat[ok] % K]
        score = best[ok]
        ends = token == EOS
        length = step + 1
        for b, p, sc in zip(sent[ends].tolist(), parent[ends].tolist(), score[ends].tolist()):
            finished[b].append((sc / length ** alpha, hist[p].tolist()))
        go = ~ends
        if not exhaustive:  # tasks/decode.cpp's retire_decided: a sentence with K finished
            # hypotheses, none of whose live ones scores better as it stands than the K-th, is decided
            kth = torch.full((B,), -math.inf, dtype=torch.float64)
            for b, f in enumerate(finished):
                if len(f) >= K:
                    kth[b] = sorted((x[0] for x in f), reverse=True)[K - 1]
            still = torch.zeros(B, dtype=torch.bool)
            live = go.nonzero().squeeze(1)
            better = score[live] / length ** alpha > kth[sent[live]]
            still[sent[live][better]] = True
            go = go & still[sent]
        if not go.any():
            break
        parents, rows, logp = parent[go], sent[go], score[go]
        hist = torch.cat([hist[parents], token[go][:, None]], dim=1)
        if step + 1 < max_steps:
            s.follow(parents, rows)
    else:  # ran out of steps: log p / length, no <eos>
        for b, h, lp in zip(rows.tolist(), hist.tolist(), logp.tolist()):
            finished[b].append((lp / max_steps ** alpha, h))
    return [max(f, key=lambda x: x[0])[1] if f else [] for f in finished]


def translate_all(net, sources, batch_tokens, K, max_steps):
    out = [None] * len(sources)
    for batch in batches(sources, batch_tokens):
        ids = [sources[i] for i in batch]
        results = beam(net, ids, K, 1.0, max_steps) if K > 1 else greedy(net, ids, max_steps)
        for i, r in zip(batch, results):
            out[i] = r
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default="runs/translate/checkpoint.safetensors")
    ap.add_argument("--sentences", required=True, help="one English sentence a line (tformer bench --save-sentences)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-tokens", type=int, default=500)
    ap.add_argument("--engine", default="pytorch")
    ap.add_argument("--out", help="write the beam-4 translations here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    net, src, tgt, max_len = load(args.checkpoint)
    lines = [line.rstrip("\n") for line in open(args.sentences)]
    sources = [(src.encode(line) + [EOS])[:max_len] for line in lines]

    def emit(figure, **fields):
        print(json.dumps({"engine": args.engine, "preset": "decode", "threads": args.threads, "figure": figure,
                          **fields}), flush=True)

    emit("info", torch=torch.__version__, **blas_kernels(), openblas_coretype=os.environ.get("OPENBLAS_CORETYPE", ""),
         sentences=len(sources), batch_tokens=args.batch_tokens, decode="batched, kv-cache, torch.no_grad")
    for name, K in (("beam4", 4), ("greedy", 1)):
        out = translate_all(net, sources, args.batch_tokens, K, max_len)  # warm-up
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            out = translate_all(net, sources, args.batch_tokens, K, max_len)
            times.append((time.perf_counter() - start) * 1e3)
        ms = statistics.median(times)
        emit(f"{name}_ms", value=round(ms, 1))
        emit(f"{name}_sentences_per_s", value=round(len(sources) / (ms * 1e-3), 1))
        if name == "beam4" and args.out:
            with open(args.out, "w") as f:
                for ids in out:
                    f.write(tgt.decode(ids) + "\n")
    emit("peak_rss_mb", value=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))


if __name__ == "__main__":
    main()

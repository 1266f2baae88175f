#!/usr/bin/env python3
"""The model benchmark of `tformer bench`, in PyTorch eager mode on the CPU.

    /usr/bin/python3 bench/torch_bench.py --preset d2l --threads 1 [--repeats N] [--decode kv|d2l]
    /usr/bin/python3 bench/torch_bench.py --preset translate --batches FILE ...

The model is seed 000's (d2l's) encoder-decoder Transformer, written out here
layer by layer with d2l's names: MultiHeadAttention with transpose_qkv and
transpose_output, AddNorm, PositionWiseFFN, the encoder and decoder with
valid-length masking, MaskedSoftmaxCELoss. The presets, the batch (random
tokens, the same valid lengths as tformer's), the figures and the JSON lines
are those of tasks/bench.hpp, so bench/compare.sh can put the two side by side:

    {"engine":"pytorch","preset":"d2l","threads":1,"figure":"train_step_ms","value":3.21}

The translate preset is the default `tformer train translate` model (d 128,
FFN 512, 4 heads, 2 layers, no dropout, one embedding matrix for the
encoder, the decoder and the output layer) on the very batches tformer
measured: `tformer bench --preset translate --save-batches FILE` writes them
(real token ids of the corpus, its SentencePiece vocabulary size, the length
buckets' shapes) and --batches FILE reads them. Its loss is the token mean of
the label-smoothed (0.1) cross-entropy over the whole vocabulary, and each
figure is the mean over the batches (each repetition is the next batch).

Greedy decoding (--decode):
  kv   (default) every decoder block keeps the keys and values it has already
       projected, so each step projects one new token, as tformer does: the
       two engines then do the same work.
  d2l  d2l's own state: each block keeps its *inputs* so far and re-projects
       the whole prefix through W_k and W_v at every step.
Either way <eos> never stops a row, so every run decodes num_steps tokens.
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


def blas_kernels():
    """The BLAS library PyTorch loaded and the kernel set it chose: OpenBLAS
    picks its kernels per CPU at load time (or as OPENBLAS_CORETYPE says), so
    the comparison prints what ran rather than what the machine could run."""
    torch.ones(2, 2) @ torch.ones(2, 2)  # make sure the BLAS library is loaded
    import ctypes
    paths = sorted({line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line and ".so" in line})
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            lib.openblas_get_config.restype = ctypes.c_char_p
            return {"blas": lib.openblas_get_config().decode(), "openblas_core": lib.openblas_get_corename().decode()}
        except (OSError, AttributeError):
            continue
    return {"blas": next((w for w in torch.__config__.show().split() if w.startswith("BLAS_INFO")), "?"),
            "openblas_core": "?"}

# name: vocabularies, sizes, batch shape, timed repeats and warm-up runs (as tasks/bench.cpp)
PRESETS = {
    "d2l": dict(task="translate", src_vocab=184, tgt_vocab=201, d=32, ffn=64, heads=4, layers=2,
                dropout=0.1, batch=64, steps=10, repeats=30, warmup=3),
    "copy": dict(task="copy", src_vocab=11, tgt_vocab=11, d=32, ffn=64, heads=8, layers=2,
                 dropout=0.0, batch=30, steps=10, repeats=30, warmup=3),
    "small": dict(task="translate", src_vocab=8000, tgt_vocab=8000, d=256, ffn=1024, heads=8, layers=3,
                  dropout=0.1, batch=64, steps=32, repeats=5, warmup=1),
    "base": dict(task="translate", src_vocab=8000, tgt_vocab=8000, d=512, ffn=2048, heads=8, layers=6,
                 dropout=0.1, batch=32, steps=32, repeats=3, warmup=1),
    # vocabularies and batches come from the --batches file
    "translate": dict(task="translate", src_vocab=0, tgt_vocab=0, d=128, ffn=512, heads=4, layers=2,
                      dropout=0.0, batch=0, steps=64, repeats=20, warmup=3, corpus=True, tied=True,
                      label_smoothing=0.1),
}
BOS, FIRST_WORD = 2, 4  # d2l's ids: <unk> 0, <pad> 1, <bos> 2, <eos> 3
MASK64 = (1 << 64) - 1


# ---- data -------------------------------------------------------------------------------------

def valid_lengths(seed, n, T):
    """n draws of 1 + (splitmix64 output mod T): tasks::bench_valid_lengths, bit for bit."""
    state, out = seed, []
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        z ^= z >> 31
        out.append(1 + z % T)
    return out


def bench_batch(p, gen, seed=0):
    """Random ids in [4, V); decoder input [<bos>, Y[:, :-1]] as d2l's train_seq2seq builds it."""
    B, T = p["batch"], p["steps"]
    X = torch.randint(FIRST_WORD, p["src_vocab"], (B, T), generator=gen)  # (B, S)
    Y = torch.randint(FIRST_WORD, p["tgt_vocab"], (B, T), generator=gen)  # (B, T)
    lens = valid_lengths(seed, 2 * B, T)  # source lengths first, then target lengths
    X_valid = torch.tensor(lens[:B], dtype=torch.int64)
    Y_valid = torch.tensor(lens[B:], dtype=torch.int64)
    dec_in = torch.cat([torch.full((B, 1), BOS, dtype=torch.int64), Y[:, :-1]], dim=1)
    return X, X_valid, dec_in, Y, Y_valid


# ---- attention ---------------------------------------------------------------------------------

def sequence_mask(X, valid_len, value=0.0):
    """Entries of X (N, L) at positions >= valid_len[n] become value."""
    L = X.size(1)
    keep = torch.arange(L, device=X.device)[None, :] < valid_len[:, None]
    return X.masked_fill(~keep, value)


def masked_softmax(X, valid_lens):
    """Softmax over the last dim of X (N, T, S), keys beyond the valid length filled with -1e6."""
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])  # one length per query row
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return F.softmax(X.reshape(shape), dim=-1)


class DotProductAttention(nn.Module):
    """softmax(Q K^T / sqrt(d)) V with dropout on the weights."""

    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)  # (B*H, T, S)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)  # (B*H, T, d)


def transpose_qkv(X, num_heads):
    """(B, T, D) -> (B*H, T, D/H): the heads become extra batch rows."""
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1).permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads):
    """(B*H, T, D/H) -> (B, T, D), undoing transpose_qkv."""
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d, num_heads, dropout, bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Linear(d, d, bias=bias)
        self.W_k = nn.Linear(d, d, bias=bias)
        self.W_v = nn.Linear(d, d, bias=bias)
        self.W_o = nn.Linear(d, d, bias=bias)

    def project_kv(self, keys, values):
        """Keys and values (B, S, D) -> per-head (B*H, S, D/H), what a KV cache keeps."""
        return transpose_qkv(self.W_k(keys), self.num_heads), transpose_qkv(self.W_v(values), self.num_heads)

    def attend(self, queries, K, V, valid_lens=None):
        """queries (B, T, D) against projected K, V -> (B, T, D)."""
        Q = transpose_qkv(self.W_q(queries), self.num_heads)
        if valid_lens is not None:
            valid_lens = torch.repeat_interleave(valid_lens, self.num_heads, dim=0)
        return self.W_o(transpose_output(self.attention(Q, K, V, valid_lens), self.num_heads))

    def forward(self, queries, keys, values, valid_lens=None):
        return self.attend(queries, *self.project_kv(keys, values), valid_lens)


# ---- blocks -----------------------------------------------------------------------------------------

class PositionWiseFFN(nn.Module):
    def __init__(self, d, ffn):
        super().__init__()
        self.dense1, self.relu, self.dense2 = nn.Linear(d, ffn), nn.ReLU(), nn.Linear(ffn, d)

    def forward(self, X):
        return self.dense2(self.relu(self.dense1(X)))


class AddNorm(nn.Module):
    """ln(dropout(Y) + X)."""

    def __init__(self, d, dropout):
        super().__init__()
        self.dropout, self.ln = nn.Dropout(dropout), nn.LayerNorm(d)

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)


class PositionalEncoding(nn.Module):
    def __init__(self, d, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pos = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1)
        angle = pos / torch.pow(10000, torch.arange(0, d, 2, dtype=torch.float32) / d)
        P = torch.zeros((1, max_len, d))
        P[:, :, 0::2], P[:, :, 1::2] = torch.sin(angle), torch.cos(angle)
        self.register_buffer("P", P)

    def forward(self, X, start=0):
        return self.dropout(X + self.P[:, start:start + X.shape[1], :])


class EncoderBlock(nn.Module):
    def __init__(self, p):
        super().__init__()
        d = p["d"]
        self.attention = MultiHeadAttention(d, p["heads"], p["dropout"])
        self.addnorm1 = AddNorm(d, p["dropout"])
        self.ffn = PositionWiseFFN(d, p["ffn"])
        self.addnorm2 = AddNorm(d, p["dropout"])

    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


class TransformerEncoder(nn.Module):
    def __init__(self, vocab, p):
        super().__init__()
        self.d = p["d"]
        self.embedding = nn.Embedding(vocab, self.d)
        self.pos_encoding = PositionalEncoding(self.d, p["dropout"])
        self.blks = nn.Sequential(*[EncoderBlock(p) for _ in range(p["layers"])])

    def forward(self, X, valid_lens):
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.d))
        for blk in self.blks:
            X = blk(X, valid_lens)
        return X


class DecoderBlock(nn.Module):
    def __init__(self, p):
        super().__init__()
        d = p["d"]
        self.attention1 = MultiHeadAttention(d, p["heads"], p["dropout"])
        self.addnorm1 = AddNorm(d, p["dropout"])
        self.attention2 = MultiHeadAttention(d, p["heads"], p["dropout"])
        self.addnorm2 = AddNorm(d, p["dropout"])
        self.ffn = PositionWiseFFN(d, p["ffn"])
        self.addnorm3 = AddNorm(d, p["dropout"])

    def rest(self, X, X2, cross_kv, enc_valid_lens):
        """After self-attention: AddNorm, encoder-decoder attention, AddNorm, FFN, AddNorm."""
        Y = self.addnorm1(X, X2)
        Z = self.addnorm2(Y, self.attention2.attend(Y, *cross_kv, enc_valid_lens))
        return self.addnorm3(Z, self.ffn(Z))

    def forward(self, X, enc_outputs, enc_valid_lens):
        """Teacher forcing over X (B, T, D): position t sees positions <= t."""
        B, T, _ = X.shape
        dec_valid_lens = torch.arange(1, T + 1).repeat(B, 1)  # (B, T)
        X2 = self.attention1(X, X, X, dec_valid_lens)
        return self.rest(X, X2, self.attention2.project_kv(enc_outputs, enc_outputs), enc_valid_lens)

    def step_kv(self, X, cache, enc_valid_lens):
        """One new token X (B, 1, D); cache holds this block's projected self K/V and cross K/V."""
        K, V = self.attention1.project_kv(X, X)
        if "K" in cache:
            K, V = torch.cat([cache["K"], K], dim=1), torch.cat([cache["V"], V], dim=1)
        cache["K"], cache["V"] = K, V
        X2 = self.attention1.attend(X, K, V)  # the cache holds only the past: nothing to mask
        return self.rest(X, X2, cache["cross"], enc_valid_lens)

    def step_d2l(self, X, cache, enc_valid_lens):
        """d2l's way: keep the block inputs so far, re-project all of them at every step."""
        key_values = X if "X" not in cache else torch.cat([cache["X"], X], dim=1)
        cache["X"] = key_values
        X2 = self.attention1(X, key_values, key_values)
        return self.rest(X, X2, cache["cross"], enc_valid_lens)


class TransformerDecoder(nn.Module):
    def __init__(self, vocab, p):
        super().__init__()
        self.d = p["d"]
        self.embedding = nn.Embedding(vocab, self.d)
        self.pos_encoding = PositionalEncoding(self.d, p["dropout"])
        self.blks = nn.Sequential(*[DecoderBlock(p) for _ in range(p["layers"])])
        self.dense = nn.Linear(self.d, vocab)

    def forward(self, X, enc_outputs, enc_valid_lens):
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.d))
        for blk in self.blks:
            X = blk(X, enc_outputs, enc_valid_lens)
        return self.dense(X)

    def init_state(self, enc_outputs, enc_valid_lens):
        # the encoder outputs are projected once per block, for every step
        caches = [{"cross": blk.attention2.project_kv(enc_outputs, enc_outputs)} for blk in self.blks]
        return {"enc_valid_lens": enc_valid_lens, "caches": caches, "steps": 0}

    def step(self, X, state, mode):
        """Next tokens X (B, 1) -> logits (B, 1, V), extending the state."""
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.d), start=state["steps"])
        for blk, cache in zip(self.blks, state["caches"]):
            step = blk.step_kv if mode == "kv" else blk.step_d2l
            X = step(X, cache, state["enc_valid_lens"])
        state["steps"] += 1
        return self.dense(X)


class EncoderDecoder(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.encoder = TransformerEncoder(p["src_vocab"], p)
        self.decoder = TransformerDecoder(p["tgt_vocab"], p)

    def forward(self, enc_X, dec_X, enc_valid_lens):
        return self.decoder(dec_X, self.encoder(enc_X, enc_valid_lens), enc_valid_lens)


def build_model(p):
    net = EncoderDecoder(p)
    # d2l's xavier_init_weights for translation (Linear weights only); the copy
    # task initialises every matrix, embeddings included (as tasks::build_model)
    for name, param in net.named_parameters():
        if param.dim() == 2 and (p["task"] == "copy" or "embedding" not in name):
            nn.init.xavier_uniform_(param)
    if p.get("tied"):
        # one (V, D) matrix for both embeddings and the output layer, N(0, 1/D) (tasks::build_model)
        shared = net.encoder.embedding.weight
        with torch.no_grad():
            shared.normal_(0.0, 1.0 / math.sqrt(p["d"]))
        net.decoder.embedding.weight = shared
        net.decoder.dense.weight = shared
    return net


def load_batches(path):
    """The batches `tformer bench --save-batches` wrote, as tensors, with the vocabulary sizes."""
    with open(path) as f:
        j = json.load(f)
    batches = []
    for b in j["batches"]:
        X, X_valid = torch.tensor(b["enc_X"]), torch.tensor(b["enc_valid"])
        dec_in, Y, Y_valid = torch.tensor(b["dec_in"]), torch.tensor(b["label"]), torch.tensor(b["label_valid"])
        batches.append((X, X_valid, dec_in, Y, Y_valid))
    return j["src_vocab_size"], j["tgt_vocab_size"], batches


def token_mean_loss(pred, label, valid_len, label_smoothing):
    """The default translation run's loss: label-smoothed cross-entropy averaged over the real tokens."""
    weights = sequence_mask(torch.ones_like(label, dtype=pred.dtype), valid_len)  # (B, T)
    unweighted = F.cross_entropy(pred.reshape(-1, pred.shape[-1]), label.reshape(-1), reduction="none",
                                 label_smoothing=label_smoothing)
    return (unweighted * weights.reshape(-1)).sum() / weights.sum()


def masked_softmax_ce_loss(pred, label, valid_len):
    """d2l's MaskedSoftmaxCELoss: pred (B, T, V), label (B, T), valid_len (B) -> (B)."""
    weights = sequence_mask(torch.ones_like(label, dtype=pred.dtype), valid_len)
    unweighted = F.cross_entropy(pred.permute(0, 2, 1), label, reduction="none")  # (B, T)
    return (unweighted * weights).mean(dim=1)


def greedy_decode(net, src, src_valid_len, num_steps, mode):
    """Greedy decoding of a batch for num_steps tokens; ids (B, num_steps) and summed log-probs (B)."""
    net.eval()
    with torch.no_grad():
        enc_outputs = net.encoder(src, src_valid_len)
        state = net.decoder.init_state(enc_outputs, src_valid_len)
        dec_X = torch.full((src.shape[0], 1), BOS, dtype=torch.int64)
        score = torch.zeros(src.shape[0], dtype=torch.float64)
        out = []
        for _ in range(num_steps):
            logits = net.decoder.step(dec_X, state, mode)  # (B, 1, V)
            logp = F.log_softmax(logits, dim=-1)
            dec_X = logits.argmax(dim=-1)  # (B, 1)
            score += logp.gather(-1, dec_X.unsqueeze(-1)).reshape(-1).double()
            out.append(dec_X)
        return torch.cat(out, dim=1), score


# ---- measuring ------------------------------------------------------------------------------------

def median_ms(warmup, repeats, body, mean=False):
    """Median (or mean) wall-clock and process-CPU milliseconds of body(i) over `repeats` runs after
    `warmup`; i counts every run from 0, so a run can pick the next batch."""
    for i in range(warmup):
        body(i)
    wall, cpu = [], []
    for i in range(warmup, warmup + repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        body(i)
        wall.append((time.perf_counter() - w0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    average = statistics.mean if mean else statistics.median
    return average(wall), average(cpu)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="d2l")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave the default)")
    ap.add_argument("--repeats", type=int, default=0, help="timed runs per figure (0: the preset's)")
    ap.add_argument("--decode", choices=["kv", "d2l"], default="kv", help="greedy decoding state (see above)")
    ap.add_argument("--engine", default="pytorch", help="the name the JSON lines carry (compare.sh: pytorch, pytorch-tuned)")
    ap.add_argument("--batches", help="the batches of `tformer bench --save-batches` (needed by --preset translate)")
    args = ap.parse_args()
    if args.preset not in PRESETS:
        sys.exit(f"torch_bench: unknown preset '{args.preset}' (available: {', '.join(PRESETS)})")
    if args.threads < 0 or args.repeats < 0:
        sys.exit("torch_bench: --threads and --repeats must be positive (0: default)")
    p = dict(PRESETS[args.preset])
    corpus = p.get("corpus", False)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    repeats = args.repeats or p["repeats"]

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    if args.batches:
        p["src_vocab"], p["tgt_vocab"], batches = load_batches(args.batches)
    elif corpus:
        sys.exit(f"torch_bench: --preset {args.preset} needs --batches FILE (tformer bench --save-batches FILE)")
    net = build_model(p)
    if not args.batches:
        batches = [bench_batch(p, gen)]
    batch_at = lambda i: batches[i % len(batches)]  # noqa: E731
    optimizer = torch.optim.Adam(net.parameters(), lr=0.005)

    def line(figure, **fields):
        print(json.dumps({"engine": args.engine, "preset": args.preset, "threads": torch.get_num_threads(),
                          "figure": figure, **fields}, separators=(",", ":")), flush=True)

    line("info", torch=torch.__version__, **blas_kernels(),
         openblas_coretype=os.environ.get("OPENBLAS_CORETYPE", ""),
         parameters=sum(t.numel() for t in net.parameters()), batch=p["batch"], num_steps=p["steps"],
         vocab=p["tgt_vocab"], repeats=repeats, warmup=p["warmup"],
         decode="kv-cache" if args.decode == "kv" else "d2l-reproject")

    def train_step(i):
        X, X_valid, dec_in, Y, Y_valid = batch_at(i)
        logits = net(X, dec_in, X_valid)  # (B, T, V)
        if corpus:
            loss = token_mean_loss(logits, Y, Y_valid, p["label_smoothing"])
        else:
            loss = masked_softmax_ce_loss(logits, Y, Y_valid).sum()  # (B) summed
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)  # as tformer: gradients are dropped, not zero-filled

    net.train()
    train_ms, train_cpu_ms = median_ms(p["warmup"], repeats, train_step, mean=corpus)
    line("train_step_ms", value=round(train_ms, 3))
    line("train_step_cpu_ms", value=round(train_cpu_ms, 3))

    net.eval()

    def forward_eval(i):
        X, X_valid, dec_in, _, _ = batch_at(i)
        with torch.no_grad():
            net(X, dec_in, X_valid)

    line("forward_eval_ms", value=round(median_ms(p["warmup"], repeats, forward_eval, mean=corpus)[0], 3))

    def decode(i):
        X, X_valid, _, Y, _ = batch_at(i)
        greedy_decode(net, X, X_valid, Y.shape[1], args.decode)

    decode_ms = median_ms(p["warmup"], repeats, decode, mean=corpus)[0]
    line("greedy_decode_ms", value=round(decode_ms, 3))
    tokens = sum(float(batch_at(i)[4].sum()) for i in range(p["warmup"], p["warmup"] + repeats)) / repeats
    line("train_tokens_per_s", value=round(tokens / (train_ms * 1e-3), 1))
    line("peak_rss_mb", value=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))


if __name__ == "__main__":
    main()

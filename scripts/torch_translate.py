#!/usr/bin/env python3
"""Loads a tformer translation checkpoint into d2l's PyTorch Transformer
(seed 000's EncoderDecoder, defined in tests/fixtures/make_fixtures.py) and
translates greedily, as d2l's predict_seq2seq does.

    /usr/bin/python3 scripts/torch_translate.py runs/translate/checkpoint.safetensors "I'm home." "He's calm."
    echo "We are friends." | /usr/bin/python3 scripts/torch_translate.py runs/translate/checkpoint.safetensors

Needs Debian's python3-torch and python3-sentencepiece (run with /usr/bin/python3).
The weights load strictly under their d2l names after the "model." prefix is
stripped; a SentencePiece model comes from the checkpoint's metadata. The
output should equal `tformer translate --beam 1` word for word.
"""

import base64
import json
import pathlib
import struct
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures"))
from make_fixtures import EncoderDecoder, TransformerDecoder, TransformerEncoder  # noqa: E402  seed 000's modules

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "BOOL": torch.bool}
UNK, PAD, BOS, EOS = 0, 1, 2, 3  # d2l's order, also SentencePiece's in tformer


def load_safetensors(path):
    """The tensors and the metadata of a safetensors file (8-byte header length, JSON, raw data)."""
    data = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        tensors[name] = torch.frombuffer(raw, dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"]).clone()
    return tensors, metadata


class WordTokenizer:
    """d2l's word vocabulary: the checkpoint's list of tokens in index order."""

    def __init__(self, tokens):
        self.tokens = tokens
        self.index = {t: i for i, t in enumerate(self.tokens)}

    def encode(self, sentence):  # d2l's preprocess_nmt, then words
        text = sentence.replace("\u202f", " ").replace("\xa0", " ").lower()
        text = "".join(" " + c if c in ",.!?" and i > 0 and text[i - 1] != " " else c for i, c in enumerate(text))
        return [self.index.get(w, UNK) for w in text.split(" ") if w]

    def decode(self, ids):
        return " ".join(self.tokens[i] for i in ids)


class SentencePieceTokenizer:
    def __init__(self, model_bytes):
        import sentencepiece
        self.sp = sentencepiece.SentencePieceProcessor(model_proto=model_bytes)

    def encode(self, sentence):
        return self.sp.encode(sentence)

    def decode(self, ids):
        return self.sp.decode(ids)


def d2l_model(c):
    """Seed 000's EncoderDecoder for a checkpoint's config, without dropout (decoding)."""
    args = dict(key_size=c["key_size"], query_size=c["query_size"], value_size=c["value_size"],
                num_hiddens=c["num_hiddens"], norm_shape=[c["norm_shape"]], ffn_num_input=c["ffn_num_input"],
                ffn_num_hiddens=c["ffn_num_hiddens"], num_heads=c["num_heads"], num_layers=c["num_layers"],
                dropout=0.0)
    return EncoderDecoder(TransformerEncoder(c["src_vocab_size"], use_bias=c["use_bias"], **args),
                          TransformerDecoder(c["tgt_vocab_size"], **args))


def tokenizers(info):
    """The source and target tokenizers of a checkpoint's metadata: one SentencePiece model or d2l's words."""
    if "tokenizer" in info:
        sp = SentencePieceTokenizer(base64.b64decode(info["tokenizer"]["model"]))
        return sp, sp
    return WordTokenizer(info["src_vocab"]), WordTokenizer(info["tgt_vocab"])


def load(path):
    """The model, its tokenizers, the longest sequence and the source padding (d2l pads to num_steps)."""
    tensors, meta = load_safetensors(path)
    info = json.loads(meta["tformer"])  # the metadata: one JSON document (config, vocabularies, ...)
    net = d2l_model(info["config"])
    net.load_state_dict({name[len("model."):]: t for name, t in tensors.items() if name.startswith("model.")},
                        strict=True)
    src, tgt = tokenizers(info)
    n = info["config"]["num_steps"]
    pad_to = n if info["extra"].get("pipeline", "d2l") == "d2l" else 0
    return net, src, tgt, n, pad_to


@torch.no_grad()
def translate(net, src, tgt, sentence, max_len, pad_to):
    """Greedy decoding: encode, then feed the decoder its own argmax until <eos>.

    d2l's predict_seq2seq feeds one token per step, and its decoder then adds
    the positional encoding of position 0 to every token (P[:, :1]): a quirk
    that a model trained on short sentences survives, but that makes long
    translations repeat themselves. tformer's cached decoder gives step t
    position t; here the whole prefix is fed each step, with the causal mask
    d2l's DecoderBlock applies in training mode (dropout is 0), which gives the
    same numbers."""
    net.train()  # the causal mask; every dropout was built with p = 0
    ids = (src.encode(sentence) + [EOS])[:max_len]
    valid = torch.tensor([len(ids)])
    enc_X = torch.tensor([ids + [PAD] * max(0, pad_to - len(ids))])
    enc_outputs = net.encoder(enc_X, valid)
    out = []
    for _ in range(max_len):
        dec_X = torch.tensor([[BOS] + out])
        Y, _ = net.decoder(dec_X, net.decoder.init_state(enc_outputs, valid))
        token = int(Y[0, -1].argmax())
        if token == EOS:
            break
        out.append(token)
    return tgt.decode(out)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    net, src, tgt, max_len, pad_to = load(sys.argv[1])
    sentences = sys.argv[2:] or [line.rstrip("\n") for line in sys.stdin]
    for s in sentences:
        print(translate(net, src, tgt, s, max_len, pad_to) if s.strip() else "")


if __name__ == "__main__":
    main()

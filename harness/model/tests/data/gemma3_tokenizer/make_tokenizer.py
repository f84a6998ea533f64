#!/usr/bin/env python3
"""Writes the small Gemma-3-style tokenizer.json and its golden encodings (golden.json).

Test data only: HuggingFace `tokenizers` (pip install tokenizers==0.23.3) builds a tokenizer laid
out as Gemma 3's tokenizer.json is (SentencePiece-style BPE: spaces replaced by U+2581, no byte-level
alphabet, byte fallback to <0xNN> tokens, the special tokens inside model.vocab), trained on a
short text, and records what it encodes for a set of texts. Run from this folder:
    python3 make_tokenizer.py
"""
import json

from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer

# Gemma 3 puts <pad> <eos> <bos> <unk> first and the turn markers later in model.vocab.
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"]
# A user-defined piece: an added token that is not special (Gemma 3's <unusedN> are such).
USER_DEFINED = "<unused0>"
# Gemma 3's image token sits after model.vocab, in added_tokens only.
BEYOND_VOCAB = "<image_soft_token>"

CORPUS = """\
The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away.
A tokenizer cuts text into tokens, and a model reads the tokens one by one.
Byte pair encoding merges the most frequent pair of symbols again and again.
Les élèves étudient à l'école. Über den Wolken scheint die Sonne. Café crème, s'il vous plaît.
Prices: 10 €, 25 € and 100 €. Indented  lines  have  two  spaces.
Tabs\tseparate\tcolumns.
Newlines end lines.
Smile 😀 and laugh 😀 again.
def encode(text):
    return [token for token in text.split()]
"""


def normalize_like_gemma(tok):
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")


def main():
    # Train merges on the normalized text: each line is one word, as Gemma has no pre-tokenizer.
    trainer_tok = Tokenizer(BPE(unk_token="<unk>"))
    normalize_like_gemma(trainer_tok)
    trainer = BpeTrainer(vocab_size=420, min_frequency=2, show_progress=False, special_tokens=[])
    trainer_tok.train_from_iterator(CORPUS.splitlines(keepends=True) * 3, trainer)
    trained = json.loads(trainer_tok.to_str())["model"]

    vocab = {}
    for s in SPECIALS + [USER_DEFINED]:
        vocab[s] = len(vocab)
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for piece, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]

    tok = Tokenizer(BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    normalize_like_gemma(tok)
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_tokens([AddedToken(USER_DEFINED, normalized=False, special=False)])
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in SPECIALS + [BEYOND_VOCAB]])
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A <bos> $B", special_tokens=[("<bos>", vocab["<bos>"])])
    tok.save("tokenizer.json")

    texts = [
        "The quick brown fox",
        " leading space",
        "trailing space ",
        "two  spaces and   three",
        "",
        " ",
        "line one\nline two\n\nend",
        "tabs\tand\ttabs",
        "élève café crème",
        "10 € and 25 €",
        "漢字 unknown to the vocabulary",
        "emoji in the vocabulary 😀 and not 🙂",
        "\x01control\x7f",
        "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
        "<bos>text<eos>",
        "a <unused0> piece",
        "<image_soft_token>",
        "<start_of_turn",
        "The dog sleeps; the fox runs away. " * 8,
    ]
    golden = []
    for text in texts:
        tok.encode_special_tokens = True  # special tokens in the text are plain text
        plain = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        special = tok.encode(text, add_special_tokens=False).ids
        with_bos = tok.encode(text, add_special_tokens=True).ids
        assert with_bos == [vocab["<bos>"]] + special
        golden.append({
            "text": text,
            "plain": plain,
            "special": special,
            "decoded": tok.decode(special, skip_special_tokens=False),
            "decoded_skip_special": tok.decode(special, skip_special_tokens=True),
        })
    with open("golden.json", "w", encoding="utf-8") as f:
        json.dump({"tokenizers_version": __import__("tokenizers").__version__, "cases": golden},
                  f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

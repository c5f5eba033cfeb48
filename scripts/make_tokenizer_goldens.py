#!/usr/bin/env python3
"""Writes the tokenizer goldens tests/text/tokenizer_test.cc reads, and the corpus
scripts/tokenizer_check.sh compares on.

    /usr/bin/python3 scripts/make_tokenizer_goldens.py [OUT_DIR]          # default tests/text/goldens
    /usr/bin/python3 scripts/make_tokenizer_goldens.py --corpus N FILE    # N lines of the test corpus

Needs Hugging Face `tokenizers` (installed with transformers by scripts/setup.sh --with-torch) and
`sentencepiece` (pip). The references are those libraries: each tokenizer is trained here on a
corpus of the repository's docs, then the golden ids are what the library gives.

OUT_DIR gets:
  bpe_gpt2/tokenizer.json     byte-level BPE as GPT-2's: ByteLevel pre-tokenizer with its regex
  bpe_llama3/tokenizer.json   byte-level BPE as Llama 3's / Qwen2's: a Split with their regex, then
                              ByteLevel without one; ignore_merges; NFC normalizer; special tokens
  sp/tokenizer.model          a SentencePiece BPE model with byte fallback (as Llama 2's)
  corpus.txt                  the first 1,000 lines of the test corpus
  <name>.ids                  per corpus line, the ids (space-separated) of encode(line) without
                              added BOS/EOS
The corpus: words, Unicode letters of several scripts, accents (composed and decomposed), emoji
(with ZWJ sequences and skin tones), whitespace runs (spaces, tabs), digits and long numbers,
contractions in any case, and the special tokens, mixed by a seeded generator.
"""
import json
import os
import random
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
GPT2_SPECIALS = ["<|endoftext|>"]
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS = ("the of and to in is that for it as with was on be by at this which from or have an are not but "
         "tensor shard mesh compile kernel gradient optimizer checkpoint").split()
UNICODE = ["naïve", "café", "cafe\u0301", "Übermäßig", "straße", "Ελληνικά", "русский", "日本語のテキスト", "中文分词",
           "한국어", "العربية", "עברית", "हिन्दी", "ไทย", "Ωμέγα", "ﬁ ligature", "x²+y³", "½ ¾", "١٢٣"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🚀🚀", "🇫🇷", "🤖"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", " \t ", "    ", "\u00a0", "\u3000"]
CONTRACTIONS = ["don't", "I'M", "we're", "They've", "you'll", "she'd", "IT'S", "o'clock", "rock'n'roll"]


def corpus_lines(n, seed=2026):
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.45:
                w = rng.choice(WORDS)
                parts.append(w.capitalize() if rng.random() < 0.2 else w)
            elif r < 0.58:
                parts.append(rng.choice(UNICODE))
            elif r < 0.66:
                parts.append(rng.choice(EMOJI))
            elif r < 0.76:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
            elif r < 0.84:
                parts.append(rng.choice(CONTRACTIONS))
            elif r < 0.90:
                parts.append(rng.choice(SPECIALS + GPT2_SPECIALS))
            else:
                parts.append(rng.choice(["...", "!?", "(x)", "{a: 1}", "--", "#", "$5.00", "a/b", "\"q\""]))
        line = ""
        for p in parts:
            line += (rng.choice(SPACES) if rng.random() < 0.25 else " ") + p if line else p
        if rng.random() < 0.1:
            line = rng.choice(SPACES) + line
        if rng.random() < 0.1:
            line += rng.choice(SPACES)
        lines.append(line)
    return lines


def training_text():
    text = []
    for root, _, files in os.walk(os.path.join(ROOT, "docs")):
        for f in sorted(files):
            if f.endswith(".md"):
                text.append(open(os.path.join(root, f), encoding="utf-8").read())
    return text + corpus_lines(3000, seed=7)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--corpus":
        with open(sys.argv[3], "w", encoding="utf-8") as f:
            for line in corpus_lines(int(sys.argv[2])):
                f.write(line + "\n")
        return
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    import sentencepiece as spm

    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "text", "goldens")
    os.makedirs(out, exist_ok=True)
    text = training_text()
    lines = corpus_lines(1000)
    with open(os.path.join(out, "corpus.txt"), "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")

    def write_ids(name, encode):
        with open(os.path.join(out, name + ".ids"), "w") as f:
            for line in lines:
                f.write(" ".join(map(str, encode(line))) + "\n")

    # GPT-2's layout.
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=GPT2_SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(text, trainer)
    os.makedirs(os.path.join(out, "bpe_gpt2"), exist_ok=True)
    tok.save(os.path.join(out, "bpe_gpt2", "tokenizer.json"))
    write_ids("bpe_gpt2", lambda s: tok.encode(s, add_special_tokens=False).ids)

    # Llama 3's / Qwen2's layout.
    tok3 = Tokenizer(models.BPE(ignore_merges=True))
    tok3.normalizer = normalizers.NFC()
    tok3.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok3.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok3.train_from_iterator(text, trainer)
    os.makedirs(os.path.join(out, "bpe_llama3"), exist_ok=True)
    tok3.save(os.path.join(out, "bpe_llama3", "tokenizer.json"))
    write_ids("bpe_llama3", lambda s: tok3.encode(s, add_special_tokens=False).ids)

    # SentencePiece as Llama 2's: BPE, byte fallback, digits split, no normalization of the text
    # beyond the library's default (nmt_nfkc).
    sp_dir = os.path.join(out, "sp")
    os.makedirs(sp_dir, exist_ok=True)
    train_file = os.path.join(sp_dir, "train.txt")
    with open(train_file, "w", encoding="utf-8") as f:
        for t in text:
            f.write(t + "\n")
    spm.SentencePieceTrainer.train(input=train_file, model_prefix=os.path.join(sp_dir, "tokenizer"),
                                   model_type="bpe", vocab_size=1000, byte_fallback=True, split_digits=True,
                                   character_coverage=0.9995, bos_id=1, eos_id=2, unk_id=0, pad_id=-1,
                                   num_threads=1, minloglevel=2)
    os.remove(train_file)
    os.remove(os.path.join(sp_dir, "tokenizer.vocab"))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(sp_dir, "tokenizer.model"))
    write_ids("sp", lambda s: sp.encode(s))
    for name in ("bpe_gpt2", "bpe_llama3", "sp"):
        print(name, sum(len(l.split()) for l in open(os.path.join(out, name + ".ids"))), "ids")


if __name__ == "__main__":
    main()

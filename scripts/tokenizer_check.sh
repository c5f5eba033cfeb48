#!/usr/bin/env bash
# Checks Axle's tokenizers against the reference implementations on a large corpus: every
# tokenizer under tests/text/goldens (byte-level BPE tokenizer.json files against Hugging Face
# tokenizers, a SentencePiece tokenizer.model against the sentencepiece library) encodes the
# LINES-line corpus of scripts/make_tokenizer_goldens.py (Unicode, emoji, whitespace runs, digits,
# special tokens) through `axle tokenize`, and the ids must be the reference's, line for line.
#
#   scripts/tokenizer_check.sh            # uses build/axle, 20000 lines
#   AXLE=build-x/axle LINES=50000 scripts/tokenizer_check.sh
#
# Environment: AXLE (default build/axle), PYTHON (default /usr/bin/python3, with `tokenizers` and
# `sentencepiece`), LINES (default 20000), KEEP=1 keeps the temp dir. Exits 0 when every id agrees,
# or (with a message) when the Python packages are missing; 1 on a mismatch; 2 when a run fails.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AXLE="${AXLE:-build/axle}"
PYTHON="${PYTHON:-/usr/bin/python3}"
LINES="${LINES:-20000}"

if ! "$PYTHON" -c "import tokenizers, sentencepiece" >/dev/null 2>&1; then
  echo "tokenizer_check: skipped: '$PYTHON' cannot import tokenizers and sentencepiece (pip install tokenizers sentencepiece)"
  exit 0
fi
TMP="$(mktemp -d "${TMPDIR:-/tmp}/axle_tokenizer_check.XXXXXX")"
if [[ "${KEEP:-0}" == 1 ]]; then echo "tokenizer_check: keeping $TMP"; else trap 'rm -rf "$TMP"' EXIT; fi

"$PYTHON" "$ROOT/scripts/make_tokenizer_goldens.py" --corpus "$LINES" "$TMP/corpus.txt"
# One document per line, so that the shard is the lines' ids one after the other.
"$PYTHON" -c "
import json, sys
with open(sys.argv[1], encoding='utf-8') as f, open(sys.argv[2], 'w', encoding='utf-8') as out:
    for line in f:
        out.write(json.dumps({'text': line.rstrip('\n')}) + '\n')
" "$TMP/corpus.txt" "$TMP/corpus.jsonl"

status=0
for tok in "$ROOT"/tests/text/goldens/bpe_gpt2/tokenizer.json "$ROOT"/tests/text/goldens/bpe_llama3/tokenizer.json \
           "$ROOT"/tests/text/goldens/sp/tokenizer.model; do
  name="$(basename "$(dirname "$tok")")"
  "$AXLE" tokenize --tokenizer "$tok" --input "$TMP/corpus.jsonl" --output "$TMP/$name.bin" --doc-token none \
    --format uint32 > "$TMP/$name.out" 2>&1 || { echo "tokenizer_check: axle tokenize failed:"; cat "$TMP/$name.out"; exit 2; }
  "$PYTHON" - "$tok" "$TMP/corpus.txt" "$TMP/$name.bin" "$name" <<'PY' || status=1
import struct, sys
import numpy as np

tok_path, corpus, shard, name = sys.argv[1:]
lines = [l.rstrip("\n") for l in open(corpus, encoding="utf-8")]
if tok_path.endswith(".json"):
    from tokenizers import Tokenizer
    t = Tokenizer.from_file(tok_path)
    ref = [t.encode(l, add_special_tokens=False).ids for l in lines]
else:
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=tok_path)
    ref = [sp.encode(l) for l in lines]
data = open(shard, "rb").read()
header = np.frombuffer(data[:1024], dtype="<i4")
got = np.frombuffer(data[1024:], dtype="<u4").astype(np.int64)
assert header[0] == 20240801 and header[2] == len(got), "bad shard header"
at = 0
for i, ids in enumerate(ref):
    if list(got[at:at + len(ids)]) != ids:
        print(f"tokenizer_check: {name}: FAILED at line {i + 1}: {lines[i]!r}\n  reference {ids}\n  axle      "
              f"{list(got[at:at + len(ids) + 3])}")
        sys.exit(1)
    at += len(ids)
if at != len(got):
    print(f"tokenizer_check: {name}: FAILED: axle wrote {len(got) - at} ids more than the reference")
    sys.exit(1)
print(f"tokenizer_check: {name}: {len(lines)} lines, {at} ids, identical to the reference")
PY
done
exit $status

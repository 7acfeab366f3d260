"""Generates the tokenizer benchmark inputs, deterministically:

  tokenizer.json  byte-level BPE (GPT-2 regex, ByteLevel decoder, template
                  with specials) with a vocabulary of VOCAB (default 262144)
                  tokens: the 256 byte symbols plus merges built from
                  pseudo-words in several scripts, ranked by frequency
  text.txt        about SIZE_MB of multilingual text lines to encode

usage: tokenizer_gen.py OUT_DIR [VOCAB] [SIZE_MB]
"""
import json
import os
import random
import sys

SYLLABLES = {
    "latin": ["ka", "to", "ri", "an", "el", "mo", "su", "th", "er", "in", "qu", "st", "on",
              "ba", "de", "li", "ne", "ra", "pe", "co", "ve", "gu", "sh", "or", "ix", "al"],
    "cyrillic": ["ка", "то", "ри", "ан", "ел", "мо", "су", "ще", "ог", "пр", "ст", "ни", "во"],
    "greek": ["κα", "το", "ρι", "αν", "ελ", "μο", "συ", "θε", "ος", "πρ"],
    "cjk": ["中", "文", "字", "日", "本", "語", "国", "人", "大", "学", "生", "時", "間", "東", "京"],
    "hangul": ["한", "국", "어", "문", "장", "입", "니", "다", "서", "울"],
    "devanagari": ["न", "म", "स्", "ते", "दु", "नि", "या", "हि", "ंदी", "पा"],
}


def bytes_to_unicode():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


B2U = bytes_to_unicode()


def bl(s):
    return "".join(B2U[b] for b in s.encode("utf-8"))


def make_words(rng, n):
    words = set()
    scripts = list(SYLLABLES)
    while len(words) < n:
        sc = rng.choice(scripts)
        k = rng.randint(1, 5)
        w = "".join(rng.choice(SYLLABLES[sc]) for _ in range(k))
        if rng.random() < 0.3 and sc == "latin":
            w = w.capitalize()
        words.add(w)
    return sorted(words)


def main():
    out = sys.argv[1]
    vocab_size = int(sys.argv[2]) if len(sys.argv) > 2 else 262144
    size_mb = float(sys.argv[3]) if len(sys.argv) > 3 else 4.0
    os.makedirs(out, exist_ok=True)
    rng = random.Random(2024)
    words = make_words(rng, 200000)
    rng.shuffle(words)  # rank order: a Zipf-like frequency by position

    vocab = {}
    for b in range(256):
        vocab[B2U[b]] = len(vocab)
    merges = []
    # merge chains: each word (with and without a leading space) is built
    # left to right from its byte-level symbols
    for w in words:
        for form in (" " + w, w):
            sym = [c for c in bl(form)]
            cur = sym[0]
            for c in sym[1:]:
                new = cur + c
                if new not in vocab:
                    if len(vocab) >= vocab_size - 3:
                        break
                    vocab[new] = len(vocab)
                    merges.append([cur, c])
                cur = new
        if len(vocab) >= vocab_size - 3:
            break
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    added = []
    for s in specials:
        added.append({"id": len(vocab), "content": s, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
        vocab[s] = len(vocab)
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<|im_start|>": {"id": "<|im_start|>",
                                                "ids": [vocab["<|im_start|>"]],
                                                "tokens": ["<|im_start|>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {k: v for k, v in vocab.items() if v < len(vocab) - 3},
                  "merges": merges},
    }
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)

    # text: Zipf-ish word draws, punctuation, digits, code-like lines, emoji
    target = int(size_mb * 1e6)
    n = 0
    lines = []
    nw = len(words)
    extra = ["\t", "  ", "...", "1234", "3.14", "(x)", "{}", "😀", "👩‍💻", "—", "«»", "<|endoftext|>"]
    while n < target:
        k = rng.randint(5, 40)
        parts = []
        for _ in range(k):
            r = rng.random()
            if r < 0.08:
                parts.append(rng.choice(extra))
            else:
                # Zipf: index ~ nw ** u
                idx = int(nw ** rng.random()) - 1
                w = words[idx]
                if rng.random() < 0.05:  # unseen variant
                    w = w + rng.choice("xyzq")
                parts.append(w)
        line = " ".join(parts) + rng.choice([".", ",", "!", "?", ""])
        lines.append(line)
        n += len(line.encode("utf-8")) + 1
    with open(os.path.join(out, "text.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"tokenizer_gen: vocab {len(vocab)}, merges {len(merges)}, text {n / 1e6:.1f} MB")


if __name__ == "__main__":
    main()

"""Trains small tokenizers with Hugging Face `tokenizers` and writes variants
of them (one tokenizer.json per directory) covering the components graft
implements. Used by the parity test and the fuzzer's seeds."""
import json
import os

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

from corpus import training_text

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _save(tok, root, name, patch=None):
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "tokenizer.json")
    tok.save(p)
    if patch:
        with open(p, encoding="utf-8") as f:
            j = json.load(f)
        patch(j)
        with open(p, "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False)
    return name, p


def _added(tok):
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    tok.add_tokens([
        AddedToken("<special_one>", special=False, normalized=False),
        AddedToken("<word_tok>", single_word=True, normalized=False),
        AddedToken("<lst>", lstrip=True, normalized=False),
        AddedToken("<rst>", rstrip=True, normalized=False),
    ])


def _template(tok, bos, eos=None):
    single = f"{bos} $A" + (f" {eos}" if eos else "")
    sp = [(bos, tok.token_to_id(bos))]
    if eos:
        sp.append((eos, tok.token_to_id(eos)))
    return processors.TemplateProcessing(single=single, special_tokens=sp)


def byte_level_bpe(text, vocab=3000):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIALS, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(text, tr)
    _added(tok)
    tok.post_processor = _template(tok, "<|im_start|>", "<|endoftext|>")
    return tok


def sp_bpe(text, vocab=2500, alphabet=150):
    """SentencePiece-style BPE: trained over Metaspace pieces, limited alphabet
    so that rare chars take the byte fallback."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tr = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<unk>", "<s>", "</s>"],
                             limit_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(text, tr)
    return tok


def add_byte_tokens(j):
    """Puts <0x00>..<0xFF> into the model vocabulary after the specials."""
    vocab = j["model"]["vocab"]
    items = sorted(vocab.items(), key=lambda kv: kv[1])
    head = [k for k, _ in items[:3]]
    rest = [k for k, _ in items[3:]]
    new = head + [f"<0x{b:02X}>" for b in range(256)] + [k for k in rest if not k.startswith("<0x")]
    j["model"]["vocab"] = {k: i for i, k in enumerate(new)}
    nid = len(new)
    for t in j["added_tokens"]:
        if t["content"] in j["model"]["vocab"]:
            t["id"] = j["model"]["vocab"][t["content"]]
        else:
            t["id"] = nid
            nid += 1


def unigram(text, vocab=2000):
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tr = trainers.UnigramTrainer(vocab_size=vocab, special_tokens=["<unk>", "<s>", "</s>"],
                                 unk_token="<unk>", show_progress=False)
    tok.train_from_iterator(text, tr)
    return tok


def wordpiece(text, vocab=2500):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tr = trainers.WordPieceTrainer(vocab_size=vocab, show_progress=False,
                                   special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"])
    tok.train_from_iterator(text, tr)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


def build_all(root):
    text = training_text()
    out = []

    # 1. GPT-2 style byte-level BPE (+ added tokens of every kind)
    bl = byte_level_bpe(text)
    out.append(_save(bl, root, "bytelevel_bpe"))
    bl_json = json.loads(bl.to_str())

    def as_string_merges(j):
        j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m
                                for m in j["model"]["merges"]]
    out.append(_save(bl, root, "bytelevel_bpe_string_merges", as_string_merges))

    # 2. Llama-3 style: Split regex then ByteLevel without regex, ignore_merges
    l3 = Tokenizer.from_str(bl.to_str())
    l3.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    l3.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False),
                                             _template(l3, "<|im_start|>")])

    def ignore_merges(j):
        j["model"]["ignore_merges"] = True
    out.append(_save(l3, root, "llama3_style", ignore_merges))

    # ByteLevel with add_prefix_space
    aps = Tokenizer.from_str(bl.to_str())
    aps.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    out.append(_save(aps, root, "bytelevel_prefix_space"))

    # 3. pre-tokenizer variants in front of a byte-level model (never unknown)
    def bl_variant(name, pre, norm=None):
        t = Tokenizer.from_str(bl.to_str())
        t.pre_tokenizer = pre_tokenizers.Sequence(
            [pre, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        if norm is not None:
            t.normalizer = norm
        out.append(_save(t, root, name))

    for beh in ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]:
        for inv in [False, True]:
            bl_variant(f"split_regex_{beh}_{int(inv)}",
                       pre_tokenizers.Split(Regex(r"\s+|\d|[.,!?]"), behavior=beh, invert=inv))
            bl_variant(f"split_string_{beh}_{int(inv)}",
                       pre_tokenizers.Split(" ", behavior=beh, invert=inv))
    bl_variant("split_empty_match", pre_tokenizers.Split(Regex(r"x*"), behavior="isolated"))
    for scheme in ["always", "first", "never"]:
        for split in [True, False]:
            bl_variant(f"metaspace_{scheme}_{int(split)}",
                       pre_tokenizers.Metaspace(prepend_scheme=scheme, split=split))
    bl_variant("whitespace", pre_tokenizers.Whitespace())
    bl_variant("whitespace_split", pre_tokenizers.WhitespaceSplit())
    bl_variant("digits_individual", pre_tokenizers.Digits(individual_digits=True))
    bl_variant("digits_grouped", pre_tokenizers.Digits(individual_digits=False))
    bl_variant("punctuation", pre_tokenizers.Punctuation())
    bl_variant("punctuation_merged_next", pre_tokenizers.Punctuation(behavior="merged_with_next"))
    bl_variant("bert_pre", pre_tokenizers.BertPreTokenizer())
    bl_variant("char_delimiter", pre_tokenizers.CharDelimiterSplit("e"))
    bl_variant("pre_sequence", pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Digits(True),
        pre_tokenizers.Punctuation()]))

    # normalizer variants (ByteLevel pre-tokenizer after them)
    norms = {
        "nfc": normalizers.NFC(), "nfd": normalizers.NFD(), "nfkc": normalizers.NFKC(),
        "nfkd": normalizers.NFKD(), "lowercase": normalizers.Lowercase(),
        "strip": normalizers.Strip(), "strip_left": normalizers.Strip(left=True, right=False),
        "strip_accents": normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents()]),
        "replace_regex": normalizers.Replace(Regex(r"\s+"), " "),
        "replace_string": normalizers.Replace("o", "0"),
        "prepend": normalizers.Prepend("▁"),
        "bert_norm": normalizers.BertNormalizer(lowercase=True),
        "bert_norm_cased": normalizers.BertNormalizer(lowercase=False, strip_accents=False,
                                                      handle_chinese_chars=True),
        "nmt": normalizers.Nmt(),
        "norm_sequence": normalizers.Sequence([normalizers.NFKD(), normalizers.Lowercase(),
                                               normalizers.Replace("  ", " ")]),
    }
    for nm, n in norms.items():
        t = Tokenizer.from_str(bl.to_str())
        t.normalizer = n
        out.append(_save(t, root, f"norm_{nm}"))

    # normalized added token (matched after lowercasing)
    t = Tokenizer.from_str(bl.to_str())
    t.normalizer = normalizers.Lowercase()
    t.add_tokens([AddedToken("HELLO", normalized=True)])
    out.append(_save(t, root, "added_normalized"))

    # 4. SentencePiece-style BPE with byte fallback (Llama/Gemma layouts)
    sp = sp_bpe(text)
    sp.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    sp.add_tokens([AddedToken("<special_one>", special=False, normalized=False)])
    sp_json = sp.to_str()

    def sp_variant(name, normalizer, pre, decoder, patch_more=None):
        t = Tokenizer.from_str(sp_json)
        t.normalizer = normalizer
        t.pre_tokenizer = pre
        t.decoder = decoder

        def patch(j):
            add_byte_tokens(j)
            if patch_more:
                patch_more(j)
            ids = {t2["content"]: t2["id"] for t2 in j["added_tokens"]}
            ids.update(j["model"]["vocab"])
            j["post_processor"] = {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                         {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {"<s>": {"id": "<s>", "ids": [ids["<s>"]], "tokens": ["<s>"]}}}
        out.append(_save(t, root, name, patch))

    sp_variant("sp_llama_style",
               normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]),
               None,
               decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                  decoders.Fuse(), decoders.Strip(" ", 1, 0)]))
    sp_variant("sp_gemma_style", normalizers.Replace(" ", "▁"), None,
               decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                  decoders.Fuse()]))
    sp_variant("sp_gemma_split",
               normalizers.Replace(" ", "▁"),
               pre_tokenizers.Split("▁", behavior="merged_with_previous"),
               decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                  decoders.Fuse()]))
    sp_variant("sp_metaspace_first", None,
               pre_tokenizers.Metaspace(prepend_scheme="first", split=False),
               decoders.Sequence([decoders.ByteFallback(), decoders.Fuse(),
                                  decoders.Metaspace(prepend_scheme="first", split=False)]))
    sp_variant("sp_metaspace_always", None,
               pre_tokenizers.Metaspace(prepend_scheme="always", split=True),
               decoders.Sequence([decoders.ByteFallback(), decoders.Fuse(),
                                  decoders.Metaspace(prepend_scheme="always")]))

    def no_fallback(j):
        j["model"]["byte_fallback"] = False
    sp_variant("sp_unk_no_fallback",
               normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]),
               None, decoders.Sequence([decoders.Replace("▁", " "), decoders.Fuse()]),
               no_fallback)

    # 5. Unigram (SentencePiece-style) with and without byte fallback
    ug = unigram(text)
    out.append(_save(ug, root, "unigram"))
    ug2 = Tokenizer.from_str(ug.to_str())
    ug2.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Metaspace()])

    def ug_bytes(j):
        voc = j["model"]["vocab"]
        j["model"]["vocab"] = voc[:3] + [[f"<0x{b:02X}>", 0.0] for b in range(256)] + voc[3:]
        j["model"]["byte_fallback"] = True
        j["model"]["unk_id"] = 0
    out.append(_save(ug2, root, "unigram_byte_fallback", ug_bytes))

    # 5b. Unigram scores that the Rust side (serde_json without float_roundtrip)
    # reads an ulp away from the correctly rounded double; an exact tie between
    # two segmentations then breaks on those bits (seen on a trained model:
    # "\n\n\n\n" is "\n\n\n" + "\n" after the prepended "▁", "\n" + "\n\n\n" after "x")
    pieces = [("<unk>", 0.0), ("▁", -1.7817907145351555), ("\n", -6.531118400921167),
              ("\n\n\n", -8.437272733480643), ("\n\n", -9.507774984374766)]
    pieces += [(c, -4.0 - i / 7) for i, c in enumerate("abcdefghijklmnopqrstuvwxyz0123456789.,!?'-:;()")]
    t = Tokenizer(models.Unigram(pieces, unk_id=0, byte_fallback=False))
    t.pre_tokenizer = pre_tokenizers.Metaspace()
    t.decoder = decoders.Metaspace()
    out.append(_save(t, root, "unigram_serde_ties"))

    # 6. WordPiece (BERT)
    out.append(_save(wordpiece(text), root, "wordpiece_bert"))

    # 7. BPE with continuing_subword_prefix / end_of_word_suffix
    t = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix="##",
                             end_of_word_suffix="</w>"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.decoder = decoders.BPEDecoder(suffix="</w>")
    tr = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<unk>"], show_progress=False,
                             continuing_subword_prefix="##", end_of_word_suffix="</w>",
                             limit_alphabet=200)
    t.train_from_iterator(text, tr)
    out.append(_save(t, root, "bpe_prefix_suffix"))
    return out


if __name__ == "__main__":
    import sys
    for name, p in build_all(sys.argv[1]):
        print(name, p)

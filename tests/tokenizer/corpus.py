"""Test corpus for tokenizer parity: multilingual text, code, emoji and ZWJ
sequences, whitespace runs, look-alikes of special tokens, the empty string,
10 kB lines, and seeded random strings. Deterministic."""
import random

BASE = [
    "",
    " ",
    "Hello, world!",
    "hello world",
    " Hello world ",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure they'll say it's fine, we've done what we'd planned.",
    "DON'T SHOUT. Don't whisper.",
    "Ça a été déjà vu à Noël — naïve façade, coöperate, Æsir, Øresund.",
    "Größe, Straße, Fußgängerübergänge; ÄÖÜ äöü ß ẞ.",
    "Привет, как дела? Съешь же ещё этих мягких французских булок.",
    "Γειά σου Κόσμε! ΣΊΣΥΦΟΣ ὀδυσσεύς",
    "مرحبا بالعالم! هذا نص عربي مع أرقام ١٢٣٤٥",
    "שלום עולם, זה טקסט בעברית.",
    "नमस्ते दुनिया, यह हिंदी पाठ है। क्षत्रिय",
    "你好，世界！这是一个中文句子，没有空格。",
    "日本語のテキスト、ひらがなとカタカナと漢字。ｶﾀｶﾅ",
    "안녕하세요 세계! 한국어 문장입니다.",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Xin chào thế giới, tiếng Việt có dấu: ặ ở ữ.",
    "İstanbul'da ıslak ığdır; DİYARBAKIR ve ŞİŞLİ.",
    "Ελληνικά και ascii mixed: αβγ abc 123",
    "Emoji: 😀😃😄 👍🏽 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇯🇵 ❤️‍🔥 🧑🏿‍🤝‍🧑🏻",
    "Keycaps 1️⃣ #️⃣ and variation selectors ︎☺︎ ☺️",
    "Combining: e\u0301 a\u0308 n\u0303 \u0915\u094d\u0937 Z\u0351\u0322a\u0358l\u0334g\u035fo",
    "Compatibility: ﬁ ﬂ ① ② ㍿ ＡＢＣ １２３ ™ ½ ℌ ㎏ x² H₂O",
    "Zero width: a\u200bb\u200cc\u200dd\ufeffe \u2060",
    "Spaces:\u00a0nbsp\u2003em\u3000ideographic\u2028line\u2029para\u0085nel",
    "tabs\tand\t\ttabs\t",
    "new\nlines\n\nand\n\n\nmore",
    "windows\r\nline\r\nendings\r\n",
    "    leading spaces",
    "trailing spaces     ",
    "multiple     inner      spaces",
    " \t \n \r\n \u00a0 mixed whitespace \t\t\n",
    "\n",
    "\n\n\n\n",
    "\t",
    "          ",
    "def f(x):\n    return x ** 2  # square\n\n\nprint(f(3))",
    "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}",
    '{"key": [1, 2.5, -3e10, null, true], "nested": {"a": "b\\"c"}}',
    "for (let i = 0; i < n; i++) { sum += arr[i] >>> 1; }",
    "SELECT * FROM users WHERE id = 'x'; -- comment",
    "<html><body class=\"main\">&amp; &lt;tag&gt;</body></html>",
    "https://example.com/path?query=1&x=y#frag user@mail.example.org",
    "$ ls -la | grep -v '^d' > out.txt 2>&1 && echo ok",
    "numbers 0 1 12 123 1234 12345 123456 1234567890 3.14159 -2.5e-3 1,000,000",
    "Dates 2024-01-31 12:30:45 +0100, phone +1 (555) 123-4567",
    "<|endoftext|>",
    "<|endoftext|><|endoftext|>",
    "text before<|endoftext|>text after",
    "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext",
    "<|endoftext|",
    "|endoftext|>",
    "< |endoftext| >",
    "<s>",
    "</s>",
    "<s> hello </s>",
    "<unk> <pad> <mask>",
    "[CLS] [SEP] [MASK] [UNK] [PAD]",
    "<s>Hello</s>",
    "word<special_one>word <special_one> word",
    "single <word_tok> and<word_tok>x and <word_tok>",
    "lstrip   <lst>   rstrip   <rst>   done",
    "NORMALIZED Hello hello HELLO",
    "<0x41> <0xFF> <0x0A>",
    "▁ already has ▁ metaspace ▁▁ chars",
    "Ġ Ċ byte-level look-alikes ĠĠ",
    "a",
    "ab",
    ".",
    "...",
    "!!!???",
    "''''",
    "'s 't 're 've 'm 'll 'd",
    "A'S B'T C'RE",
    "_underscore_ snake_case camelCase PascalCase kebab-case",
    "\u0000 nul \u0001 ctrl \u007f del \u009f c1",
    "\ufffd replacement char",
    "Ａ full width ｓｐａｃｅ　here",
    "mixed 中文English混合text日本語",
    "ﬀﬁﬂﬃﬄ ligatures",
]

POOL = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    "     \t\n.,;:!?'\"()[]{}<>/\\|-_=+*&^%$#@~`"
    "éèêëàâäôöûüçñßÉÀÇİıŞşĞğ"
    "αβγδεΣσςπΩЖжЯяшщ"
    "中文字日本語한국어ไทยหิन्दीعربيעברית"
    "😀👍🏽👩‍💻❤️🇫🇷\u200d\u0301\u0308\u00a0\u3000\u2028ﬁ①＠"
    "▁ĠĊ"
)

SPECIAL_BITS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>", "<unk>",
                "[CLS]", "<special_one>", "<word_tok>", "<lst>", "<rst>", "hello"]


def random_lines(n, seed=1234, maxlen=60):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(0, maxlen)
        s = []
        for _ in range(k):
            r = rng.random()
            if r < 0.05:
                s.append(rng.choice(SPECIAL_BITS))
            elif r < 0.12:
                s.append(" " * rng.randint(1, 5))
            else:
                s.append(rng.choice(POOL))
        out.append("".join(s))
    return out


def long_lines(seed=99):
    rng = random.Random(seed)
    joined = " ".join(x for x in BASE if x)
    out = []
    # 10 kB lines: mixed content, one char repeated, whitespace, digits, CJK
    buf = []
    while sum(len(x) for x in buf) < 10000:
        buf.append(rng.choice(BASE))
    out.append(" ".join(buf)[:10000])
    out.append("a" * 10000)
    out.append(" " * 10000)
    out.append("\n" * 3000 + "x")
    out.append("1234567890" * 1000)
    out.append("你好世界" * 2500)
    out.append("😀" * 2500)
    out.append(("ab " * 3400)[:10000])
    out.append((joined * 20)[:10000])
    out.append("".join(rng.choice(POOL) for _ in range(10000)))
    return out


def corpus():
    return BASE + random_lines(400) + long_lines()


def training_text():
    """Text to train the test tokenizers on (varied, a few hundred kB)."""
    rng = random.Random(7)
    lines = [x for x in BASE if x]
    words = " ".join(lines).split()
    out = list(lines) * 20
    for _ in range(4000):
        out.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 25))))
    out += random_lines(1500, seed=77, maxlen=80)
    return out

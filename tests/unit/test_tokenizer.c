/* Unit tests of the tokenizer C API: a small hand-written byte-level BPE and
 * a SentencePiece-style one, incremental decoding, error messages with line
 * and column, unknown component names, invalid UTF-8 input. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graft_tokenizer.h"

/* Byte-level BPE: "hello" and " world" merge fully; specials <s>, </s>. */
static const char BL_JSON[] =
    "{\"version\":\"1.0\",\"added_tokens\":["
    "{\"id\":300,\"content\":\"<s>\",\"special\":true,\"normalized\":false,"
    "\"lstrip\":false,\"rstrip\":false,\"single_word\":false},"
    "{\"id\":301,\"content\":\"</s>\",\"special\":true,\"normalized\":false,"
    "\"lstrip\":false,\"rstrip\":false,\"single_word\":false}],"
    "\"normalizer\":null,"
    "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
    "\"post_processor\":{\"type\":\"TemplateProcessing\","
    "\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
    "\"pair\":[],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[300],\"tokens\":[\"<s>\"]}}},"
    "\"decoder\":{\"type\":\"ByteLevel\"},"
    "\"model\":{\"type\":\"BPE\",\"vocab\":%s,\"merges\":[\"h e\",\"he l\",\"hel l\",\"hell o\","
    "[\"\xc4\xa0\",\"w\"],\"\xc4\xa0w o\",\"\xc4\xa0wo r\",\"\xc4\xa0wor l\",\"\xc4\xa0worl d\"]}}";

static char *bl_json(void)
{
    /* vocab: the 256 byte-level chars (ids 0..255 in byte order of the
     * printable mapping) plus merged tokens 256.. */
    static char buf[32768];
    char vocab[16384];
    size_t n = 0;
    int id = 0, extra = 0;
    n += (size_t)snprintf(vocab + n, sizeof vocab - n, "{");
    for (int b = 0; b < 256; b++) {
        unsigned cp;
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
            cp = (unsigned)b;
        else
            cp = 256 + (unsigned)extra++;
        char u[8];
        int k;
        if (cp < 0x80) {
            u[0] = (char)cp;
            k = 1;
        } else {
            u[0] = (char)(0xC0 | (cp >> 6));
            u[1] = (char)(0x80 | (cp & 0x3F));
            k = 2;
        }
        u[k] = 0;
        if (cp == '"' || cp == '\\')
            n += (size_t)snprintf(vocab + n, sizeof vocab - n, "\"\\%s\":%d,", u, id++);
        else
            n += (size_t)snprintf(vocab + n, sizeof vocab - n, "\"%s\":%d,", u, id++);
    }
    n += (size_t)snprintf(vocab + n, sizeof vocab - n,
                          "\"he\":256,\"hel\":257,\"hell\":258,\"hello\":259,\"\xc4\xa0w\":260,"
                          "\"\xc4\xa0wo\":261,\"\xc4\xa0wor\":262,\"\xc4\xa0worl\":263,"
                          "\"\xc4\xa0world\":264}");
    snprintf(buf, sizeof buf, BL_JSON, vocab);
    return buf;
}

static graft_tokenizer *load_str(const char *s)
{
    graft_tokenizer *t = NULL;
    graft_error e = {0};
    graft_status st = graft_tokenizer_load_json(s, strlen(s), "test.json", &t, &e);
    cr_assert_eq(st, GRAFT_OK, "load failed: %s", e.msg);
    return t;
}

Test(tokenizer, encode_decode_bytelevel)
{
    graft_tokenizer *t = load_str(bl_json());
    graft_ids ids = {0};
    graft_error e = {0};
    char *text = NULL;
    cr_assert_eq(graft_tokenizer_encode(t, "hello world", 11, 1, &ids, &e), GRAFT_OK);
    cr_assert_eq(ids.len, 3);
    cr_assert_eq(ids.ids[0], 300);
    cr_assert_eq(ids.ids[1], 259);
    cr_assert_eq(ids.ids[2], 264);
    cr_assert_eq(graft_tokenizer_encode(t, "hello world", 11, 0, &ids, &e), GRAFT_OK);
    cr_assert_eq(ids.len, 2);
    cr_assert_eq(graft_tokenizer_encode(t, "<s>hello</s>", 12, 0, &ids, &e), GRAFT_OK);
    cr_assert_eq(ids.len, 3);
    cr_assert_eq(ids.ids[0], 300);
    cr_assert_eq(ids.ids[2], 301);
    size_t n;
    cr_assert_eq(graft_tokenizer_decode(t, ids.ids, ids.len, 0, &text, &n, &e), GRAFT_OK);
    cr_assert_str_eq(text, "<s>hello</s>");
    free(text);
    cr_assert_eq(graft_tokenizer_decode(t, ids.ids, ids.len, 1, &text, &n, &e), GRAFT_OK);
    cr_assert_str_eq(text, "hello");
    free(text);
    cr_assert_eq(graft_tokenizer_token_to_id(t, "hello"), 259);
    cr_assert_str_eq(graft_tokenizer_id_to_token(t, 301), "</s>");
    cr_assert_eq(graft_tokenizer_id_to_token(t, 5000), NULL);
    cr_assert_eq(graft_tokenizer_vocab_size(t), 302);
    cr_assert(graft_tokenizer_is_special(t, 300));
    cr_assert(!graft_tokenizer_is_special(t, 259));
    graft_ids_free(&ids);
    graft_tokenizer_free(t);
}

Test(tokenizer, empty_input)
{
    graft_tokenizer *t = load_str(bl_json());
    graft_ids ids = {0};
    char *text = NULL;
    cr_assert_eq(graft_tokenizer_encode(t, "", 0, 0, &ids, NULL), GRAFT_OK);
    cr_assert_eq(ids.len, 0);
    cr_assert_eq(graft_tokenizer_encode(t, NULL, 0, 1, &ids, NULL), GRAFT_OK);
    cr_assert_eq(ids.len, 1);
    cr_assert_eq(graft_tokenizer_decode(t, NULL, 0, 0, &text, NULL, NULL), GRAFT_OK);
    cr_assert_str_eq(text, "");
    free(text);
    graft_ids_free(&ids);
    graft_tokenizer_free(t);
}

/* Invalid UTF-8 is replaced by U+FFFD, never a crash. */
Test(tokenizer, invalid_utf8)
{
    graft_tokenizer *t = load_str(bl_json());
    graft_ids ids = {0};
    char *text = NULL;
    static const char bad[] = "he\xff\xfe llo \xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 x\xc3";
    cr_assert_eq(graft_tokenizer_encode(t, bad, sizeof bad - 1, 0, &ids, NULL), GRAFT_OK);
    cr_assert_eq(graft_tokenizer_decode(t, ids.ids, ids.len, 0, &text, NULL, NULL), GRAFT_OK);
    cr_assert(strstr(text, "\xEF\xBF\xBD") != NULL, "got %s", text);
    cr_assert(strncmp(text, "he\xEF\xBF\xBD\xEF\xBF\xBD llo", 11) == 0, "got %s", text);
    free(text);
    /* decoding ids of raw bytes that form broken UTF-8 also gives U+FFFD */
    int32_t lone[] = {(int32_t)graft_tokenizer_token_to_id(t, "\xc3\x83")}; /* byte 0xC3 */
    cr_assert_geq(lone[0], 0);
    cr_assert_eq(graft_tokenizer_decode(t, lone, 1, 0, &text, NULL, NULL), GRAFT_OK);
    cr_assert_str_eq(text, "\xEF\xBF\xBD");
    free(text);
    graft_ids_free(&ids);
    graft_tokenizer_free(t);
}

/* Streaming: a multi-byte char split over byte tokens is held back until
 * complete; the pieces concatenate to the full decode. */
Test(tokenizer, stream_decode)
{
    graft_tokenizer *t = load_str(bl_json());
    graft_ids ids = {0};
    graft_error e = {0};
    const char *text = "hello world \xe2\x82\xac \xf0\x9f\x98\x80 hello";
    cr_assert_eq(graft_tokenizer_encode(t, text, strlen(text), 1, &ids, &e), GRAFT_OK);
    graft_tokenizer_stream *s = graft_tokenizer_stream_new(t, 1);
    cr_assert_not_null(s);
    char acc[256] = "";
    int held = 0;
    for (size_t i = 0; i < ids.len; i++) {
        const char *p;
        size_t n;
        cr_assert_eq(graft_tokenizer_stream_step(s, ids.ids[i], &p, &n, &e), GRAFT_OK);
        cr_assert_eq(strlen(p), n);
        /* every piece is whole UTF-8 */
        for (size_t k = 0; k < n;) {
            unsigned char c = (unsigned char)p[k];
            size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            cr_assert_leq(k + len, n, "broken UTF-8 piece at step %zu", i);
            k += len;
        }
        if (n == 0) held++;
        strncat(acc, p, sizeof acc - strlen(acc) - 1);
    }
    cr_assert_str_eq(acc, text);
    cr_assert_gt(held, 1, "the euro sign and emoji bytes should have been held back");
    graft_tokenizer_stream_free(s);
    graft_ids_free(&ids);
    graft_tokenizer_free(t);
}

static void expect_error(const char *json, graft_status code, const char *needle1,
                         const char *needle2)
{
    graft_tokenizer *t = NULL;
    graft_error e = {0};
    graft_status st = graft_tokenizer_load_json(json, strlen(json), "bad.json", &t, &e);
    cr_assert_eq(st, code, "status %d, message: %s", st, e.msg);
    cr_assert_null(t);
    cr_assert(strstr(e.msg, "bad.json") != NULL, "message lacks file name: %s", e.msg);
    cr_assert(strstr(e.msg, needle1) != NULL, "message lacks '%s': %s", needle1, e.msg);
    if (needle2) cr_assert(strstr(e.msg, needle2) != NULL, "message lacks '%s': %s", needle2, e.msg);
}

Test(tokenizer, malformed_json_line_column)
{
    expect_error("{\n  \"model\": {\n    \"type\": \"BPE\",,\n  }\n}", GRAFT_EINVAL, "line 3",
                 "column");
    expect_error("{\"model\": ", GRAFT_EINVAL, "line 1", "column");
    expect_error("", GRAFT_EINVAL, "line", NULL);
    expect_error("[1,2]", GRAFT_EINVAL, "not a JSON object", NULL);
}

Test(tokenizer, unknown_components_named)
{
    expect_error("{\"model\":{\"type\":\"Magic\",\"vocab\":{}}}", GRAFT_EUNSUPPORTED, "\"Magic\"",
                 "model");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                 "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
                 "{\"type\":\"Whitespace\"},{\"type\":\"FancySplit\"}]}}",
                 GRAFT_EUNSUPPORTED, "\"FancySplit\"", "pre_tokenizer.pretokenizers[1]");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                 "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Foo\"}]}}",
                 GRAFT_EUNSUPPORTED, "\"Foo\"", "normalizer.normalizers[0]");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                 "\"decoder\":{\"type\":\"CTC\"}}",
                 GRAFT_EUNSUPPORTED, "\"CTC\"", "decoder");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                 "\"post_processor\":{\"type\":\"Weird\"}}",
                 GRAFT_EUNSUPPORTED, "\"Weird\"", "post_processor");
}

Test(tokenizer, inconsistent_model)
{
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}",
                 GRAFT_EINVAL, "merges[0]", "\"ab\"");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a c\"]}}",
                 GRAFT_EINVAL, "merges[0]", NULL);
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-4}}}", GRAFT_EINVAL, "out of range",
                 NULL);
    expect_error("{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",\"x\"]]}}", GRAFT_EINVAL,
                 "vocab[0]", NULL);
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{}},\"pre_tokenizer\":{\"type\":\"Split\","
                 "\"pattern\":{\"Regex\":\"(unclosed\"},\"behavior\":\"Isolated\"}}",
                 GRAFT_EINVAL, "regex", NULL);
}

/* "vocab" and "merges" are streamed by the JSON reader: errors inside them
 * keep their line and column and their element, member order and
 * duplicate members behave as in a document walk. */
static void expect_ids(const char *json, const char *text, const int32_t *want, size_t n)
{
    graft_tokenizer *t = load_str(json);
    graft_ids ids = {0};
    graft_error e = {0};
    cr_assert_eq(graft_tokenizer_encode(t, text, strlen(text), 0, &ids, &e), GRAFT_OK, "%s", e.msg);
    cr_assert_eq(ids.len, n, "%s: %zu ids, want %zu", json, ids.len, n);
    for (size_t i = 0; i < n; i++) cr_assert_eq(ids.ids[i], want[i], "%s: id %zu", json, i);
    graft_ids_free(&ids);
    graft_tokenizer_free(t);
}

Test(tokenizer, streamed_vocab_and_merges)
{
    static const int32_t ab[] = {2}, a_b[] = {0, 1};
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\n\"b\" 1},\"merges\":[]}}",
                 GRAFT_EINVAL, "line 2, column 5", "expected ':'");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\n\"merges\":[\"a a\",\n [\"a\" \"a\"]]}}",
                 GRAFT_EINVAL, "line 3, column 7", "expected ',' or ']'");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":\"1\"}}}", GRAFT_EINVAL,
                 "vocab entry \"b\" must map to an integer id", NULL);
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"aa\":1},\"merges\":[\"a a\",7]}}",
                 GRAFT_EINVAL, "merges[1] must be", NULL);
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"vocab\":[]}}", GRAFT_EINVAL,
                 "\"vocab\" must be an object", NULL);
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":{}}}", GRAFT_EINVAL,
                 "\"merges\" must be an array", NULL);
    /* merges before vocab; both member forms of a merge */
    expect_ids("{\"model\":{\"type\":\"BPE\",\"merges\":[[\"a\",\"b\"]],\"vocab\":{\"a\":0,\"b\":1,\"ab\":2}}}",
               "ab", ab, 1);
    expect_ids("{\"model\":{\"type\":\"BPE\",\"merges\":[\"a b\"],\"vocab\":{\"a\":0,\"b\":1,\"ab\":2}}}",
               "ab", ab, 1);
    /* duplicates: the last member wins, as jansson and HF's serde do */
    expect_ids("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"q\":0},\"merges\":[\"a b\"],"
               "\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[]}}",
               "ab", a_b, 2);
    expect_ids("{\"model\":{\"vocab\":{\"q\":0}},\"model\":{\"type\":\"BPE\","
               "\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}}",
               "ab", ab, 1);
    /* the same members below the model are ordinary */
    expect_ids("{\"x\":{\"vocab\":{\"z\":\"y\"},\"merges\":[1]},\"model\":{\"type\":\"WordLevel\","
               "\"vocab\":{\"a\":0,\"b\":1,\"[UNK]\":2}},\"pre_tokenizer\":{\"type\":\"WhitespaceSplit\"}}",
               "b a", (const int32_t[]){1, 0}, 2);
}

Test(tokenizer, missing_file)
{
    graft_tokenizer *t = NULL;
    graft_error e = {0};
    cr_assert_eq(graft_tokenizer_load("/nonexistent/dir/tokenizer.json", &t, &e), GRAFT_EIO);
    cr_assert(strstr(e.msg, "/nonexistent/dir/tokenizer.json") != NULL, "%s", e.msg);
    cr_assert_eq(graft_tokenizer_load("/", &t, &e), GRAFT_EIO);
    cr_assert(strstr(e.msg, "tokenizer.json") != NULL, "%s", e.msg);
}

/* SentencePiece-style: Unigram with byte fallback, Metaspace. */
Test(tokenizer, unigram_byte_fallback)
{
    char json[16384];
    size_t n = 0;
    n += (size_t)snprintf(json + n, sizeof json - n,
                          "{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"byte_fallback\":true,"
                          "\"vocab\":[[\"<unk>\",0.0]");
    for (int b = 0; b < 256; b++)
        n += (size_t)snprintf(json + n, sizeof json - n, ",[\"<0x%02X>\",0.0]", b);
    n += (size_t)snprintf(json + n, sizeof json - n,
                          ",[\"\xe2\x96\x81hi\",-1.0],[\"\xe2\x96\x81\",-2.0],[\"h\",-3.0],"
                          "[\"i\",-3.0]]},"
                          "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\","
                          "\"prepend_scheme\":\"always\",\"split\":true},"
                          "\"decoder\":{\"type\":\"Sequence\",\"decoders\":["
                          "{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\","
                          "\"prepend_scheme\":\"always\",\"split\":true},"
                          "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]}}");
    graft_tokenizer *t = load_str(json);
    graft_ids ids = {0};
    char *text = NULL;
    cr_assert_eq(graft_tokenizer_encode(t, "hi \xc3\xa9", 5, 1, &ids, NULL), GRAFT_OK);
    /* ▁hi, ▁, <0xC3>, <0xA9> */
    cr_assert_eq(ids.len, 4);
    cr_assert_eq(ids.ids[0], 257);
    cr_assert_eq(ids.ids[1], 258);
    cr_assert_eq(ids.ids[2], 1 + 0xC3);
    cr_assert_eq(ids.ids[3], 1 + 0xA9);
    cr_assert_eq(graft_tokenizer_decode(t, ids.ids, ids.len, 0, &text, NULL, NULL), GRAFT_OK);
    cr_assert_str_eq(text, "hi \xc3\xa9");
    free(text);
    graft_ids_free(&ids);
    graft_tokenizer_free(t);
}

Test(tokenizer, free_null)
{
    graft_tokenizer_free(NULL);
    graft_tokenizer_stream_free(NULL);
    graft_ids_free(NULL);
}

/* tokenizer.json reals are read as Hugging Face's Rust core reads them
 * (serde_json without float_roundtrip: u64 significand to double, then one
 * division by a power of ten), not correctly rounded: -1.7817907145351555
 * is the double next to strtod's, and that ulp decides Unigram ties (the
 * parity test's unigram_serde_ties tokenizer checks the consequence against
 * HF itself). */
#include "tokenizer/tok_json.h"
Test(tokenizer, json_reals_as_serde_json)
{
    const char *src = "[-1.7817907145351555, 0.5, -6.531118400921167, 1e-400, 2.5e3]";
    tj_doc doc = {0};
    cr_assert(tj_parse(src, strlen(src), &doc, NULL));
    double correct = strtod("-1.7817907145351555", NULL);
    cr_assert_eq(tj_num(tj_at(doc.root, 0)), strtod("-1.7817907145351557", NULL));
    cr_assert_neq(tj_num(tj_at(doc.root, 0)), correct);
    cr_assert_eq(tj_num(tj_at(doc.root, 1)), 0.5);
    cr_assert_eq(tj_num(tj_at(doc.root, 2)), strtod("-6.531118400921167", NULL));
    cr_assert_eq(tj_num(tj_at(doc.root, 3)), 0.0);
    cr_assert_eq(tj_num(tj_at(doc.root, 4)), 2500.0);
    tj_doc_free(&doc);
    const char *big = "[1e400]";
    tj_doc d2 = {0};
    cr_assert(!tj_parse(big, strlen(big), &d2, NULL));
    cr_assert(strstr(d2.err_text, "out of range"), "%s", d2.err_text);
    tj_doc_free(&d2);
}

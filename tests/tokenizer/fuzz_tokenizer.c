/* Mutation fuzzer of the tokenizer loader and encoder/decoder, meant to run
 * under AddressSanitizer + UBSan (make test SANITIZE=1, make fuzz-tokenizer).
 *
 *   fuzz_tokenizer SECONDS SEED tokenizer.json...
 *
 * Each round picks a seed tokenizer.json and either loads a byte-mutated
 * copy (flips, inserts, deletions, truncation, splices, digit and keyword
 * swaps) or a clean one, then encodes random and mutated text (invalid
 * UTF-8 included), decodes random ids (out of range included) and streams
 * them, checking that every output is valid UTF-8. Any crash, sanitizer
 * report or broken invariant fails; load errors are expected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graft_tokenizer.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_state = x;
    return x;
}

static size_t rndn(size_t n)
{
    return n ? (size_t)(rnd() % n) : 0;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *b;
    long n;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = 0;
        *len = (size_t)n;
    }
    return b;
}

static int valid_utf8(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t k;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) k = 2, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF) k = 3, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4) k = 4, cp = c & 0x07;
        else return 0;
        if (i + k > n) return 0;
        for (size_t j = 1; j < k; j++) {
            if (((unsigned char)s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | ((unsigned char)s[i + j] & 0x3F);
        }
        if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k;
    }
    return 1;
}

static const char *const WORDS[] = {
    "\"type\"", "\"BPE\"", "\"Unigram\"", "\"WordPiece\"", "\"Sequence\"", "\"Split\"",
    "\"Metaspace\"", "\"ByteLevel\"", "\"Regex\"", "\"String\"", "null", "true", "false",
    "[]", "{}", "\"\"", "-1", "999999999999", "1e308", "\"(\"", "\"\\\\\"", "\"\\u0000\"",
    "\"\\ud800\"", "\"first\"", "\"MergedWithNext\"", "\"Contiguous\"", "0.5", "[[\"a\",1]]",
};

static char *mutate_json(const char *src, size_t n, size_t *out_n)
{
    size_t cap = n + 4096, len = n;
    char *b = malloc(cap + 1);
    if (!b) return NULL;
    memcpy(b, src, n);
    int rounds = 1 + (int)rndn(4);
    /* HF writes the model (vocab, merges) last: most mutations go to the
     * components before it, so that mutants still load and get run */
    const char *model = strstr(src, "\"model\"");
    size_t head = model ? (size_t)(model - src) : n;
    for (int r = 0; r < rounds && len > 0; r++) {
        size_t at = rndn(len);
        if (rndn(4) != 0 && head > 0 && head <= len) at = rndn(head);
        switch (rndn(7)) {
        case 0: b[at] ^= (char)(1u << rndn(8)); break;
        case 1: len = at; break; /* truncate */
        case 2: { /* delete a span */
            size_t k = 1 + rndn(64);
            if (at + k > len) k = len - at;
            memmove(b + at, b + at + k, len - at - k);
            len -= k;
            break;
        }
        case 3: { /* insert a keyword */
            const char *w = WORDS[rndn(sizeof WORDS / sizeof WORDS[0])];
            size_t k = strlen(w);
            if (len + k > cap) break;
            memmove(b + at + k, b + at, len - at);
            memcpy(b + at, w, k);
            len += k;
            break;
        }
        case 4: { /* replace a string value near `at` by a keyword */
            char *q = memchr(b + at, '"', len - at);
            if (!q) break;
            char *e = memchr(q + 1, '"', (size_t)(b + len - q - 1));
            if (!e) break;
            const char *w = WORDS[rndn(sizeof WORDS / sizeof WORDS[0])];
            size_t k = strlen(w), old = (size_t)(e - q + 1);
            if (len - old + k > cap) break;
            memmove(q + k, e + 1, (size_t)(b + len - e - 1));
            memcpy(q, w, k);
            len = len - old + k;
            break;
        }
        case 5: /* digit change */
            for (size_t j = at; j < len; j++)
                if (b[j] >= '0' && b[j] <= '9') {
                    b[j] = (char)('0' + rndn(10));
                    break;
                }
            break;
        default: { /* duplicate a chunk */
            size_t k = 1 + rndn(256);
            if (at + k > len) k = len - at;
            if (len + k > cap) break;
            char chunk[256];
            size_t to = rndn(len);
            memcpy(chunk, b + at, k);
            memmove(b + to + k, b + to, len - to);
            memcpy(b + to, chunk, k);
            len += k;
            break;
        }
        }
    }
    b[len] = 0;
    *out_n = len;
    return b;
}

static const char *const TEXT_BITS[] = {
    "<|endoftext|>", "<|im_start|>", "<s>", "</s>", "<unk>", "[CLS]", "<lst>", "<rst>",
    "<word_tok>", " ", "  ", "\t", "\n", "\r\n", "\xe2\x96\x81", "\xc4\xa0", "hello", "world",
    "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xe2\x80\x8d", "\xcc\x81", "123", "'s",
    "\xff", "\xc3", "\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf", "<0x41>", "\x00",
};

static size_t random_text(char *buf, size_t cap)
{
    size_t n = 0, parts = rndn(40);
    for (size_t i = 0; i < parts; i++) {
        if (rndn(4) == 0) {
            size_t k = 1 + rndn(8);
            for (size_t j = 0; j < k && n < cap; j++) buf[n++] = (char)rnd();
        } else {
            const char *w = TEXT_BITS[rndn(sizeof TEXT_BITS / sizeof TEXT_BITS[0])];
            size_t k = strlen(w);
            if (w[0] == 0) k = 1;
            if (n + k > cap) break;
            memcpy(buf + n, w, k);
            n += k;
        }
    }
    if (rndn(50) == 0) { /* a long run */
        char c = "a 1\xe4"[rndn(4)];
        while (n < cap && n < 6000) buf[n++] = c;
    }
    return n;
}

static int exercise(graft_tokenizer *t)
{
    static char text[8192];
    graft_ids ids = {0};
    graft_error e;
    int bad = 0;
    size_t vs = graft_tokenizer_vocab_size(t);
    for (int k = 0; k < 8 && !bad; k++) {
        size_t n = random_text(text, sizeof text);
        graft_status st = graft_tokenizer_encode(t, text, n, (int)rndn(2), &ids, &e);
        if (st != GRAFT_OK && st != GRAFT_EINVAL) {
            fprintf(stderr, "fuzz: encode status %d: %s\n", st, e.msg);
            bad = 1;
        }
        for (size_t i = 0; i < ids.len; i++)
            if (ids.ids[i] < 0 || (size_t)ids.ids[i] >= vs) {
                fprintf(stderr, "fuzz: id %d out of vocab %zu\n", ids.ids[i], vs);
                bad = 1;
            }
        /* decode what we encoded, and random ids */
        if (rndn(2) && vs)
            for (size_t i = 0; i < ids.len; i++)
                ids.ids[i] = rndn(20) == 0 ? (int32_t)(rnd() % (vs + 10)) - 5 : (int32_t)rndn(vs);
        char *out = NULL;
        size_t on = 0;
        if (graft_tokenizer_decode(t, ids.ids, ids.len, (int)rndn(2), &out, &on, &e) == GRAFT_OK &&
            !valid_utf8(out, on)) {
            fprintf(stderr, "fuzz: decode produced invalid UTF-8\n");
            bad = 1;
        }
        free(out);
        graft_tokenizer_stream *s = graft_tokenizer_stream_new(t, (int)rndn(2));
        /* streams of random ids rarely complete characters: keep them short */
        for (size_t i = 0; s && i < ids.len && i < 64 && !bad; i++) {
            const char *p;
            size_t pn;
            if (graft_tokenizer_stream_step(s, ids.ids[i], &p, &pn, &e) != GRAFT_OK) break;
            if (!valid_utf8(p, pn)) {
                fprintf(stderr, "fuzz: stream piece is invalid UTF-8\n");
                bad = 1;
            }
        }
        graft_tokenizer_stream_free(s);
    }
    graft_ids_free(&ids);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: fuzz_tokenizer SECONDS SEED tokenizer.json...\n");
        return 2;
    }
    double secs = atof(argv[1]);
    rng_state = strtoull(argv[2], NULL, 10) * 0x9E3779B97F4A7C15ull + 1;
    int nseeds = argc - 3;
    char **src = calloc((size_t)nseeds, sizeof *src);
    size_t *srcn = calloc((size_t)nseeds, sizeof *srcn);
    graft_tokenizer **clean = calloc((size_t)nseeds, sizeof *clean);
    for (int i = 0; i < nseeds; i++) {
        graft_error e;
        src[i] = slurp(argv[3 + i], &srcn[i]);
        if (!src[i]) {
            fprintf(stderr, "fuzz: cannot read %s\n", argv[3 + i]);
            return 2;
        }
        if (graft_tokenizer_load_json(src[i], srcn[i], argv[3 + i], &clean[i], &e) != GRAFT_OK) {
            fprintf(stderr, "fuzz: seed does not load: %s\n", e.msg);
            return 1;
        }
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long rounds = 0, loads = 0, loaded = 0;
    int bad = 0;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) > secs) break;
        int i = (int)rndn((size_t)nseeds);
        rounds++;
        if (rndn(3) == 0) {
            size_t mn;
            char *m = mutate_json(src[i], srcn[i], &mn);
            graft_tokenizer *t = NULL;
            graft_error e;
            loads++;
            if (m && graft_tokenizer_load_json(m, mn, "mutant.json", &t, &e) == GRAFT_OK) {
                loaded++;
                bad = exercise(t);
            } else if (m && !strstr(e.msg, "mutant.json") && e.code != GRAFT_ENOMEM) {
                fprintf(stderr, "fuzz: error message lacks the file name: %s\n", e.msg);
                bad = 1;
            }
            graft_tokenizer_free(t);
            free(m);
        } else
            bad = exercise(clean[i]);
        if (bad) break;
    }
    for (int i = 0; i < nseeds; i++) {
        graft_tokenizer_free(clean[i]);
        free(src[i]);
    }
    free(src);
    free(srcn);
    free(clean);
    printf("fuzz_tokenizer: %ld rounds, %ld mutated loads (%ld loaded), %d seeds: %s\n", rounds,
           loads, loaded, nseeds, bad ? "FAILED" : "ok");
    return bad;
}

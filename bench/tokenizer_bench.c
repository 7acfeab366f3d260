/* bench/tokenizer_bench.c — load time and single-thread encode throughput
 * of graft's tokenizer.  usage: tokenizer_bench tokenizer.json text.txt
 * Prints one JSON object: load_s, encode_s, bytes, lines, tokens, and an
 * id checksum (sum of id * (position + 1) mod 2^64) to compare with HF. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graft_tokenizer.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    graft_tokenizer *tok = NULL;
    graft_error err = {0};
    graft_ids ids = {0};
    if (argc != 3) {
        fprintf(stderr, "usage: tokenizer_bench tokenizer.json text.txt\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    if (!text || fread(text, 1, (size_t)n, f) != (size_t)n) return 1;
    fclose(f);
    text[n] = 0;

    double t0 = now();
    if (graft_tokenizer_load(argv[1], &tok, &err) != GRAFT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double t1 = now();
    unsigned long long sum = 0, tokens = 0, lines = 0, pos = 0;
    for (char *p = text; p < text + n;) {
        char *e = memchr(p, '\n', (size_t)(text + n - p));
        size_t len = e ? (size_t)(e - p) : (size_t)(text + n - p);
        if (graft_tokenizer_encode(tok, p, len, 0, &ids, &err) != GRAFT_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        for (size_t i = 0; i < ids.len; i++) sum += (unsigned long long)ids.ids[i] * (++pos);
        tokens += ids.len;
        lines++;
        p += len + 1;
    }
    double t2 = now();
    printf("{\"load_s\": %.4f, \"encode_s\": %.4f, \"bytes\": %ld, \"lines\": %llu, "
           "\"tokens\": %llu, \"checksum\": %llu}\n",
           t1 - t0, t2 - t1, n, lines, tokens, sum);
    graft_ids_free(&ids);
    graft_tokenizer_free(tok);
    free(text);
    return 0;
}

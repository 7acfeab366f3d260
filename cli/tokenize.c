/* cli/tokenize.c — `graft tokenize TOKENIZER`: encode stdin lines to JSON
 * id arrays, or decode id arrays to JSON strings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"
#include "graft_tokenizer.h"

static void tokenize_usage(FILE *f)
{
    fprintf(f,
            "usage: graft tokenize TOKENIZER [--no-special] [--json-lines]\n"
            "       graft tokenize TOKENIZER --decode [--skip-special]\n\n"
            "TOKENIZER is a tokenizer.json or a directory holding one.\n"
            "Encode (default): reads UTF-8 text lines from stdin and prints one JSON\n"
            "array of token ids per line.\n"
            "  --no-special    encode without special tokens (no BOS/EOS template)\n"
            "  --json-lines    each input line is a JSON string (any text, newlines too)\n"
            "Decode: reads one JSON array of ids per line and prints the text as a\n"
            "JSON string.\n"
            "  --decode        decode instead of encode\n"
            "  --skip-special  leave special tokens out of decoded text\n"
            "Input that is not valid UTF-8 is encoded with U+FFFD replacements.\n"
            "Exit status: 0 success, 1 runtime failure, 2 bad input or usage.\n");
}

/* Prints s (n bytes of UTF-8) as a JSON string. */
static void print_json_string(FILE *f, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            if (c < 0x20 || c == 0x7f) {
                fputs("\\u00", f);
                fputc(hex[c >> 4], f);
                fputc(hex[c & 15], f);
            } else
                fputc((int)c, f);
        }
    }
    fputc('"', f);
}

static void print_ids(FILE *f, const graft_ids *ids)
{
    fputc('[', f);
    for (size_t i = 0; i < ids->len; i++) fprintf(f, i ? ",%d" : "%d", (int)ids->ids[i]);
    fputs("]\n", f);
}

static int bad_line(size_t lineno, const char *what, const char *detail)
{
    fprintf(stderr, "graft tokenize: stdin line %zu: %s%s%s\n", lineno, what, detail ? ": " : "",
            detail ? detail : "");
    return 2;
}

int graft_cli_tokenize(int argc, char **argv)
{
    const char *path = NULL;
    int no_special = 0, json_lines = 0, decode = 0, skip_special = 0, rc = 0;
    graft_tokenizer *tok = NULL;
    graft_error err = {0};
    graft_status st;
    graft_ids ids = {0};
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t n;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            tokenize_usage(stdout);
            return 0;
        } else if (strcmp(a, "--no-special") == 0) no_special = 1;
        else if (strcmp(a, "--json-lines") == 0) json_lines = 1;
        else if (strcmp(a, "--decode") == 0) decode = 1;
        else if (strcmp(a, "--skip-special") == 0) skip_special = 1;
        else if (a[0] == '-' && a[1]) return graft_cli_usage_error("tokenize", "unknown option '%s'", a);
        else if (!path) path = a;
        else return graft_cli_usage_error("tokenize", "one TOKENIZER only (got '%s' too)", a);
    }
    if (!path) return graft_cli_usage_error("tokenize", "missing TOKENIZER");
    if (decode && (no_special || json_lines))
        return graft_cli_usage_error("tokenize", "--no-special and --json-lines are for encoding");
    if (!decode && skip_special)
        return graft_cli_usage_error("tokenize", "--skip-special is for --decode");

    st = graft_tokenizer_load(path, &tok, &err);
    if (st != GRAFT_OK) return graft_cli_fail("tokenize", st, &err);

    while ((n = getline(&line, &cap, stdin)) >= 0) {
        size_t len = (size_t)n;
        lineno++;
        if (len && line[len - 1] == '\n') len--;
        if (len && line[len - 1] == '\r' && (decode || json_lines)) len--;
        if (decode) {
            json_error_t je;
            json_t *arr = json_loadb(line, len, 0, &je);
            int32_t *v;
            char *text = NULL;
            size_t tl = 0;
            if (!arr || !json_is_array(arr)) {
                json_decref(arr);
                rc = bad_line(lineno, "expected a JSON array of token ids", arr ? NULL : je.text);
                break;
            }
            v = malloc((json_array_size(arr) + 1) * sizeof *v);
            if (!v) {
                json_decref(arr);
                fprintf(stderr, "graft tokenize: out of memory\n");
                rc = 1;
                break;
            }
            for (size_t i = 0; i < json_array_size(arr); i++) {
                json_t *x = json_array_get(arr, i);
                if (!json_is_integer(x) || json_integer_value(x) < 0 ||
                    json_integer_value(x) > INT32_MAX) {
                    rc = bad_line(lineno, "token ids must be integers in [0, 2^31)", NULL);
                    break;
                }
                v[i] = (int32_t)json_integer_value(x);
            }
            if (rc == 0) {
                st = graft_tokenizer_decode(tok, v, json_array_size(arr), skip_special, &text, &tl, &err);
                if (st != GRAFT_OK) rc = graft_cli_fail("tokenize", st, &err);
                else {
                    print_json_string(stdout, text, tl);
                    fputc('\n', stdout);
                }
            }
            free(text);
            free(v);
            json_decref(arr);
            if (rc) break;
            continue;
        }
        const char *text = line;
        size_t tl = len;
        json_t *js = NULL;
        if (json_lines) {
            json_error_t je;
            js = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
            if (!js || !json_is_string(js)) {
                json_decref(js);
                rc = bad_line(lineno, "expected a JSON string", js ? NULL : je.text);
                break;
            }
            text = json_string_value(js);
            tl = json_string_length(js);
        }
        st = graft_tokenizer_encode(tok, text, tl, !no_special, &ids, &err);
        json_decref(js);
        if (st != GRAFT_OK) {
            rc = graft_cli_fail("tokenize", st, &err);
            break;
        }
        print_ids(stdout, &ids);
    }
    if (rc == 0 && ferror(stdin)) {
        perror("graft tokenize: reading stdin");
        rc = 1;
    }
    free(line);
    graft_ids_free(&ids);
    graft_tokenizer_free(tok);
    return rc;
}

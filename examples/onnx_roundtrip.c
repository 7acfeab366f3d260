/* onnx_roundtrip: load an ONNX model with graft and save it again.
 *
 *   onnx_roundtrip IN.onnx OUT.onnx [--threshold BYTES] [--data NAME] [--shard-size BYTES]
 *
 * Loading checks every external-data reference (it must stay inside IN's
 * directory) and every tensor's size; saving writes OUT.onnx plus, for
 * tensors of BYTES and more (default 1024), OUT.onnx.data at 4 KiB-aligned
 * offsets, atomically. Exit status: 0 ok, 2 bad input, 1 other failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graft.h"

int main(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    graft_save_opts so = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threshold") == 0 && i + 1 < argc) {
            so.external_threshold = strtoll(argv[++i], NULL, 10);
            if (so.external_threshold == 0) so.external_threshold = 1; /* 0: every tensor with bytes */
        } else if (strcmp(argv[i], "--shard-size") == 0 && i + 1 < argc) {
            so.shard_size = strtoll(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
            so.data_name = argv[++i];
        } else if (!in) {
            in = argv[i];
        } else if (!out) {
            out = argv[i];
        } else {
            in = NULL;
            break;
        }
    }
    if (!in || !out) {
        fprintf(stderr, "usage: onnx_roundtrip IN.onnx OUT.onnx [--threshold BYTES] [--data NAME] "
                        "[--shard-size BYTES]\n");
        return 2;
    }
    graft_error err = {0};
    graft_model *m = NULL;
    graft_status s = graft_model_load(in, NULL, &m, &err);
    if (s == GRAFT_OK) s = graft_model_save(m, out, &so, &err);
    graft_model_free(m);
    if (s != GRAFT_OK) {
        fprintf(stderr, "onnx_roundtrip: %s\n", err.msg);
        return graft_status_exit_code(s);
    }
    return 0;
}

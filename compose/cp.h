/* compose/ internals. Prefix cp_. compose/ works on the IR through the
 * public API only; it never touches protobuf. */
#ifndef GRAFT_COMPOSE_CP_H
#define GRAFT_COMPOSE_CP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "graft.h"

graft_status cp_err(graft_error *err, graft_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "dir/name" (owned), NULL on OOM. */
char *cp_join(const char *dir, const char *name);
/* a followed by b (owned), NULL on OOM. */
char *cp_concat(const char *a, const char *b);
/* Relative path with no "..", not absolute, not empty. */
bool cp_path_is_safe(const char *rel);
/* Loads a JSON file; errors name the file, line and column. Owned. */
graft_status cp_json_load(const char *path, json_t **out, graft_error *err);
/* Writes JSON (indent 4, keys in order) to path, fsync'd when `sync`. */
graft_status cp_json_write(const char *path, const json_t *j, bool sync, graft_error *err);
/* Copies a regular file (no symlinks followed) into dst, fsync'd when `sync`. */
graft_status cp_copy_file(const char *src, const char *dst, bool sync, graft_error *err);
/* Removes a directory tree (no symlinks followed); best effort. */
void cp_rmtree(const char *path);

/* ------------------------------------------------------------ genai_config */

typedef struct cp_section {
    const char *key;        /* "decoder", "embedding", ... (borrowed from the json) */
    json_t *obj;
    const char *filename;   /* NULL when the section has none */
    json_t *inputs, *outputs; /* name maps, may be NULL */
} cp_section;

/* Checks the config's structure: known top-level and model keys, name maps
 * with known keys and string values. */
graft_status cp_config_check(const char *path, json_t *cfg, graft_error *err);
/* model.<key> as a section; returns false when absent. */
bool cp_config_section(json_t *cfg, const char *key, cp_section *s);
/* Name a map gives for `key`, or NULL. */
const char *cp_map_get(json_t *map, const char *key);

/* Rewrites cfg in place for the single composed graph `filename`. */
graft_status cp_config_rewrite(const char *path, json_t *cfg, const char *filename,
                               const char *input_ids_name, const char *const *wired_keys,
                               size_t n_wired, graft_error *err);

/* ------------------------------------------------------------ tokenizer */

/* Patches tokenizer.json (in place, as JSON) to prepend BOS when the mode
 * asks for it; *decision is a static line saying what was done. */
graft_status cp_tokenizer_patch(const char *tok_path, json_t *tok, const char *cfg_path,
                                json_t *tok_cfg, json_t *genai_cfg, graft_bos_mode mode,
                                char *decision, size_t cap, graft_error *err);

/* ------------------------------------------------------------ passes */

/* Folds every node whose inputs are all constants and at least one of
 * which derives from `seeds` (the baked constants); returns nodes folded. */
graft_status cp_fold(graft_model *m, const char *const *seeds, size_t n_seeds, size_t *folded,
                     graft_error *err);

#endif

/* Small hash maps shared by the modules (no protobuf here). */
#ifndef GRAFT_ONNX_MAP_H
#define GRAFT_ONNX_MAP_H

#include <stdbool.h>
#include <stddef.h>

/* Open-addressing map from string keys (borrowed, must outlive the map)
 * to void* values. */
typedef struct ox_map {
    const char **keys;
    void **vals;
    size_t cap, len;
} ox_map;

void ox_map_free(ox_map *m);
void ox_map_clear(ox_map *m);
/* Returns false on allocation failure. Replaces existing values. */
bool ox_map_put(ox_map *m, const char *key, void *val);
void *ox_map_get(const ox_map *m, const char *key);

/* Pointer-keyed map (identity). */
typedef struct ox_pmap {
    const void **keys;
    void **vals;
    size_t cap, len;
} ox_pmap;

void ox_pmap_free(ox_pmap *m);
bool ox_pmap_put(ox_pmap *m, const void *key, void *val);
void *ox_pmap_get(const ox_pmap *m, const void *key);
void ox_pmap_del(ox_pmap *m, const void *key);

#endif

/* Small hash maps shared by the modules (no protobuf here). */
#ifndef GRAFT_ONNX_MAP_H
#define GRAFT_ONNX_MAP_H

#include <stdbool.h>
#include <stddef.h>

/* One open-addressing table serves two kinds of map: keyed by string
 * contents (ox_map_*: keys borrowed, must outlive the map) or by pointer
 * identity (ox_pmap_*). Use one kind of function per table. */
typedef struct ox_table {
    const void **keys; /* NULL: empty slot */
    void **vals;
    size_t cap, len;
} ox_table;

typedef ox_table ox_map;  /* string keys */
typedef ox_table ox_pmap; /* pointer keys */

void ox_map_free(ox_map *m);
void ox_map_clear(ox_map *m);
/* Returns false on allocation failure. Replaces existing values. */
bool ox_map_put(ox_map *m, const char *key, void *val);
void *ox_map_get(const ox_map *m, const char *key);

#define ox_pmap_free ox_map_free
bool ox_pmap_put(ox_pmap *m, const void *key, void *val);
void *ox_pmap_get(const ox_pmap *m, const void *key);
void ox_pmap_del(ox_pmap *m, const void *key);

#endif

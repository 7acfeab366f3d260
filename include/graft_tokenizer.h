/* graft — tokenizer API: Hugging Face tokenizer.json, encode and decode.
 *
 * Loads the components a tokenizer.json describes (normalizer, pre-tokenizer,
 * model: BPE, WordPiece, WordLevel or Unigram; post-processor, decoder,
 * added tokens) and reproduces Hugging Face `tokenizers` ids and text.
 *
 * Errors: every function that can fail on account of its input returns a
 * graft_status and fills `err` (when non-NULL) with a message naming the
 * file; malformed JSON adds line and column, unknown component types are
 * named with their place in the file ("pre_tokenizer.pretokenizers[1]").
 *
 * Threads: a graft_tokenizer keeps a cache and scratch space, so one handle
 * must not be used by two threads at once (load one per thread, or lock).
 * Streams are independent of each other but borrow their tokenizer.
 */
#ifndef GRAFT_TOKENIZER_H
#define GRAFT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "graft.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct graft_tokenizer graft_tokenizer;
typedef struct graft_tokenizer_stream graft_tokenizer_stream;

/* A caller-visible, growable array of token ids. Zero-initialise it
 * ({0}) before first use; encode appends nothing, it replaces the content
 * (len is reset) and reuses the allocation. The caller owns `ids` and frees
 * it with graft_ids_free (which leaves the struct zeroed). */
typedef struct graft_ids {
    int32_t *ids;
    size_t len;
    size_t cap;
} graft_ids;

void graft_ids_free(graft_ids *ids);

/* Loads `path`: a tokenizer.json file, or a directory holding one. On
 * success *out is owned by the caller (graft_tokenizer_free). Errors:
 * GRAFT_EIO (cannot read), GRAFT_EINVAL (malformed JSON: file, line,
 * column; inconsistent vocabulary or merges), GRAFT_EUNSUPPORTED (a
 * component type graft does not implement, named in the message). */
graft_status graft_tokenizer_load(const char *path, graft_tokenizer **out, graft_error *err);

/* Same, from an in-memory JSON document of `len` bytes; `name` is used in
 * messages in place of a file name (NULL: "<memory>"). */
graft_status graft_tokenizer_load_json(const char *json, size_t len, const char *name,
                                       graft_tokenizer **out, graft_error *err);

void graft_tokenizer_free(graft_tokenizer *tok);

/* Encodes `len` bytes of UTF-8 text into out (replacing its content).
 * add_special != 0 applies the post-processor (BOS/EOS templates) like
 * HF's add_special_tokens=True. Input that is not valid UTF-8 is not an
 * error: each maximal invalid subsequence is replaced by U+FFFD first (as
 * Rust's String::from_utf8_lossy does). Fails with GRAFT_EINVAL only when
 * the model cannot represent the text (e.g. a character unknown to a
 * model without unk token), GRAFT_ENOMEM on allocation failure. */
graft_status graft_tokenizer_encode(graft_tokenizer *tok, const char *text, size_t len,
                                    int add_special, graft_ids *out, graft_error *err);

/* Decodes n ids into text. *out (NUL-terminated, *out_len bytes without
 * the NUL; out_len may be NULL) is owned by the caller: free() it.
 * skip_special != 0 leaves out special added tokens. Ids that name no
 * token are skipped, as HF does. The result is valid UTF-8 (bytes that do
 * not form characters decode to U+FFFD). */
graft_status graft_tokenizer_decode(graft_tokenizer *tok, const int32_t *ids, size_t n,
                                    int skip_special, char **out, size_t *out_len,
                                    graft_error *err);

/* Vocabulary: model vocabulary plus added tokens (size = highest id + 1). */
size_t graft_tokenizer_vocab_size(const graft_tokenizer *tok);
/* Id of a token string (added tokens first, then the model), or -1. */
int32_t graft_tokenizer_token_to_id(const graft_tokenizer *tok, const char *token);
/* Token string of an id, or NULL. Borrowed: lives as long as tok. */
const char *graft_tokenizer_id_to_token(const graft_tokenizer *tok, int32_t id);
/* 1 when id is an added token marked special, else 0. */
int graft_tokenizer_is_special(const graft_tokenizer *tok, int32_t id);

/* Incremental decoding for streaming generation. Each step takes one id
 * and yields the text it completes, never a partial UTF-8 character:
 * bytes of an unfinished character (or a decoder's pending output) are
 * held until a later id completes them. Concatenating every piece equals
 * graft_tokenizer_decode of all ids when the sequence ends on a complete
 * character. The stream borrows tok, which must outlive it; owned by the
 * caller (graft_tokenizer_stream_free). Returns NULL on allocation
 * failure. */
graft_tokenizer_stream *graft_tokenizer_stream_new(graft_tokenizer *tok, int skip_special);
/* Feeds one id. *piece (NUL-terminated, *piece_len bytes; piece_len may be
 * NULL) is borrowed from the stream and valid until the next call on it;
 * it is "" when nothing is ready yet. */
graft_status graft_tokenizer_stream_step(graft_tokenizer_stream *s, int32_t id,
                                         const char **piece, size_t *piece_len,
                                         graft_error *err);
void graft_tokenizer_stream_free(graft_tokenizer_stream *s);

#ifdef __cplusplus
}
#endif
#endif /* GRAFT_TOKENIZER_H */

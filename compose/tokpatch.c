/* BOS patch for tokenizer.json: where tokenizer_config.json says
 * add_bos_token (or --bos always) and the post-processor does not already
 * prepend the BOS token, add a TemplateProcessing that does. */
#include <string.h>

#include "compose/cp.h"

static const char *bos_string(json_t *tok_cfg)
{
    json_t *b = json_object_get(tok_cfg, "bos_token");
    if (json_is_string(b)) return json_string_value(b);
    if (json_is_object(b)) return json_string_value(json_object_get(b, "content"));
    return NULL;
}

/* Id of `token` in tokenizer.json (added tokens, then the model vocab). */
static json_int_t token_id(json_t *tok, const char *token)
{
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(tok, "added_tokens"), i, a)
    {
        const char *c = json_string_value(json_object_get(a, "content"));
        if (c && strcmp(c, token) == 0 && json_is_integer(json_object_get(a, "id")))
            return json_integer_value(json_object_get(a, "id"));
    }
    json_t *vocab = json_object_get(json_object_get(tok, "model"), "vocab");
    json_t *v = json_is_object(vocab) ? json_object_get(vocab, token) : NULL;
    if (json_is_integer(v)) return json_integer_value(v);
    if (json_is_array(vocab)) /* Unigram: [[piece, score], ...] */
        json_array_foreach(vocab, i, a)
        {
            const char *c = json_string_value(json_array_get(a, 0));
            if (c && strcmp(c, token) == 0) return (json_int_t)i;
        }
    return -1;
}

/* Does this post-processor put `bos` first on a single sequence? */
static bool prepends(json_t *pp, const char *bos)
{
    if (!json_is_object(pp)) return false;
    const char *type = json_string_value(json_object_get(pp, "type"));
    if (!type) return false;
    if (strcmp(type, "TemplateProcessing") == 0) {
        json_t *first = json_array_get(json_object_get(pp, "single"), 0);
        json_t *st = json_object_get(first, "SpecialToken");
        const char *id = json_string_value(json_object_get(st, "id"));
        return id && strcmp(id, bos) == 0;
    }
    if (strcmp(type, "BertProcessing") == 0 || strcmp(type, "RobertaProcessing") == 0) {
        const char *cls = json_string_value(json_array_get(json_object_get(pp, "cls"), 0));
        return cls && strcmp(cls, bos) == 0;
    }
    if (strcmp(type, "Sequence") == 0) {
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(pp, "processors"), i, p) if (prepends(p, bos)) return true;
    }
    return false;
}

static json_t *template_for(const char *bos, json_int_t id)
{
    return json_pack("{s:s, s:[{s:{s:s,s:i}},{s:{s:s,s:i}}], s:[{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}}],"
                     " s:{s:{s:s,s:[I],s:[s]}}}",
                     "type", "TemplateProcessing",
                     "single", "SpecialToken", "id", bos, "type_id", 0, "Sequence", "id", "A", "type_id", 0,
                     "pair", "SpecialToken", "id", bos, "type_id", 0, "Sequence", "id", "A", "type_id", 0,
                     "Sequence", "id", "B", "type_id", 1,
                     "special_tokens", bos, "id", bos, "ids", id, "tokens", bos);
}

graft_status cp_tokenizer_patch(const char *tok_path, json_t *tok, const char *cfg_path,
                                json_t *tok_cfg, json_t *genai_cfg, graft_bos_mode mode,
                                char *decision, size_t cap, graft_error *err)
{
    json_t *add = json_object_get(tok_cfg, "add_bos_token");
    if (mode == GRAFT_BOS_NEVER) {
        snprintf(decision, cap, "bos: never: tokenizer.json left unchanged");
        return GRAFT_OK;
    }
    if (mode == GRAFT_BOS_AUTO && !json_is_true(add)) {
        snprintf(decision, cap, "bos: auto: %s %s: tokenizer.json left unchanged",
                 tok_cfg ? cfg_path : "no tokenizer_config.json",
                 !tok_cfg ? "" : add ? "says add_bos_token false" : "does not set add_bos_token");
        return GRAFT_OK;
    }
    const char *bos = bos_string(tok_cfg);
    json_int_t id = bos ? token_id(tok, bos) : -1;
    if (!bos) { /* fall back on the config's id and the tokenizer's own name for it */
        json_t *bid = json_object_get(json_object_get(genai_cfg, "model"), "bos_token_id");
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(tok, "added_tokens"), i, a)
        {
            if (json_is_integer(bid) && json_integer_value(json_object_get(a, "id")) == json_integer_value(bid))
                bos = json_string_value(json_object_get(a, "content"));
        }
        id = bos ? json_integer_value(bid) : -1;
    }
    if (!bos || id < 0)
        return cp_err(err, GRAFT_EINVAL,
                      "%s: BOS requested (--bos %s) but no bos_token is defined in %s or known to %s",
                      tok_path, mode == GRAFT_BOS_ALWAYS ? "always" : "auto", cfg_path, tok_path);
    json_t *pp = json_object_get(tok, "post_processor");
    if (prepends(pp, bos)) {
        snprintf(decision, cap, "bos: %s: tokenizer.json already prepends '%s' (id %lld): left unchanged",
                 mode == GRAFT_BOS_ALWAYS ? "always" : "auto", bos, (long long)id);
        return GRAFT_OK;
    }
    json_t *tp = template_for(bos, id);
    if (!tp) return cp_err(err, GRAFT_ENOMEM, "%s: out of memory", tok_path);
    json_t *np = tp;
    if (json_is_object(pp)) {
        np = json_pack("{s:s, s:[O,o]}", "type", "Sequence", "processors", pp, tp);
        if (!np) return cp_err(err, GRAFT_ENOMEM, "%s: out of memory", tok_path);
    }
    if (json_object_set_new(tok, "post_processor", np) != 0)
        return cp_err(err, GRAFT_ENOMEM, "%s: out of memory", tok_path);
    snprintf(decision, cap, "bos: %s: %s; tokenizer.json now prepends '%s' (id %lld)",
             mode == GRAFT_BOS_ALWAYS ? "always" : "auto",
             mode == GRAFT_BOS_ALWAYS ? "requested" : "tokenizer_config.json says add_bos_token true",
             bos, (long long)id);
    return GRAFT_OK;
}

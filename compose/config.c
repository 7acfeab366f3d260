/* genai_config.json (ONNX Runtime GenAI schema): structure checks, the
 * sections compose reads, and the rewrite for a single decoder graph. */
#include <string.h>

#include "compose/cp.h"

static const char *const top_keys[] = {"model", "search", "engine", NULL};

static const char *const model_keys[] = {
    "type", "vocab_size", "context_length", "bos_token_id", "eos_token_id", "pad_token_id",
    "sep_token_id", "decoder_start_token_id", "image_token_id", "audio_token_id", "boa_token_id",
    "eoa_token_id", "boi_token_id", "eoi_token_id", "video_token_id", "vision_start_token_id",
    "decoder", "embedding", "vision", "speech", "encoder", "encoder_decoder_init",
    "prompt_templates", NULL};

/* Sections compose reads and rewrites; their keys are checked. */
static const char *const graph_section_keys[] = {
    "filename", "session_options", "run_options", "inputs", "outputs", "head_size", "hidden_size",
    "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "sliding_window",
    "adapter_filename", "config_filename", "pipeline", NULL};

/* Keys ONNX Runtime GenAI gives meaning to in a decoder or embedding name map. */
static const char *const map_keys[] = {
    "input_ids", "inputs_embeds", "attention_mask", "position_ids", "per_layer_inputs",
    "past_key_names", "past_value_names", "past_names", "present_key_names",
    "present_value_names", "present_names", "logits", "hidden_states", "image_features",
    "audio_features", "cache_indirection", "current_sequence_length", "past_sequence_length",
    "total_sequence_length", "seqlens_k", "encoder_hidden_states", "encoder_attention_mask",
    "encoder_outputs", "cross_past_key_names", "cross_past_value_names", "cross_present_key_names",
    "cross_present_value_names", "rnn_states", "rnn_states_prev", "past_key_scale_names",
    "past_value_scale_names", "present_key_scale_names", "present_value_scale_names",
    "past_conv_names", "present_conv_names", "past_recurrent_names", "present_recurrent_names",
    "output_cross_qk_names", "num_image_tokens", "image_sizes", NULL};

static bool in_list(const char *const *l, const char *k)
{
    for (; *l; l++)
        if (strcmp(*l, k) == 0) return true;
    return false;
}

static graft_status check_keys(const char *path, const char *where, json_t *obj,
                               const char *const *allowed, graft_error *err)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        if (!in_list(allowed, k))
            return cp_err(err, GRAFT_EINVAL, "%s: unknown key '%s' in %s", path, k, where);
    }
    return GRAFT_OK;
}

graft_status cp_config_check(const char *path, json_t *cfg, graft_error *err)
{
    graft_status rc;
    if (!json_is_object(cfg)) return cp_err(err, GRAFT_EINVAL, "%s: the top level is not an object", path);
    if ((rc = check_keys(path, "the top level", cfg, top_keys, err)) != GRAFT_OK) return rc;
    json_t *model = json_object_get(cfg, "model");
    if (!json_is_object(model)) return cp_err(err, GRAFT_EINVAL, "%s: 'model' is missing or not an object", path);
    if ((rc = check_keys(path, "'model'", model, model_keys, err)) != GRAFT_OK) return rc;
    static const char *const graph_sections[] = {"decoder", "embedding", NULL};
    for (const char *const *s = graph_sections; *s; s++) {
        json_t *sec = json_object_get(model, *s);
        if (!sec) continue;
        char where[64];
        snprintf(where, sizeof where, "'model.%s'", *s);
        if (!json_is_object(sec)) return cp_err(err, GRAFT_EINVAL, "%s: %s is not an object", path, where);
        if ((rc = check_keys(path, where, sec, graph_section_keys, err)) != GRAFT_OK) return rc;
        json_t *fn = json_object_get(sec, "filename");
        if (fn && !json_is_string(fn))
            return cp_err(err, GRAFT_EINVAL, "%s: %s.filename is not a string", path, where);
        static const char *const maps[] = {"inputs", "outputs", NULL};
        for (const char *const *mk = maps; *mk; mk++) {
            json_t *map = json_object_get(sec, *mk);
            if (!map) continue;
            snprintf(where, sizeof where, "'model.%s.%s'", *s, *mk);
            if (!json_is_object(map)) return cp_err(err, GRAFT_EINVAL, "%s: %s is not an object", path, where);
            if ((rc = check_keys(path, where, map, map_keys, err)) != GRAFT_OK) return rc;
            const char *k;
            json_t *v;
            json_object_foreach(map, k, v)
            {
                if (!json_is_string(v))
                    return cp_err(err, GRAFT_EINVAL, "%s: %s['%s'] is not a string", path, where, k);
            }
        }
    }
    return GRAFT_OK;
}

bool cp_config_section(json_t *cfg, const char *key, cp_section *s)
{
    memset(s, 0, sizeof *s);
    json_t *sec = json_object_get(json_object_get(cfg, "model"), key);
    if (!json_is_object(sec)) return false;
    s->key = key;
    s->obj = sec;
    s->filename = json_string_value(json_object_get(sec, "filename"));
    s->inputs = json_object_get(sec, "inputs");
    s->outputs = json_object_get(sec, "outputs");
    return true;
}

const char *cp_map_get(json_t *map, const char *key)
{
    return map ? json_string_value(json_object_get(map, key)) : NULL;
}

/* Multimodal types of ONNX Runtime GenAI and their text-only counterparts. */
static const char *const text_types[][2] = {
    {"gemma3", "gemma3_text"},       {"gemma4", "gemma4_text"},
    {"gemma4_unified", "gemma4_text"}, {"mistral3", "mistral3_text"},
    {"qwen2_5_vl", "qwen2_5_vl_text"}, {"qwen3_vl", "qwen3_vl_text"},
    {"qwen3_5", "qwen3_5_text"},     {"qwen3_5_moe", "qwen3_5_moe_text"},
};

graft_status cp_config_rewrite(const char *path, json_t *cfg, const char *filename,
                               const char *input_ids_name, const char *const *wired_keys,
                               size_t n_wired, graft_error *err)
{
    json_t *model = json_object_get(cfg, "model");
    json_t *dec = json_object_get(model, "decoder");
    if (!json_is_object(dec)) return cp_err(err, GRAFT_EINVAL, "%s: no 'model.decoder' section", path);
    if (json_object_set_new(dec, "filename", json_string(filename)) != 0) goto nomem;
    json_t *in = json_object_get(dec, "inputs");
    if (input_ids_name) {
        json_t *fresh = json_object();
        if (!fresh || json_object_set_new(fresh, "input_ids", json_string(input_ids_name)) != 0) goto nomem;
        const char *k;
        json_t *v;
        json_object_foreach(in, k, v)
        {
            bool wired = strcmp(k, "input_ids") == 0;
            for (size_t i = 0; i < n_wired && !wired; i++) wired = strcmp(k, wired_keys[i]) == 0;
            if (!wired && json_object_set(fresh, k, v) != 0) goto nomem;
        }
        if (json_object_set_new(dec, "inputs", fresh) != 0) goto nomem;
    }
    /* last: wired_keys may point into the embedding section */
    static const char *const drop[] = {"embedding", "vision", "speech", NULL};
    for (const char *const *d = drop; *d; d++) json_object_del(model, *d);
    const char *type = json_string_value(json_object_get(model, "type"));
    for (size_t i = 0; type && i < sizeof text_types / sizeof *text_types; i++)
        if (strcmp(type, text_types[i][0]) == 0) {
            if (json_object_set_new(model, "type", json_string(text_types[i][1])) != 0) goto nomem;
            break;
        }
    return GRAFT_OK;
nomem:
    return cp_err(err, GRAFT_ENOMEM, "%s: out of memory rewriting the config", path);
}

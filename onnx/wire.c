/* Iterative protobuf wire-format check: well-formedness and nesting depth,
 * before protobuf-c's recursive unpack sees the bytes. A model nested
 * thousands of levels deep is refused here without recursing. */
#include <string.h>

#include "onnx/internal.h"

static int read_varint(const uint8_t *b, size_t end, size_t *pos, uint64_t *v)
{
    uint64_t r = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*pos >= end) return -1;
        uint8_t c = b[(*pos)++];
        if (shift == 63 && (c & 0x7e)) return -1; /* more than 64 bits */
        r |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

typedef struct frame {
    const ProtobufCMessageDescriptor *desc; /* NULL: unknown message, skipped */
    size_t start, end;
} frame;

/* The name (field 8) of the innermost TensorProto on the stack, for
 * messages about its contents; "" when none. */
static void tensor_name(const uint8_t *buf, const frame *st, int sp, char *out, size_t cap)
{
    out[0] = '\0';
    for (int f = sp; f >= 0; f--) {
        if (st[f].desc != &onnx__tensor_proto__descriptor) continue;
        size_t pos = st[f].start, end = st[f].end;
        while (pos < end) {
            uint64_t tag, v;
            if (read_varint(buf, end, &pos, &tag) != 0) return;
            unsigned wt = (unsigned)(tag & 7);
            if (wt == 0) {
                if (read_varint(buf, end, &pos, &v) != 0) return;
            } else if (wt == 1 || wt == 5) {
                pos += wt == 1 ? 8 : 4;
            } else if (wt == 2) {
                if (read_varint(buf, end, &pos, &v) != 0 || v > end - pos) return;
                if ((tag >> 3) == 8) {
                    size_t n = (size_t)v < cap - 1 ? (size_t)v : cap - 1;
                    memcpy(out, buf + pos, n);
                    out[n] = '\0';
                    return;
                }
                pos += (size_t)v;
            } else {
                return;
            }
        }
        return;
    }
}

graft_status ox_wire_check(const uint8_t *buf, size_t len, const ProtobufCMessageDescriptor *desc,
                           int max_depth, const char *what, graft_error *err)
{
    frame *st = malloc(sizeof(frame) * (size_t)(max_depth + 1));
    if (!st) return ox_err(err, GRAFT_ENOMEM, "%s: out of memory", what);
    graft_status rc = GRAFT_OK;
    int sp = 0;
    size_t pos = 0;
    st[0].desc = desc;
    st[0].start = 0;
    st[0].end = len;
    while (sp >= 0) {
        if (pos == st[sp].end) {
            sp--;
            continue;
        }
        size_t at = pos;
        uint64_t tag, v;
        if (read_varint(buf, st[sp].end, &pos, &tag) != 0 || (tag >> 3) == 0 ||
            (tag >> 3) > 0x1fffffff) {
            rc = ox_err(err, GRAFT_EINVAL, "%s: malformed protobuf (bad field tag at byte %zu)", what, at);
            goto done;
        }
        unsigned field = (unsigned)(tag >> 3);
        switch (tag & 7) {
        case 0:
            if (read_varint(buf, st[sp].end, &pos, &v) != 0) {
                rc = ox_err(err, GRAFT_EINVAL, "%s: malformed protobuf (bad varint at byte %zu)", what, pos);
                goto done;
            }
            break;
        case 1:
        case 5: {
            size_t w = (tag & 7) == 1 ? 8 : 4;
            if (st[sp].end - pos < w) {
                rc = ox_err(err, GRAFT_EINVAL, "%s: malformed protobuf (truncated at byte %zu)", what, pos);
                goto done;
            }
            pos += w;
            break;
        }
        case 2: {
            if (read_varint(buf, st[sp].end, &pos, &v) != 0 || v > st[sp].end - pos) {
                rc = ox_err(err, GRAFT_EINVAL,
                            "%s: malformed protobuf (length at byte %zu runs past its message; "
                            "truncated file?)", what, at);
                goto done;
            }
            const ProtobufCFieldDescriptor *fd =
                st[sp].desc ? protobuf_c_message_descriptor_get_field(st[sp].desc, field) : NULL;
            if (fd && fd->type == PROTOBUF_C_TYPE_STRING && memchr(buf + pos, 0, (size_t)v)) {
                /* C strings would silently end at the NUL: the name checked
                 * would not be the name stored */
                char tn[128];
                tensor_name(buf, st, sp, tn, sizeof tn);
                rc = ox_err(err, GRAFT_EINVAL, "%s: %s%s%sstring field %s.%s at byte %zu ('%.*s' then a NUL byte) "
                            "holds a NUL byte; refused", what, *tn ? "tensor '" : "", tn, *tn ? "': " : "",
                            st[sp].desc->short_name, fd->name, at, (int)strnlen((const char *)buf + pos, (size_t)v),
                            (const char *)buf + pos);
                goto done;
            }
            if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (sp + 1 > max_depth) {
                    rc = ox_err(err, GRAFT_EINVAL,
                                "%s: messages nested deeper than %d levels (at byte %zu, field %s.%s); "
                                "refusing to parse", what, max_depth, at, st[sp].desc->short_name, fd->name);
                    goto done;
                }
                sp++;
                st[sp].desc = fd->descriptor;
                st[sp].start = pos;
                st[sp].end = pos + (size_t)v;
            } else {
                pos += (size_t)v;
            }
            break;
        }
        default:
            rc = ox_err(err, GRAFT_EINVAL, "%s: malformed protobuf (wire type %u at byte %zu)", what,
                        (unsigned)(tag & 7), at);
            goto done;
        }
        if (pos > st[sp].end) { /* cannot happen: every read is bounded */
            rc = ox_err(err, GRAFT_EINVAL, "%s: malformed protobuf at byte %zu", what, pos);
            goto done;
        }
    }
done:
    free(st);
    return rc;
}

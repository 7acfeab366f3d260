/* Files for compose: paths, JSON with line/column errors, copies. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compose/cp.h"

graft_status cp_err(graft_error *err, graft_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

char *cp_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

char *cp_concat(const char *a, const char *b)
{
    size_t x = strlen(a), y = strlen(b);
    char *p = malloc(x + y + 1);
    if (!p) return NULL;
    memcpy(p, a, x);
    memcpy(p + x, b, y + 1);
    return p;
}

bool cp_path_is_safe(const char *rel)
{
    if (!rel || !*rel || rel[0] == '/') return false;
    const char *p = rel;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') return false;
        if (!e) break;
        p = e + 1;
    }
    return true;
}

graft_status cp_json_load(const char *path, json_t **out, graft_error *err)
{
    json_error_t je;
    *out = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (*out) return GRAFT_OK;
    if (access(path, F_OK) != 0)
        return cp_err(err, GRAFT_EINVAL, "%s: cannot open: %s", path, strerror(errno));
    return cp_err(err, GRAFT_EINVAL, "%s: invalid JSON at line %d, column %d: %s", path, je.line,
                  je.column, je.text);
}

static graft_status write_all(int fd, const char *buf, size_t n, const char *path, graft_error *err)
{
    while (n) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return cp_err(err, GRAFT_EIO, "%s: write: %s", path, strerror(errno));
        }
        buf += w;
        n -= (size_t)w;
    }
    return GRAFT_OK;
}

graft_status cp_json_write(const char *path, const json_t *j, bool sync, graft_error *err)
{
    char *s = json_dumps(j, JSON_INDENT(4) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    if (!s) return cp_err(err, GRAFT_ENOMEM, "%s: cannot serialise JSON", path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        free(s);
        return cp_err(err, GRAFT_EIO, "%s: create: %s", path, strerror(errno));
    }
    graft_status rc = write_all(fd, s, strlen(s), path, err);
    if (rc == GRAFT_OK) rc = write_all(fd, "\n", 1, path, err);
    if (rc == GRAFT_OK && sync && fsync(fd) != 0) rc = cp_err(err, GRAFT_EIO, "%s: fsync: %s", path, strerror(errno));
    close(fd);
    free(s);
    return rc;
}

graft_status cp_copy_file(const char *src, const char *dst, bool sync, graft_error *err)
{
    graft_status rc = GRAFT_OK;
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (in < 0) return cp_err(err, GRAFT_EINVAL, "%s: cannot open: %s", src, strerror(errno));
    struct stat st;
    if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(in);
        return cp_err(err, GRAFT_EINVAL, "%s: not a regular file", src);
    }
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (out < 0) {
        close(in);
        return cp_err(err, GRAFT_EIO, "%s: create: %s", dst, strerror(errno));
    }
    off_t left = st.st_size;
    while (left > 0) {
        ssize_t r = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
        if (r < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL)) {
            char buf[1 << 16];
            ssize_t k = read(in, buf, sizeof buf);
            if (k < 0) {
                rc = cp_err(err, GRAFT_EIO, "%s: read: %s", src, strerror(errno));
                break;
            }
            if (k == 0) break;
            if ((rc = write_all(out, buf, (size_t)k, dst, err)) != GRAFT_OK) break;
            left -= k;
            continue;
        }
        if (r < 0) {
            rc = cp_err(err, GRAFT_EIO, "%s -> %s: copy: %s", src, dst, strerror(errno));
            break;
        }
        if (r == 0) break;
        left -= r;
    }
    if (rc == GRAFT_OK && sync && fsync(out) != 0) rc = cp_err(err, GRAFT_EIO, "%s: fsync: %s", dst, strerror(errno));
    close(in);
    close(out);
    return rc;
}

void cp_rmtree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
                char *c = cp_join(path, e->d_name);
                if (c) cp_rmtree(c);
                free(c);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

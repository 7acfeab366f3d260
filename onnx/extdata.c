/* Safe resolution of external-data locations: relative, no "..", no
 * symlinks anywhere on the path, a regular file with a single hard link,
 * all beneath the model's directory. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "onnx/internal.h"

graft_status ox_location_normalise(const char *loc, char **out, const char *tensor,
                                   const char *model_path, graft_error *err)
{
    *out = NULL;
    if (!loc || !*loc)
        return ox_err(err, GRAFT_EINVAL, "%s: tensor '%s': external data location is empty",
                      model_path, tensor);
    if (loc[0] == '/')
        return ox_err(err, GRAFT_EINVAL,
                      "%s: tensor '%s': external data location '%s' is an absolute path; "
                      "it must be relative to the model's directory", model_path, tensor, loc);
    size_t n = strlen(loc);
    char *buf = malloc(n + 1), *res = malloc(n + 1);
    if (!buf || !res) {
        free(buf);
        free(res);
        return ox_err(err, GRAFT_ENOMEM, "%s: out of memory", model_path);
    }
    memcpy(buf, loc, n + 1);
    size_t rl = 0;
    char *save = NULL;
    for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0) continue;
        if (strcmp(c, "..") == 0) {
            free(buf);
            free(res);
            return ox_err(err, GRAFT_EINVAL,
                          "%s: tensor '%s': external data location '%s' contains '..'; "
                          "it must stay inside the model's directory", model_path, tensor, loc);
        }
        size_t cl = strlen(c);
        if (rl) res[rl++] = '/';
        memcpy(res + rl, c, cl);
        rl += cl;
    }
    res[rl] = '\0';
    free(buf);
    if (rl == 0) {
        free(res);
        return ox_err(err, GRAFT_EINVAL, "%s: tensor '%s': external data location '%s' names no file",
                      model_path, tensor, loc);
    }
    *out = res;
    return GRAFT_OK;
}

/* Fallback without openat2: walk the components with O_NOFOLLOW. */
static int open_walk(int dirfd, const char *rel)
{
    char *copy = ox_strdup(rel);
    if (!copy) {
        errno = ENOMEM;
        return -1;
    }
    int cur = dirfd, fd = -1;
    char *save = NULL, *c = strtok_r(copy, "/", &save);
    while (c) {
        char *next = strtok_r(NULL, "/", &save);
        int flags = O_CLOEXEC | O_NOFOLLOW | (next ? (O_PATH | O_DIRECTORY) : (O_RDONLY | O_NONBLOCK));
        int nfd = openat(cur, c, flags);
        int e = errno;
        if (cur != dirfd) close(cur);
        if (nfd < 0) {
            errno = e;
            cur = -1;
            break;
        }
        cur = nfd;
        c = next;
    }
    if (cur != dirfd) fd = cur;
    free(copy);
    return fd;
}

int ox_open_beneath(int dirfd, const char *rel, const char *tensor, const char *model_path,
                    graft_error *err)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK; /* a FIFO must not block the open */
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
    int fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
    if (fd < 0 && (errno == ENOSYS || errno == EPERM))
        fd = open_walk(dirfd, rel);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP || e == EXDEV)
            ox_err(err, GRAFT_EINVAL,
                   "%s: tensor '%s': external data location '%s' goes through a symbolic link "
                   "or leaves the model's directory; refused", model_path, tensor, rel);
        else
            ox_err(err, e == ENOENT || e == ENOTDIR ? GRAFT_EINVAL : GRAFT_EIO,
                   "%s: tensor '%s': cannot open external data file '%s': %s", model_path, tensor,
                   rel, strerror(e));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        ox_err(err, GRAFT_EIO, "%s: tensor '%s': stat of external data file '%s': %s", model_path,
               tensor, rel, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        ox_err(err, GRAFT_EINVAL, "%s: tensor '%s': external data location '%s' is not a regular file",
               model_path, tensor, rel);
        goto fail;
    }
    if (st.st_nlink != 1) {
        ox_err(err, GRAFT_EINVAL,
               "%s: tensor '%s': external data file '%s' has %ju hard links; refused "
               "(a hard link can reach outside the model's directory)", model_path, tensor, rel,
               (uintmax_t)st.st_nlink);
        goto fail;
    }
    return fd;
fail:
    close(fd);
    return -1;
}

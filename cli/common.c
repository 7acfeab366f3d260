/* cli/common.c — helpers shared by graft's subcommands: error reporting and
 * safe printing of names that come from models. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int graft_cli_fail(const char *cmd, graft_status st, const graft_error *err)
{
    const char *msg = (err && err->msg[0]) ? err->msg : graft_status_str(st);

    fprintf(stderr, "graft %s: %s\n", cmd, msg);
    return graft_status_exit_code(st);
}

int graft_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "graft %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nRun 'graft help %s' for usage.\n", cmd);
    return 2;
}

graft_status graft_cli_error_set(graft_error *err, graft_status code, const char *fmt, ...)
{
    va_list ap;

    if (!err)
        return code;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

void graft_cli_print_escaped(FILE *f, const char *s)
{
    if (!s)
        return;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
}

int graft_cli_device(const char *cmd, const char *arg, int *device)
{
    if (!strcmp(arg, "auto")) *device = GRAFT_DEVICE_AUTO;
    else if (!strcmp(arg, "cpu")) *device = GRAFT_DEVICE_CPU;
    else if (!strcmp(arg, "cuda")) *device = GRAFT_DEVICE_CUDA;
    else return graft_cli_usage_error(cmd, "--device takes cpu, cuda or auto, not '%s'", arg);
    return 0;
}

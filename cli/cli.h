/* cli/cli.h — graft's command-line front end.
 *
 * cli/ is the only part of graft that prints for users or decides the
 * process exit status. Each subcommand lives in its own file
 * cli/<name>.c and defines
 *
 *     int graft_cli_<name>(int argc, char **argv);
 *
 * argv[0] is the command's name, argv[1..] its arguments. It returns the
 * exit status: 0 success, 1 runtime failure, 2 bad input or usage
 * (graft_status_exit_code maps library statuses). "--help" prints the
 * command's usage to stdout and returns 0.
 */
#ifndef GRAFT_CLI_H
#define GRAFT_CLI_H

#include <stdio.h>

#include "graft.h"

/* The command table, in the order `graft --help` lists it. Adding a command
 * is one line here, X(name, summary) \, plus its file cli/<name>.c; main.c's
 * dispatch table and the declarations below follow from it. */
#define GRAFT_CLI_COMMANDS(X)                                                      \
    X(inspect, "show a model's or pipeline's I/O, ops, weights and KV layout")     \
    X(compose, "fuse a vendor pipeline into one self-contained text-only export") \
    X(generate, "decode an export on graft's runtime, streaming text or ids")      \
    X(verify, "greedy decode compared token for token with an ONNX Runtime golden") \
    X(bench, "prefill and decode throughput and peak memory of an export")       \
    X(tokenize, "encode or decode text with a tokenizer.json")                    \
    /* end of the command table */

#define GRAFT_CLI_DECLARE_(name, summary) int graft_cli_##name(int argc, char **argv);
GRAFT_CLI_COMMANDS(GRAFT_CLI_DECLARE_)
#undef GRAFT_CLI_DECLARE_

/* Prints "graft CMD: MESSAGE" to stderr for a failed status (the library's
 * message, or the status's name when it left none) and returns the exit
 * status for it. */
int graft_cli_fail(const char *cmd, graft_status st, const graft_error *err);

/* Prints "graft CMD: MESSAGE" and a pointer to `graft help CMD` to stderr;
 * returns 2 (usage error). */
int graft_cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Fills err (code and message) the way the library does, for errors the CLI
 * finds itself. Returns `code`. */
graft_status graft_cli_error_set(graft_error *err, graft_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes `s` to f with control characters shown as \xNN, so that names
 * read from a model cannot drive the terminal. NULL prints nothing. */
void graft_cli_print_escaped(FILE *f, const char *s);

/* Parses a --device argument (cpu, cuda, auto) into *device (graft_device);
 * returns 0, or prints a usage error for `cmd` and returns 2. */
int graft_cli_device(const char *cmd, const char *arg, int *device);

#endif /* GRAFT_CLI_H */

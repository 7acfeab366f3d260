/* cli/main.c — `graft <command> [args]`: finds the command in the table of
 * cli/cli.h and runs it. Exit status: 0 success, 1 runtime failure, 2 bad
 * input or usage. Start reading here; each command is cli/<name>.c. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

typedef struct graft_cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} graft_cli_command;

#define GRAFT_CLI_ENTRY_(name, summary) {#name, graft_cli_##name, summary},
static const graft_cli_command graft_cli_commands[] = {GRAFT_CLI_COMMANDS(GRAFT_CLI_ENTRY_)};
#undef GRAFT_CLI_ENTRY_

#define GRAFT_CLI_NCOMMANDS (sizeof graft_cli_commands / sizeof graft_cli_commands[0])

static const graft_cli_command *graft_cli_command_find(const char *name)
{
    for (size_t i = 0; i < GRAFT_CLI_NCOMMANDS; i++)
        if (strcmp(graft_cli_commands[i].name, name) == 0)
            return &graft_cli_commands[i];
    return NULL;
}

static void graft_cli_usage_print(FILE *f)
{
    fprintf(f, "graft %s — compose, run and verify ONNX language-model exports\n\n"
               "usage: graft <command> [args]\n"
               "       graft help <command>\n"
               "       graft --help | --version\n\n"
               "commands:\n",
            GRAFT_VERSION);
    for (size_t i = 0; i < GRAFT_CLI_NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", graft_cli_commands[i].name, graft_cli_commands[i].summary);
    fprintf(f, "\nRun 'graft help <command>' for a command's arguments.\n"
               "Exit status: 0 success, 1 runtime failure, 2 bad input or usage.\n");
}

/* `graft help [CMD]`: the command's own --help, or the overview. */
static int graft_cli_help_run(int argc, char **argv)
{
    const graft_cli_command *c;
    char help_arg[] = "--help";
    char *sub_argv[3];

    if (argc < 2) {
        graft_cli_usage_print(stdout);
        return 0;
    }
    if (argc > 2) {
        fprintf(stderr, "graft help: one command at a time\n");
        return 2;
    }
    c = graft_cli_command_find(argv[1]);
    if (!c) {
        fprintf(stderr, "graft help: unknown command '");
        graft_cli_print_escaped(stderr, argv[1]);
        fprintf(stderr, "'\nRun 'graft --help' for the list of commands.\n");
        return 2;
    }
    sub_argv[0] = argv[1];
    sub_argv[1] = help_arg;
    sub_argv[2] = NULL;
    return c->run(2, sub_argv);
}

int main(int argc, char **argv)
{
    const graft_cli_command *c;
    int rc;

    if (argc < 2) {
        graft_cli_usage_print(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        graft_cli_usage_print(stdout);
        rc = 0;
    } else if (strcmp(argv[1], "--version") == 0) {
        printf("graft %s\n", GRAFT_VERSION);
        rc = 0;
    } else if (strcmp(argv[1], "help") == 0) {
        rc = graft_cli_help_run(argc - 1, argv + 1);
    } else if ((c = graft_cli_command_find(argv[1])) != NULL) {
        rc = c->run(argc - 1, argv + 1);
    } else {
        fprintf(stderr, "graft: %s '", argv[1][0] == '-' ? "unknown option" : "unknown command");
        graft_cli_print_escaped(stderr, argv[1]);
        fprintf(stderr, "'\nRun 'graft --help' for the list of commands.\n");
        return 2;
    }
    /* Output that did not reach its destination is a failure. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("graft: writing output");
        return rc ? rc : 1;
    }
    return rc;
}

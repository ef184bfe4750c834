/* commands.h — the subcommands main() dispatches to. Each takes argv with argv[0]
 * being the subcommand name and returns the process exit status. */
#ifndef LLC_COMMANDS_H
#define LLC_COMMANDS_H

#include "app/cli.h"

typedef struct command {
    const cli_cmd *cli;
    int (*run)(int argc, char **argv);
} command;

int cmd_chat(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_genmodel(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_ask(int argc, char **argv);
int cmd_embed(int argc, char **argv);
extern const cli_cmd cli_chat, cli_generate, cli_perplexity, cli_bench, cli_tokenize, cli_info, cli_genmodel;
extern const cli_cmd cli_serve, cli_ask;
extern const cli_cmd cli_embed;

#endif

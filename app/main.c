/* main.c — `llmchat [SUBCOMMAND] [options]`: finds the subcommand and runs it. */
#include <stdio.h>
#include <string.h>

#include "app/commands.h"

static const command g_commands[] = {
    {&cli_generate, cmd_generate},
    {&cli_perplexity, cmd_perplexity},
    {&cli_bench, cmd_bench},
    {&cli_tokenize, cmd_tokenize},
    {&cli_info, cmd_info},
    {&cli_genmodel, cmd_genmodel},
};

static void print_main_help(void) {
    printf("llmchat — local LLM chat, one engine for every session\n\n"
           "usage: llmchat SUBCOMMAND [options]\n\nsubcommands:\n");
    for (size_t i = 0; i < sizeof g_commands / sizeof g_commands[0]; i++)
        printf("  %-12s %s\n", g_commands[i].cli->name, g_commands[i].cli->summary);
    printf("\n'llmchat SUBCOMMAND --help' shows a subcommand's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_main_help();
        return 2;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "-h") || !strcmp(sub, "--help") || !strcmp(sub, "help")) {
        print_main_help();
        return 0;
    }
    for (size_t i = 0; i < sizeof g_commands / sizeof g_commands[0]; i++)
        if (!strcmp(sub, g_commands[i].cli->name)) return g_commands[i].run(argc - 1, argv + 1);
    if (sub[0] == '-')
        fprintf(stderr, "llmchat: unknown option '%s' (see 'llmchat --help')\n", sub);
    else
        fprintf(stderr, "llmchat: unknown subcommand '%s' (see 'llmchat --help')\n", sub);
    return 2;
}

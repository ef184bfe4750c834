/* main.c — `llmchat [SUBCOMMAND] [options]`: finds the subcommand and runs it. */
#include <stdio.h>
#include <string.h>

#include "app/commands.h"

static const command g_commands[] = {
    {&cli_chat, cmd_chat},
    {&cli_generate, cmd_generate},
    {&cli_perplexity, cmd_perplexity},
    {&cli_bench, cmd_bench},
    {&cli_tokenize, cmd_tokenize},
    {&cli_info, cmd_info},
    {&cli_genmodel, cmd_genmodel},
    {&cli_serve, cmd_serve},
    {&cli_ask, cmd_ask},
    {&cli_embed, cmd_embed},
};

static void print_main_help(void) {
    printf("llmchat — local LLM chat, one engine for every session\n\n"
           "usage: llmchat [SUBCOMMAND] [options]   (no subcommand: the chat UI)\n\nsubcommands:\n");
    for (size_t i = 0; i < sizeof g_commands / sizeof g_commands[0]; i++)
        printf("  %-12s %s\n", g_commands[i].cli->name, g_commands[i].cli->summary);
    printf("\n'llmchat SUBCOMMAND --help' shows a subcommand's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) return cmd_chat(1, (char *[]){"chat", NULL}); /* the chat UI is the default */
    const char *sub = argv[1];
    if (!strcmp(sub, "-h") || !strcmp(sub, "--help") || !strcmp(sub, "help")) {
        print_main_help();
        return 0;
    }
    for (size_t i = 0; i < sizeof g_commands / sizeof g_commands[0]; i++)
        if (!strcmp(sub, g_commands[i].cli->name)) return g_commands[i].run(argc - 1, argv + 1);
    if (sub[0] == '-') { /* `llmchat -m MODEL ...`: options of the chat UI */
        argv[0] = "chat";
        return cmd_chat(argc, argv);
    }
        fprintf(stderr, "llmchat: unknown subcommand '%s' (see 'llmchat --help')\n", sub);
    return 2;
}

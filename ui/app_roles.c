/* app_roles.c — the config file's roles (see app_internal.h): /role NAME (a
 * named system prompt) and the roles F1 lists. (A new tab's defaults from the
 * config are set in app_tabs.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ui/app_internal.h"
#include "ui/command.h"
#include "ui/textwrap.h"

/* /role NAME: the config's role becomes the tab's system prompt; /role alone lists them. */
void app_cmd_role(ui_app *a, conv *c, const char *name, size_t len) {
    const ui_app_config *cf = &a->cfg;
    if (!len) {
        sbuf text = {0};
        if (!cf->n_roles) {
            ui_app_notice(a, false, "no roles: add 'role NAME = TEXT' lines to %s",
                          cf->config_path && *cf->config_path ? cf->config_path : "~/.config/llmchat/config");
            return;
        }
        sb_str(&text, "Roles (/role NAME makes one the system prompt of this tab)\n");
        for (int i = 0; i < cf->n_roles; i++) {
            char line[80];
            size_t pl = strcspn(cf->roles[i].prompt, "\n");
            tw_ellipsize(cf->roles[i].prompt, pl, 60, line, sizeof line);
            sb_printf(&text, "  %-14s %s\n", cf->roles[i].name, line);
        }
        app_show_panel(a, &text);
        return;
    }
    for (int i = 0; i < cf->n_roles; i++) {
        if (strlen(cf->roles[i].name) != len || memcmp(cf->roles[i].name, name, len)) continue;
        if (!app_set_system(a, c, cf->roles[i].prompt, strlen(cf->roles[i].prompt))) return;
        ui_app_notice(a, false, "role %s: its system prompt is this tab's now (/system shows it)", cf->roles[i].name);
        return;
    }
    app_reject(a, "/role %.*s: no such role (%s)", (int)(len > 64 ? 64 : len), name,
               cf->n_roles ? "/role lists them" : "the config file names none");
}

/* /help and F1: the keys and commands, and the config's roles. */
void app_cmd_help(ui_app *a) {
    sbuf text = {0};
    sb_str(&text, ui_help_text());
    if (a->cfg.n_roles) {
        sb_str(&text, "\nRoles (/role NAME)\n ");
        for (int i = 0; i < a->cfg.n_roles; i++) sb_printf(&text, " %s", a->cfg.roles[i].name);
    }
    app_show_panel(a, &text);
}

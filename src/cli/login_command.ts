/**
 * `relay login`: checks a key against a relay and saves the relay's URL and the key in the
 * client config file, so that later commands need neither `--url` nor a key file
 * (docs/cli/commands.md, "Finding the relay and the key").
 *
 * @module
 */

import { verifyKey } from "../client/client.ts";
import { readEnv } from "../config/config.ts";
import type { Command } from "./command.ts";
import { readConfigFile, resolveUrl, URL_OPTION, writeConfigFile } from "./client_config.ts";

const login: Command = {
  name: "login",
  synopsis: "[--url URL]",
  summary: "check a key against a relay, then save the URL and key in the config file",
  help: [
    "The key comes from RELAY_API_KEY, else from stdin (on a terminal, a prompt that does",
    "not echo it); never from a flag, so it stays out of the shell history and ps. The",
    "relay must accept it: a key it refuses (401) is not saved and the exit code is 3.",
    "Writes RELAY_URL and RELAY_API_KEY to $XDG_CONFIG_HOME/relay/config (else",
    "~/.config/relay/config), mode 0600, keeping the file's other lines.",
  ].join("\n"),
  options: [URL_OPTION],
  async run(args, io) {
    const file = await readConfigFile(io.env);
    if (file.path === undefined) {
      throw args.usage("no place for the config file: set HOME or XDG_CONFIG_HOME");
    }
    const url = resolveUrl(args.string("url"), io, file);
    const key = readEnv(io.env, "RELAY_API_KEY") ?? await io.readSecret(`API key for ${url}: `);
    if (key === "") throw args.usage("no key: type it, pipe it to stdin, or set RELAY_API_KEY");
    const mayRead = await verifyKey({ url, key });
    await writeConfigFile(file.path, { url, key });
    io.err(`relay: the relay at ${url} accepted the key; saved both in ${file.path}`);
    if (!mayRead) io.err("relay: note: this key may not read results (no read scope)");
    return 0;
  },
};

/** The `login` command. */
export const LOGIN_COMMANDS: readonly Command[] = [login];

/**
 * `relay keys add|list|remove` and `relay pair`: manage the named keys in the keys file on
 * the relay's own machine, and show a pairing link and QR code for the phone app. They
 * work on files, so they run while the relay runs; the relay picks up a changed keys file
 * within a second.
 *
 * @module
 */

import { addressFile, commandDbPath, defaultKeysFile, readEnv } from "../config/config.ts";
import { addKey, readKeysFile, readLastUsed, removeKey, SCOPES } from "../access/named_keys.ts";
import { lanAddress, pairingLines, pairingLink } from "../access/pairing.ts";
import type { Args, Command, OptionSpec } from "./command.ts";
import { DB_OPTION, KEY_FILE_OPTION, readConfigFile, resolveKey } from "./client_config.ts";
import { CommandFailure, type CommandIo } from "./io.ts";
import { pathExists } from "../util/files.ts";
import { DEFAULT_RELAY_URL } from "../client/client.ts";

const KEYS_FILE_OPTION: OptionSpec = {
  name: "keys-file",
  type: "string",
  value: "FILE",
  help: "the named keys file",
  env: "RELAY_KEYS_FILE",
  default: "keys.json beside --db",
};

const SCOPE_OPTION: OptionSpec = {
  name: "scope",
  type: "string",
  value: "S[,S…]",
  multiple: true,
  help: `what the key may do: ${SCOPES.join(", ")}`,
};

const FILE_OPTIONS: readonly OptionSpec[] = [KEYS_FILE_OPTION, DB_OPTION];

/** The keys file the relay uses: `--keys-file`, `RELAY_KEYS_FILE`, or beside `--db`. */
function keysFile(args: Args, io: CommandIo): string {
  return args.string("keys-file") ?? readEnv(io.env, "RELAY_KEYS_FILE") ??
    defaultKeysFile(commandDbPath(args.string("db"), io.env, io.systemDataDir));
}

/** `--scope` values as given (repeated, or comma-separated) → scope names, trimmed. */
function scopeList(values: readonly string[]): string[] {
  return values.flatMap((value) => value.split(",")).map((s) => s.trim()).filter((s) => s !== "");
}

/** `YYYY-MM-DD HH:MM` in UTC, or `never`. */
function when(ms: number | undefined): string {
  return ms === undefined ? "never" : new Date(ms).toISOString().slice(0, 16).replace("T", " ");
}

/** The single name argument of `keys add` and `keys remove`. */
function oneName(args: Args): string {
  const [name, ...extra] = args.positionals;
  if (name === undefined || extra.length > 0) {
    throw args.needs("exactly one name, e.g. phone");
  }
  return name;
}

const add: Command = {
  name: "keys add",
  synopsis: "<name> --scope S[,S…] [--json]",
  summary: `add a named key (scopes: ${SCOPES.join(", ")}); prints it once`,
  options: [
    SCOPE_OPTION,
    { name: "json", type: "boolean", help: "print {name, key, keys_file}" },
    ...FILE_OPTIONS,
  ],
  positionals: true,
  run(args, io) {
    const name = oneName(args);
    const path = keysFile(args, io);
    const key = addKey(path, name, scopeList(args.list("scope")), Date.now());
    io.out(args.flag("json") ? JSON.stringify({ name, key, keys_file: path }) : key);
    io.err(`relay: added key "${name}" to ${path}; it is shown only this once`);
    return Promise.resolve(0);
  },
};

const list: Command = {
  name: "keys list",
  synopsis: "[--json]",
  summary: "show the named keys: name, scopes, created, last used (never the key)",
  help: "Says which keys file it read on stderr.",
  options: [{ name: "json", type: "boolean", help: "print a JSON array" }, ...FILE_OPTIONS],
  run(args, io) {
    const path = keysFile(args, io);
    const used = readLastUsed(path);
    const keys = readKeysFile(path).map((key) => ({
      name: key.name,
      scopes: key.scopes,
      created_at: key.created_at,
      last_used_at: used[key.name] ?? null,
    }));
    if (args.flag("json")) io.out(JSON.stringify(keys));
    if (keys.length === 0) {
      io.err(
        pathExists(path)
          ? `relay: no keys in ${path}`
          : `relay: no keys file at ${path} (add a key with: relay keys add <name> --scope …)`,
      );
      return Promise.resolve(0);
    }
    io.err(`relay: ${keys.length} ${keys.length === 1 ? "key" : "keys"} in ${path}`);
    if (args.flag("json")) return Promise.resolve(0);
    const rows = [
      ["NAME", "SCOPES", "CREATED (UTC)", "LAST USED (UTC)"],
      ...keys.map((k) => [
        k.name,
        k.scopes.join(","),
        when(k.created_at),
        when(k.last_used_at ?? undefined),
      ]),
    ];
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
    for (const row of rows) {
      io.out(row.map((cell, i) => cell.padEnd(widths[i]!)).join("  ").trimEnd());
    }
    return Promise.resolve(0);
  },
};

const remove: Command = {
  name: "keys remove",
  synopsis: "<name>",
  summary: "remove a named key; it stops working within a second",
  options: FILE_OPTIONS,
  positionals: true,
  run(args, io) {
    const name = oneName(args);
    const path = keysFile(args, io);
    if (!removeKey(path, name)) throw new CommandFailure(`no key named "${name}" in ${path}`);
    io.err(`relay: removed key "${name}" from ${path}`);
    return Promise.resolve(0);
  },
};

const pair: Command = {
  name: "pair",
  synopsis: "[--app-url URL] [--name N [--scope S,…]]",
  summary: "show a link and QR code that pair a phone's web app (--name adds a key for it)",
  help: [
    "The link points at --app-url, else RELAY_URL, else this machine's LAN address with",
    "the port the relay here listens on (read from the file it writes beside --db), else",
    "8787: give the address the phone reaches. With --name it adds a named key",
    "for the phone (scopes default to submit, read, publish); without, the link carries",
    "the main key, found as the client commands find it.",
  ].join("\n"),
  options: [
    {
      name: "app-url",
      type: "string",
      value: "URL",
      help: "the relay's address as the phone reaches it",
    },
    { name: "name", type: "string", value: "N", help: "add a named key for this phone" },
    { ...SCOPE_OPTION, default: "submit,read,publish" },
    KEY_FILE_OPTION,
    ...FILE_OPTIONS,
  ],
  async run(args, io) {
    const base = args.string("app-url") ?? readEnv(io.env, "RELAY_URL") ??
      localRelayUrl(commandDbPath(args.string("db"), io.env, io.systemDataDir));
    const name = args.string("name");
    let key: string;
    // The main key of the relay on this machine: a pairing link carries it to a phone, not
    // over the network to another relay.
    if (name === undefined) {
      key = await resolveKey(args, io, await readConfigFile(io.env), DEFAULT_RELAY_URL);
    } else {
      const given = args.list("scope");
      const scopes = scopeList(given.length === 0 ? ["submit,read,publish"] : given);
      key = addKey(keysFile(args, io), name, scopes, Date.now());
      io.err(`relay: added key "${name}" (${scopes.join(", ")}) for this pairing`);
    }
    for (const line of await pairingLines(pairingLink(base, key))) io.out(line);
    return 0;
  },
};

/**
 * The address of the relay on this machine as a phone on the LAN reaches it, as the relay
 * prints it at start: the scheme and port it listens on, from the address file it writes
 * beside `db`, with this machine's LAN address for a wildcard host;
 * `http://<LAN address>:8787` (the default port) when there is no such file.
 */
function localRelayUrl(db: string): string {
  let listening: URL;
  try {
    listening = new URL(Deno.readTextFileSync(addressFile(db)).trim());
  } catch {
    // Never started here, or not readable by this user: the default port.
    return `http://${lanAddress("0.0.0.0")}:8787`;
  }
  listening.hostname = lanAddress(listening.hostname.replace(/^\[(.*)\]$/, "$1"));
  return listening.origin;
}

/** The commands about keys, in help order. */
export const KEYS_COMMANDS: readonly Command[] = [add, list, remove, pair];

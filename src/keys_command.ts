/**
 * `relay keys add|list|remove` and `relay pair` (issue 7): manage the named keys in the
 * keys file on the relay's own machine, and show a pairing link and QR code for the phone
 * app. They work on files, so they run while the relay runs; the relay picks up a changed
 * keys file within a second.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { commandDbPath, ConfigError, defaultKeysFile, readEnv } from "./config.ts";
import { addKey, readKeysFile, readLastUsed, removeKey, SCOPES } from "./named_keys.ts";
import { lanAddress, pairingLines, pairingLink } from "./pairing.ts";

/** What the commands print to and read from (a subset of the client commands' IO). */
export interface KeysIo {
  /** Reads an environment variable. */
  env: (name: string) => string | undefined;
  /** Prints a line of output (stdout). */
  out: (line: string) => void;
  /** Prints a line of diagnostics (stderr). */
  err: (line: string) => void;
}

/** The synopses of the commands, for `relay --help`. */
export const KEYS_COMMANDS: ReadonlyArray<readonly [string, string]> = [
  [
    "keys add <name> --scope S[,S…]",
    `add a named key (scopes: ${SCOPES.join(", ")}); prints it once`,
  ],
  ["keys list", "show the named keys: name, scopes, created, last used (never the key)"],
  ["keys remove <name>", "remove a named key; it stops working within a second"],
  [
    "pair [--app-url URL] [--name N [--scope S,…]]",
    "show a link and QR code that pair a phone's web app (--name adds a key for it)",
  ],
];

/** The keys file the relay uses: `--keys-file`, `RELAY_KEYS_FILE`, or beside `--db`. */
function keysFile(
  values: { "keys-file"?: string | undefined; db?: string | undefined },
  io: KeysIo,
) {
  return values["keys-file"] ?? readEnv(io.env, "RELAY_KEYS_FILE") ??
    defaultKeysFile(commandDbPath(values.db, io.env));
}

const FILE_OPTIONS = {
  "keys-file": { type: "string" },
  db: { type: "string" },
  json: { type: "boolean" },
} as const;

/** `--scope` values as given (repeated, or comma-separated) → scope names, trimmed. */
function scopeList(values: readonly string[]): string[] {
  return values.flatMap((value) => value.split(",")).map((s) => s.trim()).filter((s) => s !== "");
}

/** `YYYY-MM-DD HH:MM` in UTC, or `never`. */
function when(ms: number | undefined): string {
  return ms === undefined ? "never" : new Date(ms).toISOString().slice(0, 16).replace("T", " ");
}

/**
 * Runs `relay keys <sub> …`.
 *
 * @param args The arguments after `keys`.
 * @param now The clock, epoch ms, for `created_at`.
 * @returns The exit code: 0, or 1 when `remove` names no key.
 * @throws {ConfigError} for a bad command line, name or scope, or an unusable keys file
 *   (the caller prints it and exits 2).
 */
export function keysCommand(args: string[], io: KeysIo, now: () => number): number {
  const [sub, ...rest] = args;
  switch (sub) {
    case "add": {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: {
          ...FILE_OPTIONS,
          scope: { type: "string", multiple: true },
        },
      });
      const [name, ...extra] = positionals;
      if (name === undefined || extra.length > 0) {
        throw new ConfigError("keys add needs exactly one name, e.g. relay keys add phone");
      }
      const scopes = scopeList(values.scope ?? []);
      const path = keysFile(values, io);
      const key = addKey(path, name, scopes, now());
      if (values.json) io.out(JSON.stringify({ name, key, keys_file: path }));
      else io.out(key);
      io.err(`relay: added key "${name}" to ${path}; it is shown only this once`);
      return 0;
    }
    case "list": {
      const { values, positionals } = parseArgs({ args: rest, options: FILE_OPTIONS });
      if (positionals.length > 0) throw new ConfigError("keys list takes no arguments");
      const path = keysFile(values, io);
      const used = readLastUsed(path);
      const keys = readKeysFile(path).map((key) => ({
        name: key.name,
        scopes: key.scopes,
        created_at: key.created_at,
        last_used_at: used[key.name] ?? null,
      }));
      if (values.json) {
        io.out(JSON.stringify(keys));
        return 0;
      }
      if (keys.length === 0) {
        io.out(`no named keys in ${path} (add one: relay keys add <name> --scope …)`);
        return 0;
      }
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
      return 0;
    }
    case "remove": {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: FILE_OPTIONS,
      });
      const [name, ...extra] = positionals;
      if (name === undefined || extra.length > 0) {
        throw new ConfigError("keys remove needs exactly one name");
      }
      const path = keysFile(values, io);
      if (!removeKey(path, name)) {
        io.err(`relay: no key named "${name}" in ${path}`);
        return 1;
      }
      io.err(`relay: removed key "${name}" from ${path}`);
      return 0;
    }
  }
  throw new ConfigError(
    `unknown keys command "${sub ?? ""}": use keys add, keys list or keys remove`,
  );
}

/**
 * Runs `relay pair [--app-url URL] [--name N [--scope S,…]]`: prints a QR code and the
 * pairing link of the web app at `--app-url` (else `RELAY_URL`, else
 * `http://<this machine's LAN address>:8787`; give the address the phone reaches). With
 * `--name` it first adds a named key for the phone (scopes default to submit, read,
 * publish); without it the link carries the main key.
 *
 * @param mainKey Finds the main key as the client commands do (given `--api-key-file`
 *   and `--db`).
 * @returns The exit code, 0.
 * @throws {ConfigError} for a bad command line, name or scope, or an unusable keys file.
 */
export async function pairCommand(
  args: string[],
  io: KeysIo,
  mainKey: (values: { "api-key-file"?: string; db?: string }) => Promise<string>,
  now: () => number,
): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: {
      ...FILE_OPTIONS,
      "api-key-file": { type: "string" },
      "app-url": { type: "string" },
      name: { type: "string" },
      scope: { type: "string", multiple: true },
    },
  });
  if (positionals.length > 0) throw new ConfigError("pair takes no arguments");
  const base = values["app-url"] ?? readEnv(io.env, "RELAY_URL") ??
    `http://${lanAddress("0.0.0.0")}:8787`;
  let key: string;
  if (values.name === undefined) key = await mainKey(values);
  else {
    const scopes = scopeList(values.scope ?? ["submit,read,publish"]);
    key = addKey(keysFile(values, io), values.name, scopes, now());
    io.err(`relay: added key "${values.name}" (${scopes.join(", ")}) for this pairing`);
  }
  for (const line of await pairingLines(pairingLink(base, key))) io.out(line);
  return 0;
}

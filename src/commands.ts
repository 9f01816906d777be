/**
 * The client commands of the command line: `submit`, `pull`, `peek`, `push`, `results`
 * (with `--follow`), `clear`, `health`, `publish`, `work` and `blog-delete`. Each prints
 * human-readable output, or JSON with `--json`, and returns its exit code.
 *
 * Client configuration: `--url` / `RELAY_URL` (default `http://127.0.0.1:8787`), the key
 * from `RELAY_API_KEY`, else `--api-key-file` / `RELAY_API_KEY_FILE`, else the `api-key`
 * file the relay generated beside its database (`--db` / `RELAY_DB`), for commands run on
 * the relay's own machine.
 *
 * @module
 */

import { dirname } from "node:path";
import { parseArgs } from "node:util";
import { z } from "zod";
import { generatedKeyPath } from "./api_key.ts";
import {
  checkHealth,
  clearAll,
  DEFAULT_RELAY_URL,
  peekQueues,
  publishArticle,
  pullQueue,
  pushResult,
  readResultsPage,
  type RelayClient,
  RelayError,
  submitContent,
} from "./client.ts";
import { commandDbPath, ConfigError, loadConfig, parseDuration, readEnv } from "./config.ts";
import { followResults } from "./follow.ts";
import { deleteBlogPost } from "./publish.ts";
import { work } from "./work.ts";
import { KEYS_COMMANDS, keysCommand, pairCommand } from "./keys_command.ts";
import { type Backup, exportStore, ImportError, importStore, parseBackup } from "./backup.ts";
import { describePublished, exportPublished, importPublished } from "./publish/backup.ts";
import { DatabaseInUseError } from "./lock.ts";
import { errorMessage } from "./errors.ts";
import { publishConfig, withStore } from "./server.ts";
import { MAX_LEASE_MS } from "./store.ts";

/** Exit code for a bad command line. */
export const EXIT_USAGE = 2;
/** Exit code when the relay failed or could not be reached. */
export const EXIT_FAILURE = 1;

/** What a command needs from its surroundings; tests and `main` pass the real ones. */
export interface CommandIo {
  /** Reads an environment variable. */
  env: (name: string) => string | undefined;
  /** Prints a line of output (stdout). */
  out: (line: string) => void;
  /** Prints a line of diagnostics (stderr). */
  err: (line: string) => void;
  /** Reads all of stdin, for `-` arguments. */
  stdin: () => Promise<string>;
  /** Aborts on SIGINT/SIGTERM, for `work` and `results --follow`. */
  signal: AbortSignal;
}

/** The client commands and one line of help each, in `--help` order. */
export const CLIENT_COMMANDS: ReadonlyArray<readonly [string, string]> = [
  ["submit <text|url|-> [--queue q]", "queue a link or text (- reads stdin)"],
  ["pull [--queue q]", "take and empty a queue (qa, article, general)"],
  ["peek [--queue q]", "show queued items without removing them"],
  ["push <text|->", "add a result to the results feed"],
  ["results [--since ms] [--limit n]", "read the results feed"],
  [
    "results --follow [--cursor-file F] [--exec CMD] [--interval 2s]",
    "print or handle results as they arrive",
  ],
  ["clear", "empty every queue and the results feed"],
  ["health", "check that the relay and its store answer"],
  [
    "publish --title T (--content-file F | --markdown-file F) --target notes,blog,nas [--tags a,b]",
    "publish an article downstream through the relay",
  ],
  [
    "work --queue q [--lease 5m] [--interval 5s] -- CMD [ARGS…]",
    "run CMD for each item of a queue and push its output",
  ],
  [
    "export [--db F] [--out F]",
    "write queues, results and the cursor mark as JSON (relay stopped)",
  ],
  ["import F [--db F] [--force]", "restore a backup into an empty database (relay stopped)"],
  ...KEYS_COMMANDS,
  [
    "blog-delete <post_id>",
    "delete a blog post (the relay's built-in blog, or RELAY_PUBLISH_URL's with RELAY_BLOG_ACCESS_COOKIE)",
  ],
];

const COMMON = {
  url: { type: "string" },
  "api-key-file": { type: "string" },
  db: { type: "string" },
  json: { type: "boolean" },
} as const;

const clientSchema = z.object({
  url: z.url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" }),
});

class UsageError extends Error {}

function usage(message: string): never {
  throw new UsageError(message);
}

function duration(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const ms = parseDuration(text);
  if (ms === undefined || ms <= 0) {
    usage(`invalid --${name} "${text}": use a number with ms, s, m or h`);
  }
  return ms;
}

/** `--lease` of `relay work`: a duration of whole seconds, 1 s to 12 h; default 5 minutes. */
function leaseSeconds(text: string | undefined): number {
  const ms = duration("lease", text, 5 * 60_000);
  if (ms % 1000 !== 0 || ms > MAX_LEASE_MS) {
    usage(`invalid --lease "${text}": use whole seconds up to 12h, e.g. 90s or 10m`);
  }
  return ms / 1000;
}

function wholeNumber(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text)) usage(`invalid --${name} "${text}": must be a whole number`);
  return Number(text);
}

async function resolveClient(
  values: {
    url?: string | undefined;
    "api-key-file"?: string | undefined;
    db?: string | undefined;
  },
  io: CommandIo,
): Promise<RelayClient> {
  const read = (name: string) => readEnv(io.env, name);
  const rawUrl = values.url ?? read("RELAY_URL") ?? DEFAULT_RELAY_URL;
  const parsed = clientSchema.safeParse({ url: rawUrl });
  if (!parsed.success) {
    usage(
      `invalid ${
        values.url === undefined ? "RELAY_URL" : "--url"
      } "${rawUrl}": must be an http:// or https:// URL`,
    );
  }
  const fromEnv = read("RELAY_API_KEY");
  if (fromEnv !== undefined) return { url: parsed.data.url, key: fromEnv };
  const keyFile = values["api-key-file"] ?? read("RELAY_API_KEY_FILE");
  const db = commandDbPath(values.db, io.env);
  const path = keyFile ?? generatedKeyPath(db);
  let key = "";
  try {
    key = (await Deno.readTextFile(path)).trim();
  } catch (error) {
    if (keyFile !== undefined || !(error instanceof Deno.errors.NotFound)) {
      usage(
        `cannot read the API key file "${path}": ${errorMessage(error)}`,
      );
    }
  }
  if (key === "") {
    usage(
      `no API key: set RELAY_API_KEY, or --api-key-file, or run this where the relay keeps ${path}`,
    );
  }
  return { url: parsed.data.url, key };
}

async function textArgument(words: string[], io: CommandIo, what: string): Promise<string> {
  if (words.length === 1 && words[0] === "-") return await io.stdin();
  if (words.length === 0) usage(`${what} needs text, or - to read stdin`);
  return words.join(" ");
}

/**
 * Runs one client command.
 *
 * @param command The command name, e.g. `"submit"`.
 * @param args The arguments after it.
 * @returns The exit code: 0 on success, 1 when the relay failed or could not be reached,
 *   2 for a bad command line.
 */
export async function runClientCommand(
  command: string,
  args: string[],
  io: CommandIo,
): Promise<number> {
  try {
    return await dispatch(command, args, io);
  } catch (error) {
    if (error instanceof UsageError || error instanceof ConfigError) {
      io.err(`relay: ${error.message}; see relay --help`);
      return EXIT_USAGE;
    }
    if (error instanceof RelayError) {
      io.err(`relay: ${error.message}`);
      return EXIT_FAILURE;
    }
    if (error instanceof TypeError && /parseArgs|option|argument/i.test(String(error.message))) {
      io.err(`relay: ${error.message}; see relay --help`);
      return EXIT_USAGE;
    }
    throw error;
  }
}

/** Tells whether `name` is a client command. */
export function isClientCommand(name: string): boolean {
  return CLIENT_COMMANDS.some(([synopsis]) => synopsis.split(" ")[0] === name);
}

async function dispatch(command: string, args: string[], io: CommandIo): Promise<number> {
  const json = (value: unknown) => io.out(JSON.stringify(value));
  switch (command) {
    case "submit": {
      const { values, positionals } = parseArgs({
        args,
        allowPositionals: true,
        options: { ...COMMON, queue: { type: "string", short: "q" } },
      });
      const client = await resolveClient(values, io);
      const content = await textArgument(positionals, io, "submit");
      const answer = await submitContent(client, content, { queue: values.queue });
      const match = /^OK \((\w+)\)$/.exec(answer);
      if (values.json) {
        json(
          match?.[1] === "duplicate"
            ? { status: "duplicate" }
            : { status: "accepted", queue: match?.[1] },
        );
      } else io.out(answer);
      return 0;
    }
    case "pull": {
      const { values } = parseArgs({
        args,
        options: { ...COMMON, queue: { type: "string", short: "q" } },
      });
      const items = await pullQueue(await resolveClient(values, io), values.queue);
      if (values.json) json(items);
      else if (items.length === 0) io.err("relay: nothing queued");
      else for (const item of items) io.out(item);
      return 0;
    }
    case "peek": {
      const { values } = parseArgs({
        args,
        options: { ...COMMON, queue: { type: "string", short: "q" } },
      });
      const body = await peekQueues(await resolveClient(values, io), values.queue);
      if (values.json) json(body ?? { total: 0, queues: {} });
      else if (body === undefined) io.out("nothing queued");
      else {
        for (const [queue, items] of Object.entries(body.queues)) {
          io.out(`${queue} (${items.length})`);
          for (const item of items) io.out(`  ${item.created_at}  ${item.content}`);
        }
      }
      return 0;
    }
    case "push": {
      const { values, positionals } = parseArgs({ args, allowPositionals: true, options: COMMON });
      const client = await resolveClient(values, io);
      await pushResult(client, await textArgument(positionals, io, "push"));
      if (values.json) json({ status: "ok" });
      else io.out("OK");
      return 0;
    }
    case "results": {
      const { values } = parseArgs({
        args,
        options: {
          ...COMMON,
          since: { type: "string" },
          limit: { type: "string" },
          follow: { type: "boolean", short: "f" },
          "cursor-file": { type: "string" },
          exec: { type: "string" },
          interval: { type: "string" },
        },
      });
      const client = await resolveClient(values, io);
      const print = (item: { t: number; c: string }) =>
        values.json ? json(item) : io.out(`${new Date(item.t).toISOString()}  ${item.c}`);
      if (values.follow) {
        await followResults(client, {
          cursorFile: values["cursor-file"],
          exec: values.exec,
          intervalMs: duration("interval", values.interval, 2000),
          signal: io.signal,
          print,
          log: io.err,
        });
        return 0;
      }
      if (values["cursor-file"] !== undefined || values.exec !== undefined) {
        usage("--cursor-file and --exec go with --follow");
      }
      const page = await readResultsPage(client, {
        since: wholeNumber("since", values.since),
        limit: wholeNumber("limit", values.limit),
      });
      if (values.json) json(page);
      else {
        for (const item of page.items) print(item);
        io.err(`relay: cursor ${page.cursor}`);
      }
      return 0;
    }
    case "clear": {
      const { values } = parseArgs({ args, options: COMMON });
      const answer = await clearAll(await resolveClient(values, io));
      if (values.json) json({ status: "ok" });
      else io.out(answer);
      return 0;
    }
    case "health": {
      const { values } = parseArgs({ args, options: COMMON });
      const health = await checkHealth(await resolveClient(values, io));
      if (values.json) json(health);
      else io.out(health.ok ? `ok (store ${health.db})` : `not ok (store ${health.db})`);
      return health.ok ? 0 : EXIT_FAILURE;
    }
    case "publish":
      return await publishCommand(args, io);
    case "work": {
      const { values, positionals } = parseArgs({
        args,
        allowPositionals: true,
        options: {
          ...COMMON,
          queue: { type: "string", short: "q" },
          interval: { type: "string" },
          lease: { type: "string" },
        },
      });
      if (values.queue === undefined) usage("work needs --queue (qa, article or general)");
      if (positionals.length === 0) {
        usage("work needs a command after --, e.g. relay work --queue general -- ./summarise");
      }
      const client = await resolveClient(values, io);
      io.err(`relay: working on queue "${values.queue}" with: ${positionals.join(" ")}`);
      const summary = await work(client, {
        queue: values.queue,
        command: positionals,
        intervalMs: duration("interval", values.interval, 5000),
        leaseS: leaseSeconds(values.lease),
        signal: io.signal,
        log: io.err,
      });
      io.err(`relay: stopped after ${summary.done} done, ${summary.failed} failed and put back`);
      return 0;
    }
    case "blog-delete":
      return await blogDeleteCommand(args, io);
    case "export":
    case "import":
      return await backupCommand(command, args, io);
    case "keys":
      return keysCommand(args, io, Date.now);
    case "pair":
      return await pairCommand(
        args,
        io,
        async (values) => (await resolveClient(values, io)).key,
        Date.now,
      );
  }
  usage(`unknown command "${command}"`);
}

async function publishCommand(args: string[], io: CommandIo): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      ...COMMON,
      title: { type: "string" },
      "content-file": { type: "string" },
      "markdown-file": { type: "string" },
      target: { type: "string" },
      tags: { type: "string" },
    },
  });
  if (values.title === undefined) usage("publish needs --title");
  if (values.target === undefined) usage("publish needs --target, e.g. notes,blog,nas");
  if (values["content-file"] === undefined && values["markdown-file"] === undefined) {
    usage("publish needs --content-file or --markdown-file");
  }
  const readFile = (path: string | undefined) =>
    path === undefined ? undefined : readInput(path, io);
  const content = await readFile(values["content-file"]);
  const markdown = await readFile(values["markdown-file"]);
  const targets = values.target.split(",").map((t) => t.trim()).filter((t) => t !== "");
  const client = await resolveClient(values, io);
  const outcome = await publishArticle(client, {
    title: values.title,
    // Without a plain-text file, the Markdown is the plain text too.
    content: content ?? markdown,
    ...(markdown === undefined ? {} : { content_md: markdown }),
    ...(values.tags === undefined ? {} : { tags: values.tags }),
    targets,
    ...(targets.includes("nas") ? { transform: "read" } : {}),
  });
  if (values.json) io.out(JSON.stringify(outcome.body));
  else {
    for (const [target, result] of Object.entries(outcome.body.results)) {
      const detail = result.status === "success"
        ? result.doc_id ?? result.url ?? result.message ?? ""
        : result.error ?? "";
      io.out(`${target}: ${result.status}${detail ? ` (${detail})` : ""}`);
    }
  }
  return outcome.body.status === "ok" ? 0 : EXIT_FAILURE;
}

async function blogDeleteCommand(args: string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      ...COMMON,
      "publish-url": { type: "string" },
      "blog-url": { type: "string" },
      "publish-timeout": { type: "string" },
    },
  });
  if (positionals.length !== 1 || positionals[0] === "") {
    usage("blog-delete needs exactly one post id");
  }
  const config = loadConfig({
    "publish-url": values["publish-url"],
    "blog-url": values["blog-url"],
    "publish-timeout": values["publish-timeout"],
  }, io.env);
  const publish = publishConfig(config);
  let baseUrl = publish.urls.blog;
  let cookie = config.secrets.blogAccessCookie;
  if (baseUrl === undefined) {
    // The relay's built-in blog (docs/publishing-builtin.md): its delete takes the
    // relay_access cookie holding the client's key.
    const client = await resolveClient(values, io);
    baseUrl = `${client.url.replace(/\/+$/, "")}/downstream`;
    cookie ??= `relay_access=${client.key}`;
  }
  if (cookie === undefined) usage("blog-delete needs RELAY_BLOG_ACCESS_COOKIE");
  const failure = await deleteBlogPost(positionals[0]!, {
    baseUrl,
    cookie,
    timeoutMs: publish.timeoutMs,
  });
  if (failure !== undefined) {
    io.err(`relay: cannot delete post "${positionals[0]}": ${failure}`);
    return EXIT_FAILURE;
  }
  io.out(`deleted post ${positionals[0]}`);
  return 0;
}

/** Reads a file named on the command line, `-` being standard input; usage error if not. */
async function readInput(path: string, io: CommandIo): Promise<string> {
  try {
    return path === "-" ? await io.stdin() : await Deno.readTextFile(path);
  } catch (error) {
    usage(`cannot read "${path}": ${errorMessage(error)}`);
  }
}

async function backupCommand(
  command: "export" | "import",
  args: string[],
  io: CommandIo,
): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { db: { type: "string" }, out: { type: "string" }, force: { type: "boolean" } },
  });
  const db = loadConfig({ db: values.db }, io.env).db;
  try {
    if (command === "export") {
      if (positionals.length > 0) usage("export takes no arguments; use --out F");
      const backup: Backup = {
        ...await withStore(db, exportStore),
        published: await exportPublished(dirname(db)),
      };
      const text = JSON.stringify(backup, null, 2) + "\n";
      if (values.out === undefined) io.out(text.trimEnd());
      else {
        await Deno.writeTextFile(`${values.out}.tmp`, text, { mode: 0o600 });
        await Deno.rename(`${values.out}.tmp`, values.out);
        io.err(`relay: exported ${describeBackup(backup)} to ${values.out}`);
      }
      return 0;
    }
    if (positionals.length !== 1) usage("import needs exactly one backup file");
    const backup = parseBackup(await readInput(positionals[0]!, io));
    await withStore(db, (store) => importStore(store, backup, { force: values.force ?? false }));
    if (backup.published !== undefined) await importPublished(dirname(db), backup.published);
    io.err(`relay: imported ${describeBackup(backup)} into ${db}`);
    return 0;
  } catch (error) {
    if (error instanceof ImportError || error instanceof DatabaseInUseError) {
      io.err(`relay: cannot ${command}: ${error.message}`);
      return EXIT_FAILURE;
    }
    throw error;
  }
}

function describeBackup(backup: Backup): string {
  const queued = Object.values(backup.queues).reduce((n, items) => n + items.length, 0);
  const published = backup.published;
  const any = published &&
    published.notes.length + published.posts.length + published.episodes.length > 0;
  return `${queued} queued items and ${backup.results.length} results` +
    (any ? ` (and ${describePublished(published)})` : "");
}

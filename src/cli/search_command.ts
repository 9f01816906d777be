/**
 * `relay search TEXT`: searches the relay's notes, blog posts, podcast episodes and results
 * over HTTP (`GET /search`, docs/cli/commands.md, "relay search").
 *
 * @module
 */

import { searchRelay } from "../client/client.ts";
import type { Command } from "./command.ts";
import { CLIENT_OPTIONS, resolveClient } from "./client_config.ts";
import { escapeLine, isoTime } from "./output.ts";

/** The kinds `--kind` takes. */
const KINDS = ["note", "post", "episode", "result"];

const search: Command = {
  name: "search",
  synopsis: "TEXT… [--kind note|post|episode|result] [--limit N] [--json]",
  summary: "search notes, blog posts, podcast episodes and results",
  help: "Every word must match, in any language (Chinese and Japanese too). One line per hit,\n" +
    "best first: its time (ISO 8601, UTC), kind, title, address and snippet, separated by\n" +
    "tabs, each match in the snippet between « and ». --json prints the relay's answer.",
  options: [
    {
      name: "kind",
      type: "string",
      value: "KIND",
      help: `only hits of this kind: ${KINDS.join(", ")}`,
    },
    { name: "limit", type: "string", value: "N", help: "most hits, 1 to 50", default: "20" },
    { name: "json", type: "boolean", help: "print the relay's JSON answer" },
    ...CLIENT_OPTIONS,
  ],
  positionals: true,
  async run(args, io) {
    const text = args.positionals.join(" ").trim();
    if (text === "") throw args.needs("TEXT: the words to look for");
    const kind = args.string("kind");
    if (kind !== undefined && !KINDS.includes(kind)) {
      throw args.usage(`invalid --kind "${kind}": one of ${KINDS.join(", ")}`);
    }
    const limitText = args.string("limit");
    if (limitText !== undefined && !/^(?:[1-9]|[1-4]\d|50)$/.test(limitText)) {
      throw args.usage(`invalid --limit "${limitText}": a whole number from 1 to 50`);
    }
    const limit = limitText === undefined ? undefined : Number(limitText);
    const client = await resolveClient(args, io);
    const { value, text: body } = await searchRelay(client, text, {
      kind,
      limit,
      signal: io.signal,
    });
    if (args.flag("json")) {
      io.out(body);
      return 0;
    }
    for (const hit of value.items) {
      const fields = [isoTime(hit.t), hit.kind, hit.title, hit.url, hit.snippet];
      io.out(fields.map(escapeLine).join("\t"));
    }
    return 0;
  },
};

/** The `search` command. */
export const SEARCH_COMMANDS: readonly Command[] = [search];

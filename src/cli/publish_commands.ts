/**
 * `relay publish` (an article downstream, through the relay) and `relay blog-delete` (a
 * blog post, straight at the blog).
 *
 * @module
 */

import { failedPublishes, publishArticle } from "../client/client.ts";
import { loadCheckedConfig } from "../config/config.ts";
import { deleteBlogPost } from "../publish/fan_out.ts";
import { targetNamed, TARGETS } from "../publish/registry.ts";
import { publishConfig } from "../publish/fan_out.ts";
import type { Command } from "./command.ts";
import { CLIENT_OPTIONS, resolveClient } from "./client_config.ts";
import { CommandFailure, type CommandIo, EXIT_FAILURE } from "./io.ts";
import { ENCODING_OPTION, readInput } from "./text_input.ts";

const publish: Command = {
  name: "publish",
  synopsis:
    `--title T (--content C | --content-file F | --markdown-file F) --target ${
      TARGETS.join(",")
    } ` +
    "[--tags a,b] | --failed | --retry ID",
  summary: "publish an article downstream through the relay",
  help: "Prints one line per target: success with the document id or URL, or the error.\n" +
    "Exit code 1 when a target failed. The relay keeps publishes with a failed target:\n" +
    "--failed lists them, --retry ID sends one again to the targets that failed.",
  options: [
    { name: "title", type: "string", value: "T", help: "the article's title (required)" },
    {
      name: "content",
      type: "string",
      value: "C",
      help: "the article's plain text itself, for a short one",
    },
    {
      name: "content-file",
      type: "string",
      value: "F",
      help: "plain text of the article (- is stdin)",
    },
    {
      name: "markdown-file",
      type: "string",
      value: "F",
      help: "Markdown of the article (- is stdin)",
    },
    {
      name: "target",
      type: "string",
      value: "LIST",
      help: `comma-separated targets: ${TARGETS.join(", ")} (required; nas is the podcast too)`,
    },
    { name: "targets", type: "string", value: "LIST", help: "the same as --target" },
    {
      name: "transform",
      type: "string",
      value: "read",
      help: "read (accepted for older relays; the podcast reads aloud without it)",
    },
    { name: "tags", type: "string", value: "LIST", help: "comma-separated tags" },
    ENCODING_OPTION,
    { name: "json", type: "boolean", help: "print the relay's JSON answer" },
    { name: "failed", type: "boolean", help: "list the failed publishes the relay keeps" },
    {
      name: "retry",
      type: "string",
      value: "ID",
      help: "send the failed publish ID again, to the targets that failed",
    },
    ...CLIENT_OPTIONS,
  ],
  async run(args, io) {
    if (args.flag("failed")) {
      const entries = await failedPublishes(await resolveClient(args, io));
      if (args.flag("json")) io.out(JSON.stringify(entries));
      else {
        for (const e of entries) {
          const errors = Object.entries(e.errors).map(([t, error]) => `${t}: ${error}`);
          io.out(`${e.id}  ${e.at}  tries ${e.tries}  "${e.title}"  ${errors.join("; ")}`);
        }
      }
      return 0;
    }
    const retry = args.string("retry");
    const title = args.string("title");
    const target = args.string("target") ?? args.string("targets");
    const inline = args.string("content");
    const contentFile = args.string("content-file");
    const markdownFile = args.string("markdown-file");
    const transform = args.string("transform");
    if (retry !== undefined) {
      return printOutcome(
        await publishArticle(await resolveClient(args, io), { id: retry }, "/publish/retry"),
        args.flag("json"),
        io,
      );
    }
    if (title === undefined) throw args.needs("--title");
    if (target === undefined) throw args.needs(`--target, e.g. ${TARGETS.join(",")}`);
    if (inline === undefined && contentFile === undefined && markdownFile === undefined) {
      throw args.needs("--content, --content-file or --markdown-file");
    }
    if (inline !== undefined && contentFile !== undefined) {
      throw args.usage("give --content or --content-file, not both");
    }
    if (transform !== undefined && transform !== "read") {
      throw args.usage(`invalid --transform "${transform}": the only transform is read`);
    }
    const read = (path: string | undefined) =>
      path === undefined ? undefined : readInput(path, io, args);
    const content = inline ?? await read(contentFile);
    const markdown = await read(markdownFile);
    const targets = target.split(",").map((t) => t.trim()).filter((t) => t !== "");
    const tags = args.string("tags");
    const outcome = await publishArticle(await resolveClient(args, io), {
      title,
      // Without a plain-text file, the Markdown is the plain text too.
      content: content ?? markdown,
      ...(markdown === undefined ? {} : { content_md: markdown }),
      ...(tags === undefined ? {} : { tags }),
      targets,
      // Relays before the podcast took its name needed this for "nas"; later ones ignore it.
      ...(targets.some((t) => targetNamed(t) === "podcast") ? { transform: "read" } : {}),
    });
    return printOutcome(outcome, args.flag("json"), io);
  },
};

/** Prints a publish's answer (one line per target, or the JSON); 0 when all succeeded. */
function printOutcome(
  outcome: { body: { status: string; results: Record<string, Record<string, string>> } },
  asJson: boolean,
  io: CommandIo,
): number {
  if (asJson) io.out(JSON.stringify(outcome.body));
  else {
    for (const [name, result] of Object.entries(outcome.body.results)) {
      const detail = result.status === "success"
        ? result.doc_id ?? result.url ?? result.message ?? ""
        : result.error ?? "";
      io.out(`${name}: ${result.status}${detail ? ` (${detail})` : ""}`);
    }
  }
  return outcome.body.status === "ok" ? 0 : EXIT_FAILURE;
}

const blogDelete: Command = {
  name: "blog-delete",
  synopsis: "<post_id>",
  summary: "delete a blog post: the relay's built-in blog, or an external one " +
    "(RELAY_PUBLISH_URL or RELAY_BLOG_URL, with RELAY_BLOG_ACCESS_COOKIE)",
  options: [
    {
      name: "publish-url",
      type: "string",
      value: "URL",
      help: "base URL of the downstream services",
      env: "RELAY_PUBLISH_URL",
    },
    {
      name: "blog-url",
      type: "string",
      value: "URL",
      help: "base URL of the blog, instead of --publish-url",
      env: "RELAY_BLOG_URL",
    },
    {
      name: "publish-timeout",
      type: "string",
      value: "D",
      help: "how long the call may take",
      env: "RELAY_PUBLISH_TIMEOUT",
      default: "15s",
    },
    ...CLIENT_OPTIONS,
  ],
  positionals: true,
  async run(args, io) {
    const [id, ...extra] = args.positionals;
    if (id === undefined || id === "" || extra.length > 0) {
      throw args.needs("exactly one post id");
    }
    const config = await loadCheckedConfig({
      "publish-url": args.string("publish-url"),
      "blog-url": args.string("blog-url"),
      "publish-timeout": args.string("publish-timeout"),
    }, io.env);
    const settings = publishConfig(config);
    let baseUrl = settings.urls.blog;
    let cookie = config.secrets.blogAccessCookie;
    if (baseUrl === undefined) {
      // The relay's built-in blog (docs/publishing-builtin.md): its delete takes the
      // relay_access cookie holding the client's key.
      const client = await resolveClient(args, io);
      baseUrl = `${client.url.replace(/\/+$/, "")}/downstream`;
      cookie ??= `relay_access=${client.key}`;
    }
    if (cookie === undefined) throw args.needs("RELAY_BLOG_ACCESS_COOKIE");
    const failure = await deleteBlogPost(id, { baseUrl, cookie, timeoutMs: settings.timeoutMs });
    if (failure !== undefined) throw new CommandFailure(`cannot delete post "${id}": ${failure}`);
    io.out(`deleted post ${id}`);
    return 0;
  },
};

/** The publishing commands. */
export const PUBLISH_COMMANDS: readonly Command[] = [publish, blogDelete];

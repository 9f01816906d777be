/**
 * The built-in services in the API document (`GET /openapi.json`): the downstream API,
 * notes, blog and podcast (docs/publishing-builtin.md), described per path and method. What
 * each needs (no key, a scope, the app id) and the errors of that check come from the route
 * table that serves them, as for the API's own paths (server/openapi.ts), so a blog the
 * relay serves publicly is documented as public and a `--private-blog` one as needing `read`.
 *
 * @module
 */

import { NOT_BLANK } from "../util/patterns.ts";
import { z } from "zod";
import type { ZodOpenApiOperationObject } from "zod-openapi";

// The same problem document as the API's (server/openapi.ts): `type` names the kind of
// problem, a heading of docs/problems.md.
const problem = z.object({
  type: z.string().meta({ example: "/docs/problems.md#not-found" }),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
});

function problems(...entries: Array<[number, string]>) {
  return Object.fromEntries(entries.map(([status, description]) => [String(status), {
    description,
    content: { "application/problem+json": { schema: problem } },
  }]));
}

function json(description: string, schema: z.ZodType) {
  return { description, content: { "application/json; charset=utf-8": { schema } } };
}

const id = (name: string, example: string) =>
  z.string().regex(/^[0-9]{8}-[0-9]{6}-[a-z0-9]{8}$/).meta({
    param: { in: "path", name, example },
  });

const BAD_INPUT: Array<[number, string]> = [
  [400, "A missing or empty field, a wrong value, or a body that is not a JSON object"],
  [413, "The body is over the limit"],
  [415, "The body is not application/json"],
];

const note = z.object({
  doc_id: z.string(),
  title: z.string(),
  tags: z.array(z.string()),
  created: z.string().meta({ description: "ISO 8601, UTC" }),
});

const episode = z.object({
  id: z.string(),
  title: z.string(),
  created_at: z.number().int().meta({ description: "epoch ms" }),
  state: z.enum(["queued", "synthesising", "ready", "failed"]),
  chunks_total: z.number().int(),
  chunks_done: z.number().int(),
  bytes: z.number().int(),
  duration_s: z.number(),
  chapters: z.array(z.object({
    start_s: z.number().meta({ description: "seconds from the start of the audio" }),
    title: z.string(),
  })).optional().meta({ description: "one per heading read, in order; none without headings" }),
  skipped: z.array(z.string()).optional().meta({
    description: "languages of passages left out for want of a voice",
  }),
  finished_at: z.number().int().optional(),
  error: z.string().optional(),
  audio_url: z.string().optional(),
});

/** Longest title, tag list and content the services take, characters (as their API checks). */
const TITLE_MAX = 500;
const TAGS_MAX = 2000;
const CONTENT_MAX = 1_000_000;

/** A text field that must hold more than white space, of at most `max` characters. */
function nonBlank(max: number) {
  return z.string().regex(NOT_BLANK).max(max);
}

/** What every publish body has; the targets and `transform` are in {@linkcode publishBody}. */
const publishFields = {
  title: nonBlank(TITLE_MAX),
  content: nonBlank(CONTENT_MAX),
  content_md: z.string().optional(),
  tags: z.string().max(TAGS_MAX).optional(),
};

/**
 * A publish body, in the two shapes the services take: reading aloud (`nas` among the
 * targets) needs `transform: "read"`, and the blog alone takes no `transform`. JSON Schema's
 * `contains` says the first; the second is an object without `transform`.
 */
const publishBody = z.union([
  z.object({
    ...publishFields,
    targets: z.array(z.enum(["blog", "nas"])).min(1).meta({ contains: { const: "nas" } }),
    transform: z.literal("read"),
  }),
  z.strictObject({ ...publishFields, targets: z.array(z.literal("blog")).min(1) }),
]);

const html = { description: "HTML page", content: { "text/html; charset=utf-8": {} } };

/** The `publishing` part of `GET /stats`: the built-in services' figures and limits. */
export const publishingStatsSchema: z.ZodType = z.object({
  notes: z.number().int(),
  posts: z.number().int(),
  podcast: z.object({
    episodes: z.record(z.enum(["queued", "synthesising", "ready", "failed"]), z.number().int()),
    audio_bytes: z.number().int(),
    evicted: z.number().int().meta({ description: "episodes deleted by retention since start" }),
    retention: z.object({
      keep: z.number().int(),
      max_disk_bytes: z.number().int(),
    }),
  }),
}).meta({ description: "The built-in notes store, blog and podcast" });

/** The services' API under `/downstream`. */
function downstreamPaths(): Record<string, ZodOpenApiOperationObject> {
  return {
    "/downstream/api/notes/import": {
      summary: "Save a note (built-in notes store)",
      description: "Writes `<data>/notes/{doc_id}.md` with front matter.",
      requestBody: {
        required: true,
        content: {
          "application/json": {
            schema: z.object({
              title: nonBlank(TITLE_MAX),
              content: nonBlank(CONTENT_MAX),
              content_format: z.literal(1).optional(),
              tags: z.string().max(TAGS_MAX).optional().meta({ description: "comma-separated" }),
            }),
            example: { title: "A note", content: "# A note\n\nText", content_format: 1 },
          },
        },
      },
      responses: {
        "200": json("Saved", z.object({ code: z.literal(0), doc_id: z.string() })),
        ...problems(...BAD_INPUT),
      },
    },
    "/downstream/api/publish": {
      summary: "Publish a post (targets blog) or queue a reading (targets nas)",
      description: 'With `targets: ["nas"]` and `transform: "read"` the episode is ' +
        "spoken in the background.",
      requestBody: {
        required: true,
        content: {
          "application/json": {
            schema: publishBody,
            example: { title: "A post", content: "Summary", targets: ["blog"] },
          },
        },
      },
      responses: {
        "200": json(
          "Published and/or queued",
          z.object({
            blog: z.object({
              status: z.literal("success"),
              redirect_url: z.string(),
              post_id: z.string(),
            }).optional(),
            status: z.literal("success").optional(),
            message: z.string().optional(),
            episode_id: z.string().optional(),
          }),
        ),
        ...problems(...BAD_INPUT),
      },
    },
    "/downstream/delete/{post_id}": {
      summary: "Delete a blog post",
      description: "Takes the key in the cookie `relay_access` too, for an identity " +
        "gateway's clients, with the relay's own `Origin` only.",
      parameters: [
        id("post_id", "20261123-114218-x8d0a1mz"),
        z.string().meta({
          param: { in: "cookie", name: "relay_access", example: "the-relay-key" },
        }),
      ],
      responses: {
        "303": { description: "Deleted; Location is the blog's index" },
        ...problems([404, "No such post"]),
      },
    },
  };
}

/** The notes (a key with the read scope). */
function notePaths(): Record<string, ZodOpenApiOperationObject> {
  return {
    "/notes": {
      summary: "The same as /notes/",
      responses: { "200": json("Notes", z.object({ notes: z.array(note) })) },
    },
    "/notes/": {
      summary: "The notes, newest first",
      responses: { "200": json("Notes", z.object({ notes: z.array(note) })) },
    },
    "/notes/{doc_id}": {
      summary: "One note's file as stored, front matter included",
      parameters: [id("doc_id", "20261123-114218-k3f9q2ab")],
      responses: {
        "200": {
          description: "The Markdown file",
          content: { "text/markdown; charset=utf-8": {} },
        },
        ...problems([404, "No such note"]),
      },
    },
  };
}

/** The blog's pages, feed and posts. */
function blogPaths(): Record<string, ZodOpenApiOperationObject> {
  return {
    "/blog": { summary: "The same as /blog/", responses: { "200": html } },
    "/blog/": {
      summary: "The blog's index, newest first",
      responses: { "200": html },
    },
    "/blog/feed.xml": {
      summary: "Atom feed of the newest 20 posts (full text for the newest, within 512 KiB)",
      responses: {
        "200": { description: "Atom", content: { "application/atom+xml; charset=utf-8": {} } },
      },
    },
    "/blog/posts": {
      summary: "The posts as JSON, newest first, and the feed's address",
      responses: {
        "200": json(
          "Posts",
          z.object({
            feed_url: z.string(),
            posts: z.array(z.object({
              post_id: z.string(),
              title: z.string(),
              tags: z.array(z.string()),
              created_at: z.number().int(),
              url: z.string(),
            })),
          }),
        ),
      },
    },
    "/blog/{post_id}": {
      summary: "One post, rendered from its Markdown",
      parameters: [id("post_id", "20261123-114218-x8d0a1mz")],
      responses: { "200": html, ...problems([404, "No such post"]) },
    },
  };
}

/** The podcast's page, episodes, feed, QR code and audio. */
function podcastPaths(): Record<string, ZodOpenApiOperationObject> {
  return {
    "/podcast": { summary: "The same as /podcast/", responses: { "200": html } },
    "/podcast/": {
      summary: "The podcast page: feed address and every episode with its state",
      responses: { "200": html },
    },
    "/podcast/episodes": {
      summary: "The episodes and their states as JSON, newest first",
      description: "For a private podcast, `feed_url` and each `audio_url` carry the podcast's " +
        "feed key (`?key=`), which opens the podcast's pages, feed and files and nothing else.",
      responses: {
        "200": json(
          "Episodes",
          z.object({ feed_url: z.string(), episodes: z.array(episode) }),
        ),
      },
    },
    "/podcast/feed.xml": {
      summary: "RSS 2.0 podcast feed of the ready episodes",
      responses: {
        "200": { description: "RSS", content: { "application/rss+xml; charset=utf-8": {} } },
      },
    },
    "/podcast/qr.svg": {
      summary: "The feed's address as a QR code, for subscribing from a phone",
      responses: {
        "200": { description: "SVG", content: { "image/svg+xml": {} } },
      },
    },
    "/podcast/artwork.png": {
      summary: "The podcast's artwork: a square PNG of 3000 px (public)",
      responses: { "200": { description: "PNG", content: { "image/png": {} } } },
    },
    "/robots.txt": {
      summary: "Where crawlers may go: the public blog and podcast only",
      responses: { "200": { description: "robots.txt", content: { "text/plain": {} } } },
    },
    "/podcast/{file}": {
      summary: "An episode's MP3 (`{id}.mp3`, honours Range), transcript as spoken " +
        "(`{id}.txt`) or Podcasting 2.0 chapters (`{id}.chapters.json`)",
      parameters: [
        z.string().meta({
          param: { in: "path", name: "file", example: "20261123-114218-p2c7w4ne.mp3" },
        }),
        z.string().optional().meta({
          param: { in: "header", name: "Range", example: "bytes=0-" },
        }),
      ],
      responses: {
        "200": {
          description: "The whole file",
          content: { "audio/mpeg": {}, "text/plain": {}, "application/json+chapters": {} },
        },
        "206": { description: "The range asked for", content: { "audio/mpeg": {} } },
        ...problems([404, "No such episode, not ready, or without chapters"], [
          416,
          "A range past the end",
        ]),
      },
    },
  };
}

/**
 * The built-in services' operations by path, for the relay's API document; their methods
 * and access are taken from the routes that serve them.
 */
export function builtinPaths(): Record<string, ZodOpenApiOperationObject> {
  return { ...downstreamPaths(), ...notePaths(), ...blogPaths(), ...podcastPaths() };
}

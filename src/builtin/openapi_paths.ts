/**
 * The built-in services in the API document (`GET /openapi.json`): the downstream API,
 * notes, blog and podcast (docs/publishing-builtin.md). Every operation carries
 * `x-builtin: true`; the blog and podcast are public unless the relay was started with
 * `--private-blog` or `--private-podcast`.
 *
 * @module
 */

import { z } from "zod";
import type { ZodOpenApiOperationObject, ZodOpenApiPathsObject } from "zod-openapi";

const problem = z.object({
  type: z.string(),
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
  z.string().regex(/^\d{8}-\d{6}-[a-z0-9]{8}$/).meta({
    param: { in: "path", name, example },
  });

const BAD_INPUT: Array<[number, string]> = [
  [400, "A missing or empty field, a wrong value, or a body that is not a JSON object"],
  [405, "Wrong method"],
  [413, "The body is over the limit"],
  [415, "The body is not application/json"],
];

/** A client address that sent too many wrong keys, app ids or cookies (per minute). */
const LIMITED: [number, string] = [
  429,
  "Too many failed keys, app ids or cookies from this address; Retry-After says when to " +
  "try again",
];

const KEY_NEEDED: Array<[number, string]> = [
  [401, "No key, or a key without the read scope (private blog or podcast only)"],
  LIMITED,
];

const builtin = (operation: ZodOpenApiOperationObject): ZodOpenApiOperationObject => ({
  ...operation,
  "x-builtin": true,
  security: [],
});

const readKey = (operation: ZodOpenApiOperationObject): ZodOpenApiOperationObject => ({
  ...operation,
  "x-builtin": true,
  "x-scope": "read",
  security: [{ header: [] }, { query: [] }],
  responses: {
    ...operation.responses,
    ...problems([401, "No key, or a key without the read scope"], [
      403,
      "Not given: a key without the scope gets 401 here",
    ], LIMITED),
  },
});

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
  finished_at: z.number().int().optional(),
  error: z.string().optional(),
  audio_url: z.string().optional(),
});

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

/** The built-in services' paths, for the relay's API document. */
export function builtinPaths(): ZodOpenApiPathsObject {
  return {
    "/downstream/api/notes/import": {
      post: builtin({
        summary: "Save a note (built-in notes store)",
        description: "Writes `<data>/notes/{doc_id}.md` with front matter. Needs the " +
          "`X-App-ID` header (the relay's app id) or a key with the publish scope.",
        parameters: [
          z.string().optional().meta({
            param: { in: "header", name: "X-App-ID", example: "app-id" },
          }),
        ],
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: z.object({
                title: z.string().min(1).max(500),
                content: z.string().min(1),
                content_format: z.literal(1).optional(),
                tags: z.string().optional().meta({ description: "comma-separated" }),
              }),
              example: { title: "A note", content: "# A note\n\nText", content_format: 1 },
            },
          },
        },
        responses: {
          "200": json("Saved", z.object({ code: z.literal(0), doc_id: z.string() })),
          ...problems(...BAD_INPUT, [401, "No app id and no key with the publish scope"], LIMITED),
        },
      }),
    },
    "/downstream/api/publish": {
      post: builtin({
        summary: "Publish a post (targets blog) or queue a reading (targets nas)",
        description: "Needs the `X-App-ID` header holding the relay's app id " +
          "(`RELAY_APP_ID` or the generated `app-id` file); a post may instead be sent with " +
          'a key with the publish scope. With `targets: ["nas"]` and `transform: "read"` ' +
          "the episode is spoken in the background.",
        parameters: [
          z.string().optional().meta({
            param: { in: "header", name: "X-App-ID", example: "app-id" },
          }),
        ],
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: z.object({
                title: z.string().min(1).max(500),
                content: z.string().min(1),
                content_md: z.string().optional(),
                tags: z.string().optional(),
                targets: z.array(z.enum(["blog", "nas"])).min(1),
                transform: z.literal("read").optional(),
              }),
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
          ...problems(
            ...BAD_INPUT,
            [401, "Without the right X-App-ID (or, for a post, a key)"],
            LIMITED,
          ),
        },
      }),
    },
    "/downstream/delete/{post_id}": {
      post: builtin({
        summary: "Delete a blog post",
        description: "Needs the cookie `relay_access` holding the relay's key or a named key " +
          "with the publish scope.",
        parameters: [
          id("post_id", "20261123-114218-x8d0a1mz"),
          z.string().meta({
            param: { in: "cookie", name: "relay_access", example: "the-relay-key" },
          }),
        ],
        responses: {
          "303": { description: "Deleted; Location is the blog's index" },
          ...problems(
            [401, "No valid access cookie: nothing deleted"],
            [404, "No such post"],
            LIMITED,
          ),
        },
      }),
    },
    "/notes": {
      get: readKey({
        summary: "The same as /notes/",
        responses: { "200": json("Notes", z.object({ notes: z.array(note) })) },
      }),
    },
    "/notes/": {
      get: readKey({
        summary: "The notes, newest first",
        responses: { "200": json("Notes", z.object({ notes: z.array(note) })) },
      }),
    },
    "/notes/{doc_id}": {
      get: readKey({
        summary: "One note's file as stored, front matter included",
        parameters: [id("doc_id", "20261123-114218-k3f9q2ab")],
        responses: {
          "200": {
            description: "The Markdown file",
            content: { "text/markdown; charset=utf-8": {} },
          },
          ...problems([404, "No such note"]),
        },
      }),
    },
    "/blog": { get: builtin({ summary: "The same as /blog/", responses: { "200": html } }) },
    "/blog/": {
      get: builtin({
        summary: "The blog's index, newest first",
        responses: { "200": html, ...problems(...KEY_NEEDED) },
      }),
    },
    "/blog/feed.xml": {
      get: builtin({
        summary: "Atom feed of the newest 50 posts",
        responses: {
          "200": { description: "Atom", content: { "application/atom+xml; charset=utf-8": {} } },
          ...problems(...KEY_NEEDED),
        },
      }),
    },
    "/blog/posts": {
      get: builtin({
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
          ...problems(...KEY_NEEDED),
        },
      }),
    },
    "/blog/{post_id}": {
      get: builtin({
        summary: "One post, rendered from its Markdown",
        parameters: [id("post_id", "20261123-114218-x8d0a1mz")],
        responses: { "200": html, ...problems(...KEY_NEEDED, [404, "No such post"]) },
      }),
    },
    "/podcast": { get: builtin({ summary: "The same as /podcast/", responses: { "200": html } }) },
    "/podcast/": {
      get: builtin({
        summary: "The podcast page: feed address and every episode with its state",
        responses: { "200": html, ...problems(...KEY_NEEDED) },
      }),
    },
    "/podcast/episodes": {
      get: builtin({
        summary: "The episodes and their states as JSON, newest first",
        responses: {
          "200": json(
            "Episodes",
            z.object({ feed_url: z.string(), episodes: z.array(episode) }),
          ),
          ...problems(...KEY_NEEDED),
        },
      }),
    },
    "/podcast/feed.xml": {
      get: builtin({
        summary: "RSS 2.0 podcast feed of the ready episodes",
        responses: {
          "200": { description: "RSS", content: { "application/rss+xml; charset=utf-8": {} } },
          ...problems(...KEY_NEEDED),
        },
      }),
    },
    "/podcast/qr.svg": {
      get: builtin({
        summary: "The feed's address as a QR code, for subscribing from a phone",
        responses: {
          "200": { description: "SVG", content: { "image/svg+xml": {} } },
          ...problems(...KEY_NEEDED),
        },
      }),
    },
    "/podcast/{file}": {
      get: builtin({
        summary: "An episode's MP3 (`{id}.mp3`); honours Range",
        parameters: [
          z.string().meta({
            param: { in: "path", name: "file", example: "20261123-114218-p2c7w4ne.mp3" },
          }),
          z.string().optional().meta({
            param: { in: "header", name: "Range", example: "bytes=0-" },
          }),
        ],
        responses: {
          "200": { description: "The whole file", content: { "audio/mpeg": {} } },
          "206": { description: "The range asked for", content: { "audio/mpeg": {} } },
          ...problems(...KEY_NEEDED, [404, "No such episode, or not ready"], [
            416,
            "A range past the end",
          ]),
        },
      }),
    },
  };
}

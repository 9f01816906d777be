/**
 * The floor: the least work any relay on this stack must do per request, measured in the
 * same rounds as the relay and the bare reference (docs/benchmarks.md, "How it measures").
 *
 * It is not a relay. It has no queues, no validation, no duplicate check, no limits; it
 * only does what the relay cannot skip:
 *
 * - every request: reads the `X-Auth-Key` and `Origin` headers and compares the key, takes
 *   the path out of the URL with string slicing (no `URL` object), and queues one access-log
 *   line, written by the relay's own batching writer and time format (`src/server/log.ts`);
 * - `GET <path>` whose body was set with `PUT <path>`: answers that body as
 *   `application/json; charset=utf-8`, as the relay's reads do;
 * - `POST <path>`: reads the body as text and answers "OK" only after a Deno KV commit that
 *   holds it is durable. Commits are grouped (one in flight; what arrives meanwhile waits
 *   for the next), one `set` per request: the relay's group commit with nothing else in it;
 * - `GET /pull`: answers only after a grouped commit that deletes one key (a pull takes an
 *   item: a write, as in the relay).
 *
 * With `--headers` as its second argument it answers with the response headers the relay
 * sends: its `Content-Type`, `Cache-Control` on a keyed answer (`private`, `no-store` for a
 * pull) and `Vary: Origin` (`GET /` without a body set stands for the open `GET /health`: no
 * `Cache-Control`). Deno's server sends one header through a fast call and several through a
 * slower one, so the relay's exact headers cost more than the floor's one (`deno task bench
 * --floor-headers`; docs/benchmarks.md, "Reads").
 *
 * At start it opens a Deno KV file (the first argument), loads Hono and zod, the stack's
 * libraries that the relay loads at start, and starts a timer, as every relay must, so its
 * idle RSS is the stack's own memory (with the relay's small log module,
 * `src/server/log.ts`).
 * Hono and zod are not used per request: the throughput it measures stays the floor's.
 *
 * Prints `listening <port>` once it listens on 127.0.0.1.
 *
 * @module
 */

import { Hono } from "hono";
import { z } from "zod";
import { BatchedLog, isoTime } from "../src/server/log.ts";

const KEY = Deno.env.get("RELAY_API_KEY") ?? "";
const kv = await Deno.openKv(Deno.args[0]);

// Loaded, not used per request (see the module doc).
const stack = { app: new Hono(), schema: z.object({ content: z.string() }) };
stack.app.get("/", (c) => c.text(stack.schema.parse({ content: "OK" }).content));

// A relay runs timers from its start (the relay sweeps idle connections every second), and
// a pending timer adds about 3 MB to an idle process's RSS (docs/benchmarks.md, "Idle
// memory"): the floor keeps one as well, doing nothing.
Deno.unrefTimer(setInterval(() => {}, 1000));

/** Bodies set with `PUT`, by path. */
const bodies = new Map<string, string>();

/** The access log, batched by the relay's own writer (20 ms, or at once at 64 KiB). */
const accessLog = new BatchedLog();

/** A write waiting for a commit: `content` to store, or `undefined` to delete one item. */
interface Write {
  content: string | undefined;
  done: () => void;
  failed: (e: unknown) => void;
}

let waiting: Write[] = [];
let inFlight = false;
let sequence = 0;
let taken = 0;

/** Commits what waits, one commit in flight at a time. */
async function commit(): Promise<void> {
  if (inFlight || waiting.length === 0) return;
  inFlight = true;
  const batch = waiting;
  waiting = [];
  try {
    const atomic = kv.atomic();
    const now = Date.now();
    for (const { content } of batch) {
      if (content === undefined) atomic.delete(["item", ++taken]);
      else atomic.set(["item", ++sequence], { content, at: now });
    }
    await atomic.commit();
    for (const item of batch) item.done();
  } catch (error) {
    for (const item of batch) item.failed(error);
  }
  inFlight = false;
  void commit();
}

const JSON_TYPE = "application/json; charset=utf-8";

/**
 * With `--headers`, each answer's init with the relay's headers (module comment): a write's,
 * a pull's (nothing of it may be kept), a read's, and health's (`GET /` with no body set).
 * Without it, `undefined`: the floor's own answers.
 */
const EXACT = Deno.args[1] === "--headers"
  ? {
    write: {
      headers: {
        "content-type": "text/plain; charset=utf-8",
        "cache-control": "private",
        vary: "Origin",
      },
    },
    pull: { headers: { "content-type": JSON_TYPE, "cache-control": "no-store", vary: "Origin" } },
    read: { headers: { "content-type": JSON_TYPE, "cache-control": "private", vary: "Origin" } },
    health: { headers: { "content-type": JSON_TYPE, vary: "Origin" } },
  }
  : undefined;

Deno.serve({
  hostname: "127.0.0.1",
  port: 0,
  onListen: ({ port }) => console.log(`listening ${port}`),
}, async (req) => {
  const started = performance.now();
  const key = req.headers.get("x-auth-key");
  const origin = req.headers.get("origin");
  const url = req.url;
  const start = url.indexOf("/", url.indexOf("//") + 2);
  const end = url.indexOf("?", start);
  const path = end < 0 ? url.slice(start) : url.slice(start, end);
  let res: Response;
  if (req.method === "PUT") {
    bodies.set(path, await req.text());
    res = new Response(null, { status: 204 });
  } else if (key !== KEY || origin !== null) {
    res = new Response("unauthorized", { status: 401 });
  } else if (req.method === "POST" || path === "/pull") {
    const content = req.method === "POST" ? await req.text() : undefined;
    await new Promise<void>((done, failed) => {
      waiting.push({ content, done, failed });
      void commit();
    });
    res = new Response("OK", req.method === "POST" ? EXACT?.write : EXACT?.pull);
  } else {
    const body = bodies.get(path);
    res = body === undefined
      ? new Response("OK", EXACT?.health)
      : new Response(body, EXACT?.read ?? { headers: { "content-type": JSON_TYPE } });
  }
  accessLog.line(
    `${isoTime(Date.now())} INFO 127.0.0.1 ${req.method} ${path} ${res.status} ${
      (performance.now() - started).toFixed(1)
    }ms key=main`,
  );
  return res;
});

/**
 * The results feed's endpoints: `POST /push`, `GET /results` (with the
 * long-poll) and the live delivery of `GET /results/stream` (Server-Sent
 * Events) and the feed for feed readers, `GET /results/feed.xml` (Atom). Each
 * handler parses the request, calls one store function and answers.
 *
 * @module
 */

import { HttpError } from "../../errors.ts";
import { push, readResults, stateVersion } from "../../store/store.ts";
import { readBody } from "../body.ts";
import { AnswerCache, answerOf, cachedResponse } from "../cache.ts";
import { MAIN_KEY_ID } from "../auth.ts";
import { eventStreamResponse, sseEvent, streamResults } from "../live.ts";
import { text } from "../responses.ts";
import { absentIfEmpty, type Route, type RouteContext, type Routes, waitFor } from "../route.ts";
import { parseOr400, pushFieldsSchema, resultsQuerySchema, streamStartSchema } from "../schemas.ts";
import { selfLinkKey, withKeyedSelf } from "../self_link.ts";

/** Results answers kept: one per distinct query string (readers' cursors differ). */
const RESULTS_CACHE_ANSWERS = 64;

const FEED = ["feed"] as const;

/** The Atom feed's builder, with the `feed` and `markdown-it` packages: loaded when first asked. */
const loadAtom = () => import("../results_feed.ts");

/** Entries of the Atom feed: the whole results feed, which holds at most 50. */
const ATOM_ENTRIES = 50;

/** The Atom feed's content type (RFC 4287, section 7). */
const ATOM_TYPE = "application/atom+xml; charset=utf-8";

/** `POST /push` (scope `push`): a result onto the feed. */
function pushRoute(relay: RouteContext): Route {
  const { store } = relay;
  const reading = { action: "push", formFields: Object.keys(pushFieldsSchema.shape) };
  const write = async (request: Request) => {
    const body = await readBody(request, relay.maxBodyBytes, reading);
    const content = body.kind === "text"
      ? body.text.trim()
      : (parseOr400(pushFieldsSchema, body.fields, "push").content?.trim() ?? "");
    if (content === "") {
      throw new HttpError(
        400,
        'Cannot push: content is empty (send text, or a "content" field)',
        {},
        "empty-content",
      );
    }
    await push(store, content);
    return text("OK");
  };
  return {
    scope: "push",
    methods: ["POST"],
    handler: (c) => write(c.req.raw),
  };
}

/**
 * `GET /results` (scope `read`): the feed after a cursor, long-polled with `wait`; a read
 * that does not wait is answered from a cache while the feed is unchanged.
 */
function resultsRoute(relay: RouteContext): Route {
  const { store, bulkRead } = relay;
  // Answers of reads that do not wait, by query string (each reader's cursor is one).
  const resultsCache = new AnswerCache(RESULTS_CACHE_ANSWERS);
  // A read that does not wait, at the same version of the feed, answers the same bytes
  // (docs/benchmarks.md, "Reads"); only such reads are stored (below).
  const cached = (search: string) => {
    const hit = resultsCache.get(search, stateVersion(store, FEED), -Infinity);
    return hit === undefined ? undefined : cachedResponse(hit);
  };
  return {
    scope: "read",
    methods: ["GET", "HEAD"],
    cached,
    handler: async (c, url) => {
      const hit = cached(url.search);
      if (hit !== undefined) return hit;
      const key = url.search;
      const since = absentIfEmpty(url.searchParams.get("since"));
      const query = parseOr400(resultsQuerySchema, {
        since,
        limit: absentIfEmpty(url.searchParams.get("limit")),
        wait: absentIfEmpty(url.searchParams.get("wait")),
      }, "read results");
      // Serialised inside the limit of concurrent bulk reads, like the read itself.
      const read = () =>
        bulkRead(async () => {
          // Read before the store: a change during the read makes the next request miss.
          const version = stateVersion(store, FEED);
          const page = await readResults(store, query);
          const answer = answerOf(
            {
              cursor: page.cursor,
              items: page.items.map((item) => ({ t: item.t, c: item.content })),
              // only for a reader that gave a cursor, and only when it missed some.
              ...(since !== undefined && page.gap ? { gap: true } : {}),
            },
            version,
            Infinity,
          );
          if (query.wait === 0) resultsCache.set(key, answer);
          return { found: page.items.length > 0, answer: cachedResponse(answer) };
        });
      // Without wait, one read answers, whatever it found.
      if (query.wait === 0) return (await read()).answer;
      const found = async () => {
        const { found, answer } = await read();
        return found ? answer : undefined;
      };
      return await waitFor(relay, {
        kind: "results",
        waitS: query.wait,
        collections: ["feed"],
        signal: c.req.raw.signal,
        attempt: found,
      }) ?? (await read()).answer;
    },
  };
}

/** `GET /results/stream` (scope `read`): the feed as server-sent events. */
function streamRoute(relay: RouteContext): Route {
  const { store } = relay;
  return {
    scope: "read",
    methods: ["GET"],
    // A stream never ends: nothing of it may be kept.
    noStore: true,
    handler: (c, url) => {
      const since = parseOr400(streamStartSchema, {
        lastEventId: absentIfEmpty(c.req.header("last-event-id")),
        since: absentIfEmpty(url.searchParams.get("since")),
      }, "stream results");
      const resumed = c.req.header("last-event-id") !== undefined ||
        url.searchParams.has("since");
      // Past the limits: 503 (all streams) or 429 (this key's), before anything is held.
      const release = relay.streams.take(c.keyId ?? MAIN_KEY_ID);
      const { closing } = relay;
      const left = c.req.raw.signal;
      return Promise.resolve(eventStreamResponse(async (stream, gone) => {
        const done = relay.metrics.wait("stream");
        const stop = new AbortController();
        const end = () => stop.abort();
        // The stream ends when the client goes (its request's signal, or the body being
        // cancelled) or the relay stops.
        for (const signal of [gone, left, closing]) {
          signal.addEventListener("abort", end, { once: true });
          if (signal.aborted) end();
        }
        try {
          await streamResults(store, stream, {
            since,
            keepAliveMs: relay.keepAliveMs,
            resumed,
            signal: stop.signal,
          });
        } catch (error) {
          // The cause stays in the relay's log; the client learns only that it failed.
          relay.logger.error("relay: results stream failed", error);
          await stream.write(sseEvent({ event: "error", data: "the relay failed; reconnect" }));
        } finally {
          for (const signal of [gone, left, closing]) signal.removeEventListener("abort", end);
          done();
          release();
        }
      }));
    },
  };
}

/**
 * The routes of the results feed: push (scope `push`), results and results/stream
 * (`read`).
 *
 * @param relay What the handlers share: the store, the body limit, the limit of bulk
 *   reads, the closing signal and the stream's keep-alive interval.
 */
export function resultRoutes(relay: RouteContext): Routes {
  return {
    "/push": pushRoute(relay),
    "/results": resultsRoute(relay),
    "/results/feed.xml": atomRoute(relay),
    "/results/stream": streamRoute(relay),
  };
}

/**
 * `GET /results/feed.xml` (scope `read`, the key may be in `?key=`): the whole results feed
 * as Atom with each result's Markdown rendered, for feed readers. Its links use the
 * relay's public URL or listening address when the built-in services know it, so that a
 * request's `Host` does not end up in a document a proxy may keep. Read with a key in
 * `?key=`, its self link keeps access without the main key ({@linkcode selfLinkKey}).
 */
function atomRoute(relay: RouteContext): Route {
  const { store, bulkRead } = relay;
  return {
    scope: "read",
    methods: ["GET", "HEAD"],
    handler: async (c, url) => {
      const { resultsAtom } = await loadAtom();
      const page = await bulkRead(() => readResults(store, { since: 0, limit: ATOM_ENTRIES }));
      const origin = relay.builtin?.services.site.origin ?? url.origin;
      const self = selfLinkKey(c, url, relay.feedKeys?.get("/results/feed.xml"));
      return new Response(withKeyedSelf(resultsAtom(page.items, origin), self), {
        headers: { "content-type": ATOM_TYPE },
      });
    },
  };
}

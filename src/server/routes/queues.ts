/**
 * The queue endpoints: `POST /submit`, `GET /pull` (with the long-poll
 * and leases), `POST /ack`, `GET /peek` and `GET /qa-hosts`. Each handler
 * parses the request, calls one store function and answers.
 *
 * @module
 */

import { z } from "zod";
import type { ZodOpenApiOperationObject } from "zod-openapi";
import { HttpError } from "../../errors.ts";
import { QUEUE_NAMES, routeContent } from "../../queue_names.ts";
import {
  ack,
  lease,
  nextLeaseEnd,
  peek,
  pullFirst,
  stateVersion,
  submit,
} from "../../store/store.ts";
import { readBody } from "../body.ts";
import { AnswerCache, answerOf, cachedResponse } from "../cache.ts";
import { json, JSON_TYPE, text } from "../responses.ts";
import { absentIfEmpty, type Route, type RouteContext, type Routes, waitFor } from "../route.ts";
import {
  ackBodySchema,
  dedupeParam,
  itemId,
  parseOr400,
  pullQuerySchema,
  queryParam,
  queueParam,
  queueParamSchema,
  submitFieldsSchema,
} from "../schemas.ts";

// The last second formatted: items queued close together share it.
let formattedSecond = NaN;
let formatted = "";

/** `YYYY-MM-DD HH:MM:SS` in UTC, as peek shows `created_at`. */
export function formatTimestamp(ms: number): string {
  const second = Math.floor(ms / 1000);
  if (second !== formattedSecond) {
    formatted = new Date(second * 1000).toISOString().slice(0, 19).replace("T", " ");
    formattedSecond = second;
  }
  return formatted;
}

/** Peek answers kept: one per distinct query string (`?queue=…`). */
const PEEK_CACHE_ANSWERS = 16;

/** `POST /submit` (scope `submit`): a link or text into its queue, or the one named. */
function submitRoute(relay: RouteContext): Route {
  const { store } = relay;
  const reading = { action: "submit", formFields: Object.keys(submitFieldsSchema.shape) };
  const write = async (request: Request, url: URL) => {
    const body = await readBody(request, relay.maxBodyBytes, reading);
    let content: string;
    let queueField: string | undefined;
    if (body.kind === "text") {
      content = body.text.trim();
    } else {
      const fields = parseOr400(submitFieldsSchema, body.fields, "submit");
      // a non-empty content wins over url.
      content = fields.content?.trim() || (fields.url?.trim() ?? "");
      queueField = absentIfEmpty(fields.queue);
    }
    const named = queueParam(queueField ?? absentIfEmpty(queryParam(url, "queue")), "submit");
    if (content === "") {
      throw new HttpError(
        400,
        'Cannot submit: content is empty (send text, or a "content" or "url" field)',
        {},
        "empty-content",
      );
    }
    const dedupe = dedupeParam(absentIfEmpty(queryParam(url, "dedupe")), "submit");
    const queue = named ?? routeContent(content, relay.qaHosts);
    const outcome = await submit(store, content, queue, { dedupe });
    return text(outcome.accepted ? `OK (${outcome.queue})` : "OK (duplicate)");
  };
  return {
    scope: "submit",
    methods: ["POST"],
    handler: (c, url) => write(c.req.raw, url),
  };
}

/** `GET /pull` (scope `consume`): a queue's items, or a lease of some. */
function pullRoute(relay: RouteContext): Route {
  const { store, bulkRead } = relay;
  return {
    scope: "consume",
    methods: ["GET"],
    // A pull takes what it answers: no cache may keep it, nor answer it again.
    noStore: true,
    handler: async (c, url) => {
      const query = parseOr400(pullQuerySchema, {
        queue: url.searchParams.get("queue") ?? undefined,
        wait: absentIfEmpty(url.searchParams.get("wait")),
        lease: absentIfEmpty(url.searchParams.get("lease")),
        limit: absentIfEmpty(url.searchParams.get("limit")),
      }, "pull");
      const order = query.queue === undefined ? QUEUE_NAMES : [query.queue];
      const leaseS = query.lease;
      // Serialised inside the limit of concurrent bulk reads, like the read itself.
      const take = () =>
        bulkRead(async () => {
          if (leaseS === undefined) {
            const taken = await pullFirst(store, order, query.limit);
            return taken && json(taken.items.map((item) => item.content));
          }
          const leaseMs = leaseS * 1000;
          const taken = await lease(store, order, { leaseMs, limit: query.limit ?? 50 });
          return taken && json(taken.items.map((item) => ({
            id: itemId(item),
            content: item.content,
            created_at: formatTimestamp(item.created_at),
            lease_until: item.lease_until,
          })));
        });
      return await waitFor(relay, {
        kind: "pull",
        waitS: query.wait,
        collections: order,
        signal: c.req.raw.signal,
        attempt: take,
        // An ended lease makes its item available without a commit: wake then too.
        wakeAt: () => nextLeaseEnd(store, order),
      }) ?? new Response(null, { status: 204 });
    },
  };
}

/** `POST /ack` (scope `consume`): acknowledges leased items. */
function ackRoute(relay: RouteContext): Route {
  const { store } = relay;
  return {
    scope: "consume",
    methods: ["POST"],
    handler: async (c) => {
      const body = await readBody(c.req.raw, relay.maxBodyBytes, {
        action: "ack",
        accepted: ["application/json"],
      });
      if (body.kind !== "fields") {
        throw new HttpError(
          400,
          "Cannot ack: the body must be a JSON object",
          {},
          "malformed-body",
        );
      }
      const { ids } = parseOr400(ackBodySchema, body.fields, "ack");
      const outcome = await ack(store, ids);
      return json({ acked: outcome.acked.length, unknown: outcome.unknown.map(itemId) });
    },
  };
}

/** `GET /peek` (scope `read`): the queued items, answered from a cache when unchanged. */
function peekRoute(relay: RouteContext): Route {
  const { store, bulkRead } = relay;
  const peekCache = new AnswerCache(PEEK_CACHE_ANSWERS);
  // The same query at the same state version and before the first shown lease ends
  // answers the same bytes (docs/benchmarks.md, "Reads").
  const cached = (search: string) => {
    const hit = peekCache.get(search, stateVersion(store, QUEUE_NAMES), store.clock());
    return hit === undefined ? undefined : cachedResponse(hit);
  };
  return {
    scope: "read",
    methods: ["GET", "HEAD"],
    cached,
    handler: async (_c, url) => {
      const hit = cached(url.search);
      if (hit !== undefined) return hit;
      const key = url.search;
      const queue = parseOr400(
        queueParamSchema,
        url.searchParams.get("queue") ?? undefined,
        "peek",
      );
      return await bulkRead(async () => {
        // Read before the store: a change during the read makes the next request miss.
        const version = stateVersion(store, QUEUE_NAMES);
        const found = await peek(store, queue === undefined ? QUEUE_NAMES : [queue]);
        let total = 0;
        let until = Infinity;
        const queues: Record<string, unknown[]> = {};
        for (const [name, items] of found) {
          total += items.length;
          queues[name] = items.map((item) => {
            const shown = {
              content: item.content,
              queue_type: item.queue,
              created_at: formatTimestamp(item.created_at),
            };
            // an item a leased pull holds says until when; the answer changes
            // when that lease ends.
            if (item.lease_until === undefined) return shown;
            until = Math.min(until, item.lease_until);
            return { ...shown, lease_until: item.lease_until };
          });
        }
        const answer = answerOf(total === 0 ? undefined : { total, queues }, version, until);
        peekCache.set(key, answer);
        return cachedResponse(answer);
      });
    },
  };
}

/**
 * `GET /qa-hosts` (scope `consume`): the Q&A domains whose links submit routes to `qa`, as
 * `{"hosts": [...]}`. A reader of `qa` that opens links with its user's cookies (the browser
 * extension) reads only links to these sites, and leaves any other item for the reader on the
 * relay; so the key that may pull `qa` may also see the list. Fixed for the relay's life.
 */
function qaHostsRoute(relay: RouteContext): Route {
  const answer = { hosts: relay.qaHosts };
  return {
    scope: "consume",
    methods: ["GET", "HEAD"],
    handler: () => Promise.resolve(json(answer)),
  };
}

/**
 * What the API document (openapi.ts) says of `GET /qa-hosts`; its method and scope come from
 * the route table.
 */
export function qaHostsOperation(): ZodOpenApiOperationObject {
  const schema = z.object({ hosts: z.array(z.string()) });
  return {
    summary: "The Q&A domains whose links go to qa",
    description: "The domains (`--qa-hosts`) whose links, and their subdomains', submit " +
      "routes to `qa`: what a reader of `qa` that opens links with its user's cookies (the " +
      "browser extension) limits itself to.",
    responses: {
      "200": {
        description: "The domains, lower case",
        content: { [JSON_TYPE]: { schema, example: { hosts: ["stackoverflow.com"] } } },
      },
    },
  };
}

/**
 * The routes of the queues: submit (scope `submit`), pull, ack and the Q&A hosts (`consume`),
 * peek (`read`).
 *
 * @param relay What the handlers share: the store, the body limit, the Q&A hosts, the
 *   limit of bulk reads.
 */
export function queueRoutes(relay: RouteContext): Routes {
  return {
    "/submit": submitRoute(relay),
    "/pull": pullRoute(relay),
    "/ack": ackRoute(relay),
    "/peek": peekRoute(relay),
    "/qa-hosts": qaHostsRoute(relay),
  };
}

/**
 * The endpoints for whoever runs the relay: `GET /stats`, `GET /metrics` and
 * `POST /clear`, which need the `admin` scope, and the open
 * `GET /health` and `GET /openapi.json`.
 *
 * @module
 */

import denoConfig from "../../../deno.json" with { type: "json" };
import { clear, freshHealth, health, type HealthVerdict, stats } from "../../store/store.ts";
import { json, JSON_TYPE, text, withSize } from "../responses.ts";
import type { RouteContext, Routes } from "../route.ts";
import { searchRoutes } from "./search.ts";

/**
 * The admin routes: stats, metrics and clear (scope `admin`); health and the API document
 * (open).
 *
 * @param relay What the handlers share: the store and the metrics.
 * @param served Every route the app serves, for the API document's methods and scopes;
 *   called at the document's first request.
 */
export function adminRoutes(relay: RouteContext, served: () => Readonly<Routes>): Routes {
  const { store, metrics } = relay;
  // The API document, built at the first request (zod-openapi is loaded then).
  let apiDocument: Promise<string> | undefined;
  return {
    "/stats": {
      scope: "admin",
      methods: ["GET", "HEAD"],
      handler: async () =>
        json({
          ...await stats(store),
          ...(relay.builtin ? { publishing: await relay.builtin.services.stats() } : {}),
          ...(relay.failed ? { failed_publishes: relay.failed.list() } : {}),
        }),
    },
    "/metrics": {
      scope: "admin",
      methods: ["GET", "HEAD"],
      handler: async () =>
        new Response(
          await metrics.text(store, await relay.builtin?.services.stats()),
          { headers: { "content-type": metrics.contentType } },
        ),
    },
    "/clear": {
      scope: "admin",
      methods: ["POST"],
      handler: async () => {
        await clear(store);
        return text("OK (all queues cleared)");
      },
    },
    "/openapi.json": {
      methods: ["GET", "HEAD"],
      open: true,
      handler: async () => {
        apiDocument ??= import("../openapi.ts").then((m) =>
          JSON.stringify(m.openApiDocument(denoConfig.version, served()))
        );
        // A failed build is not kept: the next request tries again.
        const document = await apiDocument.catch((error) => {
          apiDocument = undefined;
          throw error;
        });
        return new Response(document, { headers: { "content-type": JSON_TYPE } });
      },
    },
    // Search covers the built-in services and the results feed: served with the services.
    ...(relay.builtin?.search === undefined ? {} : searchRoutes(relay.builtin.search)),
    "/health": {
      methods: ["GET", "HEAD"],
      open: true,
      // Between probes the verdict is known: answered before routing, without a promise.
      cached: () => {
        const verdict = freshHealth(store);
        return verdict === undefined ? undefined : healthResponse(verdict, store.clock());
      },
      handler: async () => {
        // Whether the store can commit: its last commit, probed at most once a second.
        return healthResponse(await health(store), store.clock());
      },
    },
  };
}

/**
 * The answer of `GET /health`: 200 `{ok: true, ts, db: "connected"}`, or 503 with `ok: false`,
 * `db: "error"` and the verdict's short `reason`. The one error that is not a problem
 * document (docs/api/service.md, "GET /health").
 *
 * @param now Epoch ms, reported as `ts` in whole ms.
 */
function healthResponse(verdict: HealthVerdict, now: number): Response {
  const ts = Math.floor(now);
  if (!verdict.ok) return json({ ok: false, ts, db: "error", reason: verdict.reason }, 503);
  // The text JSON.stringify writes for `{ ok: true, ts, db: "connected" }`, written directly:
  // ASCII, so its length is its size in bytes.
  const body = `{"ok":true,"ts":${ts},"db":"connected"}`;
  return withSize(new Response(body, { headers: { "content-type": JSON_TYPE } }), body.length);
}

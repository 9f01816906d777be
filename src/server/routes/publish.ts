/**
 * `POST /publish` (spec §4.8, C60–C64): one article fanned out to the configured
 * downstream services; without them every publish answers 503.
 *
 * @module
 */

import { HttpError } from "../../errors.ts";
import { missingConfiguration, publish, type PublishConfig } from "../../publish/publish.ts";
import { readBody } from "../body.ts";
import { withBuiltinTargets } from "../builtin.ts";
import { json } from "../responses.ts";
import type { RouteContext, Routes } from "../route.ts";
import { parseOr400, publishBodySchema } from "../schemas.ts";

/** Publishing without downstream services: every target is "not configured" (C63). */
const NOT_CONFIGURED: PublishConfig = {
  urls: { notes: undefined, blog: undefined, nas: undefined },
  appId: undefined,
  timeoutMs: 1,
};

/**
 * The publish route (scope `publish`).
 *
 * @param relay What the handler shares: the body limit and the downstream services.
 */
export function publishRoutes(relay: RouteContext): Routes {
  return {
    "/publish": {
      scope: "publish",
      methods: ["POST"],
      handler: async (c) => {
        const body = await readBody(c.req.raw, relay.maxBodyBytes, {
          action: "publish",
          accepted: ["application/json"],
        });
        if (body.kind !== "fields") {
          throw new HttpError(400, "Cannot publish: the body must be a JSON object");
        }
        const { article, targets } = parseOr400(publishBodySchema, body.fields, "publish");
        const builtin = relay.builtin;
        const config = builtin === undefined ? relay.publish ?? NOT_CONFIGURED : withBuiltinTargets(
          relay.publish ?? { ...NOT_CONFIGURED, timeoutMs: 15_000 },
          builtin.services,
          builtin.appId,
          builtin.publicUrl ?? new URL(c.req.url).origin,
        );
        const missing = missingConfiguration(targets, config);
        if (missing.length > 0) {
          throw new HttpError(503, `Cannot publish: ${missing.join("; ")}`);
        }
        const outcome = await publish(article, targets, config);
        return json(outcome.body, outcome.httpStatus);
      },
    },
  };
}

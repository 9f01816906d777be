/**
 * `POST /publish` (spec §4.8, C60–C64): one article fanned out to the configured
 * downstream services; without them every publish answers 503 (`relay serve` always
 * configures them: the built-in services unless told otherwise).
 *
 * @module
 */

import { errorMessage, HttpError } from "../../errors.ts";
import { MAX_FAILED_ENTRIES } from "../../publish/failed.ts";
import {
  type Article,
  missingConfiguration,
  publish,
  type PublishConfig,
  type PublishOutcome,
  type Target,
  TARGETS,
} from "../../publish/fan_out.ts";
import { readBody } from "../body.ts";
import { withBuiltinTargets } from "../builtin_wiring.ts";
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
 * Publishes `article` to `targets` with the configured services (the built-in ones for
 * targets without a URL).
 *
 * @throws {HttpError} 503 when a target is not configured.
 */
async function publishNow(
  relay: RouteContext,
  requestUrl: string,
  article: Article,
  targets: readonly Target[],
): Promise<PublishOutcome> {
  const builtin = relay.builtin;
  const config = builtin === undefined ? relay.publish ?? NOT_CONFIGURED : withBuiltinTargets(
    relay.publish ?? { ...NOT_CONFIGURED, timeoutMs: 15_000 },
    builtin.services,
    builtin.appId,
    builtin.publicUrl ?? new URL(requestUrl).origin,
  );
  const missing = missingConfiguration(targets, config);
  if (missing.length > 0) {
    throw new HttpError(503, `Cannot publish: ${missing.join("; ")}`);
  }
  return await publish(article, targets, config);
}

/** The errors of the failed targets of `outcome`. */
function failures(outcome: PublishOutcome): Record<string, string> {
  const errors: Record<string, string> = {};
  for (const [target, result] of Object.entries(outcome.body.results)) {
    if (result?.status === "error") errors[target] = result.error;
  }
  return errors;
}

/**
 * The publish routes (scope `publish`): `POST /publish`; `GET /publish/failed`, the
 * publishes with a failed target, kept to be retried; `POST /publish/retry` with
 * `{"id": …}`, which sends such a publish again to the targets that failed.
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
        const outcome = await publishNow(relay, c.req.url, article, targets);
        const failed = failures(outcome);
        if (relay.failed !== undefined && Object.keys(failed).length > 0) {
          // A failure to keep it must not change the publish's answer.
          await relay.failed.add(article, failed).catch((error) =>
            relay.logger.error(`relay: cannot keep a failed publish: ${errorMessage(error)}`)
          );
        }
        return json(outcome.body, outcome.httpStatus);
      },
    },
    "/publish/failed": {
      scope: "publish",
      methods: ["GET", "HEAD"],
      handler: () =>
        Promise.resolve(json({ max: MAX_FAILED_ENTRIES, entries: relay.failed?.list() ?? [] })),
    },
    "/publish/retry": {
      scope: "publish",
      methods: ["POST"],
      handler: async (c) => {
        const body = await readBody(c.req.raw, relay.maxBodyBytes, {
          action: "retry a publish",
          accepted: ["application/json"],
        });
        const id = body.kind === "fields" ? body.fields.id : undefined;
        if (typeof id !== "string" || id === "") {
          throw new HttpError(400, 'Cannot retry a publish: the body must be {"id": "…"}');
        }
        const entry = relay.failed?.get(id);
        if (entry === undefined) {
          throw new HttpError(404, `Cannot retry a publish: no failed publish "${id}" is kept`);
        }
        const targets = TARGETS.filter((t) => t in entry.errors);
        const outcome = await publishNow(relay, c.req.url, entry.article, targets);
        await relay.failed!.settle(id, failures(outcome));
        return json(outcome.body, outcome.httpStatus);
      },
    },
  };
}

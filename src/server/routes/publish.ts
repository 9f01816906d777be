/**
 * `POST /publish`: one article fanned out to the configured
 * downstream services; without them every publish answers 503 (`relay serve` always
 * configures them: the built-in services unless told otherwise).
 *
 * @module
 */

import { errorMessage, HttpError } from "../../errors.ts";
import { builtinTargets } from "../../builtin/publishing.ts";
import type { BuiltinTargets } from "../../publish/target_kind.ts";
import { fileFaultProblem, whileRoomLeft } from "../faults.ts";
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
import { targetNamed } from "../../publish/registry.ts";
import { readBody } from "../body.ts";
import { json } from "../responses.ts";
import type { RouteContext, Routes } from "../route.ts";
import { parseOr400, publishBodySchema, publishReportSchema } from "../schemas.ts";

/** Publishing without downstream services: every target is "not configured". */
const NOT_CONFIGURED: PublishConfig = {
  urls: Object.fromEntries(TARGETS.map((target) => [target, undefined])) as Record<
    Target,
    undefined
  >,
  appId: undefined,
  timeoutMs: 1,
};

/**
 * The built-in services as publish targets, their failures said as the routes of the same
 * services would answer them: a full disk is `HTTP 507: Cannot save to the built-in notes: the
 * relay's disk is full. …`, a failing one 503, so that the failed publish says what to do. Any
 * other error is a bug: logged, and reported without its message (it may name local paths).
 */
function withFaultAnswers(targets: BuiltinTargets, relay: RouteContext): BuiltinTargets {
  const answered = <T>(target: string, call: () => Promise<T>) => async (): Promise<T> => {
    try {
      return await call();
    } catch (error) {
      const fault = fileFaultProblem(error, `save to the built-in ${target}`);
      if (fault === undefined) {
        relay.logger.error(`relay: built-in ${target}: unexpected error`, error);
        throw new Error("the relay logged the cause");
      }
      const { detail } = await fault.json() as { detail: string };
      throw new Error(`HTTP ${fault.status}: ${detail}`);
    }
  };
  return {
    saveNote: (article) => answered("notes", () => targets.saveNote(article))(),
    publishPost: (article) => answered("blog", () => targets.publishPost(article))(),
    queueEpisode: (article) => answered("podcast", () => targets.queueEpisode(article))(),
  };
}

/**
 * Publishes `article` to `targets` with the configured services (the built-in ones for
 * targets without a URL).
 *
 * @throws {HttpError} 503 when a target is not configured.
 */
async function publishNow(
  relay: RouteContext,
  article: Article,
  targets: readonly Target[],
): Promise<PublishOutcome> {
  const base = relay.publish ?? NOT_CONFIGURED;
  const config: PublishConfig = relay.builtin === undefined ? base : {
    ...base,
    builtin: withFaultAnswers(
      whileRoomLeft(builtinTargets(relay.builtin.services), relay.store),
      relay,
    ),
  };
  const missing = missingConfiguration(targets, config);
  if (missing.length > 0) {
    throw new HttpError(503, `Cannot publish: ${missing.join("; ")}`);
  }
  return await publish(article, targets, config);
}

/**
 * The answer's body with each target under the name the request gave it (`nas` stays `nas`
 * for a client that asked for `nas`; one that named both `nas` and `podcast` sees the one
 * publish under both).
 */
function underNames(outcome: PublishOutcome, names: readonly string[]) {
  const results: Record<string, unknown> = {};
  for (const name of names) results[name] = outcome.body.results[targetNamed(name)!];
  return { ...outcome.body, results };
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
 * `POST /publish/report`: keeps a publish a client could not make (the relay unreachable, or
 * answering 5xx, until its tries were spent) with the relay's own failed publishes, so that it
 * is seen and can be retried; nothing is sent to any target.
 */
function reportHandler(relay: RouteContext) {
  return async (c: { req: { raw: Request } }) => {
    const action = "report a failed publish";
    const body = await readBody(c.req.raw, relay.maxBodyBytes, {
      action,
      accepted: ["application/json"],
    });
    if (body.kind !== "fields") {
      throw new HttpError(400, `Cannot ${action}: the body must be a JSON object`);
    }
    const report = parseOr400(publishReportSchema, body.fields, action);
    if (relay.failed === undefined) {
      throw new HttpError(503, `Cannot ${action}: this relay keeps no failed publishes`);
    }
    const errors = Object.fromEntries(report.targets.map((t) => [t, report.error]));
    return json({ id: await relay.failed.add(report.article, errors) }, 201);
  };
}

/**
 * The publish routes (scope `publish`): `POST /publish`; `GET /publish/failed`, the
 * publishes with a failed target, kept to be retried; `POST /publish/retry` with
 * `{"id": …}`, which sends such a publish again to the targets that failed; `POST
 * /publish/report`, which keeps a publish a client could not make (`error` says why).
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
          throw new HttpError(
            400,
            "Cannot publish: the body must be a JSON object",
            {},
            "malformed-body",
          );
        }
        const { article, targets, names } = parseOr400(
          publishBodySchema,
          body.fields,
          "publish",
        );
        const outcome = await publishNow(relay, article, targets);
        const failed = failures(outcome);
        if (relay.failed !== undefined && Object.keys(failed).length > 0) {
          // A failure to keep it must not change the publish's answer.
          await relay.failed.add(article, failed).catch((error) =>
            relay.logger.error(`relay: cannot keep a failed publish: ${errorMessage(error)}`)
          );
        }
        return json(underNames(outcome, names), outcome.httpStatus);
      },
    },
    "/publish/failed": {
      scope: "publish",
      methods: ["GET", "HEAD"],
      handler: () =>
        Promise.resolve(json({ max: MAX_FAILED_ENTRIES, entries: relay.failed?.list() ?? [] })),
    },
    "/publish/report": { scope: "publish", methods: ["POST"], handler: reportHandler(relay) },
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
        // Kept under the names of their day: `nas` is the podcast.
        const failedNames = Object.keys(entry.errors).map(targetNamed);
        const targets = TARGETS.filter((t) => failedNames.includes(t));
        const outcome = await publishNow(relay, entry.article, targets);
        await relay.failed!.settle(id, failures(outcome));
        return json(outcome.body, outcome.httpStatus);
      },
    },
  };
}

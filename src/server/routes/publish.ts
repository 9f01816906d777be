/**
 * `POST /publish`: one article fanned out to the configured
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
  type TargetResult,
  TARGETS,
} from "../../publish/fan_out.ts";
import { fileFaultProblem } from "../faults.ts";
import { readBody } from "../body.ts";
import { json } from "../responses.ts";
import type { BuiltinPublishing, RouteContext, Routes } from "../route.ts";
import { parseOr400, publishBodySchema } from "../schemas.ts";
import { noteSchema, postSchema, publishPost, saveNote, siteOrigin } from "./downstream.ts";

/** Publishing without downstream services: every target is "not configured". */
const NOT_CONFIGURED: PublishConfig = {
  urls: { notes: undefined, blog: undefined, nas: undefined },
  appId: undefined,
  timeoutMs: 1,
};

/** The first problem zod found with what the built-in services were given. */
function refusal(result: { error: { issues: readonly { message: string }[] } }): string {
  return result.error.issues[0]?.message ?? "the article is malformed";
}

/**
 * The built-in adapter of the fan-out: each target without a URL of its own is published
 * to the relay's own notes store, blog or podcast directly, with the checks and answers of
 * their `/downstream` API (which outside callers use; the same functions serve both).
 *
 * @param relay Where an unexpected failure is logged.
 * @param builtin The services.
 * @param origin The origin of the post's address: `--public-url`, else the request's.
 */
export function builtinTarget(
  relay: Pick<RouteContext, "logger">,
  builtin: BuiltinPublishing,
  origin: string,
): (target: Target, article: Article) => Promise<TargetResult> {
  const { services } = builtin;
  return async (target, article) => {
    const fields = {
      title: article.title,
      ...(article.tags === undefined ? {} : { tags: article.tags }),
    };
    try {
      if (target === "notes") {
        const note = noteSchema.safeParse({
          ...fields,
          content: article.content_md ?? article.content,
        });
        if (!note.success) {
          return { status: "error", error: `Cannot save the note: ${refusal(note)}` };
        }
        return { status: "success", doc_id: await saveNote(services, note.data) };
      }
      const post = postSchema.safeParse({
        ...fields,
        content: article.content,
        ...(article.content_md === undefined ? {} : { content_md: article.content_md }),
        ...(target === "blog" ? { targets: ["blog"] } : { targets: ["nas"], transform: "read" }),
      });
      if (!post.success) return { status: "error", error: `Cannot publish: ${refusal(post)}` };
      const answer = await publishPost(services, post.data, origin);
      if (target === "blog") {
        return { status: "success", url: (answer.blog as { redirect_url: string }).redirect_url };
      }
      return { status: "success", message: String(answer.message) };
    } catch (error) {
      // A full or failing disk is a reason to report, as the services' own API answers it.
      const fault = fileFaultProblem(error, `save to the built-in ${target}`);
      if (fault !== undefined) {
        const { detail } = await fault.json() as { detail: string };
        return { status: "error", error: `HTTP ${fault.status}: ${detail}` };
      }
      relay.logger.error(`relay: built-in ${target}: unexpected error`, error);
      return {
        status: "error",
        error: `The built-in ${target} failed: the relay logged the cause`,
      };
    }
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
  const builtin = relay.builtin;
  const config: PublishConfig = builtin === undefined ? relay.publish ?? NOT_CONFIGURED : {
    ...(relay.publish ?? NOT_CONFIGURED),
    builtin: builtinTarget(relay, builtin, siteOrigin(builtin)),
  };
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
          throw new HttpError(
            400,
            "Cannot publish: the body must be a JSON object",
            {},
            "malformed-body",
          );
        }
        const { article, targets } = parseOr400(publishBodySchema, body.fields, "publish");
        const outcome = await publishNow(relay, article, targets);
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
        const outcome = await publishNow(relay, entry.article, targets);
        await relay.failed!.settle(id, failures(outcome));
        return json(outcome.body, outcome.httpStatus);
      },
    },
  };
}

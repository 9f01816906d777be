/**
 * How the relay uses its built-in services: the app id (`RELAY_APP_ID`, else a file
 * generated on first start like the API key), publishing through the same client code as
 * for external services with requests for the built-in ones dispatched in process, and the
 * services' figures for `/stats` and `/metrics`.
 *
 * @module
 */

import { join } from "node:path";
import { newKey } from "../access/api_key.ts";
import type { PublishConfig, Target } from "../publish/fan_out.ts";
import { TARGETS } from "../publish/fan_out.ts";
import { writePrivateFile } from "../util/files.ts";
import { DOWNSTREAM_PATH } from "./routes/downstream.ts";
import type { BuiltinServices } from "./routes/downstream.ts";

/** The app id and where it came from (never the id itself in a log). */
export interface AppId {
  /** The app id itself: a secret, never logged. */
  readonly appId: string;
  /** `RELAY_APP_ID`, the existing `app-id` file, or a file generated now. */
  readonly source: "environment" | "file" | "generated";
  /** The file it was read from or written to. */
  readonly path: string | undefined;
}

/**
 * Finds the read-aloud queue's app id: `fromEnv` (`RELAY_APP_ID`) when set, else the file
 * `app-id` in the data directory, created on the first start (256 random bits, base64url,
 * mode 0600, fsynced with its directory) and reused after.
 *
 * @param dataDir The data directory; it must exist.
 * @throws {Error} when the file cannot be written or read, or is empty.
 */
export async function resolveAppId(fromEnv: string | undefined, dataDir: string): Promise<AppId> {
  if (fromEnv !== undefined) return { appId: fromEnv, source: "environment", path: undefined };
  const path = join(dataDir, "app-id");
  const appId = newKey();
  try {
    writePrivateFile(path, `${appId}\n`, { createNew: true });
    return { appId, source: "generated", path };
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
  }
  const text = (await Deno.readTextFile(path)).trim();
  if (text === "") throw new Error(`the app id file "${path}" is empty`);
  return { appId: text, source: "file", path };
}

/**
 * The publish configuration of one `POST /publish`: each target without a URL of its own
 * goes to the built-in service at `{origin}/downstream`, and requests under that address
 * are handed to the built-in app in process (the same requests and answers as over HTTP);
 * every other request goes out with `fetch`.
 *
 * @param external The configured URLs (`--publish-url`, `--notes-url`, …) and timeout.
 * @param services The built-in services.
 * @param appId The app id the built-in read-aloud queue accepts.
 * @param origin Where the relay is reached: `--public-url`, else the request's origin.
 */
export function withBuiltinTargets(
  external: PublishConfig,
  services: Pick<BuiltinServices, "app">,
  appId: string,
  origin: string,
): PublishConfig {
  const base = `${origin.replace(/\/+$/, "")}${DOWNSTREAM_PATH}`;
  const urls = Object.fromEntries(
    TARGETS.map((target) => [target, external.urls[target] ?? base]),
  ) as Record<Target, string>;
  const outside = external.fetch ?? fetch;
  return {
    ...external,
    urls,
    // An external podcast needs RELAY_APP_ID; the built-in one has its own when unset.
    appId: external.urls.nas === undefined ? external.appId ?? appId : external.appId,
    timeoutMs: external.timeoutMs,
    fetch: (request) => {
      if (!request.url.startsWith(`${base}/`)) return outside(request);
      // The built-in app serves /downstream/… whatever path --public-url has before it.
      const path = `${DOWNSTREAM_PATH}${request.url.slice(base.length)}`;
      const inside = new Request(new URL(path, request.url), request);
      // The relay's own calls carry the app id, which the built-in notes store and blog
      // ask for (the podcast's request has it already).
      inside.headers.set("x-app-id", appId);
      return Promise.resolve(services.app.fetch(inside));
    },
  };
}

/**
 * The built-in services' figures as Prometheus text lines: episodes by state, audio bytes
 * and the retention limits, episodes deleted by retention, notes and posts.
 */
export async function builtinMetricsText(services: BuiltinServices): Promise<string> {
  const stats = await services.stats();
  const { podcast } = stats;
  const lines = [
    "# HELP relay_podcast_episodes Podcast episodes by state.",
    "# TYPE relay_podcast_episodes gauge",
    ...Object.entries(podcast.episodes).map(([state, n]) =>
      `relay_podcast_episodes{state="${state}"} ${n}`
    ),
    "# HELP relay_podcast_audio_bytes Bytes of podcast audio on disk.",
    "# TYPE relay_podcast_audio_bytes gauge",
    `relay_podcast_audio_bytes ${podcast.audio_bytes}`,
    "# HELP relay_podcast_audio_max_bytes Disk space allowed for podcast audio.",
    "# TYPE relay_podcast_audio_max_bytes gauge",
    `relay_podcast_audio_max_bytes ${podcast.retention.max_disk_bytes}`,
    "# HELP relay_podcast_keep_episodes Podcast episodes kept at most.",
    "# TYPE relay_podcast_keep_episodes gauge",
    `relay_podcast_keep_episodes ${podcast.retention.keep}`,
    "# HELP relay_podcast_evicted_total Episodes deleted by the retention limits since start.",
    "# TYPE relay_podcast_evicted_total counter",
    `relay_podcast_evicted_total ${podcast.evicted}`,
    "# HELP relay_notes Notes in the built-in notes store.",
    "# TYPE relay_notes gauge",
    `relay_notes ${stats.notes}`,
    "# HELP relay_blog_posts Posts on the built-in blog.",
    "# TYPE relay_blog_posts gauge",
    `relay_blog_posts ${stats.posts}`,
  ];
  return `${lines.join("\n")}\n`;
}

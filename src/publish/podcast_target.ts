/**
 * The podcast target: the article queued to be read aloud as an episode. It is called
 * `podcast`; `nas`, the name the relay's first specification gave it, is accepted too, and
 * stays the name its external service's request uses (`targets: ["nas"]`). Registered in
 * `registry.ts`.
 *
 * @module
 */

import type { TargetKind } from "./target_kind.ts";

/**
 * The podcast: `POST /api/publish` with `X-App-ID`, `targets: ["nas"]` and
 * `transform: "read"`; success `status` = `success`, reports the service's message.
 */
export const podcastTarget: TargetKind = {
  name: "podcast",
  aliases: ["nas"],
  description: "the podcast (read aloud)",
  urlFlag: "--podcast-url",
  url: (config) => config.podcastUrl ?? config.publishUrl,
  needsAppId: true,
  preset: {
    label: "The podcast service",
    path: "/api/publish",
    body: {
      title: "{{title}}",
      content: "{{content}}",
      content_md: "{{content_md}}",
      targets: ["nas"],
      transform: "read",
    },
    success: { path: "status", equals: "success" },
    report: { path: "message", as: "message" },
  },
  async builtin(services, article) {
    return { status: "success", message: (await services.queueEpisode(article)).message };
  },
};

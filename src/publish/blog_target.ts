/**
 * The blog target: the article as a post (a read article's body under its own title, without
 * the result's header). Registered in `registry.ts`.
 *
 * @module
 */

import type { TargetKind } from "./target_kind.ts";

/** The blog: `POST /api/publish` with `targets: ["blog"]`, reports the post's address. */
export const blogTarget: TargetKind = {
  name: "blog",
  aliases: [],
  description: "the blog",
  urlFlag: "--blog-url",
  url: (config) => config.blogUrl ?? config.publishUrl,
  needsAppId: false,
  preset: {
    label: "The blog",
    path: "/api/publish",
    body: {
      title: "{{title}}",
      content: "{{content}}",
      content_md: "{{content_md}}",
      tags: "{{tags}}",
      targets: ["blog"],
    },
    success: { path: "blog.status", equals: "success" },
    report: { path: "blog.redirect_url", as: "url" },
  },
  async builtin(services, article) {
    return { status: "success", url: (await services.publishPost(article)).url };
  },
};

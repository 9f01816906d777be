/**
 * The notes store target: the article kept as a Markdown note (the whole result text of a
 * read article, source line included). Registered in `registry.ts`.
 *
 * @module
 */

import type { TargetKind } from "./target_kind.ts";

/** The notes store: `POST /api/notes/import`, success `code` 0, reports the note's id. */
export const notesTarget: TargetKind = {
  name: "notes",
  aliases: [],
  description: "the notes store",
  urlFlag: "--notes-url",
  url: (config) => config.notesUrl ?? config.publishUrl,
  needsAppId: false,
  preset: {
    label: "The notes store",
    path: "/api/notes/import",
    body: { title: "{{title}}", content: "{{markdown}}", content_format: 1, tags: "{{tags}}" },
    success: { path: "code", equals: 0 },
    report: { path: "doc_id", as: "doc_id" },
  },
  async builtin(services, article) {
    return { status: "success", doc_id: (await services.saveNote(article)).doc_id };
  },
};

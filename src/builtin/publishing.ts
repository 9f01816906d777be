/**
 * The built-in services as publish targets: what a note, a post and an episode are made of,
 * for `POST /publish` (through the fan-out's targets) and for the services' own `/downstream`
 * API alike. An article a reader read arrives with its whole result text as `content_md`
 * (src/article_result.ts); each service takes the part it shows:
 *
 * - the note keeps the whole result (title, byline, source, summary, body): it is the record;
 * - the post is the article's body under the request's title, without the result's header
 *   (the blog's page shows the title itself);
 * - the episode is given the Markdown (for an article, the whole result, which the speech text
 *   reads as a person would: the title, then where it is from and who wrote it, never the
 *   address), rather than `content`.
 *
 * Anything else (a note typed in, Markdown from the command line) is published as it came.
 *
 * @module
 */

import { readArticleResult } from "../article_result.ts";
import { parseTags } from "./notes.ts";
import type { BuiltinServices } from "./services.ts";

/** An article as the services take it; checked by the caller (limits, non-empty fields). */
export interface PublishedArticle {
  /** The title, one line. */
  readonly title: string;
  /** Plain text: the post's summary, and the episode's text when there is no article. */
  readonly content: string;
  /** The Markdown original, or a reader's whole result text. */
  readonly content_md?: string;
  /** Comma-separated tags. */
  readonly tags?: string;
}

/**
 * The three services as the fan-out calls them (the shape of `BuiltinTargets` in
 * `publish/target_kind.ts`).
 *
 * @param services The opened services; their site origin makes the post's address.
 * @returns One call per service; each throws what the service's files throw (a full disk).
 */
export function builtinTargets(services: BuiltinServices): {
  saveNote(article: PublishedArticle): Promise<{ doc_id: string }>;
  publishPost(article: PublishedArticle): Promise<{ post_id: string; url: string }>;
  queueEpisode(article: PublishedArticle): Promise<{ id: string; message: string }>;
} {
  return {
    async saveNote(article) {
      const saved = await services.notes.save({
        title: article.title.trim(),
        markdown: article.content_md ?? article.content,
        tags: parseTags(article.tags),
      });
      return { doc_id: saved.doc_id };
    },
    async publishPost(article) {
      // An article result comes as the Markdown, or alone as the content (the reader's
      // smaller retry after a 413).
      const source = article.content_md ?? article.content;
      const result = readArticleResult(source);
      const markdown = result?.markdown || article.content_md;
      // A post's `content` describes it (its page's description, its feed entry): an
      // article's summary when it has one (the post keeps only the article's body), else
      // the plain content, which is the article's body itself when the content is the result
      // (`relay publish --markdown-file` sends it as both), without its title and source lines.
      const contentIsResult = result !== undefined && article.content === source;
      const saved = await services.blog.publish({
        title: article.title.trim(),
        content: result?.summary || (contentIsResult ? result.markdown : article.content),
        ...(markdown?.trim() ? { content_md: markdown } : {}),
        tags: parseTags(article.tags),
      });
      return { post_id: saved.post_id, url: `${services.site.origin}/blog/${saved.post_id}` };
    },
    async queueEpisode(article) {
      // The Markdown when there is one: the speech text reads an article result as such.
      const text = article.content_md?.trim() ? article.content_md : article.content;
      const episode = await services.podcast.enqueue(article.title.trim(), text);
      return { id: episode.id, message: `queued for reading aloud as episode ${episode.id}` };
    },
  };
}

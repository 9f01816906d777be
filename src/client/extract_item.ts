/**
 * One item of `relay work --extract`: an item that is an `http(s)` link is fetched and its
 * article pushed to the results feed as Markdown (and published, with `--publish`); an item
 * that is not a link is pushed as it is. A link that cannot be read is tried again, up to the
 * worker's attempts with doubling waits, and then reported in the results feed as one line
 * (`Could not read <url>: HTTP 404`): every link ends as a result, none loops for ever and none
 * is dropped in silence. The extractor (Readability, Turndown, linkedom) is imported with the
 * first link, so a worker that only ever sees text never loads it.
 *
 * @module
 */

import { failureResult, readArticleResult } from "../article_result.ts";
import { sleep } from "../util/backoff.ts";
import {
  type LeasedItem,
  publishArticle,
  pushResult,
  type RelayClient,
  RelayError,
  reportFailedPublish,
  retrying,
} from "./client.ts";
import type { ReadLink } from "./extract.ts";
import type { AllowList } from "./address_policy.ts";
import { type SummarizeSettings, withSummary } from "./summary.ts";
import { readInThread } from "./read_thread.ts";

/** What `--extract` adds to the worker's options. */
export interface ExtractSettings {
  /** The time limit of one fetch, redirects and body included, ms. */
  timeoutMs: number;
  /** The most bytes of a page read; a longer page is cut there, with a note. */
  maxBytes: number;
  /** The `Accept-Language` header sent with each fetch. */
  acceptLanguage: string;
  /** Targets each article is published to through `POST /publish` (`notes`, `blog`, `podcast`). */
  publish: readonly string[];
  /**
   * Hosts read despite the address policy (`--allow-private`): `all`, or hosts with an
   * optional port; the reader refuses loopback, private, link-local and the relay's own
   * addresses otherwise (src/client/address_policy.ts).
   */
  allowPrivate: AllowList;
  /** With `--summarize`: how each article's summary is made (`summary.ts`). */
  summarize?: SummarizeSettings | undefined;
  /**
   * The reader's state directory (`--state-dir`), where each item is recorded while it is
   * read (src/client/reading_record.ts); `undefined`: none, a page that stops the reader is
   * read again after each restart.
   */
  stateDir?: string | undefined;
}

/** The worker's options {@linkcode readItem} uses besides the {@linkcode ExtractSettings}. */
export interface ReadItemOptions extends ExtractSettings {
  /** Fetches of one link before it is reported as unreadable, ≥ 1. */
  attempts: number;
  /** Wait after the first failed fetch, ms; doubles after each further one. */
  backoffMs: number;
  /** Stops between attempts (the worker is stopping). */
  signal: AbortSignal;
  /** Where progress and errors go, one line each. */
  log: (line: string) => void;
}

/**
 * Schemes of an item that is one link the worker must not read: they are reported as links
 * that cannot be read, not pushed as text. Anything else with a colon (`note:…`) is text.
 */
const REFUSED_SCHEMES = /^(?:javascript|vbscript|data|file|blob|about|ftp|view-source):/i;

/**
 * The link an item is, or `undefined` for an item that is not one link: one token (no white
 * space) that starts with `http://`, `https://` or one of {@linkcode REFUSED_SCHEMES}.
 */
export function linkOf(content: string): string | undefined {
  const text = content.trim();
  if (/\s/.test(text)) return undefined;
  return /^https?:\/\//i.test(text) || REFUSED_SCHEMES.test(text) ? text : undefined;
}

/**
 * Handles one item: reads it if it is a link, pushes the result, publishes the article.
 *
 * @returns `true` when a result for the item was pushed (its article, or the item itself),
 *   `false` when its link could not be read and that was pushed instead, `undefined` when the
 *   worker stopped before the item was finished (it is left to its lease).
 * @throws {RelayError} when the relay refuses a push (a 4xx).
 */
export async function readItem(
  client: RelayClient,
  item: LeasedItem,
  options: ReadItemOptions,
): Promise<boolean | undefined> {
  const { log } = options;
  const push = (content: string) => pushFitting(client, content, options);
  const link = linkOf(item.content);
  if (link === undefined) {
    log(`relay: item ${item.id} is not a link; pushed as it is`);
    await push(item.content.trim());
    return true;
  }
  const outcome = await readAttempts(link, item, client, options);
  if (outcome === undefined) return undefined;
  if (typeof outcome === "string") {
    await push(failureResult(link, outcome));
    return false;
  }
  if (options.summarize !== undefined) {
    outcome.result = await withSummary(outcome.result, outcome.article.text, options.summarize);
    // A model that failed is said in the log too, not only under the summary it left.
    const note = readArticleResult(outcome.result)?.summaryNote;
    if (note?.startsWith("Offline summary:")) log(`relay: ${link} (item ${item.id}): ${note}`);
  }
  log(`relay: read ${link} (item ${item.id}): "${outcome.article.title}"`);
  await push(outcome.result);
  if (options.publish.length > 0) await publish(client, outcome, options);
  return true;
}

/** Halvings of a result the relay refuses as too large, before it is given up as too long. */
const CUTS = 4;

/**
 * Pushes a result; when the relay refuses it as larger than its body limit (413), pushes its
 * first half instead, then a quarter, …, with a note saying so: a long article still ends as a
 * result, and the item is not handed out again for ever.
 *
 * @throws {RelayError} when the relay refuses the push otherwise (a 4xx other than 413).
 */
async function pushFitting(
  client: RelayClient,
  content: string,
  options: ReadItemOptions,
): Promise<void> {
  const { log, signal } = options;
  const bytes = new TextEncoder().encode(content);
  for (let cut = 0;; cut++) {
    const text = cut === 0 ? content : cutTo(bytes, bytes.length >> cut) +
      `\n\n_The result was cut to ${bytes.length >> cut} of its ${bytes.length} bytes: ` +
      "the relay takes no longer ones (its body limit)._\n";
    try {
      await retrying(() => pushResult(client, text), "push the result", log, signal);
      return;
    } catch (error) {
      if (!(error instanceof RelayError) || error.status !== 413 || cut === CUTS) throw error;
      log(
        `relay: the relay refused a result of ${new TextEncoder().encode(text).length} ` +
          "bytes as too large; pushing its first half",
      );
    }
  }
}

/** The first `size` bytes of UTF-8 `bytes` as text, ending at a whole character and line. */
function cutTo(bytes: Uint8Array, size: number): string {
  const text = new TextDecoder().decode(bytes.subarray(0, size)).replace(/\uFFFD$/, "");
  const line = text.lastIndexOf("\n");
  return (line > 0 ? text.slice(0, line) : text).trimEnd();
}

/**
 * Reads `link` up to `options.attempts` times.
 *
 * @returns The article, the reason of the last failure, or `undefined` when the worker is
 *   stopping.
 */
async function readAttempts(
  link: string,
  item: LeasedItem,
  client: RelayClient,
  options: ReadItemOptions,
): Promise<ReadLink | string | undefined> {
  const { attempts, log, signal } = options;
  const { relayAddresses } = await import("./fetch_page.ts");
  const policy = { allow: options.allowPrivate, relay: await relayAddresses(client.url) };
  const fetchOptions = {
    timeoutMs: options.timeoutMs,
    maxBytes: options.maxBytes,
    acceptLanguage: options.acceptLanguage,
    policy,
  };
  for (let attempt = 1;; attempt++) {
    const answer = await readInThread(link, fetchOptions, signal);
    if (answer.ok) return answer.read;
    if (signal.aborted) return undefined;
    // A page that trips the extractor itself (a stack overflow in a parser) is that page's
    // failure: rethrown, it would stop the worker, and the item would come back for ever.
    const reason = answer.page
      ? answer.message
      : `the extractor failed on the page (${answer.message.split("\n")[0]})`;
    const last = attempt >= attempts || !answer.retryable;
    // A failure that another try cannot mend (a refused address, not a web page) says so,
    // rather than counting tries that will not be made.
    const which = answer.retryable ? `attempt ${attempt} of ${attempts}` : "not retried";
    log(
      `relay: could not read ${link} (item ${item.id}, ${which}): ` +
        `${reason}${last ? "; reported in the results feed" : ""}`,
    );
    if (last) return reason;
    if (!await sleep(options.backoffMs * 2 ** (attempt - 1), signal)) return undefined;
  }
}

/**
 * Tries to publish to `options.publish` this many times when the relay cannot be reached;
 * a target that fails is kept by the relay in its failed publishes, not retried here.
 */
const PUBLISH_TRIES = 3;

/**
 * The publish requests of an article, largest first, for a relay that refuses the larger as
 * over its body limit (413): the article as text and Markdown; then as Markdown only (one
 * representation, still whole: the blog renders it, the podcast reads it); then its Markdown cut
 * to a half, a quarter, …, ending with a note that says so. Nothing is left out in silence.
 */
function* publishBodies(read: ReadLink, options: ReadItemOptions) {
  const { article } = read;
  // The result text pushed, whole (src/article_result.ts): every publisher (this one, the web
  // app's button) sends the same article, and the services read its parts from it.
  const markdown = read.result;
  const common = {
    title: article.title,
    targets: options.publish,
    // Relays before the podcast took its name needed this for "nas"; later ones ignore it.
    ...(options.publish.some((t) => t === "nas" || t === "podcast") ? { transform: "read" } : {}),
  };
  if (article.text !== undefined) {
    yield { how: "whole", body: { ...common, content: article.text, content_md: markdown } };
  }
  yield { how: "as Markdown only", body: { ...common, content: markdown } };
  const bytes = new TextEncoder().encode(markdown);
  for (let cut = 1; cut <= CUTS; cut++) {
    const content = `${cutTo(bytes, bytes.length >> cut)}\n\n_The article was cut to ` +
      `${bytes.length >> cut} of its ${bytes.length} bytes to be published: the relay takes ` +
      `no longer requests (its body limit). The whole article: <${article.url}>_\n`;
    yield { how: `cut to ${bytes.length >> cut} bytes`, body: { ...common, content } };
  }
}

/** Publishes an article through `POST /publish`, logging the outcome of each target. */
async function publish(client: RelayClient, read: ReadLink, options: ReadItemOptions) {
  const { log } = options;
  const { article } = read;
  const bodies = publishBodies(read, options);
  let { body } = bodies.next().value!;
  for (let attempt = 1;; attempt++) {
    try {
      const answer = await publishArticle(client, body);
      const failed = Object.entries(answer.body.results)
        .filter(([, result]) => result.status !== "success")
        .map(([target, result]) => `${target}: ${result.error ?? result.status}`);
      log(
        failed.length === 0
          ? `relay: published "${article.title}" to ${options.publish.join(", ")}`
          : `relay: publishing "${article.title}" failed for ${failed.join("; ")} ` +
            "(kept in the relay's failed publishes: relay publish --failed)",
      );
      return;
    } catch (error) {
      const smaller = error instanceof RelayError && error.status === 413
        ? bodies.next()
        : undefined;
      if (smaller?.done === false) {
        log(
          `relay: the relay refused to publish "${article.title}" as too large; ` +
            `sending it ${smaller.value.how}`,
        );
        body = smaller.value.body;
        attempt--;
        continue;
      }
      const retryable = (error as { retryable?: boolean }).retryable === true;
      const retry = attempt < PUBLISH_TRIES && retryable;
      log(
        `relay: could not publish "${article.title}": ${(error as Error).message}` +
          (retry ? "; trying again" : ""),
      );
      if (retry && await sleep(options.backoffMs * 2 ** (attempt - 1), options.signal)) continue;
      // A refusal (4xx) would refuse the report too; a publish that failed for want of the
      // relay is kept by it as soon as it answers, like any failed publish.
      if (retryable) await report(client, body, (error as Error).message, options);
      return;
    }
  }
}

/**
 * Has the relay keep a publish whose tries were spent (`POST /publish/report`), waiting for the
 * relay as a push does, so that it is listed and retried with the relay's failed publishes.
 */
async function report(
  client: RelayClient,
  body: Record<string, unknown>,
  error: string,
  options: ReadItemOptions,
): Promise<void> {
  const { log, signal } = options;
  const title = String(body.title);
  try {
    let id = "";
    await retrying(
      async () => void (id = await reportFailedPublish(client, body, error)),
      "report a failed publish",
      log,
      signal,
    );
    log(`relay: kept "${title}" in the relay's failed publishes as ${id} (relay publish --failed)`);
  } catch (refused) {
    log(
      `relay: the relay did not keep the failed publish of "${title}": ${
        (refused as Error).message
      }`,
    );
  }
}

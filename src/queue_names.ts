/**
 * Queue names and routing: which input queue a submission goes to.
 *
 * Pure functions only: no KV, no HTTP.
 *
 * @module
 */

/** The input queues, in the order a pull without `queue` tries them. */
export const QUEUE_NAMES = ["qa", "article", "general"] as const;

/** One of the input queues. */
export type QueueName = typeof QUEUE_NAMES[number];

/**
 * The queue names as a sentence lists them, for help texts and the API's descriptions.
 *
 * @param last The word before the last name: `"or"` (one of them) or `"and"` (each).
 * @returns e.g. `qa, article or general`.
 */
export function queueList(last: "or" | "and" = "or"): string {
  return `${QUEUE_NAMES.slice(0, -1).join(", ")} ${last} ${QUEUE_NAMES.at(-1)}`;
}

/**
 * Q&A sites whose links go to the `qa` queue unless `--qa-hosts` says otherwise.
 * A host matches a domain when it equals it or ends with `.` + the domain.
 */
export const DEFAULT_QA_HOSTS: readonly string[] = [
  "zhihu.com",
  "stackoverflow.com",
  "stackexchange.com",
  "superuser.com",
  "serverfault.com",
  "askubuntu.com",
  "mathoverflow.net",
  "quora.com",
];

// a URL starts at http:// or https:// (any case) and ends at white space or <>"'.
const URL_PATTERN = /https?:\/\/[^\s<>"']+/i;
// punctuation that ends a sentence or closes a bracket is not part of the URL.
// Stripped with a loop: the regex /[.,;:!?)\]}]+$/ takes quadratic time on a long run of
// dots that is not at the end (150,000 dots: 23 s).
const TRAILING_PUNCTUATION = new Set([".", ",", ";", ":", "!", "?", ")", "]", "}"]);

/**
 * Finds the first `http://` or `https://` URL anywhere in `content`.
 *
 * @param content The trimmed submission.
 * @returns The URL's text, without trailing `.,;:!?)]}`, or `undefined` when there is none.
 */
export function findFirstUrl(content: string): string | undefined {
  const match = URL_PATTERN.exec(content);
  if (match === null) return undefined;
  const url = match[0];
  let end = url.length;
  while (end > 0 && TRAILING_PUNCTUATION.has(url[end - 1]!)) end--;
  return url.slice(0, end);
}

/**
 * Tells whether `host` is one of `qaHosts` or a subdomain of one.
 *
 * @param host A host name, any case.
 * @param qaHosts Lower-case domains, e.g. `["stackoverflow.com"]`.
 */
export function isQaHost(host: string, qaHosts: readonly string[]): boolean {
  const name = host.toLowerCase().replace(/\.$/, "");
  return qaHosts.some((domain) => name === domain || name.endsWith(`.${domain}`));
}

/**
 * Chooses the queue for a submission that named none (spec rules 1–2):
 * `qa` when the first URL in the content points at a Q&A host, else `general`.
 * Never returns `article`: that queue is only reached by naming it.
 *
 * @param content The trimmed submission.
 * @param qaHosts Lower-case Q&A domains (`--qa-hosts`).
 */
export function routeContent(content: string, qaHosts: readonly string[]): QueueName {
  const text = findFirstUrl(content);
  if (text === undefined) return "general";
  let host: string;
  try {
    host = new URL(text).hostname;
  } catch {
    return "general";
  }
  return isQaHost(host, qaHosts) ? "qa" : "general";
}

/**
 * Reading request bodies of `POST /submit` and `POST /push` (contract C5): the content
 * type, the size limit counted while the stream is read, UTF-8, and the three body
 * formats.
 *
 * `Deno.serve` has no body limit and `Content-Length` can lie or be absent (chunked), so
 * bytes are counted as they arrive and reading stops at the limit (platform notes).
 *
 * @module
 */

import { errorMessage, HttpError } from "./errors.ts";

/** Default body limit, bytes: 512 KiB (C5). */
export const DEFAULT_MAX_BODY_BYTES = 512 * 1024;

/**
 * Largest allowed body limit, bytes: 768 KiB. A body is stored in one atomic commit and a
 * Deno KV commit holds at most 800 KiB, so larger bodies could never be stored (C5, C8).
 */
export const MAX_BODY_LIMIT_BYTES = 768 * 1024;

/** The body formats the relay accepts (C5). */
export const ACCEPTED_TYPES = [
  "application/json",
  "text/plain",
  "application/x-www-form-urlencoded",
] as const;

/** One of {@linkcode ACCEPTED_TYPES}. */
export type BodyType = typeof ACCEPTED_TYPES[number];

/**
 * A body as read: the fields it names, or the whole text when it names none.
 * `fields` holds the JSON object or the form's fields, values unchecked.
 */
export type ParsedBody =
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "fields"; readonly fields: Record<string, unknown> };

/**
 * The media type a request declares, lower case without parameters; a missing
 * `Content-Type` counts as `text/plain` (C5).
 *
 * @param accepted The types the endpoint takes; default {@linkcode ACCEPTED_TYPES}.
 * @throws {HttpError} 415 for any type not in `accepted`, or a charset other than UTF-8.
 */
export function bodyType(
  headers: Headers,
  accepted: readonly BodyType[] = ACCEPTED_TYPES,
): BodyType {
  const raw = headers.get("content-type");
  const type = raw === null ? "text/plain" : (raw.split(";")[0] ?? "").trim().toLowerCase();
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(raw ?? "")?.[1]?.toLowerCase();
  if (
    charset !== undefined && charset !== "utf-8" && charset !== "utf8" && charset !== "us-ascii"
  ) {
    throw new HttpError(415, `Cannot accept charset "${charset}": send UTF-8`, {
      "accept-post": accepted.join(", "),
    });
  }
  const found = accepted.find((t) => t === type);
  if (found === undefined) {
    const shown = raw === null ? "none" : `"${raw}"`;
    throw new HttpError(415, `Cannot accept content type ${shown}: send ${accepted.join(", ")}`, {
      "accept-post": accepted.join(", "),
    });
  }
  return found;
}

/**
 * How long a request body may take to arrive, ms: 768 KiB over a poor 100 kbit/s phone
 * link takes about 63 s. A client that stalls longer gets 408 and frees its memory
 * (`Deno.serve` has no timeout of its own).
 */
export const BODY_TIMEOUT_MS = 90_000;

/**
 * Reads the whole body, counting bytes as they arrive, and stops at `limit` (C5).
 * A `Content-Length` over the limit is refused before anything is read.
 *
 * @param limit Maximum body size in bytes.
 * @param timeoutMs How long the whole body may take, ms; default {@linkcode BODY_TIMEOUT_MS}.
 * @returns The body's bytes (empty when there is no body).
 * @throws {HttpError} 413 when the body is larger than `limit` bytes; 408 when it is late.
 */
export async function readLimited(
  request: Request,
  limit: number,
  timeoutMs = BODY_TIMEOUT_MS,
): Promise<Uint8Array> {
  const tooLarge = (size: string) =>
    new HttpError(413, `Cannot accept body: ${size} bytes, limit is ${limit}`);
  const declared = request.headers.get("content-length");
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared) > limit) {
    throw tooLarge(declared.trim());
  }
  let bytes: Uint8Array | undefined;
  // A timer cleared as soon as the body is read: AbortSignal.timeout() would keep every
  // request's reader alive for the whole 90 s (measured: 3 KB a request, 700 MB under load).
  const late = new AbortController();
  const timer = setTimeout(
    () => late.abort(new DOMException("body too late", "TimeoutError")),
    timeoutMs,
  );
  try {
    // Without Transfer-Encoding, Deno's HTTP parser reads exactly Content-Length bytes, so
    // a declared length within the limit bounds the body: read it in one step (fewer async
    // hops than the stream). Anything else is counted chunk by chunk.
    bytes = declared !== null && request.headers.get("transfer-encoding") === null
      ? new Uint8Array(await untilAborted(request.arrayBuffer(), late.signal))
      : await readAtMost(request.body, limit, late.signal);
  } catch (error) {
    if (error instanceof DOMException && error.name === "TimeoutError") {
      throw new HttpError(408, `Cannot read body: it did not arrive within ${timeoutMs / 1000} s`);
    }
    throw new HttpError(400, "Cannot read body: the client stopped sending it");
  } finally {
    clearTimeout(timer);
  }
  if (bytes === undefined) throw tooLarge(`more than ${limit}`);
  return bytes;
}

/**
 * `work`, or the signal's reason as soon as `signal` aborts (then `onAbort` runs too, e.g.
 * to cancel a stream). The listener is removed once either settles, so nothing outlives
 * the read.
 */
async function untilAborted<T>(
  work: Promise<T>,
  signal: AbortSignal | undefined,
  onAbort: () => void = () => {},
): Promise<T> {
  if (signal === undefined) return await work;
  let stop = () => {};
  const aborted = new Promise<never>((_, reject) => {
    stop = () => {
      reject(signal.reason);
      onAbort();
    };
    if (signal.aborted) stop();
    else signal.addEventListener("abort", stop, { once: true });
  });
  try {
    return await Promise.race([work, aborted]);
  } finally {
    signal.removeEventListener("abort", stop);
  }
}

/**
 * Reads a byte stream to its end, counting bytes as they arrive, and cancels it as soon as
 * it passes `limit`. Used for request bodies and for downstream answers alike.
 *
 * @param stream The stream, or `null` for no body.
 * @param limit Maximum bytes.
 * @param signal Stops the read (throwing the signal's reason), e.g. a timeout.
 * @returns The bytes, or `undefined` when the stream was longer than `limit`.
 * @throws whatever the stream's reads throw (a client that went away, an abort).
 */
export async function readAtMost(
  stream: ReadableStream<Uint8Array> | null,
  limit: number,
  signal?: AbortSignal,
): Promise<Uint8Array | undefined> {
  if (stream === null) return new Uint8Array(0);
  const reader = stream.getReader();
  const cancel = () => void reader.cancel().catch(() => {});
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await untilAborted(reader.read(), signal, cancel);
    // A cancelled read can win the race as "done": it is still a late body.
    if (signal?.aborted) throw signal.reason;
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Whether a form body is a set of fields the endpoint takes: every `&`-separated part is
 * `name=value` and every (decoded) name is one of `names`. Empty parts are skipped, as a
 * browser never sends them. Anything else, such as a link with a query string
 * (`https://x.example/r?id=1&url=…`), is text that merely looks like a form.
 */
function isFieldsOf(text: string, names: readonly string[]): boolean {
  for (const part of text.split("&")) {
    if (part === "") continue;
    const equals = part.indexOf("=");
    if (equals < 0) return false;
    const name = new URLSearchParams(`${part.slice(0, equals)}=`).keys().next().value;
    if (name === undefined || !names.includes(name)) return false;
  }
  return true;
}

/**
 * Decodes and parses a body by its type (C5, amended; docs/api.md, "Submitting"): JSON
 * must be an object; a form body is read as fields only when every field in it is one of
 * `formFields`, and otherwise taken whole as plain text, so that
 * `curl -d 'https://x.example/r?id=1&url=https://t.example/a'` stores the whole link;
 * plain text is the text.
 *
 * @param bytes The body, at most the size limit.
 * @param type The declared type, from {@linkcode bodyType}.
 * @param options.action What the request does, for messages: `"submit"` or `"push"`.
 * @param options.formFields The field names the endpoint takes from a form body, e.g.
 *   `["content"]`; default none (every form body is text).
 * @throws {HttpError} 400 for bytes that are not UTF-8, malformed JSON, or JSON that is not
 *   an object.
 */
export function parseBody(
  bytes: Uint8Array,
  type: BodyType,
  options: { action: string; formFields?: readonly string[] },
): ParsedBody {
  const { action, formFields = [] } = options;
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    throw new HttpError(400, `Cannot ${action}: the body is not valid UTF-8`);
  }
  switch (type) {
    case "text/plain":
      return { kind: "text", text };
    case "application/x-www-form-urlencoded": {
      if (!isFieldsOf(text, formFields)) return { kind: "text", text };
      return { kind: "fields", fields: Object.fromEntries(new URLSearchParams(text)) };
    }
    case "application/json": {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (error) {
        const reason = errorMessage(error);
        throw new HttpError(400, `Cannot ${action}: the body is not valid JSON (${reason})`);
      }
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        throw new HttpError(400, `Cannot ${action}: the JSON body must be an object`);
      }
      return { kind: "fields", fields: value as Record<string, unknown> };
    }
  }
}

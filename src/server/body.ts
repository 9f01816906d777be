/**
 * Reading request bodies of `POST /submit` and `POST /push`: the content
 * type, the size limit counted while the stream is read, UTF-8, and the three body
 * formats.
 *
 * `Deno.serve` has no body limit and `Content-Length` can lie or be absent (chunked), so
 * bytes are counted as they arrive and reading stops at the limit (platform notes).
 *
 * @module
 */

import { errorMessage, HttpError } from "../errors.ts";
import { type Deadline, Deadlines } from "../util/deadlines.ts";
import { readAtMost } from "../util/streams.ts";

/** The body formats the relay accepts. */
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
 * `Content-Type` counts as `text/plain`.
 *
 * @param accepted The types the endpoint takes; default {@linkcode ACCEPTED_TYPES}.
 * @throws {HttpError} 415 for any type not in `accepted`, or a charset other than UTF-8.
 */
export function bodyType(
  headers: Headers,
  accepted: readonly BodyType[] = ACCEPTED_TYPES,
): BodyType {
  return typeOf(headers.get("content-type"), accepted);
}

/** {@linkcode bodyType} of a `Content-Type` value, `null` when the request has none. */
function typeOf(raw: string | null, accepted: readonly BodyType[]): BodyType {
  const semicolon = raw === null ? -1 : raw.indexOf(";");
  const type = raw === null
    ? "text/plain"
    : (semicolon < 0 ? raw : raw.slice(0, semicolon)).trim().toLowerCase();
  // Without a `;` there are no parameters, so no charset to look for.
  const charset = semicolon < 0
    ? undefined
    : /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(raw!)?.[1]?.toLowerCase();
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

/** Headers of an answer after which the connection is closed, its request left unread. */
const CLOSE = { connection: "close" } as const;

/**
 * How long a request body may take to arrive, ms: 768 KiB over a poor 100 kbit/s phone
 * link takes about 63 s. A client that stalls longer gets 408 and frees its memory
 * (`Deno.serve` has no timeout of its own).
 */
export const BODY_TIMEOUT_MS = 90_000;

/** The deadlines of body reads: one timer for all, firing at most 50 ms late. */
const bodyDeadlines = new Deadlines(50);

/**
 * Reads the whole body, counting bytes as they arrive, and stops at `limit`.
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
  // The connection is closed once the answer is sent (docs/api/rules.md, "Limits"): the rest of
  // the body is not read, so a client cannot make the relay take in a gigabyte it refused.
  const tooLarge = (size: string) =>
    new HttpError(413, `Cannot accept body: ${size} bytes, limit is ${limit}`, CLOSE);
  const declared = request.headers.get("content-length");
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared) > limit) {
    throw tooLarge(declared.trim());
  }
  let bytes: Uint8Array | undefined;
  // A deadline cleared as soon as the body is read: AbortSignal.timeout() would keep every
  // request's reader alive for the whole 90 s (measured: 3 KB a request, 700 MB under load).
  const tooLate = () => new DOMException("body too late", "TimeoutError");
  let deadline: Deadline | undefined;
  try {
    if (declared !== null && request.headers.get("transfer-encoding") === null) {
      // Without Transfer-Encoding, Deno's HTTP parser reads exactly Content-Length bytes, so
      // a declared length within the limit bounds the body: read it in one step (fewer async
      // hops than the stream), raced against the deadline (the connection is closed after a
      // 408, which ends the read).
      // One promise settled by whichever comes first (a race would take three).
      bytes = await new Promise<Uint8Array>((resolve, reject) => {
        deadline = bodyDeadlines.add(timeoutMs, () => reject(tooLate()));
        request.bytes().then(resolve, reject);
      });
    } else {
      // Anything else is counted chunk by chunk, and the stream cancelled when late.
      const late = new AbortController();
      deadline = bodyDeadlines.add(timeoutMs, () => late.abort(tooLate()));
      bytes = await readAtMost(request.body, limit, late.signal);
    }
  } catch (error) {
    if (error instanceof DOMException && error.name === "TimeoutError") {
      throw new HttpError(
        408,
        `Cannot read body: it did not arrive within ${timeoutMs / 1000} s`,
        CLOSE,
      );
    }
    throw new HttpError(
      400,
      "Cannot read body: the client stopped sending it",
      {},
      "malformed-body",
    );
  } finally {
    deadline?.clear();
  }
  if (bytes === undefined) throw tooLarge(`more than ${limit}`);
  return bytes;
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
 * A body sent without saying it is JSON that is a JSON object naming a field the endpoint
 * takes: `curl -d '{"content": "…"}'` without `-H 'Content-Type: application/json'` (curl
 * then says the body is a form), the most common mistake with curl. Storing such a body
 * as text would queue the JSON itself instead of its content, so it is read as the JSON it
 * is. Anything else (text that merely starts with a brace, JSON naming no known field) is
 * left as text.
 *
 * @param text The decoded body.
 * @param names The field names the endpoint takes.
 * @returns The object's fields, or `undefined` when the body is not such an object.
 */
function jsonFieldsOf(text: string, names: readonly string[]): ParsedBody | undefined {
  const trimmed = text.trim();
  if (!trimmed.startsWith("{") || !trimmed.endsWith("}")) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(trimmed);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const fields = value as Record<string, unknown>;
  return Object.keys(fields).some((name) => names.includes(name))
    ? { kind: "fields", fields }
    : undefined;
}

/**
 * Decodes and parses a body by its type (docs/api/queues.md, "POST /submit"): JSON
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
 * @param options.typeGiven `false` when the request had no `Content-Type` (`type` is then
 *   `text/plain`). A body with no type or a form type that is a JSON object naming one of
 *   `formFields` is read as JSON ({@linkcode jsonFieldsOf}); default `true`.
 * @throws {HttpError} 400 for bytes that are not UTF-8, malformed JSON, or JSON that is not
 *   an object.
 */
export function parseBody(
  bytes: Uint8Array,
  type: BodyType,
  options: { action: string; formFields?: readonly string[]; typeGiven?: boolean },
): ParsedBody {
  const { action, formFields = [] } = options;
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    throw new HttpError(400, `Cannot ${action}: the body is not valid UTF-8`, {}, "malformed-body");
  }
  switch (type) {
    case "text/plain":
      if (options.typeGiven === false) {
        return jsonFieldsOf(text, formFields) ?? { kind: "text", text };
      }
      return { kind: "text", text };
    case "application/x-www-form-urlencoded": {
      if (!isFieldsOf(text, formFields)) {
        return jsonFieldsOf(text, formFields) ?? { kind: "text", text };
      }
      return { kind: "fields", fields: Object.fromEntries(new URLSearchParams(text)) };
    }
    case "application/json": {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (error) {
        const reason = errorMessage(error);
        throw new HttpError(
          400,
          `Cannot ${action}: the body is not valid JSON (${reason})`,
          {},
          "malformed-body",
        );
      }
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        throw new HttpError(
          400,
          `Cannot ${action}: the JSON body must be an object`,
          {},
          "malformed-body",
        );
      }
      return { kind: "fields", fields: value as Record<string, unknown> };
    }
  }
}

/**
 * Reads a POST body under the relay's content-type and size rules, in this order: the type
 * first (415), then the size (413), then the parse (400).
 *
 * @param request The request whose body is read.
 * @param limit The body limit, bytes.
 * @param options.action What the request does, for messages, e.g. `"submit"`.
 * @param options.accepted The content types the endpoint takes; default all three.
 * @param options.formFields The fields a form body may name to be read as fields (the
 *   keys of the endpoint's schema); any other form body is plain text.
 * @throws {HttpError} 415, 413, 408 or 400 as {@linkcode bodyType},
 *   {@linkcode readLimited} and {@linkcode parseBody} say.
 */
export async function readBody(
  request: Request,
  limit: number,
  options: { action: string; accepted?: readonly BodyType[]; formFields?: readonly string[] },
): Promise<ParsedBody> {
  const declared = request.headers.get("content-type");
  const type = typeOf(declared, options.accepted ?? ACCEPTED_TYPES);
  const bytes = await readLimited(request, limit);
  return parseBody(bytes, type, {
    action: options.action,
    ...(options.formFields === undefined ? {} : { formFields: options.formFields }),
    typeGiven: declared !== null,
  });
}

/**
 * The one path every request takes, whatever it asks for, in this order:
 *
 * 1. **Route lookup** ({@linkcode RouteTable}): the path (dot segments resolved as the URL
 *    parser resolves them, then percent-decoded, so `/%73ubmit` is `/submit`) to one route
 *    of the tables in `routes/`. A URL that cannot be read, a path with a malformed
 *    percent-encoding, or a request from the network without a host, is answered 400; a
 *    path no route serves, 404.
 * 2. **Method and access**: a method the route does not answer gets 405 with `Allow` (or,
 *    from an origin let in, or any origin for what anyone may read, a CORS preflight's
 *    answer); then the one authorisation path (`auth.ts`) with the access the route declares
 *    (`route.ts`, `accessOf`): `Origin`, app id, key, scope. An open route has nothing to
 *    check; no other route skips this step.
 * 3. **Handler**: a cached read's answer when its cache has one, else the route's handler.
 * 4. **Representation** (`validators.ts`, `representation.ts`): an entity tag and `304` for
 *    bodies made in memory, compression, a `HEAD`'s length, `Cache-Control` from the route's
 *    access (`private`, or `no-store` where nothing may be kept), CORS for an origin let in
 *    and `Vary: Origin` on every answer.
 * 5. **Record**: the access log line and the request metrics.
 *
 * An error at steps 1 to 4 becomes an RFC 9457 problem document, which goes on through
 * steps 4 and 5 like any answer: malformed requests, unknown methods and paths get the
 * same documents on every route.
 *
 * The fast path is inside, not beside: a request whose path, as received, names a route
 * on a host already checked is not parsed into a `URL` until a handler needs it, and a
 * read answered from its cache goes through every step in the same turn, without a promise
 * (docs/benchmarks.md, "Reads").
 *
 * @module
 */

import { WEBAPP_PATH } from "../constants.ts";
import { HttpError, problemResponse, truncate } from "../errors.ts";
import { StoreBusyError } from "../store/store.ts";
import type { Access, Authorize, Secrets } from "./auth.ts";
import { targetRedactor } from "./auth.ts";
import {
  granted,
  isPreflight,
  preflightResponse,
  PUBLIC_ALLOWED_HEADERS,
  varyOrigin,
} from "./cors.ts";
import { fileFaultProblem } from "./faults.ts";
import type { Logger } from "./log.ts";
import type { RelayMetrics } from "./metrics.ts";
import { cacheControlled, encoded, headLength, lacksHost } from "./representation.ts";
import { sizeOf } from "./responses.ts";
import { accessOf, type HandlerContext, type Route, type Routes } from "./route.ts";
import { preconditionFailedResponse, untaggedPreconditionFailed, validated } from "./validators.ts";

/** The connection a request came on, as the relay's server passes it. */
export interface RequestInfo {
  /** The client's address, when it came over the network. */
  readonly remoteAddr?: { readonly hostname?: string } | undefined;
}

/** What {@linkcode createPipeline} needs. */
export interface PipelineParts {
  /** Every route the relay serves. */
  readonly routes: Readonly<Routes>;
  /** The one authorisation path of every route that is not open. */
  readonly authorize: Authorize;
  /** The `Origin` a response may be granted to (`cors.ts`), or `undefined`. */
  readonly cors: (headers: Headers) => string | undefined;
  /** Where the access log and unexpected errors go. */
  readonly logger: Logger;
  /** The request metrics. */
  readonly metrics: RelayMetrics;
  /** The keys the access log hides. */
  readonly secrets: Secrets;
  /** Whether the relay serves the built-in services (their entries in a 404's list). */
  readonly builtin: boolean;
  /** Aborted when the relay is stopping: from then on every request is answered 503. */
  readonly stopping?: AbortSignal;
}

/**
 * Answers one request: `(request, info, network)`, `network` saying whether it came from
 * the network (which must name its host) rather than in-process. Never rejects.
 */
export type Pipeline = (
  request: Request,
  info: RequestInfo | undefined,
  network: boolean,
) => Response | Promise<Response>;

/** A route as the pipeline keeps it: what steps 2 to 5 need, worked out once. */
interface Entry {
  /** The route's path as declared, e.g. `/blog/:post_id`: the metrics' label. */
  readonly path: string;
  readonly route: Route;
  /** Its methods, as `Allow` lists them. */
  readonly allow: string;
  /** What its requests must hold; `undefined` for an open route. */
  readonly access: Access | undefined;
  /** Its answers' `Cache-Control` from its access: `undefined` for an open route. */
  readonly cacheRule: "private" | "no-store" | undefined;
  /** Whether its `GET` only reads (it answers `HEAD`): only then may it answer `304`. */
  readonly safe: boolean;
}

/** A request as step 1 found it. */
interface Target {
  readonly entry: Entry;
  /** The query, `""` or starting with `?`. */
  readonly search: string;
  /** The parsed URL; `undefined` on the fast path, until a handler needs it. */
  readonly url: URL | undefined;
  /** The value of the route's path parameter, percent-decoded, if it has one. */
  readonly param: string | undefined;
}

/**
 * The path a request named, for error details: the route's own path with its parameter's value
 * in place (`/podcast/20261123-….mp3`, not `/podcast/:file`), as the client wrote it.
 */
function pathOf(target: Target): string {
  const { path } = target.entry;
  return target.param === undefined ? path : path.replace(/:[^/]+$/, () => target.param!);
}

/**
 * The routes by path: exact paths in a map, and the paths that end in one parameter
 * (`/notes/:doc_id`: one non-empty segment after `/notes/`), tried after them.
 */
export class RouteTable {
  readonly #exact = new Map<string, Entry>();
  readonly #patterns: { prefix: string; name: string; entry: Entry }[] = [];

  /** @param routes The route tables of `routes/`. */
  constructor(routes: Readonly<Routes>) {
    for (const [path, route] of Object.entries(routes)) {
      const access = accessOf(route);
      const entry: Entry = {
        path,
        route,
        allow: route.methods.join(", "),
        access,
        cacheRule: access === undefined ? undefined : route.noStore ? "no-store" : "private",
        safe: route.methods.includes("HEAD"),
      };
      const colon = path.lastIndexOf("/:");
      if (colon < 0) this.#exact.set(path, entry);
      else {this.#patterns.push({
          prefix: path.slice(0, colon + 1),
          name: path.slice(colon + 2),
          entry,
        });}
    }
  }

  /** The route declared at exactly `path`, without parameters. */
  exact(path: string): Entry | undefined {
    return this.#exact.get(path);
  }

  /** The route serving `path` (decoded), and its parameter's value. */
  find(path: string): { entry: Entry; param?: string } | undefined {
    const entry = this.#exact.get(path);
    if (entry !== undefined) return { entry };
    for (const { prefix, entry } of this.#patterns) {
      if (!path.startsWith(prefix)) continue;
      const rest = path.slice(prefix.length);
      if (rest !== "" && !rest.includes("/")) return { entry, param: rest };
    }
    return undefined;
  }

  /** The name of `entry`'s path parameter, if it has one. */
  paramName(entry: Entry): string | undefined {
    return this.#patterns.find((pattern) => pattern.entry === entry)?.name;
  }

  /** Every method some route answers, as an `Allow` value, e.g. `GET, HEAD, POST, OPTIONS`. */
  methods(): string {
    const all = new Set<string>();
    for (const entry of [...this.#exact.values(), ...this.#patterns.map((p) => p.entry)]) {
      for (const method of entry.route.methods) all.add(method);
    }
    all.add("OPTIONS");
    return [...all].join(", ");
  }

  /** Every route's path, in the order declared. */
  paths(): string[] {
    return [...this.#exact.keys(), ...this.#patterns.map(({ entry }) => entry.path)];
  }
}

/** `value`, or what it resolves to, passed to `next`: synchronous when `value` is. */
function then<T, U>(value: T | Promise<T>, next: (value: T) => U | Promise<U>): U | Promise<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}

/**
 * A path as routed: percent-decoded except for the characters that delimit a path
 * (`decodeURI`); `undefined` when its percent-encoding is malformed.
 */
function decodedPath(pathname: string): string | undefined {
  if (!pathname.includes("%")) return pathname;
  try {
    return decodeURI(pathname);
  } catch {
    return undefined;
  }
}

/** A path parameter, percent-decoded; as received when its encoding is malformed. */
function decodedParam(value: string | undefined): string | undefined {
  if (value === undefined || !value.includes("%")) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/**
 * A `Host` header's value as RFC 9112 allows it: `uri-host [ ":" port ]` (RFC 3986), an IP
 * literal in brackets or a name of unreserved characters, percent-encodings and sub-delims,
 * and the bytes of a name sent in raw UTF-8 (which the URL parser turns into punycode); empty
 * is left to {@linkcode lacksHost}.
 */
const HOST_SYNTAX =
  /^(?:\[[0-9A-Za-z:.]+\]|[A-Za-z0-9\-._~%!$&'()*+,;=\u0080-\u00ff]*)(?::[0-9]*)?$/;

/**
 * The 400 of a request that names no usable host: Deno builds the URL from the `Host`
 * header, so a malformed one makes it unparsable (`badHost`), and HTTP/1.1 requires one.
 */
function unreadable(badHost: boolean): Response {
  return problemResponse(
    400,
    badHost
      ? "Cannot read the request: its Host header is not a host name or address with an " +
        "optional port"
      : "Cannot read the request: it has no Host header (HTTP/1.1 requires one): send " +
        "Host: with the relay's address, as every HTTP client does",
  );
}

/** The refusal of a request that arrives while the relay is stopping. */
const SHUTTING_DOWN = new HttpError(
  503,
  "Cannot serve: the relay is shutting down; try again",
  { "connection": "close", "retry-after": "5" },
  "shutting-down",
);

/** A `%` not followed by two hexadecimal digits: not a percent-encoding (RFC 3986). */
const MALFORMED_ESCAPE = /%(?![0-9A-Fa-f]{2})/;

/**
 * The 400 of a path that is not a valid URI path because a `%` in it starts no
 * percent-encoding, as nginx and Apache answer it. (A well-formed encoding of bytes that
 * are not UTF-8 names no route: 404.)
 */
function malformedPath(): Response {
  return problemResponse(
    400,
    'Cannot read the request: its path has a "%" that is not followed by two hexadecimal ' +
      'digits (write a literal "%" as "%25")',
  );
}

/** Paths of the built-in services, listed once each in a 404's message. */
const BUILTIN_PREFIXES = ["/notes", "/blog", "/podcast", "/downstream"];

/** The 404 of a path no route serves: it lists the API's endpoints and the app's entry. */
function notFound(table: RouteTable, builtin: boolean): (path: string) => Response {
  // Not every app file, nor every page of the built-in services: their entries.
  const endpoints = table.paths().filter((path) =>
    path !== "/" && !path.startsWith(WEBAPP_PATH) &&
    !BUILTIN_PREFIXES.some((prefix) => path.startsWith(prefix))
  );
  endpoints.push(WEBAPP_PATH);
  if (builtin) endpoints.push("/notes/", "/blog/", "/podcast/", "/downstream/…");
  return (path) =>
    problemResponse(
      404,
      `No endpoint at "${truncate(path)}": the relay serves ${endpoints.join(", ")}`,
    );
}

/**
 * Every error as an RFC 9457 problem document: `(error, doing)`, `doing` naming the request
 * (`GET /peek`) for a file fault's message. An unexpected error is logged and answers 500.
 */
function errorResponder(logger: Logger): (error: unknown, doing: string) => Response {
  return (error, doing) => {
    if (error instanceof HttpError) {
      return problemResponse(error.status, error.message, error.headers, error.kind);
    }
    if (error instanceof StoreBusyError) {
      return problemResponse(503, `${error.message}: try again`, { "retry-after": "1" });
    }
    const fault = fileFaultProblem(error, doing);
    if (fault !== undefined) return fault;
    logger.error("relay: unexpected error", error);
    return problemResponse(500, "Internal error: the relay logged the cause");
  };
}

/**
 * The size of the body a response sends, bytes, for the access log: 0 for HEAD, the size
 * its maker recorded ({@linkcode sizeOf}), its `Content-Length` when it has one, else
 * measured on a copy (problem documents, web app files: bodies already in memory);
 * `undefined` for an event stream, whose size is not known when it starts. Synchronous
 * unless it has to be measured.
 */
function bodyBytes(
  method: string,
  res: Response,
): number | undefined | Promise<number | undefined> {
  if (method === "HEAD") return 0;
  const known = sizeOf(res);
  if (known !== undefined) return known;
  const declared = res.headers.get("content-length");
  if (declared !== null && /^\d+$/.test(declared)) return Number(declared);
  if (res.headers.get("content-type")?.startsWith("text/event-stream")) return undefined;
  return measured(res);
}

/** The size of a response's body, measured on a copy; `undefined` when it was read. */
async function measured(res: Response): Promise<number | undefined> {
  try {
    return (await res.clone().arrayBuffer()).byteLength;
  } catch {
    return undefined; // a body already read: the log line must not fail the request
  }
}

/** Makes the host check of step 1, which remembers the last host that passed it. */
function hostChecker(): {
  known(text: string, hostEnd: number): boolean;
  remember(url: URL, text: string): void;
} {
  // The scheme and host of the last request that named a usable one, e.g.
  // `http://relay.lan:8080`. Never `localhost`, which Deno also writes when the `Host`
  // header is missing or empty.
  let knownHost = "";
  return {
    known: (text, hostEnd) => hostEnd === knownHost.length && text.startsWith(knownHost),
    remember(url, text) {
      if (url.hostname === "localhost") return;
      knownHost = text.slice(0, text.indexOf("/", text.indexOf("//") + 2));
    },
  };
}

/** Step 1: route lookup, as `lookup(request, network)`: a route found, or the 400 or 404. */
function lookupStep(
  table: RouteTable,
  builtin: boolean,
): (request: Request, network: boolean) => Target | Response {
  const noRoute = notFound(table, builtin);
  const serverMethods = table.methods();
  const hosts = hostChecker();
  // The last `Host` value that passed HOST_SYNTAX: the same one again is not tested again.
  let goodHost = "";
  return (request, network) => {
    // Deno writes the URL as scheme, `://`, the Host header's value, then the path: a value
    // holding `/`, `?`, `#`, `\` or `user@` would move where the path starts, so that
    // `Host: relay.lan/stats?` with `GET /health` reads as `/stats`. It is refused first.
    const host = request.headers.get("host");
    if (host !== null && host !== goodHost) {
      if (!HOST_SYNTAX.test(host)) return unreadable(true);
      goodHost = host;
    }
    // The path as received names a route on a known host: no URL is parsed.
    const text = request.url;
    const hostEnd = text.indexOf("/", text.indexOf("//") + 2);
    if (hostEnd >= 0 && hosts.known(text, hostEnd)) {
      const queryAt = text.indexOf("?", hostEnd);
      const entry = table.exact(queryAt < 0 ? text.slice(hostEnd) : text.slice(hostEnd, queryAt));
      if (entry !== undefined) {
        const search = queryAt < 0 ? "" : text.slice(queryAt);
        return { entry, search, url: undefined, param: undefined };
      }
    }
    // Else the URL is parsed, its host checked, and its path routed decoded.
    const url = URL.parse(text);
    if (url === null || (network && lacksHost(request, url))) return unreadable(url === null);
    hosts.remember(url, text);
    const path = decodedPath(url.pathname);
    if (path === undefined && MALFORMED_ESCAPE.test(url.pathname)) return malformedPath();
    const found = path === undefined ? undefined : table.find(path);
    if (found === undefined) {
      // `OPTIONS *` asks about the server as a whole (RFC 9110, "OPTIONS"); Deno gives its
      // path as `/*`, which no route has.
      if (request.method === "OPTIONS" && url.pathname === "/*") {
        return new Response(null, { status: 204, headers: { allow: serverMethods } });
      }
      return noRoute(url.pathname);
    }
    return { entry: found.entry, search: url.search, url, param: decodedParam(found.param) };
  };
}

/**
 * Steps 2 and 3: method, access, then the handler (a cached read's answer when there is
 * one), as `run(target, request, info)`. What they throw is answered as a problem document.
 */
function runStep(
  parts: PipelineParts,
  table: RouteTable,
  errorResponse: (error: unknown, doing: string) => Response,
): (
  target: Target,
  request: Request,
  info: RequestInfo | undefined,
) => Response | Promise<Response> {
  const { authorize, cors } = parts;
  return (target, request, info) => {
    const { entry } = target;
    const method = request.method;
    const failed = (error: unknown) => errorResponse(error, `${method} ${pathOf(target)}`);
    try {
      if (!entry.route.methods.includes(method)) {
        const preflight = isPreflight(request);
        const origin = preflight ? cors(request.headers) : undefined;
        if (origin !== undefined) return preflightResponse(origin, entry.route.methods);
        if (preflight && entry.route.anyOrigin) {
          return preflightResponse("*", entry.route.methods, PUBLIC_ALLOWED_HEADERS);
        }
        // What the path answers (RFC 9110, "OPTIONS"): HAProxy's default health check is
        // `OPTIONS / HTTP/1.0`, and counts only a 2xx or 3xx as up.
        if (method === "OPTIONS" && !isPreflight(request)) {
          return new Response(null, { status: 204, headers: { allow: entry.allow } });
        }
        throw new HttpError(405, `Cannot ${method} ${entry.path}: use ${entry.allow}`, {
          allow: entry.allow,
        });
      }
      const keyId = entry.access === undefined ? undefined : authorize(
        request,
        target.url ?? request.url,
        info?.remoteAddr?.hostname,
        entry.access,
        entry.path,
      );
      const reading = method === "GET" || method === "HEAD";
      // A write, or a read that takes (a pull), is not carried out when `If-Match` fails:
      // nothing the API answers has a tag to match. Safe reads are checked with their answer.
      if ((!reading || !entry.safe) && untaggedPreconditionFailed(request)) {
        return preconditionFailedResponse();
      }
      if (entry.route.cached !== undefined && reading) {
        const hit = entry.route.cached(target.search);
        if (hit !== undefined) return hit;
      }
      const context = handlerContext(request, keyId, target, table);
      return entry.route.handler(context, target.url ?? new URL(request.url)).catch(failed);
    } catch (error) {
      return failed(error);
    }
  };
}

/**
 * Step 4: representation, as `represent(entry, request, response)`: validators and 304 for
 * bodies made in memory, compression for a client that asks, a `HEAD`'s length; then
 * `Cache-Control` from the route's access, and CORS (`Vary: Origin` on every answer). Synchronous unless a body is read.
 */
function representStep(
  cors: (headers: Headers) => string | undefined,
): (
  entry: Entry | undefined,
  request: Request,
  response: Response,
) => Response | Promise<Response> {
  return (entry, request, response) => {
    const tagged = validated(request, response, entry?.safe ?? false);
    const sent = then(tagged, (answer) => encoded(request, answer));
    const whole = request.method === "HEAD" ? then(sent, headLength) : sent;
    return then(whole, (answer) => {
      const kept = cacheControlled(answer, entry?.cacheRule);
      const origin = cors(request.headers);
      return origin === undefined ? varyOrigin(kept) : granted(kept, origin);
    });
  };
}

/**
 * Step 5: the access log line and the request metrics, under the route's declared path
 * (`other` for no route), as `record(request, entry, info, response, started)`, `started`
 * being the request's `performance.now()`. Synchronous unless the body is measured.
 */
function recordStep(
  parts: PipelineParts,
): (
  request: Request,
  entry: Entry | undefined,
  info: RequestInfo | undefined,
  response: Response,
  started: number,
) => Response | Promise<Response> {
  const { logger, metrics } = parts;
  const logging = logger.enabled("info");
  const redacted = targetRedactor(parts.secrets);
  return (request, entry, info, response, started) => {
    const ms = performance.now() - started;
    const method = request.method;
    metrics.request(entry?.path ?? "other", method, response.status, ms);
    if (!logging) return response;
    return then(bodyBytes(method, response), (bytes) => {
      logger.access({
        method,
        path: redacted(request.url),
        status: response.status,
        durationMs: ms,
        bytes,
        client: info?.remoteAddr?.hostname,
      });
      return response;
    });
  };
}

/**
 * Makes the pipeline: the five steps of the module comment, in their order, as one
 * function.
 *
 * @param parts The routes and what the steps share.
 * @returns The function that answers every request.
 */
export function createPipeline(parts: PipelineParts): Pipeline {
  const table = new RouteTable(parts.routes);
  const errorResponse = errorResponder(parts.logger);
  const lookup = lookupStep(table, parts.builtin);
  const run = runStep(parts, table, errorResponse);
  const represent = representStep(parts.cors);
  const record = recordStep(parts);
  return (request, info, network) => {
    const started = performance.now();
    const target = lookup(request, network);
    const entry = target instanceof Response ? undefined : target.entry;
    const failed = (error: unknown) =>
      errorResponse(
        error,
        `${request.method} ${target instanceof Response ? entry?.path : pathOf(target)}`,
      );
    try {
      // While the relay drains what is in flight, a new request gets 503 (with its route's
      // Cache-Control, CORS and its log line, as any answer), and its connection is closed.
      const answer = parts.stopping?.aborted
        ? failed(SHUTTING_DOWN)
        : target instanceof Response
        ? target
        : run(target, request, info);
      const sent = then(answer, (response) => represent(entry, request, response));
      if (!(sent instanceof Promise)) return record(request, entry, info, sent, started);
      return sent.catch(failed).then((response) => record(request, entry, info, response, started));
    } catch (error) {
      // Only the representation of an answer made at once can throw here.
      return record(request, entry, info, failed(error), started);
    }
  };
}

/** What a handler gets of its request ({@linkcode HandlerContext}). */
function handlerContext(
  raw: Request,
  keyId: string | undefined,
  target: Target,
  table: RouteTable,
): HandlerContext {
  return {
    req: {
      raw,
      method: raw.method,
      header: (name) => raw.headers.get(name) ?? undefined,
      param: (name) =>
        target.param !== undefined && table.paramName(target.entry) === name
          ? target.param
          : undefined,
    },
    keyId,
  };
}

/**
 * The relay's listening socket and the connections it accepts: a cap on open connections,
 * an idle timeout, and an accept loop that survives running out of file descriptors
 * (docs/faults.md, "Connections and file descriptors").
 *
 * `Deno.serve` accepts connections itself, with no limit, no header or idle timeout and no
 * hook per connection, and its accept loop ends the server on the first accept error: at
 * the process's open-file limit it threw `Too many open files` and the relay exited. So the
 * relay accepts connections itself (`Deno.listen`, `Deno.listenTls`) and hands each one to
 * Deno's HTTP server for that connection alone: the runtime's `serveHttpOnConnection`, the
 * function `Deno.serve` runs on every connection it accepts. It is reached through
 * `Deno[Deno.internal]` because Deno has no public name for it (fenced in
 * _deno_internals.ts); on a Deno without it, {@linkcode serveConnections} falls back to
 * `Deno.serve` and warns once that the connection cap and the idle timeout are lost.
 * (Deno's `node:http` server has these timeouts and limits, but measured at 0.58 × the
 * throughput of `Deno.serve` on a bare answer; serving each connection with Deno's own
 * server keeps its speed.)
 *
 * What happens to a connection:
 * - it is accepted unless {@linkcode ServeOptions.maxConnections} are open; then the oldest
 *   idle connection of the client address holding the most connections is closed to make
 *   room, and when every open connection has a request in progress, the new one is
 *   answered `503` with `Retry-After` and closed;
 * - a connection with no request in progress (never sent one, is still sending its
 *   headers, or kept alive after its last answer) is closed once it has been so for
 *   {@linkcode ServeOptions.idleTimeoutMs};
 * - a response with `Connection: close` closes its connection once it is sent, without
 *   reading the rest of the request (a body refused with 413 is not read to its end);
 * - an accept that fails (no file descriptor left) is logged, an idle connection is closed
 *   to free one, and accepting resumes after a short pause: never fatal.
 *
 * @module
 */

import { errorMessage, problemType } from "../errors.ts";
import {
  cancelHook,
  PINNED_DENO,
  type ServeOnConnection,
  serveOnConnection,
} from "./_deno_internals.ts";
import type { Logger } from "./log.ts";

/** Options of {@linkcode serveConnections}. */
export interface ServeOptions {
  /** Address to listen on, e.g. `0.0.0.0`. */
  readonly hostname: string;
  /** TCP port; 0 picks a free one. */
  readonly port: number;
  /** PEM certificate chain and key: serve HTTPS (HTTP/2 and HTTP/1.1). */
  readonly tls?: { readonly cert: string; readonly key: string } | undefined;
  /** Connections open at once, ≥ 1; more are refused or make room (module comment). */
  readonly maxConnections: number;
  /** How long a connection may stay without a request in progress, ms, > 0. */
  readonly idleTimeoutMs: number;
  /** Where refusals and accept errors are reported (`warn`, at most once a minute). */
  readonly logger: Logger;
  /** Answers a request whose handler threw. */
  readonly onError: (error: unknown) => Response | Promise<Response>;
}

/** The address a request came from, as {@linkcode serveConnections} passes it on. */
export interface ConnectionInfo {
  /** The client's address and port. */
  readonly remoteAddr: Deno.NetAddr;
}

/**
 * A request handler of {@linkcode serveConnections}. A response it returns at once, not in
 * a promise, must have its body in memory (text or bytes, not a stream): its connection
 * counts as idle again as soon as Deno's server has taken it.
 */
export type ConnectionHandler = (
  request: Request,
  info: ConnectionInfo,
) => Response | Promise<Response>;

/** A listening relay socket, from {@linkcode serveConnections}. */
export interface ServedConnections {
  /** The address it listens on (the port chosen when 0 was asked). */
  readonly addr: Deno.NetAddr;
  /** Connections open now. */
  readonly open: number;
  /**
   * Stops accepting, lets every request in progress finish, and closes every connection.
   * Resolves once they are all closed.
   */
  shutdown(): Promise<void>;
}

/** How often idle connections are looked for, ms, at most (a quarter of the timeout when shorter). */
const SWEEP_INTERVAL_MS = 1000;

/**
 * How long after its answer was handed over a connection that asked to close is cut, ms.
 * Handed over is not written: the runtime writes it at a later turn of its loop, which a
 * loaded machine can put off (with 20 ms, a 413 was cut before it was written in two runs of
 * the whole suite under load). Meanwhile a client still sending a refused body pushes what
 * loopback carries, read and discarded: with 1 s, 607 MiB of a declared gigabyte under load.
 * 300 ms is fifteen times the delay that lost answers, and a third of that push.
 */
const CUT_AFTER_MS = 300;

/** Connections being answered 503 at once; past this, a refused connection is just closed. */
const MAX_REFUSING = 32;

/** How long a refused connection may take to receive its 503 before it is closed, ms. */
const REFUSAL_MS = 2000;

/** After an accept error, the first pause and the longest, ms. */
const ACCEPT_RETRY_MS = [10, 1000] as const;

/** A refusal or accept-error message is written at most this often, ms. */
const REPORT_INTERVAL_MS = 60_000;

/** `Retry-After` of the 503 given to a connection over the cap, seconds. */
const REFUSAL_RETRY_AFTER_S = 5;

const encoder = new TextEncoder();

/** One open connection. */
interface Open {
  readonly address: string;
  /** Requests whose responses are not completely handed to the runtime yet. */
  inFlight: number;
  /** Since when it has had no request in progress, `performance.now()` ms. */
  idleSince: number;
  /** Whether it is being closed. */
  closing: boolean;
  /** Set when a response asked to close the connection. */
  closeWhenDone: boolean;
  /** Closes it at once, whatever is in progress. */
  cut(): void;
  /** Closes it once the requests in progress are answered. */
  shutdown(): void;
}

/** The 503 a connection over the cap gets, as raw HTTP/1.1. */
function refusalBytes(max: number): Uint8Array {
  const body = JSON.stringify({
    type: problemType(503),
    title: "Service Unavailable",
    status: 503,
    detail:
      `Cannot serve: the relay has ${max} connections open, each with a request in progress; try again`,
  });
  return encoder.encode(
    "HTTP/1.1 503 Service Unavailable\r\n" +
      "content-type: application/problem+json\r\n" +
      `retry-after: ${REFUSAL_RETRY_AFTER_S}\r\n` +
      "connection: close\r\n" +
      `content-length: ${encoder.encode(body).byteLength}\r\n\r\n${body}`,
  );
}

/** Writes a message at most once per {@linkcode REPORT_INTERVAL_MS}, counting the rest. */
function throttled(write: (line: string) => void): (message: string) => void {
  let last = -Infinity;
  let skipped = 0;
  return (message) => {
    const now = performance.now();
    if (now - last < REPORT_INTERVAL_MS) {
      skipped++;
      return;
    }
    last = now;
    write(skipped === 0 ? message : `${message} (${skipped} more since the last report)`);
    skipped = 0;
  };
}

/**
 * The fallback of {@linkcode serveConnections} on a Deno without a per-connection HTTP
 * server: `Deno.serve`, which has no connection cap and no idle timeout, after one warning
 * that says so.
 */
function serveWithDeno(options: ServeOptions, handler: ConnectionHandler): ServedConnections {
  options.logger.warn(
    `relay: warning: Deno ${Deno.version.deno} has no per-connection HTTP server ` +
      `(Deno[Deno.internal].serveHttpOnConnection; the relay pins Deno ${PINNED_DENO}): ` +
      "serving with Deno.serve, without the connection cap (--max-connections) and the idle " +
      "timeout, and an accept error at the open-file limit stops the server",
  );
  const server = Deno.serve({
    hostname: options.hostname,
    port: options.port,
    ...(options.tls === undefined ? {} : { cert: options.tls.cert, key: options.tls.key }),
    onListen: () => {},
    onError: options.onError,
  }, (request, info) => handler(request, { remoteAddr: info.remoteAddr as Deno.NetAddr }));
  return {
    addr: server.addr,
    open: 0,
    shutdown: () => server.shutdown(),
  };
}

/**
 * The open connections of one listener and what is done to them: admitted within the cap
 * (making room by closing an idle one, else refusing with 503), served by Deno's server
 * for one connection, cut when idle too long or when an answer asks to close, and shut
 * down together.
 */
class ConnectionPool {
  readonly #options: ServeOptions;
  readonly #handler: ConnectionHandler;
  readonly #serveOn: ServeOnConnection;
  readonly #open = new Set<Open>();
  readonly #byAddress = new Map<string, Set<Open>>();
  /** Each connection's end, resolved once Deno's server for it has finished. */
  readonly #ended = new Set<Promise<void>>();
  readonly #refusal: Uint8Array;
  readonly #reportRefusal: (message: string) => void;
  /** Reports an accept or serve error, at most once a minute. */
  readonly reportError: (message: string) => void;
  #refusing = 0;
  /** Set once the listener stops: connections close as soon as they are idle. */
  stopping = false;

  constructor(options: ServeOptions, handler: ConnectionHandler, serveOn: ServeOnConnection) {
    this.#options = options;
    this.#handler = handler;
    this.#serveOn = serveOn;
    this.#refusal = refusalBytes(options.maxConnections);
    this.#reportRefusal = throttled(options.logger.warn);
    this.reportError = throttled(options.logger.warn);
  }

  /** Connections open now. */
  get size(): number {
    return this.#open.size;
  }

  /** A request of `conn` is answered: it is idle again, or closes if it asked to. */
  #finish(conn: Open): void {
    if (--conn.inFlight > 0) return;
    conn.idleSince = performance.now();
    if (conn.closeWhenDone) {
      // Deno's server reads a request body that was not read to its end before it closes
      // (a gigabyte if the client sends one), so the connection is cut instead, once the
      // answer has had the event loop's turn to be written.
      conn.closing = true;
      setTimeout(conn.cut, CUT_AFTER_MS);
    } else if (this.stopping) conn.shutdown();
  }

  /**
   * Starts closing the oldest idle connection of the address holding the most open ones,
   * so that one client flooding the relay gives up its own connections first.
   *
   * @returns false when every open connection has a request in progress or is closing.
   */
  closeIdle(): boolean {
    let victim: Open | undefined;
    let heaviest = 0;
    for (const conns of this.#byAddress.values()) {
      if (conns.size < heaviest) continue;
      let oldest: Open | undefined;
      for (const conn of conns) {
        if (conn.inFlight > 0 || conn.closing) continue;
        if (oldest === undefined || conn.idleSince < oldest.idleSince) oldest = conn;
      }
      if (oldest !== undefined && (conns.size > heaviest || victim === undefined)) {
        victim = oldest;
        heaviest = conns.size;
      }
    }
    victim?.cut();
    return victim !== undefined;
  }

  #forget(conn: Open): void {
    if (!this.#open.delete(conn)) return;
    const mine = this.#byAddress.get(conn.address);
    mine?.delete(conn);
    if (mine?.size === 0) this.#byAddress.delete(conn.address);
  }

  /** Answers a connection over the cap 503 and closes it. */
  async #refuse(socket: Deno.Conn): Promise<void> {
    if (this.#refusing >= MAX_REFUSING) {
      socket.close();
      return;
    }
    this.#refusing++;
    const timer = setTimeout(() => {
      try {
        socket.close();
      } catch {
        // closed already
      }
    }, REFUSAL_MS);
    try {
      // Over TLS the answer is HTTP/1.1 only if that is what the client chose: an HTTP/2
      // client would read it as garbage, so it is just closed.
      if ("handshake" in socket) {
        const { alpnProtocol } = await (socket as Deno.TlsConn).handshake();
        if (alpnProtocol === "h2") return;
      }
      await socket.write(this.#refusal);
      // Read what the client sends until it has the answer and closes: closing with its
      // request unread would reset the connection and could lose the answer.
      await socket.closeWrite();
      const sink = new Uint8Array(16 * 1024);
      while (await socket.read(sink) !== null) { /* discard */ }
    } catch {
      // the client went away, or the timer closed the connection
    } finally {
      clearTimeout(timer);
      this.#refusing--;
      try {
        socket.close();
      } catch {
        // closed by the timer
      }
    }
  }

  /** Connections whose closing has begun. */
  #closing(): number {
    let n = 0;
    for (const conn of this.#open) if (conn.closing) n++;
    return n;
  }

  /** Takes an accepted connection in, or refuses it when the cap is reached. */
  admit(socket: Deno.Conn): void {
    if (this.stopping) {
      socket.close();
      return;
    }
    const max = this.#options.maxConnections;
    const size = this.#open.size;
    if (size >= max && size - this.#closing() >= max && !this.closeIdle()) {
      this.#reportRefusal(
        `relay: warning: ${size} connections open, each with a request in progress ` +
          `(--max-connections ${max}): refusing new ones with 503`,
      );
      void this.#refuse(socket);
      return;
    }
    this.#serve(socket);
  }

  /** Serves an admitted connection with Deno's server for it. */
  #serve(socket: Deno.Conn): void {
    const remoteAddr = socket.remoteAddr as Deno.NetAddr;
    const hook = cancelHook();
    let server: ReturnType<ServeOnConnection> | undefined;
    const conn: Open = {
      address: remoteAddr.hostname,
      inFlight: 0,
      idleSince: performance.now(),
      closing: false,
      closeWhenDone: false,
      cut() {
        conn.closing = true;
        hook.cancel();
      },
      shutdown() {
        // After this, the connection can no longer be cut: Deno's graceful close takes it
        // over. Only the relay's own shutdown uses it, under its own deadline.
        conn.closing = true;
        void server?.shutdown().catch(() => {});
      },
    };
    this.#open.add(conn);
    const mine = this.#byAddress.get(conn.address);
    if (mine === undefined) this.#byAddress.set(conn.address, new Set([conn]));
    else mine.add(conn);
    try {
      server = this.#serveOn(
        socket,
        hook.signal,
        this.#answer(conn, { remoteAddr }),
        this.#options.onError,
        () => {},
      );
    } catch (error) {
      this.#forget(conn);
      try {
        socket.close();
      } catch {
        // already closed
      }
      this.reportError(`relay: cannot serve a connection: ${errorMessage(error)}`);
      return;
    }
    // A client that resets the connection rejects `finished`: that ends it like any close.
    const done = server.finished.catch(() => {}).finally(() => {
      this.#forget(conn);
      this.#ended.delete(done);
    });
    this.#ended.add(done);
  }

  /** The handler Deno's server calls for each request of `conn`. */
  #answer(conn: Open, info: ConnectionInfo) {
    // An answer that closes its connection is an error (413, 408, 503): its headers are
    // read only then, since reading a response's headers makes Deno build a `Headers`
    // object for it (measured: about a fifth of a cached read's time).
    const closeIfAsked = (response: Response) => {
      if (response.status >= 400 && response.headers.get("connection") === "close") {
        conn.closeWhenDone = true;
      }
      return response;
    };
    const finish = () => this.#finish(conn);
    // A response returned at once has its body in memory (ConnectionHandler), which Deno's
    // server takes whole in the microtask queued after this handler returns: finishing two
    // microtasks later is after that, as `served.completed` would say, without the
    // promise, the callbacks and the reaction that asking for it costs per request
    // (measured: docs/benchmarks.md, "Reads").
    const finishLater = () => queueMicrotask(finish);
    return (request: Request, served: Deno.ServeHandlerInfo) => {
      conn.inFlight++;
      let response: Response | Promise<Response>;
      try {
        response = this.#handler(request, info);
      } catch (error) {
        served.completed.then(finish, finish); // Deno answers with onError
        throw error;
      }
      if (response instanceof Promise) {
        served.completed.then(finish, finish);
        return response.then(closeIfAsked);
      }
      queueMicrotask(finishLater);
      return closeIfAsked(response);
    };
  }

  /** Cuts every connection without a request in progress for `idleTimeoutMs`. */
  sweep(): void {
    const now = performance.now();
    for (const conn of this.#open) {
      if (
        !conn.closing && conn.inFlight === 0 && now - conn.idleSince >= this.#options.idleTimeoutMs
      ) {
        conn.cut();
      }
    }
  }

  /** Closes every connection once its requests are answered; resolves when all have. */
  async shutdown(): Promise<void> {
    this.stopping = true;
    for (const conn of this.#open) conn.shutdown();
    await Promise.all([...this.#ended]);
  }
}

/**
 * Accepts connections until the pool stops; an accept that fails (no file descriptor
 * left) is reported, an idle connection closed to free one, and accepting resumes after a
 * pause that doubles up to {@linkcode ACCEPT_RETRY_MS}'s longest.
 */
async function acceptLoop(listener: Deno.Listener, pool: ConnectionPool): Promise<void> {
  let pause: number = ACCEPT_RETRY_MS[0];
  while (!pool.stopping) {
    let socket: Deno.Conn;
    try {
      socket = await listener.accept();
    } catch (error) {
      if (pool.stopping || error instanceof Deno.errors.BadResource) return;
      const freed = pool.closeIdle();
      pool.reportError(
        `relay: warning: cannot accept a connection (${errorMessage(error)}) with ` +
          `${pool.size} open; ${freed ? "closed an idle one and retrying" : "retrying"}: ` +
          "raise the open-file limit (LimitNOFILE) or lower --max-connections",
      );
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, ACCEPT_RETRY_MS[1]);
      continue;
    }
    pause = ACCEPT_RETRY_MS[0];
    pool.admit(socket);
  }
}

/**
 * Listens on `hostname:port` and serves each connection with `handler`, within the cap on
 * open connections and the idle timeout (module comment).
 *
 * @example
 * ```ts
 * import { Logger } from "./log.ts";
 *
 * const served = serveConnections(
 *   {
 *     hostname: "127.0.0.1",
 *     port: 0,
 *     maxConnections: 512,
 *     idleTimeoutMs: 30_000,
 *     logger: new Logger(),
 *     onError: () => new Response("Internal error", { status: 500 }),
 *   },
 *   (_request) => new Response("OK"),
 * );
 * ```
 * @throws {Deno.errors.AddrInUse} and the other errors of `Deno.listen` / `Deno.listenTls`
 *   (e.g. a certificate or key that TLS cannot use).
 */
export function serveConnections(
  options: ServeOptions,
  handler: ConnectionHandler,
): ServedConnections {
  const serveOn = serveOnConnection();
  if (serveOn === undefined) return serveWithDeno(options, handler);
  const listener: Deno.Listener = options.tls === undefined
    ? Deno.listen({ hostname: options.hostname, port: options.port })
    : Deno.listenTls({
      hostname: options.hostname,
      port: options.port,
      cert: options.tls.cert,
      key: options.tls.key,
      alpnProtocols: ["h2", "http/1.1"],
    });
  const pool = new ConnectionPool(options, handler, serveOn);
  const accepting = acceptLoop(listener, pool);
  const sweep = setInterval(
    () => pool.sweep(),
    Math.min(SWEEP_INTERVAL_MS, Math.max(10, Math.floor(options.idleTimeoutMs / 4))),
  );
  Deno.unrefTimer(sweep);
  return {
    addr: listener.addr as Deno.NetAddr,
    get open() {
      return pool.size;
    },
    async shutdown() {
      pool.stopping = true;
      try {
        listener.close();
      } catch {
        // already closed
      }
      await accepting;
      clearInterval(sweep);
      await pool.shutdown();
    },
  };
}

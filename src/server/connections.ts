/**
 * The relay's listening socket and the connections it accepts: a cap on open connections,
 * an idle timeout, and an accept loop that survives running out of file descriptors
 * (docs/operations.md, "Connections and file descriptors").
 *
 * `Deno.serve` accepts connections itself, with no limit, no header or idle timeout and no
 * hook per connection, and its accept loop ends the server on the first accept error: at
 * the process's open-file limit it threw `Too many open files` and the relay exited. So the
 * relay accepts connections itself (`Deno.listen`, `Deno.listenTls`) and hands each one to
 * Deno's HTTP server for that connection alone: the runtime's `serveHttpOnConnection`, the
 * function `Deno.serve` runs on every connection it accepts. It is reached through
 * `Deno[Deno.internal]` because Deno has no public name for it; the relay pins its Deno
 * version, and {@linkcode serveConnections} refuses to start without it rather than run
 * unprotected. (Deno's `node:http` server has these timeouts and limits, but measured at
 * 0.58 × the throughput of `Deno.serve` on a bare answer; serving each connection with
 * Deno's own server keeps its speed.)
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

/** A request handler of {@linkcode serveConnections}. */
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

/** Deno's server for one connection, as `Deno.serve` calls it for each it accepts. */
type ServeOnConnection = (
  connection: Deno.Conn,
  signal: AbortSignal,
  handler: (request: Request, info: Deno.ServeHandlerInfo) => Response | Promise<Response>,
  onError: (error: unknown) => Response | Promise<Response>,
  onListen: () => void,
) => { finished: Promise<void>; shutdown(): Promise<void> };

/**
 * Deno's per-connection HTTP server, or `undefined` in a Deno that no longer has it.
 */
function serveOnConnection(): ServeOnConnection | undefined {
  const deno = Deno as unknown as Record<symbol, Record<string, unknown> | undefined>;
  const internal = (Deno as unknown as { internal?: symbol }).internal;
  const serve = internal === undefined ? undefined : deno[internal]?.serveHttpOnConnection;
  return typeof serve === "function" ? serve as ServeOnConnection : undefined;
}

/** How often idle connections are looked for, ms, at most (a quarter of the timeout when shorter). */
const SWEEP_INTERVAL_MS = 1000;

/**
 * How long after its answer was handed over a connection that asked to close is cut, ms:
 * time enough for the runtime to write a short answer, little for a client still sending
 * a body to push more (20 ms of a gigabit LAN is 2.5 MB, read and discarded).
 */
const CUT_AFTER_MS = 20;

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

/**
 * A stand-in for the `AbortSignal` that Deno's per-connection server takes: the server
 * only adds an `abort` listener (which cancels the connection), and calling that listener
 * here, inside `try`, cannot throw into the event loop when the connection has already
 * closed (a real signal would report the error as uncaught and end the process).
 */
function cancelHook(): { signal: AbortSignal; cancel(): void } {
  let listener: (() => void) | undefined;
  const signal = {
    aborted: false,
    addEventListener(_type: string, callback: () => void) {
      listener = callback;
    },
    removeEventListener() {
      listener = undefined;
    },
  } as unknown as AbortSignal;
  return {
    signal,
    cancel() {
      const callback = listener;
      listener = undefined;
      try {
        callback?.();
      } catch {
        // the connection has closed already
      }
    },
  };
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
 * Listens on `hostname:port` and serves each connection with `handler`, within the cap on
 * open connections and the idle timeout (module comment).
 *
 * @example
 * ```ts
 * const served = serveConnections(
 *   { hostname: "127.0.0.1", port: 0, maxConnections: 512, idleTimeoutMs: 30_000, logger, onError },
 *   (request) => new Response("OK"),
 * );
 * ```
 * @throws {Error} when this Deno has no per-connection HTTP server (a Deno other than the
 *   pinned one).
 * @throws {Deno.errors.AddrInUse} and the other errors of `Deno.listen` / `Deno.listenTls`
 *   (e.g. a certificate or key that TLS cannot use).
 */
export function serveConnections(
  options: ServeOptions,
  handler: ConnectionHandler,
): ServedConnections {
  const serveOn = serveOnConnection();
  if (serveOn === undefined) {
    throw new Error(
      `Deno ${Deno.version.deno} cannot serve HTTP on a connection the relay accepted ` +
        "(serveHttpOnConnection is gone): run the relay with the Deno version it pins",
    );
  }
  const { maxConnections, idleTimeoutMs, logger } = options;
  const listener: Deno.Listener = options.tls === undefined
    ? Deno.listen({ hostname: options.hostname, port: options.port })
    : Deno.listenTls({
      hostname: options.hostname,
      port: options.port,
      cert: options.tls.cert,
      key: options.tls.key,
      alpnProtocols: ["h2", "http/1.1"],
    });
  const addr = listener.addr as Deno.NetAddr;
  const open = new Set<Open>();
  const byAddress = new Map<string, Set<Open>>();
  const ended = new Set<Promise<void>>();
  let refusing = 0;
  let stopping = false;
  const refusal = refusalBytes(maxConnections);
  const reportRefusal = throttled(logger.warn);
  const reportAcceptError = throttled(logger.warn);

  const finish = (conn: Open) => {
    if (--conn.inFlight > 0) return;
    conn.idleSince = performance.now();
    if (conn.closeWhenDone) {
      // Deno's server reads a request body that was not read to its end before it closes
      // (a gigabyte if the client sends one), so the connection is cut instead, once the
      // answer has had the event loop's turn to be written.
      conn.closing = true;
      setTimeout(conn.cut, CUT_AFTER_MS);
    } else if (stopping) conn.shutdown();
  };

  /**
   * Starts closing the oldest idle connection of the address holding the most open ones,
   * so that one client flooding the relay gives up its own connections first.
   *
   * @returns false when every open connection has a request in progress or is closing.
   */
  const closeIdle = (): boolean => {
    let victim: Open | undefined;
    let heaviest = 0;
    for (const conns of byAddress.values()) {
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
  };

  const forget = (conn: Open) => {
    if (!open.delete(conn)) return;
    const mine = byAddress.get(conn.address);
    mine?.delete(conn);
    if (mine?.size === 0) byAddress.delete(conn.address);
  };

  const refuse = async (socket: Deno.Conn) => {
    if (refusing >= MAX_REFUSING) {
      socket.close();
      return;
    }
    refusing++;
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
      await socket.write(refusal);
      // Read what the client sends until it has the answer and closes: closing with its
      // request unread would reset the connection and could lose the answer.
      await socket.closeWrite();
      const sink = new Uint8Array(16 * 1024);
      while (await socket.read(sink) !== null) { /* discard */ }
    } catch {
      // the client went away, or the timer closed the connection
    } finally {
      clearTimeout(timer);
      refusing--;
      try {
        socket.close();
      } catch {
        // closed by the timer
      }
    }
  };

  const admit = (socket: Deno.Conn) => {
    if (stopping) {
      socket.close();
      return;
    }
    if (
      open.size >= maxConnections && open.size - closing() >= maxConnections && !closeIdle()
    ) {
      reportRefusal(
        `relay: warning: ${open.size} connections open, each with a request in progress ` +
          `(--max-connections ${maxConnections}): refusing new ones with 503`,
      );
      void refuse(socket);
      return;
    }
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
    open.add(conn);
    const mine = byAddress.get(conn.address);
    if (mine === undefined) byAddress.set(conn.address, new Set([conn]));
    else mine.add(conn);
    const info: ConnectionInfo = { remoteAddr };
    // An answer that closes its connection is an error (413, 408, 503): its headers are
    // read only then, since reading a response's headers makes Deno build a `Headers`
    // object for it (measured: about a fifth of a cached read's time).
    const closeIfAsked = (response: Response) => {
      if (response.status >= 400 && response.headers.get("connection") === "close") {
        conn.closeWhenDone = true;
      }
      return response;
    };
    const serve = (request: Request, served: Deno.ServeHandlerInfo) => {
      conn.inFlight++;
      served.completed.then(() => finish(conn), () => finish(conn));
      const response = handler(request, info);
      return response instanceof Promise ? response.then(closeIfAsked) : closeIfAsked(response);
    };
    try {
      server = serveOn(socket, hook.signal, serve, options.onError, () => {});
    } catch (error) {
      forget(conn);
      try {
        socket.close();
      } catch {
        // already closed
      }
      reportAcceptError(`relay: cannot serve a connection: ${errorMessage(error)}`);
      return;
    }
    // A client that resets the connection rejects `finished`: that ends it like any close.
    const done = server.finished.catch(() => {}).finally(() => {
      forget(conn);
      ended.delete(done);
    });
    ended.add(done);
  };

  /** Connections whose closing has begun. */
  const closing = () => {
    let n = 0;
    for (const conn of open) if (conn.closing) n++;
    return n;
  };

  const accepting = (async () => {
    let pause: number = ACCEPT_RETRY_MS[0];
    while (!stopping) {
      let socket: Deno.Conn;
      try {
        socket = await listener.accept();
      } catch (error) {
        if (stopping || error instanceof Deno.errors.BadResource) return;
        const freed = closeIdle();
        reportAcceptError(
          `relay: warning: cannot accept a connection (${errorMessage(error)}) with ` +
            `${open.size} open; ${freed ? "closed an idle one and retrying" : "retrying"}: ` +
            "raise the open-file limit (LimitNOFILE) or lower --max-connections",
        );
        await new Promise((resolve) => setTimeout(resolve, pause));
        pause = Math.min(pause * 2, ACCEPT_RETRY_MS[1]);
        continue;
      }
      pause = ACCEPT_RETRY_MS[0];
      admit(socket);
    }
  })();

  const sweep = setInterval(() => {
    const now = performance.now();
    for (const conn of open) {
      if (!conn.closing && conn.inFlight === 0 && now - conn.idleSince >= idleTimeoutMs) {
        conn.cut();
      }
    }
  }, Math.min(SWEEP_INTERVAL_MS, Math.max(10, Math.floor(idleTimeoutMs / 4))));
  Deno.unrefTimer(sweep);

  return {
    addr,
    get open() {
      return open.size;
    },
    async shutdown() {
      stopping = true;
      try {
        listener.close();
      } catch {
        // already closed
      }
      await accepting;
      clearInterval(sweep);
      for (const conn of open) conn.shutdown();
      await Promise.all([...ended]);
    },
  };
}

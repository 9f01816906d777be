/**
 * Running the relay: open the database under its lock, resolve the API key, serve the
 * app with `Deno.serve`, and shut down gracefully (contract C71, C72, C73).
 *
 * @module
 */

import { dirname, join } from "node:path";
import { resolveApiKey } from "../access/api_key.ts";
import { createApp } from "./app.ts";
import { type Config, ConfigError } from "../config/config.ts";
import { errorMessage, problemResponse } from "../errors.ts";
import {
  missingConfiguration,
  publishConfig,
  TARGETS,
  withTargetsFile,
} from "../publish/fan_out.ts";
import { loadTargetsFile } from "../publish/targets.ts";
import { FailedPublishes } from "../publish/failed.ts";
import { keysMatch, WEAK_KEY_LENGTH } from "./auth.ts";
import {
  type ConnectionHandler,
  type ConnectionInfo,
  serveConnections,
  type ServedConnections,
  type ServeOptions,
} from "./connections.ts";
import { BatchedLog, droppedLinesNotice, Logger, messageLine } from "./log.ts";
import { RelayMetrics } from "./metrics.ts";
import { KeyRing } from "../access/named_keys.ts";
import { lanAddress, pairingLines, pairingLink } from "../access/pairing.ts";
import {
  damagedDatabaseError,
  openLockedDatabase,
  type UnsafeDatabaseError,
} from "../store/database.ts";
import { checkDatabase, keepCounters } from "../store/integrity.ts";
import { createStore, type Store } from "../store/store.ts";
import { resolveAppId } from "./builtin_wiring.ts";
import { createBuiltinServices } from "./routes/downstream.ts";
import { IdleMemory } from "./idle_memory.ts";

/** `bytes` in MiB with one decimal. */
function mib(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1);
}

/**
 * How long in-flight requests may take to finish after SIGINT/SIGTERM before the relay
 * exits anyway, ms. Long enough for a 768 KiB body on a slow phone link; short enough
 * that systemd's default 90 s stop timeout never has to SIGKILL.
 */
export const SHUTDOWN_GRACE_MS = 10_000;

/**
 * Longest wait for the log's last lines when the relay stops, ms: an output nobody reads
 * (a stalled journal, a paused terminal) must not keep it from exiting.
 */
export const LOG_FLUSH_GRACE_MS = 2_000;

/**
 * Reads a PEM file for TLS (issue 7).
 *
 * @throws {ConfigError} when it cannot be read or holds no PEM block.
 */
function readPem(path: string, option: string): string {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (error) {
    throw new ConfigError(
      `invalid ${option} "${path}": cannot read it (${errorMessage(error)})`,
    );
  }
  if (!text.includes("-----BEGIN ")) {
    throw new ConfigError(`invalid ${option} "${path}": not a PEM file`);
  }
  return text;
}

/**
 * {@linkcode serveConnections}, with a certificate or key that TLS cannot use reported as a
 * configuration error naming the options (C70) rather than Deno's bare message.
 *
 * @throws {ConfigError} when `options.tls` is given and Deno rejects it.
 */
function serveOrExplain(options: ServeOptions, handler: ConnectionHandler): ServedConnections {
  try {
    return serveConnections(options, handler);
  } catch (error) {
    if (options.tls === undefined || error instanceof Deno.errors.AddrInUse) throw error;
    throw new ConfigError(
      `invalid --tls-cert or --tls-key: ${errorMessage(error)}`,
    );
  }
}

/** A relay that is serving. */
export interface RunningRelay {
  /** The address it listens on, e.g. `http://0.0.0.0:8787` (`https://` with TLS). */
  readonly url: string;
  /** The relay's log, in the configured format and level, for the caller's own messages. */
  readonly logger: Logger;
  /**
   * Stops accepting, waits up to {@linkcode SHUTDOWN_GRACE_MS} for in-flight requests,
   * closes KV and releases the lock (C72).
   *
   * @returns `true` when every request finished in time.
   */
  shutdown(): Promise<boolean>;
  /**
   * Writes the lines the log still holds: the caller's last step after its last line. It
   * waits for an output that does not take them at most what is left of
   * {@linkcode LOG_FLUSH_GRACE_MS}, counted from its first call, so that a stop (whose
   * {@linkcode RunningRelay.shutdown} calls it first) waits for its log that long in all.
   * Call it only to stop: after its grace is spent, it no longer waits.
   */
  flushLog(): Promise<void>;
  /**
   * Settles when the relay must stop by itself: it found its database damaged while serving
   * (docs/operations.md, "A damaged database"). The error's message is the line to log, with
   * the steps that recover; the caller stops the relay and exits 2, as on a damaged database
   * at start, so that systemd does not restart it in a loop. Never rejects.
   */
  readonly failed: Promise<UnsafeDatabaseError>;
}

/** A job that runs beside the server on its open store, e.g. scheduled backups. */
export interface BackgroundJob {
  /** Stops the job; waits for work under way. Called before the store closes; never throws. */
  stop(): Promise<void>;
}

/** Options of {@linkcode startRelay}. */
export interface StartOptions {
  /** Where every log line goes (errors too); default: standard output and error. */
  log?: (line: string) => void;
  /** The relay's version, for the start line. */
  version?: string;
  /** Print a QR code and link that pair a phone's web app with the main key. */
  pairing?: boolean;
  /**
   * Jobs started once the relay serves, each given the store and the log, and stopped at
   * shutdown before the store closes. The command line starts scheduled backups this way,
   * so that the server needs to know nothing of the backup format.
   */
  jobs?: readonly ((store: Store, logger: Logger) => BackgroundJob)[];
}

/**
 * Starts the relay (C71–C73). Prints one line with the version, the data file and what is
 * enabled, one saying where the API key comes from, then
 * `relay listening on http://<host>:<port>` (`https://` with `--tls-cert`, issue 7).
 *
 * @param config The validated configuration; its `logFormat` and `logLevel` shape every
 *   line written.
 * @param options.log Where every log line goes (errors too); default standard output for
 *   messages and the access log, standard error for errors, each through a bounded
 *   {@linkcode BatchedLog} (messages are written at once, access lines within 20 ms).
 * @param options.version The relay's version, for the start line.
 * @param options.pairing Print a QR code and link that pair a phone's web app with the
 *   main key (issue 7); the command line asks for it when standard output is a terminal,
 *   so that the key never lands in a service's journal.
 * @param options.jobs Background jobs on the open store ({@linkcode StartOptions.jobs}).
 * @throws {ConfigError} for a key file that cannot be read or written, an invalid keys
 *   file, or TLS files that cannot be read.
 * @throws {DatabaseInUseError} when another relay holds the database.
 * @throws {UnsafeDatabaseError} when the database has more than one name, is damaged, or
 *   holds less than the relay wrote to it (docs/operations.md, damaged files).
 * @throws {Deno.errors.AddrInUse} and other errors of `Deno.serve` and `Deno.openKv`.
 */
export async function startRelay(
  config: Config,
  options: StartOptions = {},
): Promise<RunningRelay> {
  // Unless the caller collects lines itself, every line goes through a bounded batch: access
  // lines within 20 ms, messages at once, errors to standard error (docs/configuration.md,
  // "Logging"). A write to an output nobody reads then never stops the relay.
  const notice = (n: number) => messageLine(config.logFormat, "warn", droppedLinesNotice(n));
  const outputs = options.log === undefined
    ? {
      out: new BatchedLog(Deno.stdout, { notice }),
      err: new BatchedLog(Deno.stderr, { notice }),
    }
    : undefined;
  const logger = new Logger({
    format: config.logFormat,
    level: config.logLevel,
    ...(outputs === undefined ? { write: options.log! } : {
      write: outputs.out.lineNow,
      writeError: outputs.err.lineNow,
      writeAccess: outputs.out.line,
    }),
  });
  // One grace for all the waits of a stop (or of a failed start), counted from the first.
  let flushDeadline: number | undefined;
  const flushLog = async () => {
    flushDeadline ??= performance.now() + LOG_FLUSH_GRACE_MS;
    const left = Math.max(0, flushDeadline - performance.now());
    await Promise.all([outputs?.out.flush(left), outputs?.err.flush(left)]);
  };
  const log = logger.info;
  const database = await openLockedDatabase(config.db);
  const { path: db, kv } = database;
  try {
    const apiKey = await resolveApiKey({
      fromEnv: config.secrets.apiKey,
      keyFile: config.apiKeyFile,
      db,
    });
    const keyRing = new KeyRing(config.keysFile, Date.now, logger.warn);
    const tls = config.tls === undefined ? undefined : {
      cert: readPem(config.tls.certFile, "--tls-cert"),
      key: readPem(config.tls.keyFile, "--tls-key"),
    };
    const metrics = new RelayMetrics();
    // Storage faults are logged once the database passed its check: before, they stop the
    // relay with their own line.
    let checked = false;
    const failed = Promise.withResolvers<UnsafeDatabaseError>();
    const store = createStore(kv, {
      dedupeWindowMs: config.dedupeWindowMs,
      onCommit: metrics.commit,
      path: db,
      maxItemBytes: config.maxBodyBytes,
      onHealthChange: (verdict) => {
        if (!checked) return;
        if (verdict.ok) log("relay: storage: the database commits again");
        else logger.error(`relay: storage: ${verdict.reason}: see docs/operations.md`);
        // Deno KV's background tasks die on damaged pages: stop first, with the steps.
        if (!verdict.ok && verdict.kind === "damaged") {
          failed.resolve(damagedDatabaseError(db, errorMessage(verdict.cause)));
        }
      },
    });
    const warning = await checkDatabase(store, db);
    if (warning !== undefined) logger.warn(warning);
    checked = true;
    const publish = withTargetsFile(
      publishConfig(config),
      loadTargetsFile(
        config.targetsFile.path,
        (name) => Deno.env.get(name),
        config.targetsFile.required,
      ),
    );
    // The built-in notes store, blog and podcast (docs/publishing-builtin.md).
    const appId = await resolveAppId(config.secrets.appId, dirname(db)).catch((error) => {
      throw new ConfigError(`cannot set up the app id: ${errorMessage(error)}`);
    });
    const builtin = createBuiltinServices({
      dataDir: dirname(db),
      authorize: (key, scope) =>
        keysMatch(key, apiKey.key) || (keyRing.find(key)?.scopes.includes(scope) ?? false),
      appId: appId.appId,
      publicUrl: config.publicUrl,
      log,
      logError: logger.error,
      ttsCommand: config.ttsCommand,
      privateBlog: config.privateBlog,
      privatePodcast: config.privatePodcast,
      retention: { keep: config.podcastKeep, maxDiskBytes: config.podcastMaxDiskBytes },
      maxBodyBytes: config.maxBodyBytes,
    });
    // Ends long-polls and results streams when the relay stops (C72).
    const closing = new AbortController();
    const app = createApp({
      store,
      apiKey: apiKey.key,
      keyRing,
      qaHosts: config.qaHosts,
      maxBodyBytes: config.maxBodyBytes,
      publish,
      logger,
      metrics,
      closing: closing.signal,
      builtin: { services: builtin, appId: appId.appId, publicUrl: config.publicUrl },
      failed: await FailedPublishes.open(
        join(dirname(db), "failed-publishes.json"),
        Date.now,
        logger.warn,
      ),
      allowedOrigins: config.allowedOrigins,
      maxStreams: config.maxStreams,
      maxStreamsPerKey: config.maxStreamsPerKey,
    });
    const adapted = TARGETS.filter((t) => publish.adapters?.[t] !== undefined);
    const external = TARGETS.filter((t) =>
      !adapted.includes(t) && missingConfiguration([t], publish).length === 0
    );
    const internal = TARGETS.filter((t) => !adapted.includes(t) && publish.urls[t] === undefined);
    log(
      `relay ${options.version ?? ""} (deno ${Deno.version.deno}): data ${db}; ` +
        `dedupe window ${config.dedupeWindowMs} ms; body limit ${config.maxBodyBytes} bytes; ` +
        `publishing to ${
          [
            ...(internal.length > 0 ? [`built-in ${internal.join(", ")}`] : []),
            ...(external.length > 0 ? [`external ${external.join(", ")}`] : []),
            ...adapted.map((t) => `${t} via ${publish.adapters?.[t]?.kind}`),
          ].join("; ")
        }; read aloud by ${builtin.podcast.engineName}`,
    );
    if (appId.source === "generated") {
      log(`relay: first start: generated the podcast app id in ${appId.path}`);
    }
    if (apiKey.source === "environment") log("relay: API key from RELAY_API_KEY");
    else if (apiKey.source === "generated") {
      log(
        `relay: first start: generated an API key in ${apiKey.path} (read it with: cat ${apiKey.path})`,
      );
    } else log(`relay: API key from ${apiKey.path}`);
    if (keyRing.size > 0) log(`relay: ${keyRing.size} named key(s) from ${config.keysFile}`);
    if (apiKey.key.length < WEAK_KEY_LENGTH) {
      logger.warn(
        `relay: warning: the API key is ${apiKey.key.length} characters long; ` +
          `use at least ${WEAK_KEY_LENGTH} random characters (delete the key file to get a generated one)`,
      );
    }

    // Deno's server.shutdown() cuts off request bodies still being read (measured: the
    // handler's read fails with BadResource), so the relay drains its own handlers first:
    // it counts requests in its handler, answers new ones 503 while draining, and calls
    // server.shutdown() only once the count reaches zero.
    let inFlight = 0;
    let draining = false;
    const idle = Promise.withResolvers<void>();
    const done = () => {
      if (--inFlight === 0 && draining) idle.resolve();
    };
    // Memory given back once the relay is idle (issue 19).
    const idleMemory = new IdleMemory({
      collected: ({ rssBefore, rssAfter, heapBefore, heapAfter, ms }) =>
        logger.debug(
          `relay: idle: gave back memory in ${ms.toFixed(0)} ms (resident ${mib(rssBefore)} → ` +
            `${mib(rssAfter)} MiB, heap ${mib(heapBefore)} → ${mib(heapAfter)} MiB)`,
        ),
      unavailable: (error) =>
        logger.debug(`relay: idle: cannot give back memory: ${errorMessage(error)}`),
    });
    const handler = (
      request: Request,
      info: ConnectionInfo,
    ): Response | Promise<Response> => {
      idleMemory.request();
      if (draining) {
        return problemResponse(503, "Cannot serve: the relay is shutting down; try again", {
          "connection": "close",
          "retry-after": "5",
        });
      }
      const answer = app.fetch(request, info); // a rejection still reaches onError below
      // A cached read is answered at once (a `Response`): nothing of it is left to wait for.
      if (answer instanceof Promise) {
        inFlight++;
        answer.then(done, done);
      }
      return answer;
    };

    const server = serveOrExplain({
      hostname: config.hostname,
      port: config.port,
      tls,
      maxConnections: config.maxConnections,
      idleTimeoutMs: config.idleTimeoutMs,
      logger,
      onError: (error) => {
        logger.error("relay: unexpected error", error);
        return problemResponse(500, "Internal error: the relay logged the cause");
      },
    }, handler);
    const addr = server.addr;
    const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
    const url = `${tls === undefined ? "http" : "https"}://${host}:${addr.port}`;
    log(`relay listening on ${url}`);
    if (options.pairing && tls !== undefined) {
      // A phone checks the certificate's name, which an address found here cannot be.
      log(
        "relay: to pair a phone: relay pair --name <phone> " +
          `--app-url https://<the certificate's name>:${addr.port}`,
      );
    } else if (options.pairing) {
      const reachable = `http://${lanAddress(addr.hostname)}:${addr.port}`;
      void pairingLines(pairingLink(reachable, apiKey.key)).then((lines) => {
        log(
          "relay: to pair a phone, scan this or open the link " +
            `(again: relay pair --app-url ${reachable}):`,
        );
        for (const line of lines) log(line);
      });
    }
    const counters = keepCounters(
      store,
      db,
      (error) => logger.warn(`relay: cannot write the counters file: ${errorMessage(error)}`),
    );
    const jobs = (options.jobs ?? []).map((start) => start(store, logger));
    builtin.start();
    // Last use of named keys reaches its file within a minute, and only when there was one.
    const recordUses = setInterval(() => keyRing.flush(), 60_000);
    Deno.unrefTimer(recordUses);
    const stopIdleMemory = idleMemory.start();

    return {
      url,
      logger,
      async shutdown() {
        draining = true;
        stopIdleMemory(); // no collection's pause during the drain
        closing.abort();
        if (inFlight === 0) idle.resolve();
        let timer: ReturnType<typeof setTimeout> | undefined;
        const drained = await Promise.race([
          idle.promise.then(() => server.shutdown()).then(() => true),
          new Promise<boolean>((done) => {
            timer = setTimeout(() => done(false), SHUTDOWN_GRACE_MS);
          }),
        ]);
        clearTimeout(timer);
        await builtin.stop();
        await Promise.all(jobs.map((job) => job.stop()));
        await counters.stop();
        clearInterval(recordUses);
        keyRing.flush();
        database.close();
        await flushLog();
        return drained;
      },
      flushLog,
      failed: failed.promise,
    };
  } catch (error) {
    database.close();
    // What it logged before failing (a warning, the key's source) is written before the
    // caller reports the failure and the process exits.
    await flushLog();
    throw error;
  }
}

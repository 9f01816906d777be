/**
 * Running the relay: open the database under its lock, resolve the API key, serve the
 * app with `Deno.serve`, and shut down gracefully.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { type ApiKey, resolveApiKey } from "../access/api_key.ts";
import { createApp, type RelayApp } from "./app.ts";
import { addressFile, type Config, ConfigError } from "../config/config.ts";
import { errorMessage, problemResponse } from "../errors.ts";
import {
  missingConfiguration,
  type PublishConfig,
  publishConfig,
  TARGETS,
  withTargetsFile,
} from "../publish/fan_out.ts";
import { loadTargetsFile } from "../publish/targets.ts";
import { FailedPublishes } from "../publish/failed.ts";
import { WEAK_KEY_LENGTH } from "./auth.ts";
import {
  type ConnectionHandler,
  serveConnections,
  type ServedConnections,
  type ServeOptions,
} from "./connections.ts";
import { Logger, relayLogging } from "./log.ts";
import { RelayMetrics } from "./metrics.ts";
import { KeyRing } from "../access/named_keys.ts";
import { lanAddress, pairingLines, pairingLink } from "../access/pairing.ts";
import {
  damagedDatabaseError,
  openLockedDatabase,
  type UnsafeDatabaseError,
} from "../store/database.ts";
import { checkDatabase, keepCounters } from "../store/integrity.ts";
import { createStore, roomForContent, type Store } from "../store/store.ts";
import { type AppId, resolveAppId } from "../access/app_id.ts";
import { type BuiltinServices, createBuiltinServices } from "../builtin/services.ts";
import type { PodcastStep } from "../builtin/podcast.ts";
import { openSearch, type RelaySearch } from "./searching.ts";
import { IdleMemory } from "./idle_memory.ts";
import { writePrivateFile } from "../util/files.ts";
import { Drain } from "./drain.ts";
import { CommandEngine } from "../builtin/speech_command.ts";

/** `bytes` in MiB with one decimal. */
function mib(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1);
}

/**
 * Longest wait for the log's last lines when the relay stops, ms: an output nobody reads
 * (a stalled journal, a paused terminal) must not keep it from exiting.
 */
export const LOG_FLUSH_GRACE_MS = 2_000;

/**
 * Reads a PEM file for TLS.
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
 * configuration error naming the options rather than Deno's bare message.
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
   * Stops accepting, waits up to the drain's grace (`SHUTDOWN_GRACE_MS` in drain.ts) for
   * in-flight requests, closes KV and releases the lock.
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
   * (docs/faults.md, "A damaged database"). The error's message is the line to log, with
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
  /**
   * For crash tests only (tests/reliability/_paused_relay.ts): the step where the podcast's
   * worker stops for good, so that a test can kill the relay exactly there. The command line
   * never sets it.
   */
  podcastPauseAt?: PodcastStep | undefined;
}

/** What a relay is made of once built, before it listens ({@linkcode buildRelay}). */
interface RelayParts {
  readonly config: Config;
  readonly logger: Logger;
  /** The database file's path. */
  readonly db: string;
  readonly apiKey: ApiKey;
  readonly appId: AppId;
  readonly keyRing: KeyRing;
  readonly tls: { readonly cert: string; readonly key: string } | undefined;
  readonly store: Store;
  readonly publish: PublishConfig;
  readonly builtin: BuiltinServices;
  /** The search index beside the store, and what keeps it current. */
  readonly search: RelaySearch;
  readonly app: RelayApp;
  /** Aborted when the relay stops: long-polls and results streams end at once. */
  readonly closing: AbortController;
  /** Resolved when the database is found damaged while serving. */
  readonly failed: PromiseWithResolvers<UnsafeDatabaseError>;
}

/**
 * The store over the open database, checked before use; storage faults are logged once it
 * passed its check (before, they stop the relay with their own line).
 */
async function openStore(
  kv: Deno.Kv,
  db: string,
  config: Config,
  parts: {
    logger: Logger;
    metrics: RelayMetrics;
    failed: PromiseWithResolvers<UnsafeDatabaseError>;
  },
): Promise<Store> {
  const { logger } = parts;
  let checked = false;
  const store = createStore(kv, {
    dedupeWindowMs: config.dedupeWindowMs,
    maxItemBytes: config.maxBodyBytes,
    onCommit: parts.metrics.commit,
    path: db,
    onHealthChange: (verdict) => {
      if (!checked) return;
      if (verdict.ok) logger.info("relay: storage: the database commits again");
      else logger.error(`relay: storage: ${verdict.reason}: see docs/operations.md`);
      // Deno KV's background tasks die on damaged pages: stop first, with the steps.
      if (!verdict.ok && verdict.kind === "damaged") {
        parts.failed.resolve(damagedDatabaseError(db, errorMessage(verdict.cause)));
      }
    },
  });
  const warning = await checkDatabase(store, db);
  if (warning !== undefined) logger.warn(warning);
  checked = true;
  return store;
}

/**
 * Builds the relay on its open database: keys, TLS files, the store, publishing, the
 * built-in services and the app.
 *
 * @throws {ConfigError} for key, keys, targets or TLS files that cannot be used.
 * @throws {UnsafeDatabaseError} when the database fails its check.
 */
async function buildRelay(
  config: Config,
  database: { path: string; kv: Deno.Kv },
  logger: Logger,
  podcastPauseAt: PodcastStep | undefined,
): Promise<RelayParts> {
  const [db, dataDir] = [database.path, dirname(database.path)];
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
  const [metrics, failed] = [new RelayMetrics(), Promise.withResolvers<UnsafeDatabaseError>()];
  const store = await openStore(database.kv, db, config, { logger, metrics, failed });
  const targetsFile = loadTargetsFile(
    config.targetsFile.path,
    (name) => Deno.env.get(name),
    config.targetsFile.required,
  );
  const publish = withTargetsFile(publishConfig(config), targetsFile);
  // The built-in notes store, blog and podcast (docs/publishing-builtin.md).
  const appId = await resolveAppId(config.secrets.appId, dataDir).catch((error) => {
    throw new ConfigError(`cannot set up the app id: ${errorMessage(error)}`);
  });
  const builtin = await builtinOf(config, dataDir, logger, store, podcastPauseAt);
  const closing = new AbortController();
  const { failedPublishes, search } = await openLast(store, builtin, dataDir, logger);
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
    stopping: closing.signal,
    builtin: {
      services: builtin,
      search,
      appId: appId.appId,
      publicUrl: config.publicUrl,
      privateBlog: config.privateBlog,
      privatePodcast: config.privatePodcast,
      podcastFeed: { language: config.podcastLanguage, email: config.podcastEmail },
    },
    failed: failedPublishes,
    allowedOrigins: config.allowedOrigins,
    maxStreams: config.maxStreams,
    maxStreamsPerKey: config.maxStreamsPerKey,
  });
  return {
    config,
    logger,
    db,
    apiKey,
    appId,
    keyRing,
    tls,
    store,
    publish,
    builtin,
    search,
    app,
    closing,
    failed,
  };
}

/**
 * The built-in notes store, blog and podcast in `dataDir` (docs/publishing-builtin.md),
 * reading aloud with the household's speech command when one is set.
 *
 * @throws {Error} when the speech command cannot be split into words (`relay serve` has
 *   checked it already, with its configuration).
 */
async function builtinOf(
  config: Config,
  dataDir: string,
  logger: Logger,
  store: Store,
  podcastPauseAt: PodcastStep | undefined,
): Promise<BuiltinServices> {
  return createBuiltinServices({
    dataDir,
    log: logger.info,
    roomForContent: () => roomForContent(store),
    speechCommand: config.speechCommand === undefined
      ? undefined
      : await CommandEngine.fromLine(config.speechCommand),
    retention: { keep: config.podcastKeep, maxDiskBytes: config.podcastMaxDiskBytes },
    publicUrl: config.publicUrl,
    podcastPauseAt,
  });
}

/**
 * What the relay opens last in its data directory: the publishes kept to be retried, then the
 * search index, whose thread must not outlive a failed start (nothing after it throws).
 */
async function openLast(store: Store, builtin: BuiltinServices, dataDir: string, logger: Logger) {
  const failedPublishes = await FailedPublishes.open(
    join(dataDir, "failed-publishes.json"),
    Date.now,
    logger.warn,
    () => roomForContent(store),
  );
  return {
    failedPublishes,
    search: await openSearch(store, builtin, { dataDir, log: logger.info }),
  };
}

/**
 * The lines the relay prints when it starts, before it listens: the version, data file
 * and publishing targets; where the app id and the API key come from; the named keys.
 * Pure: the same parts give the same lines.
 *
 * @param parts The built relay.
 * @param version The relay's version.
 * @returns Lines at level `info`, and warnings.
 */
export function startupLines(
  parts: Pick<RelayParts, "config" | "db" | "apiKey" | "appId" | "publish"> & {
    readonly engineName: string;
    readonly namedKeys: number;
  },
  version = "",
): { info: string[]; warn: string[] } {
  const { config, apiKey, appId, publish } = parts;
  const adapted = TARGETS.filter((t) => publish.adapters?.[t] !== undefined);
  const external = TARGETS.filter((t) =>
    !adapted.includes(t) && missingConfiguration([t], publish).length === 0
  );
  const internal = TARGETS.filter((t) => !adapted.includes(t) && publish.urls[t] === undefined);
  const targets = [
    ...(internal.length > 0 ? [`built-in ${internal.join(", ")}`] : []),
    ...(external.length > 0 ? [`external ${external.join(", ")}`] : []),
    ...adapted.map((t) => `${t} via ${publish.adapters?.[t]?.kind}`),
  ];
  const info = [
    `relay ${version} (deno ${Deno.version.deno}): data ${parts.db}; ` +
    `dedupe window ${config.dedupeWindowMs} ms; body limit ${config.maxBodyBytes} bytes; ` +
    `publishing to ${targets.join("; ")}; read aloud by ${parts.engineName}`,
  ];
  if (appId.source === "generated") {
    info.push(`relay: first start: generated the podcast app id in ${appId.path}`);
  }
  if (apiKey.source === "environment") info.push("relay: API key from RELAY_API_KEY");
  else if (apiKey.source === "generated") {
    info.push(
      `relay: first start: generated an API key in ${apiKey.path} (read it with: cat ${apiKey.path})`,
    );
  } else info.push(`relay: API key from ${apiKey.path}`);
  if (parts.namedKeys > 0) {
    info.push(`relay: ${parts.namedKeys} named key(s) from ${config.keysFile}`);
  }
  const warn = apiKey.key.length < WEAK_KEY_LENGTH
    ? [
      `relay: warning: the API key is ${apiKey.key.length} characters long; ` +
      `use at least ${WEAK_KEY_LENGTH} random characters (delete the key file to get a generated one)`,
    ]
    : [];
  return { info, warn };
}

/** Memory given back once the relay is idle, its collections logged at level debug. */
function idleMemoryOf(logger: Logger): IdleMemory {
  return new IdleMemory({
    collected: ({ rssBefore, rssAfter, heapBefore, heapAfter, ms }) =>
      logger.debug(
        `relay: idle: gave back memory in ${ms.toFixed(0)} ms (resident ${mib(rssBefore)} → ` +
          `${mib(rssAfter)} MiB, heap ${mib(heapBefore)} → ${mib(heapAfter)} MiB)`,
      ),
    unavailable: (error) =>
      logger.debug(`relay: idle: cannot give back memory: ${errorMessage(error)}`),
  });
}

/** Prints how to pair a phone with the relay at `addr`. */
function printPairing(parts: RelayParts, addr: Deno.NetAddr): void {
  const log = parts.logger.info;
  if (parts.tls !== undefined) {
    // A phone checks the certificate's name, which an address found here cannot be.
    log(
      "relay: to pair a phone: relay pair --name <phone> " +
        `--app-url https://<the certificate's name>:${addr.port}`,
    );
    return;
  }
  const reachable = `http://${lanAddress(addr.hostname)}:${addr.port}`;
  void pairingLines(pairingLink(reachable, parts.apiKey.key)).then((lines) => {
    log(
      "relay: to pair a phone, scan this or open the link " +
        `(again: relay pair --app-url ${reachable}):`,
    );
    for (const line of lines) log(line);
  });
}

/**
 * Listens, starts what runs beside the server (the counters file, the jobs, the podcast
 * worker, the named keys' last use, the idle collection), and returns the running relay,
 * whose `shutdown()` drains and stops them all in order.
 *
 * @throws {ConfigError} when TLS cannot use the certificate or key.
 * @throws {Deno.errors.AddrInUse} and the other errors of listening.
 */
function serve(
  parts: RelayParts,
  database: { close(): void },
  options: StartOptions & { flushLog: () => Promise<void> },
): RunningRelay {
  const { config, logger, store, builtin, keyRing } = parts;
  const drain = new Drain();
  const idleMemory = idleMemoryOf(logger);
  const server = serveOrExplain({
    hostname: config.hostname,
    port: config.port,
    tls: parts.tls,
    maxConnections: config.maxConnections,
    idleTimeoutMs: config.idleTimeoutMs,
    logger,
    onError: (error) => {
      logger.error("relay: unexpected error", error);
      return problemResponse(500, "Internal error: the relay logged the cause");
    },
  }, drain.handler(parts.app, idleMemory));
  const addr = server.addr;
  const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
  const url = `${parts.tls === undefined ? "http" : "https"}://${host}:${addr.port}`;
  logger.info(`relay listening on ${url}`);
  try {
    writePrivateFile(addressFile(parts.db), `${url}\n`);
  } catch (error) {
    logger.warn(
      `relay: cannot write ${addressFile(parts.db)} (for relay pair): ${errorMessage(error)}`,
    );
  }
  // Without --public-url, the blog's and podcast's links name an address of this machine.
  builtin.listening(
    `${parts.tls === undefined ? "http" : "https"}://${lanAddress(addr.hostname)}:${addr.port}`,
  );
  if (options.pairing) printPairing(parts, addr);
  const counters = keepCounters(
    store,
    parts.db,
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
      stopIdleMemory(); // no collection's pause during the drain
      parts.closing.abort();
      const drained = await drain.drain(server);
      await builtin.stop();
      await parts.search.close();
      await Promise.all(jobs.map((job) => job.stop()));
      await counters.stop();
      clearInterval(recordUses);
      keyRing.flush();
      database.close();
      await options.flushLog();
      return drained;
    },
    flushLog: options.flushLog,
    failed: parts.failed.promise,
  };
}

/**
 * Starts the relay. Prints one line with the version, the data file and what is
 * enabled, one saying where the API key comes from, then
 * `relay listening on http://<host>:<port>` (`https://` with `--tls-cert`).
 *
 * @param config The validated configuration; its `logFormat` and `logLevel` shape every
 *   line written.
 * @param options.log Where every log line goes (errors too); default standard output for
 *   messages and the access log, standard error for errors, each through a bounded
 *   {@linkcode BatchedLog} (messages are written at once, access lines within 20 ms).
 * @param options.version The relay's version, for the start line.
 * @param options.pairing Print a QR code and link that pair a phone's web app with the
 *   main key; the command line asks for it when standard output is a terminal,
 *   so that the key never lands in a service's journal.
 * @param options.jobs Background jobs on the open store ({@linkcode StartOptions.jobs}).
 * @throws {ConfigError} for a key file that cannot be read or written, an invalid keys
 *   file, or TLS files that cannot be read.
 * @throws {DatabaseInUseError} when another relay holds the database.
 * @throws {UnsafeDatabaseError} when the database has more than one name, is damaged, or
 *   holds less than the relay wrote to it (docs/faults.md, "Damaged files").
 * @throws {Deno.errors.AddrInUse} and other errors of `Deno.serve` and `Deno.openKv`.
 */
export async function startRelay(
  config: Config,
  options: StartOptions = {},
): Promise<RunningRelay> {
  const { logger, flushLog } = relayLogging(config, options.log, LOG_FLUSH_GRACE_MS);
  const database = await openLockedDatabase(config.db);
  let parts: RelayParts | undefined;
  try {
    parts = await buildRelay(config, database, logger, options.podcastPauseAt);
    const lines = startupLines({
      ...parts,
      engineName: parts.builtin.podcast.engineName,
      namedKeys: parts.keyRing.size,
    }, options.version);
    for (const line of lines.info) logger.info(line);
    for (const line of lines.warn) logger.warn(line);
    return serve(parts, database, { ...options, flushLog });
  } catch (error) {
    await parts?.search.close();
    database.close();
    // What it logged before failing (a warning, the key's source) is written before the
    // caller reports the failure and the process exits.
    await flushLog();
    throw error;
  }
}

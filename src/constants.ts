/**
 * Numbers and names that both the configuration and the server use, defined once here
 * so that the configuration (which checks the options) and the access code (which builds
 * pairing links) need not import the server: the body limits, the log levels and formats,
 * the longest lease, and the web app's path.
 *
 * @module
 */

/**
 * Longest lease a leased pull may take, ms: 12 hours. The store holds leases to it, and
 * `relay work --lease` checks it before anything is sent.
 */
export const MAX_LEASE_MS = 12 * 3_600_000;

/** Default body limit, bytes: 512 KiB (docs/api/rules.md, "Limits"). */
export const DEFAULT_MAX_BODY_BYTES = 512 * 1024;

/**
 * Largest allowed body limit, bytes: 768 KiB. A body is stored in one atomic commit and a
 * Deno KV commit holds at most 800 KiB, so larger bodies could never be stored.
 */
export const MAX_BODY_LIMIT_BYTES = 768 * 1024;

/**
 * Connections open at once by default (`--max-connections`): a household's phones,
 * browsers and workers use a few dozen. Each holds a file descriptor: the systemd unit's
 * `LimitNOFILE=1024` leaves room for these and the relay's own.
 */
export const DEFAULT_MAX_CONNECTIONS = 512;

/**
 * Results streams open at once by default (`--max-streams`). Each costs about 60 KB while
 * idle, and a new result is written to every one of them (up to 768 KiB each): 64 keep
 * the worst case well within the unit's memory limit, and a household has a few phones
 * and browsers.
 */
export const DEFAULT_MAX_STREAMS = 64;

/** Results streams one key may have open by default: a phone or a browser needs one or two. */
export const DEFAULT_MAX_STREAMS_PER_KEY = 16;

/** The log levels, least severe first; a level shows its own lines and the ones after it. */
export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;

/** One of {@linkcode LOG_LEVELS}. */
export type LogLevel = typeof LOG_LEVELS[number];

/** The log formats: `text` for people, `json` (one object per line) for log shippers. */
export const LOG_FORMATS = ["text", "json"] as const;

/** One of {@linkcode LOG_FORMATS}. */
export type LogFormat = typeof LOG_FORMATS[number];

/** The path the phone web app lives under; the service worker's scope. */
export const WEBAPP_PATH = "/app/";

/**
 * The table of the relay's server options: for each, its flag, its environment variable,
 * its default and what it means (docs/configuration.md). `config.ts` validates what they
 * hold; `relay --help` prints this table.
 *
 * @module
 */

import {
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MAX_STREAMS,
  DEFAULT_MAX_STREAMS_PER_KEY,
} from "../constants.ts";
import { DEFAULT_QA_HOSTS } from "../queue_names.ts";

/** One configurable option: its flag, its environment variable, default and meaning. */
export interface OptionSpec {
  /** Flag name without dashes, e.g. `"port"`. */
  readonly flag: string;
  /** Environment variable, e.g. `"RELAY_PORT"`. */
  readonly env: string;
  /** Default as shown in `--help`, or `undefined` when the option is off by default. */
  readonly default: string | undefined;
  /** One line for `--help`. */
  readonly help: string;
}

/** Every server option, in `--help` order. */
export const SERVER_OPTIONS: readonly OptionSpec[] = [
  {
    flag: "hostname",
    env: "RELAY_HOSTNAME",
    default: "0.0.0.0",
    help: "address to listen on",
  },
  { flag: "port", env: "RELAY_PORT", default: "8787", help: "TCP port (0 picks a free one)" },
  {
    flag: "db",
    env: "RELAY_DB",
    default: "$STATE_DIRECTORY/relay.kv under systemd, else ./data/relay.kv",
    help: "Deno KV database file",
  },
  {
    flag: "dedupe-window",
    env: "RELAY_DEDUPE_WINDOW",
    default: "5m",
    help: "same content within this time is a duplicate (e.g. 1500ms, 2s, 5m)",
  },
  {
    flag: "qa-hosts",
    env: "RELAY_QA_HOSTS",
    default: DEFAULT_QA_HOSTS.join(","),
    help: "comma-separated Q&A domains whose links go to the qa queue",
  },
  {
    flag: "max-body",
    env: "RELAY_MAX_BODY",
    default: "512KiB",
    help: "largest request body (bytes, KiB or MiB; at most 768KiB)",
  },
  {
    flag: "max-connections",
    env: "RELAY_MAX_CONNECTIONS",
    default: String(DEFAULT_MAX_CONNECTIONS),
    help: "connections open at once; past it an idle one is closed, else the new one gets 503",
  },
  {
    flag: "idle-timeout",
    env: "RELAY_IDLE_TIMEOUT",
    default: "30s",
    help: "close a connection that has had no request in progress for this long",
  },
  {
    flag: "max-streams",
    env: "RELAY_MAX_STREAMS",
    default: String(DEFAULT_MAX_STREAMS),
    help: "results streams (GET /results/stream) open at once; more get 503",
  },
  {
    flag: "max-streams-per-key",
    env: "RELAY_MAX_STREAMS_PER_KEY",
    default: String(DEFAULT_MAX_STREAMS_PER_KEY),
    help: "results streams one key may have open; more get 429",
  },
  {
    flag: "allow-origin",
    env: "RELAY_ALLOW_ORIGIN",
    default: undefined,
    help: "comma-separated origins (https://host:port) whose web pages may call the API",
  },
  {
    flag: "publish-url",
    env: "RELAY_PUBLISH_URL",
    default: undefined,
    help: "base URL of the downstream publishing services",
  },
  {
    flag: "notes-url",
    env: "RELAY_NOTES_URL",
    default: undefined,
    help: "base URL of the notes store, instead of --publish-url",
  },
  {
    flag: "blog-url",
    env: "RELAY_BLOG_URL",
    default: undefined,
    help: "base URL of the blog, instead of --publish-url",
  },
  {
    flag: "podcast-url",
    env: "RELAY_PODCAST_URL",
    default: undefined,
    help: "base URL of the podcast (read-aloud) queue, instead of --publish-url",
  },
  {
    flag: "targets-file",
    env: "RELAY_TARGETS_FILE",
    default: undefined,
    help:
      "which service each target is: IMA, Memos, any HTTP endpoint (default: targets.json beside --db, if any)",
  },
  {
    flag: "publish-timeout",
    env: "RELAY_PUBLISH_TIMEOUT",
    default: "15s",
    help: "how long one downstream call may take (e.g. 500ms, 15s)",
  },
  {
    flag: "public-url",
    env: "RELAY_PUBLIC_URL",
    default: undefined,
    help:
      "URL phones reach the relay at, for feed, audio and post links (default: where it listens)",
  },
  {
    flag: "private-blog",
    env: "RELAY_PRIVATE_BLOG",
    default: "no",
    help: "yes: the built-in blog and its feed need a key with the read scope",
  },
  {
    flag: "private-podcast",
    env: "RELAY_PRIVATE_PODCAST",
    default: "no",
    help: "yes: the built-in podcast's feed and audio need a key with the read scope",
  },
  {
    flag: "speech-command",
    env: "RELAY_SPEECH_COMMAND",
    default: undefined,
    help: "speech engine to run per chunk instead of the built-in one: text on stdin, " +
      "WAV on stdout, {lang} replaced by en, zh, ja…",
  },
  {
    flag: "podcast-keep",
    env: "RELAY_PODCAST_KEEP",
    default: "100",
    help: "podcast episodes kept; the oldest beyond are deleted",
  },
  {
    flag: "podcast-max-disk",
    env: "RELAY_PODCAST_MAX_DISK",
    default: "1GiB",
    help: "disk space for podcast audio (bytes, KiB, MiB or GiB); the oldest beyond are deleted",
  },
  {
    flag: "podcast-language",
    env: "RELAY_PODCAST_LANGUAGE",
    default: undefined,
    help: "language of the podcast feed, e.g. en or zh-cn (default: the first episode's)",
  },
  {
    flag: "podcast-email",
    env: "RELAY_PODCAST_EMAIL",
    default: undefined,
    help: "owner's email in the podcast feed (Apple Podcasts requires one to list it)",
  },
  {
    flag: "api-key-file",
    env: "RELAY_API_KEY_FILE",
    default: undefined,
    help: "file holding the API key (RELAY_API_KEY wins; default: api-key beside --db)",
  },
  {
    flag: "keys-file",
    env: "RELAY_KEYS_FILE",
    default: undefined,
    help: "named keys with scopes (relay keys add/list/remove; default: keys.json beside --db)",
  },
  {
    flag: "tls-cert",
    env: "RELAY_TLS_CERT",
    default: undefined,
    help: "PEM certificate chain: serve HTTPS (needs --tls-key)",
  },
  {
    flag: "tls-key",
    env: "RELAY_TLS_KEY",
    default: undefined,
    help: "PEM private key of --tls-cert",
  },
  {
    flag: "backup-every",
    env: "RELAY_BACKUP_EVERY",
    default: undefined,
    help: "while serving, export a backup into backups/ beside --db this often (e.g. 24h)",
  },
  {
    flag: "backup-keep",
    env: "RELAY_BACKUP_KEEP",
    default: "7",
    help: "how many of those backups to keep; the oldest beyond it are removed",
  },
  {
    flag: "log-format",
    env: "RELAY_LOG_FORMAT",
    default: "text",
    help: "text, or json: one JSON object per line, for log collectors",
  },
  {
    flag: "log-level",
    env: "RELAY_LOG_LEVEL",
    default: "info",
    help: "debug, info (adds a line per request), warn or error",
  },
];

/** Environment variables holding secrets; there are no flags for these. */
export const SECRET_ENV = {
  apiKey: "RELAY_API_KEY",
  appId: "RELAY_APP_ID",
  blogAccessCookie: "RELAY_BLOG_ACCESS_COOKIE",
} as const;

/**
 * The relay's log: messages at four levels and the access log (one line per request), as
 * plain text or as one JSON object per line (`--log-format`, `--log-level`; docs/
 * configuration.md, "Logging"). Access lines are gathered and written to standard output
 * together, at most every {@linkcode FLUSH_INTERVAL_MS}, instead of one blocking write per
 * request (`console.log` writes synchronously; under load that was a large share of each
 * request). The running relay writes its messages through the same {@linkcode BatchedLog},
 * at once, so that an output nobody reads (a stalled journal, a paused terminal) never
 * stops it: lines wait up to {@linkcode MAX_WAITING_BYTES}, the rest are counted and
 * reported first in the next batch written.
 *
 * @module
 */

import { LOG_LEVELS, type LogFormat, type LogLevel } from "../constants.ts";
import { utf8Length } from "./responses.ts";

/**
 * Characters a logged field never shows as they are: control characters (U+0000–U+001F, DEL, U+0080–U+009F), the
 * space (it separates a text line's fields), the backslash (it starts an escape), line and
 * paragraph separators, bidirectional and zero-width formatting characters (U+202E turns
 * the rest of a line around in a terminal), and halves of surrogate pairs.
 */
const UNSAFE =
  // deno-lint-ignore no-control-regex
  /[\x00-\x20\x7f-\x9f\\\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** Text with no character of {@linkcode UNSAFE}: printable ASCII without the backslash. */
const PLAIN = /^[\x21-\x5b\x5d-\x7e]*$/;

/** The rank of level `info` in {@linkcode LOG_LEVELS}. */
const INFO_RANK = LOG_LEVELS.indexOf("info");

/** Longest method the access log shows, characters (methods are short words). */
const LOGGED_METHOD_CHARS = 32;

/**
 * Longest path the access log shows, characters, as a last resort: the relay cuts request
 * targets shorter before (`LOGGED_TARGET_CHARS` in auth.ts).
 */
const LOGGED_PATH_CHARS = 1024;

/**
 * `text` safe to write into one log line: cut to `max` characters (ending in `…(+N)`, N
 * the characters left out), and every character of {@linkcode UNSAFE} escaped: `\\` for a
 * backslash, `\xHH` below U+0100, `\u{HHHH}` above.
 *
 * @example
 * ```ts
 * logSafe("/a\u202eb c", 100); // "/a\\u{202e}b\\x20c"
 * ```
 */
export function logSafe(text: string, max: number): string {
  if (text.length <= max && PLAIN.test(text)) return text; // the common case, unchanged
  const cut = text.length > max ? `${text.slice(0, max)}…(+${text.length - max})` : text;
  return cut.replace(UNSAFE, (char) => {
    if (char === "\\") return "\\\\";
    const code = char.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u{${code.toString(16)}}`;
  });
}

// The ISO 8601 text of the last second formatted (`2026-11-24T14:30:03.`): lines written
// within one second share it and add their milliseconds.
let isoSecond = NaN;
let isoPrefix = "";

/**
 * `ms` as `Date.prototype.toISOString` writes it (`2026-11-24T14:30:03.412Z`), formatting
 * the date and time of day once per second.
 *
 * @param ms Epoch ms, within the years 0–9999.
 */
export function isoTime(ms: number): string {
  const second = Math.floor(ms / 1000);
  if (second !== isoSecond) {
    isoPrefix = new Date(second * 1000).toISOString().slice(0, 20);
    isoSecond = second;
  }
  const milli = ms - second * 1000;
  return `${isoPrefix}${milli < 10 ? "00" : milli < 100 ? "0" : ""}${milli}Z`;
}

/** One request as the access log records it (at level `info`). */
export interface AccessEntry {
  /** The request's method, e.g. `GET`. */
  readonly method: string;
  /** Path and query as received, the `key` parameter's value replaced by `REDACTED`. */
  readonly path: string;
  /** The response's status. */
  readonly status: number;
  /** From the request's arrival to its response, ms. */
  readonly durationMs: number;
  /** The response body's size, bytes (0 for HEAD); `undefined` for a stream. */
  readonly bytes: number | undefined;
  /** The client's IP address; `undefined` for an in-process request. */
  readonly client: string | undefined;
}

/** Options of {@linkcode Logger}. */
export interface LoggerOptions {
  /** `text` (default) or `json`. */
  readonly format?: LogFormat;
  /** The least severe level written; default `info`. */
  readonly level?: LogLevel;
  /** Where message lines go, each without its newline; default `console.log`. */
  readonly write?: (line: string) => void;
  /** Where `error` lines go; default `write` when given, else `console.error`. */
  readonly writeError?: (line: string) => void;
  /** Where access lines go; default `write`. */
  readonly writeAccess?: (line: string) => void;
}

/**
 * Writes the relay's messages and access lines in one format, leaving out the ones below
 * its level.
 *
 * Text: a message is its text alone (`relay listening on http://0.0.0.0:8787`); an access
 * line is `<time> <client> <method> <path> <status> <bytes> <ms>ms`, with `-` for an
 * unknown client or size. JSON: `{"time", "level", "msg"}`, plus for an access line
 * `method`, `path`, `status`, `duration_ms`, `bytes` and `client` (`null` when unknown),
 * plus `error` for an error's cause.
 *
 * @example
 * ```ts
 * const logger = new Logger({ format: "json", level: "warn" });
 * logger.warn("relay: warning: the API key is short");
 * ```
 */
export class Logger {
  /** The format lines are written in. */
  readonly format: LogFormat;
  /** The least severe level written. */
  readonly level: LogLevel;
  readonly #rank: number;
  readonly #write: (line: string) => void;
  readonly #writeError: (line: string) => void;
  readonly #writeAccess: (line: string) => void;

  /**
   * Makes a logger.
   *
   * @param options Format, level and where lines go; see {@linkcode LoggerOptions}.
   */
  constructor(options: LoggerOptions = {}) {
    this.format = options.format ?? "text";
    this.level = options.level ?? "info";
    this.#rank = LOG_LEVELS.indexOf(this.level);
    this.#write = options.write ?? ((line) => console.log(line));
    this.#writeError = options.writeError ??
      (options.write === undefined ? (line) => console.error(line) : this.#write);
    this.#writeAccess = options.writeAccess ?? this.#write;
  }

  /** Whether lines at `level` are written. */
  enabled(level: LogLevel): boolean {
    return LOG_LEVELS.indexOf(level) >= this.#rank;
  }

  /** Writes a message at level `debug`. */
  readonly debug = (msg: string): void => this.#message("debug", msg);
  /** Writes a message at level `info`. */
  readonly info = (msg: string): void => this.#message("info", msg);
  /** Writes a message at level `warn`. */
  readonly warn = (msg: string): void => this.#message("warn", msg);

  /**
   * Writes a message at level `error`.
   *
   * @param cause The error behind it, written after the message (its stack when it has one).
   */
  readonly error = (msg: string, cause?: unknown): void => this.#message("error", msg, cause);

  /**
   * Writes one access line at level `info`. The method and the path are made safe with
   * {@linkcode logSafe}: escaped and cut, in both formats.
   */
  access(entry: AccessEntry): void {
    if (this.#rank > INFO_RANK) return;
    const time = isoTime(Date.now());
    const ms = Math.round(entry.durationMs * 10) / 10;
    const method = logSafe(entry.method, LOGGED_METHOD_CHARS);
    const path = logSafe(entry.path, LOGGED_PATH_CHARS);
    if (this.format === "text") {
      this.#writeAccess(
        `${time} ${entry.client ?? "-"} ${method} ${path} ${entry.status} ` +
          `${entry.bytes ?? "-"} ${ms.toFixed(1)}ms`,
      );
      return;
    }
    this.#writeAccess(JSON.stringify({
      time,
      level: "info",
      msg: `${method} ${path} ${entry.status}`,
      method,
      path,
      status: entry.status,
      duration_ms: ms,
      bytes: entry.bytes ?? null,
      client: entry.client ?? null,
    }));
  }

  #message(level: LogLevel, msg: string, cause?: unknown): void {
    if (!this.enabled(level)) return;
    const write = level === "error" ? this.#writeError : this.#write;
    const detail = cause === undefined
      ? undefined
      : cause instanceof Error
      ? cause.stack ?? String(cause)
      : Deno.inspect(cause);
    write(messageLine(this.format, level, msg, detail));
  }
}

/**
 * One message line in `format`, as {@linkcode Logger} writes it: the text alone, or a JSON
 * object with `time`, `level`, `msg` and, when there is a `detail`, `error`.
 *
 * @param detail What caused it (an error's stack), written after the message.
 */
export function messageLine(
  format: LogFormat,
  level: LogLevel,
  msg: string,
  detail?: string,
): string {
  if (format === "text") return detail === undefined ? msg : `${msg}: ${detail}`;
  return JSON.stringify({
    time: new Date().toISOString(),
    level,
    msg,
    ...(detail === undefined ? {} : { error: detail }),
  });
}

/** Longest time a line waits before it is written, ms. */
const FLUSH_INTERVAL_MS = 20;

/** Bytes gathered before a write is started at once. */
const FLUSH_BYTES = 64 * 1024;

/**
 * Most bytes of lines a {@linkcode BatchedLog} holds that its output has not taken yet
 * (counted as UTF-16 code units plus the newline): about 10,000 access lines. Past it, new
 * lines are dropped and counted, so that an output nobody reads cannot make the relay's
 * memory grow with every request.
 */
export const MAX_WAITING_BYTES = 1024 * 1024;

const encoder = new TextEncoder();

/** Where a {@linkcode BatchedLog} writes: `Deno.stdout`, `Deno.stderr`, or alike. */
export interface LogOutput {
  /** Writes some of `p`; resolves with how many bytes it took. */
  write(p: Uint8Array): Promise<number>;
}

/** Options of {@linkcode BatchedLog}. */
export interface BatchedLogOptions {
  /**
   * The line written first once the output takes lines again after some were dropped,
   * given how many were (lines past {@linkcode MAX_WAITING_BYTES}, and lines of writes that
   * failed); default a plain sentence, which is also used when this one throws.
   */
  readonly notice?: (dropped: number) => string;
  /** Most bytes waiting; default {@linkcode MAX_WAITING_BYTES}. */
  readonly maxWaitingBytes?: number;
}

/**
 * Gathers lines and writes them in batches to an output (default standard output), one
 * write in flight at a time, in order. Lines that the output has not taken yet are held up
 * to a bound; past it they are dropped and counted, and a notice with their number goes
 * first in the next batch (made by the next flush, which a stop makes too). A write that
 * fails loses the lines it did not write whole, which the next notice counts too.
 */
export class BatchedLog {
  #lines: string[] = [];
  /** Bytes of `#lines`. */
  #bytes = 0;
  /** Bytes of lines held: gathered, or handed to a write that has not finished. */
  #waiting = 0;
  /** Lines dropped and not yet reported. */
  #dropped = 0;
  /** Whether the last write was cut off inside a line. */
  #cut = false;
  #droppedInAll = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #writing: Promise<void> = Promise.resolve();
  readonly #out: LogOutput;
  readonly #notice: (dropped: number) => string;
  readonly #max: number;

  /**
   * Makes an empty batch.
   *
   * @param out Where the lines go; default `Deno.stdout`.
   * @param options The notice of dropped lines and the bound; see
   *   {@linkcode BatchedLogOptions}.
   */
  constructor(out: LogOutput = Deno.stdout, options: BatchedLogOptions = {}) {
    this.#out = out;
    this.#notice = options.notice ?? droppedLinesNotice;
    this.#max = options.maxWaitingBytes ?? MAX_WAITING_BYTES;
  }

  /** Bytes of lines held that the output has not taken yet (at most the bound). */
  get waitingBytes(): number {
    return this.#waiting;
  }

  /** Lines dropped since this log was made: past the bound, or lost to failed writes. */
  get droppedLines(): number {
    return this.#droppedInAll;
  }

  /**
   * Queues one entry: a line without its newline (an error's stack makes it several). The
   * batch is handed to the writer within {@linkcode FLUSH_INTERVAL_MS}, or at once when it
   * reaches {@linkcode FLUSH_BYTES}: one timer per batch, never one per line (a timer per
   * line cost about 3 µs of a 22 µs cached read under load; docs/benchmarks.md, "Reads").
   * Dropped when the bound is reached.
   */
  readonly line = (text: string): void => {
    if (!this.#hold(text)) return;
    if (this.#bytes >= FLUSH_BYTES) void this.flush();
    else this.#timer ??= setTimeout(() => void this.flush(), FLUSH_INTERVAL_MS);
  };

  /**
   * Queues one entry, as {@linkcode BatchedLog.line} does, and hands what is gathered to the
   * writer at once, for messages (a start line, a warning); dropped when the bound is reached.
   */
  readonly lineNow = (text: string): void => {
    if (this.#hold(text)) void this.flush();
  };

  /**
   * Hands every gathered line to the writer; resolves once they are written, or after
   * `maxWaitMs` when that comes first (the lines are still written when the output takes
   * them).
   *
   * @param maxWaitMs Longest wait, ms; default no limit.
   */
  async flush(maxWaitMs = Infinity): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    // Dropped lines are reported even when no line follows them (the relay stopping).
    if (this.#lines.length > 0 || this.#dropped > 0) {
      const lines = this.#lines;
      const bytes = this.#bytes;
      const dropped = this.#dropped;
      this.#lines = [];
      this.#bytes = 0;
      this.#dropped = 0;
      this.#writing = this.#writing.then(() => this.#write(lines, bytes, dropped));
    }
    if (maxWaitMs === Infinity) return await this.#writing;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      this.#writing,
      new Promise<void>((done) => timer = setTimeout(done, maxWaitMs)),
    ]);
    clearTimeout(timer);
  }

  /** Holds `text` when it fits under the bound; otherwise counts it as dropped. */
  #hold(text: string): boolean {
    const bytes = text.length + 1;
    if (this.#waiting + bytes > this.#max) {
      this.#dropped++;
      this.#droppedInAll++;
      return false;
    }
    this.#lines.push(text);
    this.#bytes += bytes;
    this.#waiting += bytes;
    return true;
  }

  /**
   * Writes `lines`, after a notice of `dropped` earlier lines; never rejects. When a write
   * fails, the lines it wrote whole stay written; the rest, and the notice if it was not
   * written, go to the next notice. A write cut off inside a line makes the next one start on
   * a line of its own.
   */
  async #write(lines: string[], bytes: number, dropped: number): Promise<void> {
    const entries = dropped > 0 ? [this.#noticeLine(dropped), ...lines] : lines;
    const lead = this.#cut ? "\n" : "";
    const data = encoder.encode(`${lead}${entries.join("\n")}\n`);
    let offset = 0;
    try {
      while (offset < data.length) {
        const n = await this.#out.write(data.subarray(offset));
        // A writer that takes nothing would keep this loop going forever.
        if (!(n > 0)) throw new Error("the log's output took no bytes");
        offset += n;
      }
      this.#cut = false;
    } catch {
      // An entry counts as written when all its text was (its newline may be missing: the next
      // write then starts with one). Entries may hold newlines (an error's stack), so count
      // by their lengths in bytes.
      let whole = 0;
      let end = lead.length;
      for (const entry of entries) {
        end += utf8Length(entry);
        if (end > offset) break;
        whole++;
        end += 1;
      }
      // The notice, when there is one, is the first entry.
      const noticeLost = dropped > 0 && whole === 0;
      const linesLost = entries.length - whole - (noticeLost ? 1 : 0);
      this.#dropped += linesLost + (noticeLost ? dropped : 0);
      this.#droppedInAll += linesLost;
      if (offset > 0) this.#cut = data[offset - 1] !== 0x0a;
    } finally {
      this.#waiting -= bytes;
    }
  }

  /** The notice of `dropped` lines; the default sentence when the given one throws. */
  #noticeLine(dropped: number): string {
    try {
      return this.#notice(dropped);
    } catch {
      return droppedLinesNotice(dropped);
    }
  }
}

/**
 * The notice of `dropped` lines, as a plain sentence: what {@linkcode BatchedLog} writes when
 * {@linkcode BatchedLogOptions.notice} is not given (or throws).
 */
export function droppedLinesNotice(dropped: number): string {
  return `relay: warning: ${dropped} log line(s) dropped: the output was not taking them`;
}

/** The relay's log and the wait for its last lines, from {@linkcode relayLogging}. */
export interface Logging {
  /** The log. */
  readonly logger: Logger;
  /** Writes what the log still holds, waiting at most the grace left. */
  readonly flushLog: () => Promise<void>;
}

/**
 * The relay's log: unless the caller collects lines itself, every line goes through a
 * bounded batch: access lines within 20 ms, messages at once, errors to standard error
 * (docs/configuration.md, "Logging"). A write to an output nobody reads then never stops
 * the relay.
 *
 * @param config The log's format and level.
 * @param collect Where every line goes instead, when given (a test, `relay serve` in a
 *   caller that collects lines).
 * @param graceMs How long the waits of one stop may take in all, counted from the first.
 */
export function relayLogging(
  config: { readonly logFormat: LogFormat; readonly logLevel: LogLevel },
  collect: ((line: string) => void) | undefined,
  graceMs: number,
): Logging {
  const notice = (n: number) => messageLine(config.logFormat, "warn", droppedLinesNotice(n));
  const outputs = collect === undefined
    ? {
      out: new BatchedLog(Deno.stdout, { notice }),
      err: new BatchedLog(Deno.stderr, { notice }),
    }
    : undefined;
  const logger = new Logger({
    format: config.logFormat,
    level: config.logLevel,
    ...(outputs === undefined ? { write: collect! } : {
      write: outputs.out.lineNow,
      writeError: outputs.err.lineNow,
      writeAccess: outputs.out.line,
    }),
  });
  // One grace for all the waits of a stop (or of a failed start), counted from the first.
  let flushDeadline: number | undefined;
  const flushLog = async () => {
    flushDeadline ??= performance.now() + graceMs;
    const left = Math.max(0, flushDeadline - performance.now());
    await Promise.all([outputs?.out.flush(left), outputs?.err.flush(left)]);
  };
  return { logger, flushLog };
}

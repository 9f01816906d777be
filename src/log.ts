/**
 * The access log's writer: lines are gathered and written to standard output together, at
 * most every {@linkcode FLUSH_INTERVAL_MS}, instead of one blocking write per request
 * (`console.log` writes synchronously; under load that was a large share of each request).
 *
 * @module
 */

/** Longest time a line waits before it is written, ms. */
const FLUSH_INTERVAL_MS = 20;

/** Bytes gathered before a write is started early. */
const FLUSH_BYTES = 64 * 1024;

const encoder = new TextEncoder();

/** Gathers lines and writes them in batches to a writer (default standard output). */
export class BatchedLog {
  #lines: string[] = [];
  #bytes = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #writing: Promise<void> = Promise.resolve();
  readonly #out: { write(p: Uint8Array): Promise<number> };

  /** @param out Where the lines go; default `Deno.stdout`. */
  constructor(out: { write(p: Uint8Array): Promise<number> } = Deno.stdout) {
    this.#out = out;
  }

  /** Queues one line (without its newline). */
  readonly line = (text: string): void => {
    this.#lines.push(text);
    this.#bytes += text.length + 1;
    if (this.#bytes >= FLUSH_BYTES) this.#flushSoon(0);
    else this.#flushSoon(FLUSH_INTERVAL_MS);
  };

  /** Writes every queued line; resolves once they are written. */
  async flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#lines.length > 0) {
      const data = encoder.encode(this.#lines.join("\n") + "\n");
      this.#lines = [];
      this.#bytes = 0;
      this.#writing = this.#writing.then(() => writeAll(this.#out, data)).catch(() => {});
    }
    await this.#writing;
  }

  #flushSoon(ms: number): void {
    if (this.#timer !== undefined && ms > 0) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.flush(), ms);
  }
}

async function writeAll(
  out: { write(p: Uint8Array): Promise<number> },
  data: Uint8Array,
): Promise<void> {
  let offset = 0;
  while (offset < data.length) offset += await out.write(data.subarray(offset));
}

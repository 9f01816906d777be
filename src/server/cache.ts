/**
 * Serialised answers of reads (`GET /peek`, `GET /results`) kept per state version: a read
 * whose collections have not changed since the answer was built (and whose answer shows no
 * lease that has ended since) is answered with the same bytes, without reading the store,
 * formatting timestamps or serialising JSON again. docs/benchmarks.md, "Reads".
 *
 * @module
 */

import { JSON_TYPE, withSize } from "./responses.ts";

/** One serialised answer and what it is valid for. */
export interface CachedAnswer {
  /** The store's state version (`stateVersion`) the answer was built from. */
  readonly version: number;
  /** Valid while the clock is before this, epoch ms (`Infinity`: until the next change). */
  readonly until: number;
  /**
   * The JSON body; `null` for a 204 answer. Kept as text: Deno sends a string body without
   * copying it in JavaScript, where a `Uint8Array` body is copied for every response.
   */
  readonly body: string | null;
  /** The body's size in UTF-8, bytes (0 for a 204 answer): its `Content-Length`. */
  readonly bytes: number;
}

/** Largest answer body kept, bytes: a peek of large items is built again each time. */
export const MAX_CACHED_BODY_BYTES = 256 * 1024;

/** Most bytes of answer bodies one cache keeps. */
export const MAX_CACHED_BYTES = 2 * 1024 * 1024;

/**
 * A small map of answers by request (method-independent: path and query). Holds at most
 * `capacity` answers and {@linkcode MAX_CACHED_BYTES} of bodies, and forgets them all when
 * full, so a client sending ever new query strings cannot grow it; an answer over
 * {@linkcode MAX_CACHED_BODY_BYTES} is not kept.
 */
export class AnswerCache {
  readonly #capacity: number;
  #entries = new Map<string, CachedAnswer>();
  #bytes = 0;

  /** @param capacity Most answers kept, ≥ 1. */
  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /**
   * The answer stored under `key` when it was built from `version` and is still valid at
   * `now` (epoch ms); otherwise `undefined`.
   */
  get(key: string, version: number, now: number): CachedAnswer | undefined {
    const found = this.#entries.get(key);
    return found !== undefined && found.version === version && now < found.until
      ? found
      : undefined;
  }

  /** Stores `answer` under `key`, replacing what was there, unless its body is too large. */
  set(key: string, answer: CachedAnswer): void {
    const size = answer.bytes;
    const old = this.#entries.get(key);
    if (old !== undefined) {
      this.#entries.delete(key);
      this.#bytes -= old.bytes;
    }
    if (size > MAX_CACHED_BODY_BYTES) return;
    if (this.#entries.size >= this.#capacity || this.#bytes + size > MAX_CACHED_BYTES) {
      this.#entries.clear();
      this.#bytes = 0;
    }
    this.#entries.set(key, answer);
    this.#bytes += size;
  }
}

const encoder = new TextEncoder();

/**
 * The answer for `value`: its JSON encoded once, or `null` (a 204) for `undefined`.
 *
 * @param version The state version `value` was read at.
 * @param until Epoch ms after which `value` may be out of date; `Infinity` for never.
 */
export function answerOf(value: unknown, version: number, until: number): CachedAnswer {
  if (value === undefined) return { version, until, body: null, bytes: 0 };
  const body = JSON.stringify(value);
  return { version, until, body, bytes: encoder.encode(body).byteLength };
}

/**
 * The HTTP response of a cached answer: 200 with the JSON body, or 204. Its one header is
 * `Content-Type` (the runtime adds `Content-Length`; see `responses.ts`), its size recorded
 * for the access log and `HEAD`.
 */
export function cachedResponse(answer: CachedAnswer): Response {
  if (answer.body === null) return withSize(new Response(null, { status: 204 }), 0);
  return withSize(
    new Response(answer.body, { headers: { "content-type": JSON_TYPE } }),
    answer.bytes,
  );
}

/**
 * Reading byte streams with a limit and a way to stop: request bodies and the answers of
 * downstream services alike.
 *
 * @module
 */

/**
 * `work`, or the signal's reason as soon as `signal` aborts (then `onAbort` runs too, e.g.
 * to cancel a stream). The listener is removed once either settles, so nothing outlives
 * the read.
 *
 * @param work The promise to wait for.
 * @param signal Stops the wait; `undefined` waits for `work` alone.
 * @param onAbort Runs once if `signal` aborts first.
 * @returns What `work` resolves to.
 * @throws the signal's reason when it aborts first, or whatever `work` rejects with.
 */
export async function untilAborted<T>(
  work: Promise<T>,
  signal: AbortSignal | undefined,
  onAbort: () => void = () => {},
): Promise<T> {
  if (signal === undefined) return await work;
  let stop = () => {};
  const aborted = new Promise<never>((_, reject) => {
    stop = () => {
      reject(signal.reason);
      onAbort();
    };
    if (signal.aborted) stop();
    else signal.addEventListener("abort", stop, { once: true });
  });
  try {
    return await Promise.race([work, aborted]);
  } finally {
    signal.removeEventListener("abort", stop);
  }
}

/**
 * Reads a byte stream to its end, counting bytes as they arrive, and cancels it as soon as
 * it passes `limit`. Used for request bodies and for downstream answers alike.
 *
 * @param stream The stream, or `null` for no body.
 * @param limit Maximum bytes.
 * @param signal Stops the read (throwing the signal's reason), e.g. a timeout.
 * @returns The bytes, or `undefined` when the stream was longer than `limit`.
 * @throws whatever the stream's reads throw (a client that went away, an abort).
 */
export async function readAtMost(
  stream: ReadableStream<Uint8Array> | null,
  limit: number,
  signal?: AbortSignal,
): Promise<Uint8Array | undefined> {
  if (stream === null) return new Uint8Array(0);
  const reader = stream.getReader();
  const cancel = () => void reader.cancel().catch(() => {});
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await untilAborted(reader.read(), signal, cancel);
    // A cancelled read can win the race as "done": it is still a late body.
    if (signal?.aborted) throw signal.reason;
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

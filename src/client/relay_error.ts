/**
 * The error of a failed call to the relay, apart from the client (client.ts) so that the
 * command line can map it to an exit code without loading the client: a serving relay
 * never loads it (src/cli/main.ts).
 *
 * @module
 */

/** A failed call to the relay. */
export class RelayError extends Error {
  /** The HTTP status, when the relay answered. */
  readonly status: number | undefined;
  /**
   * Whether trying again later may work: the relay was unreachable, timed out or answered
   * 5xx. A 401 or another 4xx will not change by waiting.
   */
  readonly retryable: boolean;

  /**
   * @param message One sentence saying what went wrong and what to do.
   * @param status The HTTP status, when there was one.
   * @param retryable Whether trying again later may work.
   */
  constructor(message: string, status: number | undefined, retryable: boolean) {
    super(message);
    this.name = "RelayError";
    this.status = status;
    this.retryable = retryable;
  }
}

/**
 * `GET /metrics` (issue 6): the relay's metrics in the Prometheus text format, built with
 * `prom-client`. Requests by route and status with a latency histogram, KV commit latency,
 * long-poll and stream clients waiting, and the queue depths and durable counters of
 * `GET /stats`, read from the store at scrape time.
 *
 * @module
 */

import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { QUEUE_NAMES } from "./queues.ts";
import { stats, type Store } from "./store.ts";

/** Latency buckets, seconds: 0.5 ms to 10 s. */
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** What waits for something to happen: a long-polling pull or results read, or a stream. */
export type Waiter = "pull" | "results" | "stream";

/**
 * The relay's metrics: one registry per app, so that tests with several apps do not mix
 * their numbers.
 */
export class RelayMetrics {
  readonly #registry = new Registry();
  readonly #requests = new Counter({
    name: "relay_http_requests_total",
    help: "HTTP requests answered, by route, method and status.",
    labelNames: ["route", "method", "status"] as const,
    registers: [this.#registry],
  });
  readonly #duration = new Histogram({
    name: "relay_http_request_duration_seconds",
    help: "Time from request to response headers, by route (long-polls included).",
    labelNames: ["route"] as const,
    buckets: BUCKETS,
    registers: [this.#registry],
  });
  readonly #commits = new Histogram({
    name: "relay_kv_commit_duration_seconds",
    help: "Deno KV atomic commits (one per batch of writes), by outcome.",
    labelNames: ["outcome"] as const,
    buckets: BUCKETS,
    registers: [this.#registry],
  });
  readonly #waiting = new Gauge({
    name: "relay_waiting_clients",
    help: "Clients waiting now: long-polling pulls and results reads, and open streams.",
    labelNames: ["kind"] as const,
    registers: [this.#registry],
  });
  readonly #depth = new Gauge({
    name: "relay_queue_depth",
    help: "Items in each queue now, leased ones included.",
    labelNames: ["queue"] as const,
    registers: [this.#registry],
  });
  readonly #inFlight = new Gauge({
    name: "relay_queue_in_flight",
    help: "Items held by a leased pull now, by queue.",
    labelNames: ["queue"] as const,
    registers: [this.#registry],
  });
  readonly #items = new Counter({
    name: "relay_queue_items_total",
    help: "Queue items by what happened to them (the counters of GET /stats).",
    labelNames: ["queue", "event"] as const,
    registers: [this.#registry],
  });
  readonly #resultsDepth = new Gauge({
    name: "relay_results_depth",
    help: "Results in the feed now.",
    registers: [this.#registry],
  });
  readonly #results = new Counter({
    name: "relay_results_total",
    help: "Results by what happened to them (the counters of GET /stats).",
    labelNames: ["event"] as const,
    registers: [this.#registry],
  });

  constructor() {
    for (const kind of ["pull", "results", "stream"] as const) this.#waiting.set({ kind }, 0);
  }

  /** The media type of {@linkcode RelayMetrics.text}: Prometheus text format 0.0.4. */
  get contentType(): string {
    return this.#registry.contentType;
  }

  /**
   * Counts one answered request.
   *
   * @param route The endpoint's path, e.g. `/pull`, or `other` for unknown paths.
   * @param ms Time to the response headers, ms.
   */
  request(route: string, method: string, status: number, ms: number): void {
    this.#requests.inc({ route, method, status: String(status) });
    this.#duration.observe({ route }, ms / 1000);
  }

  /** Records one KV commit: its duration, ms, and whether it succeeded. */
  readonly commit = (ms: number, ok: boolean): void => {
    this.#commits.observe({ outcome: ok ? "ok" : "conflict_or_error" }, ms / 1000);
  };

  /**
   * Counts a client as waiting until the returned function is called (once).
   *
   * @param kind A long-polling pull, results read, or an open stream.
   */
  wait(kind: Waiter): () => void {
    this.#waiting.inc({ kind });
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#waiting.dec({ kind });
    };
  }

  /**
   * The metrics in Prometheus text format, with the store's depths and counters as of now.
   *
   * @throws KV errors while the store's state is first loaded.
   */
  async text(store: Store): Promise<string> {
    const now = await stats(store);
    for (const queue of QUEUE_NAMES) {
      const { depth, in_flight, ...counters } = now.queues[queue];
      this.#depth.set({ queue }, depth);
      this.#inFlight.set({ queue }, in_flight);
      for (const [event, value] of Object.entries(counters)) {
        // Counters cannot be set: start from zero and add the durable value.
        this.#items.remove({ queue, event });
        this.#items.inc({ queue, event }, value);
      }
    }
    const { depth, hwm: _hwm, ...counters } = now.results;
    this.#resultsDepth.set(depth);
    for (const [event, value] of Object.entries(counters)) {
      this.#results.remove({ event });
      this.#results.inc({ event }, value);
    }
    return await this.#registry.metrics();
  }
}

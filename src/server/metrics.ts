/**
 * `GET /metrics`: the relay's metrics in the Prometheus text format, built with
 * `prom-client`. Requests by route and status with a latency histogram, KV commit latency,
 * long-poll and stream clients waiting, and the queue depths and durable counters of
 * `GET /stats`, read from the store at scrape time.
 *
 * `prom-client` (and the Node compatibility modules it pulls in) adds about 10 MB to the
 * relay's resident memory, a sixth of an idle relay. So it is loaded at the first scrape:
 * a relay nobody scrapes never pays for it, and request and commit metrics are collected
 * from the first scrape on (Prometheus takes a counter's first sample as its baseline).
 * The waiting-client gauges and the store's counters are complete from the start.
 *
 * @module
 */

import type { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { BuiltinServices } from "../builtin/services.ts";
import { QUEUE_NAMES } from "../queue_names.ts";
import { stats, type Store } from "../store/store.ts";

/** Latency buckets, seconds: 0.5 ms to 10 s. */
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** What waits for something to happen: a long-polling pull or results read, or a stream. */
export type Waiter = "pull" | "results" | "stream";

/** The prom-client registry and its metrics, made at the first scrape. */
interface Collectors {
  registry: Registry;
  requests: Counter<"route" | "method" | "status">;
  duration: Histogram<"route">;
  commits: Histogram<"outcome">;
  waiting: Gauge<"kind">;
  depth: Gauge<"queue">;
  inFlight: Gauge<"queue">;
  items: Counter<"queue" | "event">;
  resultsDepth: Gauge;
  results: Counter<"event">;
}

async function collectors(): Promise<Collectors> {
  const { Counter, Gauge, Histogram, Registry } = await import("prom-client");
  const registry = new Registry();
  const registers = [registry];
  return {
    registry,
    requests: new Counter({
      name: "relay_http_requests_total",
      help: "HTTP requests answered, by route, method and status.",
      labelNames: ["route", "method", "status"] as const,
      registers,
    }),
    duration: new Histogram({
      name: "relay_http_request_duration_seconds",
      help: "Time from request to response headers, by route (long-polls included).",
      labelNames: ["route"] as const,
      buckets: BUCKETS,
      registers,
    }),
    commits: new Histogram({
      name: "relay_kv_commit_duration_seconds",
      help: "Deno KV atomic commits (one per batch of writes), by outcome.",
      labelNames: ["outcome"] as const,
      buckets: BUCKETS,
      registers,
    }),
    waiting: new Gauge({
      name: "relay_waiting_clients",
      help: "Clients waiting now: long-polling pulls and results reads, and open streams.",
      labelNames: ["kind"] as const,
      registers,
    }),
    depth: new Gauge({
      name: "relay_queue_depth",
      help: "Items in each queue now, leased ones included.",
      labelNames: ["queue"] as const,
      registers,
    }),
    inFlight: new Gauge({
      name: "relay_queue_in_flight",
      help: "Items held by a leased pull now, by queue.",
      labelNames: ["queue"] as const,
      registers,
    }),
    items: new Counter({
      name: "relay_queue_items_total",
      help: "Queue items by what happened to them (the counters of GET /stats).",
      labelNames: ["queue", "event"] as const,
      registers,
    }),
    resultsDepth: new Gauge({
      name: "relay_results_depth",
      help: "Results in the feed now.",
      registers,
    }),
    results: new Counter({
      name: "relay_results_total",
      help: "Results by what happened to them (the counters of GET /stats).",
      labelNames: ["event"] as const,
      registers,
    }),
  };
}

/** The built-in services' figures, as {@linkcode BuiltinServices.stats} gives them. */
export type PublishingStats = Awaited<ReturnType<BuiltinServices["stats"]>>;

/** The built-in services' gauges, made at the first scrape of a relay that serves them. */
interface PublishingCollectors {
  episodes: Gauge<"state">;
  audioBytes: Gauge;
  audioMaxBytes: Gauge;
  keep: Gauge;
  evicted: Counter;
  notes: Gauge;
  posts: Gauge;
}

async function publishingCollectors(registry: Registry): Promise<PublishingCollectors> {
  const { Counter, Gauge } = await import("prom-client");
  const registers = [registry];
  const gauge = (name: string, help: string) => new Gauge({ name, help, registers });
  return {
    episodes: new Gauge({
      name: "relay_podcast_episodes",
      help: "Podcast episodes by state.",
      labelNames: ["state"] as const,
      registers,
    }),
    audioBytes: gauge("relay_podcast_audio_bytes", "Bytes of podcast audio on disk."),
    audioMaxBytes: gauge("relay_podcast_audio_max_bytes", "Disk space allowed for podcast audio."),
    keep: gauge("relay_podcast_keep_episodes", "Podcast episodes kept at most."),
    evicted: new Counter({
      name: "relay_podcast_evicted_total",
      help: "Episodes deleted by the retention limits since start.",
      registers,
    }),
    notes: gauge("relay_notes", "Notes in the built-in notes store."),
    posts: gauge("relay_blog_posts", "Posts on the built-in blog."),
  };
}

/** Sets the built-in services' gauges to `now`. */
function setPublishing(c: PublishingCollectors, now: PublishingStats): void {
  const { podcast } = now;
  for (const [state, n] of Object.entries(podcast.episodes)) c.episodes.set({ state }, n);
  c.audioBytes.set(podcast.audio_bytes);
  c.audioMaxBytes.set(podcast.retention.max_disk_bytes);
  c.keep.set(podcast.retention.keep);
  // A counter cannot be set: start from zero and add the podcast's own count.
  c.evicted.reset();
  c.evicted.inc(podcast.evicted);
  c.notes.set(now.notes);
  c.posts.set(now.posts);
}

/**
 * The relay's metrics: one set per app, so that tests with several apps do not mix their
 * numbers.
 */
export class RelayMetrics {
  #collectors: Collectors | undefined;
  #loading: Promise<Collectors> | undefined;
  #publishing: Promise<PublishingCollectors> | undefined;
  readonly #waiting: Record<Waiter, number> = { pull: 0, results: 0, stream: 0 };

  /** The media type of {@linkcode RelayMetrics.text}: Prometheus text format 0.0.4. */
  readonly contentType = "text/plain; version=0.0.4; charset=utf-8";

  /**
   * Counts one answered request (from the first scrape on).
   *
   * @param route The endpoint's path, e.g. `/pull`, or `other` for unknown paths.
   * @param ms Time to the response headers, ms.
   */
  request(route: string, method: string, status: number, ms: number): void {
    const c = this.#collectors;
    if (c === undefined) return;
    c.requests.inc({ route, method, status: String(status) });
    c.duration.observe({ route }, ms / 1000);
  }

  /** Records one KV commit (from the first scrape on): its duration, ms, and its outcome. */
  readonly commit = (ms: number, ok: boolean): void => {
    this.#collectors?.commits.observe({ outcome: ok ? "ok" : "conflict_or_error" }, ms / 1000);
  };

  /**
   * Counts a client as waiting until the returned function is called (once).
   *
   * @param kind A long-polling pull, results read, or an open stream.
   */
  wait(kind: Waiter): () => void {
    this.#waiting[kind]++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#waiting[kind]--;
    };
  }

  /**
   * The metrics in Prometheus text format, with the store's depths and counters as of now.
   * The first call loads `prom-client`.
   *
   * @param store The store whose queues and feed are reported.
   * @param publishing The built-in services' figures, when the relay serves them.
   * @throws KV errors while the store's state is first loaded.
   */
  async text(store: Store, publishing?: PublishingStats): Promise<string> {
    // One load, even when two first scrapes arrive together.
    const c = this.#collectors ??= await (this.#loading ??= collectors());
    if (publishing !== undefined) {
      setPublishing(await (this.#publishing ??= publishingCollectors(c.registry)), publishing);
    }
    const now = await stats(store);
    for (const [kind, n] of Object.entries(this.#waiting)) c.waiting.set({ kind }, n);
    for (const queue of QUEUE_NAMES) {
      const { depth, in_flight, ...counters } = now.queues[queue];
      c.depth.set({ queue }, depth);
      c.inFlight.set({ queue }, in_flight);
      for (const [event, value] of Object.entries(counters)) {
        // Counters cannot be set: start from zero and add the durable value.
        c.items.remove({ queue, event });
        c.items.inc({ queue, event }, value);
      }
    }
    const { depth, hwm: _hwm, ...counters } = now.results;
    c.resultsDepth.set(depth);
    for (const [event, value] of Object.entries(counters)) {
      c.results.remove({ event });
      c.results.inc({ event }, value);
    }
    return await c.registry.metrics();
  }
}

/**
 * The search index as the relay uses it: a SQLite file beside the store, owned by a thread of
 * its own (`index_worker.ts`), that is derived data and never the source of truth.
 *
 * - With the first change, query or count after start (not at start: an idle relay keeps no
 *   thread, below) the file is opened and checked (SQLite's quick check, the layout's
 *   version) and its generation marker is compared with the sources' fingerprint (what the
 *   store and the built-in services hold now). A query waits for that check. A file that is
 *   missing, damaged, of another version, or whose marker differs is rebuilt from the sources
 *   in the background; meanwhile {@linkcode SearchIndex.search} throws
 *   {@linkcode SearchUnavailableError} (the route answers 503 with `Retry-After`), never a
 *   partial answer. A relay stopped before any of these leaves the file and its marker as
 *   they were.
 * - While the relay runs, the marker is empty: a file left by a crash is rebuilt. The marker is
 *   written at an orderly close, once every change has reached the file.
 * - Changes ({@linkcode SearchIndex.put}, `remove`, `keepFrom`) are queued and sent to the
 *   thread in one batch per turn of the event loop; a request never waits for the index.
 *   During a rebuild they wait until its end, so that the rebuild's older copy of a document
 *   never wins over a later change.
 * - When SQLite finds the file damaged while the relay runs, the index is rebuilt.
 * - The thread starts with the first call, not at start: a relay that has not been written to
 *   or searched since its start holds no second V8 isolate with SQLite (about 9 MB of
 *   resident memory, measured; docs/benchmarks.md, "Idle memory"). It is kept from then on:
 *   ending it gave back 0.4 MB, and closing the file checkpoints SQLite's log, a disk write
 *   while the relay is idle. A thread that failed is replaced by the next call, which
 *   reopens the file without the full check.
 *
 * @module
 */

import type { IndexOp, SearchRequest } from "./index_db.ts";
import type { IndexMessage } from "./index_worker.ts";
import type { SearchDocument, SearchHit, SearchKind } from "./text.ts";

/** Where the index's documents come from: the store's results and the built-in services. */
export interface SearchSources {
  /**
   * A short text that changes whenever the set of documents changes (their kinds and keys):
   * documents are never edited in place, only added and removed.
   */
  fingerprint(): Promise<string>;
  /** Every document, read now. */
  documents(): AsyncIterable<SearchDocument>;
}

/** Search cannot answer yet: the index is being checked or rebuilt. */
export class SearchUnavailableError extends Error {
  /** Seconds after which asking again is worth it. */
  readonly retryAfterS: number;

  /** @param retryAfterS Seconds after which asking again is worth it. */
  constructor(retryAfterS = 2) {
    super("The search index is being built: try again shortly");
    this.name = "SearchUnavailableError";
    this.retryAfterS = retryAfterS;
  }
}

/** Where the index is: checking the file, rebuilding it, ready, or closed. */
export type IndexState = "checking" | "rebuilding" | "ready" | "closed";

/** Documents sent to the thread at once during a rebuild. */
const REBUILD_BATCH = 200;
/** How long after a rebuild failed (a source could not be read) it is tried again, ms. */
const RETRY_MS = 30_000;

type Reply = { id: number; ok: true; value: unknown } | {
  id: number;
  ok: false;
  error: string;
  damaged: boolean;
};

/** An error of the index's thread. */
class IndexError extends Error {
  readonly damaged: boolean;
  constructor(message: string, damaged: boolean) {
    super(message);
    this.damaged = damaged;
  }
}

/** Options of {@linkcode SearchIndex.open}. */
export interface SearchIndexOptions {
  /** The index file, e.g. `<data>/search.sqlite`. */
  readonly path: string;
  /** Where the documents come from. */
  readonly sources: SearchSources;
  /** Where a rebuild's and a failure's one line goes. */
  readonly log: (line: string) => void;
}

/** The search index: see the module's doc. */
export class SearchIndex {
  /** The index's thread while it runs. */
  #worker: Worker | undefined;
  readonly #options: SearchIndexOptions;
  /** Calls not answered yet: the thread ends only when there are none. */
  readonly #calls = new Map<number, PromiseWithResolvers<unknown>>();
  #nextId = 0;
  #state: IndexState = "checking";
  #pending: IndexOp[] = [];
  #flushing: Promise<void> | undefined;
  #buffering = true;
  #work: Promise<void>;
  #retry: ReturnType<typeof setTimeout> | undefined;
  /** Whether the file is open in a thread: a new thread reopens it before anything else. */
  #opened = false;
  /** The start-up check, once begun: whether the file could be used as it is. */
  #checking: Promise<boolean> | undefined;

  private constructor(options: SearchIndexOptions) {
    this.#options = options;
    this.#work = Promise.resolve();
  }

  /**
   * Opens the index at `options.path`; checking it, and rebuilding it when it must be, go on
   * in the background from the first change, query or count.
   */
  static open(options: SearchIndexOptions): SearchIndex {
    return new SearchIndex(options);
  }

  /** Where the index is. */
  get state(): IndexState {
    return this.#state;
  }

  /** Whether the index's thread is running now (for tests and the benchmark). */
  get threadRunning(): boolean {
    return this.#worker !== undefined;
  }

  /**
   * Checks the index when that has not begun, and resolves when the check or rebuild under
   * way is over (for tests and the benchmark).
   */
  async settled(): Promise<void> {
    this.#begin();
    while (true) {
      const work = this.#work;
      await work;
      if (work !== this.#work) continue;
      // A rebuild that failed waits for its retry: nothing more will settle meanwhile.
      if (this.#state !== "ready") return;
      this.#flush();
      await this.#flushing;
      if (work === this.#work && this.#pending.length === 0) return;
    }
  }

  /** Adds or replaces a document. */
  put(doc: SearchDocument): void {
    this.#queue({ op: "put", doc });
  }

  /** Removes a document, if the index has it. */
  remove(kind: SearchKind, key: string): void {
    this.#queue({ op: "remove", kind, key });
  }

  /** Removes the documents of `kind` made before `from` (epoch ms); all of them with `null`. */
  keepFrom(kind: SearchKind, from: number | null): void {
    this.#queue({ op: "keepFrom", kind, from });
  }

  /**
   * The best hits of a query, after every change queued before it.
   *
   * @throws {SearchUnavailableError} while the index is checked or rebuilt, or when it was
   *   found damaged (a rebuild is then under way).
   */
  async search(request: SearchRequest): Promise<SearchHit[]> {
    this.#begin();
    if (this.#state === "checking") await this.#checking;
    if (this.#state !== "ready") throw new SearchUnavailableError();
    this.#flush();
    try {
      return await this.#call({ type: "search", request }) as SearchHit[];
    } catch (error) {
      if (error instanceof IndexError && error.damaged) {
        this.#options.log(`relay: the search index is damaged (${error.message}): rebuilding it`);
        this.#work = this.#rebuild();
        throw new SearchUnavailableError();
      }
      throw error;
    }
  }

  /** Documents in the index by kind (for `/stats`, tests and the benchmark). */
  async counts(): Promise<Record<string, number>> {
    this.#begin();
    return await this.#call({ type: "counts" }) as Record<string, number>;
  }

  /**
   * Writes every queued change, records the sources' fingerprint as the file's marker when
   * the index is whole (so that the next start uses the file as it is), closes the file and
   * ends the thread. Stop whatever calls `put` first.
   */
  async close(): Promise<void> {
    if (this.#isClosed()) return;
    const wasReady = this.#state === "ready";
    this.#state = "closed";
    clearTimeout(this.#retry);
    if (!wasReady && this.#worker === undefined) return;
    try {
      await this.#work.catch(() => {});
      if (wasReady) {
        this.#buffering = false;
        await this.#flushNow();
        const fingerprint = await this.#options.sources.fingerprint();
        await this.#call({ type: "setMeta", key: "generation", value: fingerprint });
      }
      await this.#call({ type: "close" });
    } catch (error) {
      this.#options.log(`relay: cannot close the search index: ${String(error)}`);
    } finally {
      this.#endThread();
      this.#failAll(new IndexError("the search index is closed", false));
    }
  }

  /** Begins the start-up check, and the rebuild it may call for, once. */
  #begin(): void {
    if (this.#checking !== undefined || this.#isClosed()) return;
    const checking = this.#check();
    this.#checking = checking;
    this.#work = checking.then((usable) => usable ? undefined : this.#rebuild());
  }

  /** Opens and checks the file; `true` when it is used as it is (the index is then ready). */
  async #check(): Promise<boolean> {
    try {
      const opened = await this.#call({ type: "open", path: this.#options.path }) as {
        fresh: boolean;
        generation: string | undefined;
      };
      const fingerprint = await this.#options.sources.fingerprint();
      if (this.#isClosed()) return true;
      if (!opened.fresh && opened.generation === fingerprint && opened.generation !== "") {
        // From now on the file changes: a crash leaves it to be rebuilt.
        await this.#call({ type: "setMeta", key: "generation", value: "" });
        this.#ready();
        return true;
      }
    } catch (error) {
      this.#options.log(`relay: cannot open the search index: ${String(error)}`);
    }
    return false;
  }

  async #rebuild(): Promise<void> {
    if (this.#isClosed()) return;
    this.#state = "rebuilding";
    this.#buffering = true;
    const started = performance.now();
    try {
      await this.#call({ type: "reset" });
      let batch: IndexOp[] = [];
      let count = 0;
      for await (const doc of this.#options.sources.documents()) {
        if (this.#isClosed()) return;
        batch.push({ op: "put", doc });
        count++;
        if (batch.length >= REBUILD_BATCH) {
          await this.#call({ type: "apply", ops: batch });
          batch = [];
        }
      }
      await this.#call({ type: "apply", ops: batch });
      if (this.#isClosed()) return;
      this.#ready();
      const ms = Math.round(performance.now() - started);
      this.#options.log(`relay: search index rebuilt: ${count} documents in ${ms} ms`);
    } catch (error) {
      if (this.#isClosed()) return;
      this.#options.log(
        `relay: cannot rebuild the search index (${String(error)}); trying again in ` +
          `${RETRY_MS / 1000} s`,
      );
      const retry = setTimeout(() => {
        this.#work = this.#rebuild();
      }, RETRY_MS);
      Deno.unrefTimer(retry);
      this.#retry = retry;
    }
  }

  /** Whether the index was closed (a method: a field read is narrowed across awaits). */
  #isClosed(): boolean {
    return this.#state === "closed";
  }

  #ready(): void {
    this.#state = "ready";
    this.#buffering = false;
    this.#flush();
  }

  #queue(op: IndexOp): void {
    if (this.#isClosed()) return;
    this.#begin();
    this.#pending.push(op);
    if (!this.#buffering && this.#pending.length === 1) setTimeout(() => this.#flush(), 0);
  }

  /** Sends the queued changes now (the thread applies them before any later message). */
  #flush(): void {
    if (this.#buffering || this.#pending.length === 0) return;
    const ops = this.#pending;
    this.#pending = [];
    const sent = this.#call({ type: "apply", ops }).then(() => {}, (error) => {
      if (error instanceof IndexError && error.damaged && this.#state === "ready") {
        this.#options.log(`relay: the search index is damaged (${error.message}): rebuilding it`);
        this.#work = this.#rebuild();
      } else if (this.#state !== "closed") {
        this.#options.log(`relay: cannot update the search index: ${String(error)}`);
      }
    });
    const previous = this.#flushing;
    this.#flushing = Promise.all([previous, sent]).then(() => {});
  }

  async #flushNow(): Promise<void> {
    this.#flush();
    await this.#flushing;
  }

  #call(message: DistributiveOmit<IndexMessage, "id">): Promise<unknown> {
    const id = this.#nextId++;
    const call = Promise.withResolvers<unknown>();
    this.#calls.set(id, call);
    this.#thread().postMessage({ ...message, id });
    return call.promise;
  }

  /**
   * The running thread, started when there is none. Messages posted before its module has
   * loaded wait, in order; a thread started after the file was opened reopens it first
   * (its own message, whose failure reaches the call after it as a damaged file).
   */
  #thread(): Worker {
    if (this.#worker !== undefined) return this.#worker;
    const worker = new Worker(new URL("./index_worker.ts", import.meta.url).href, {
      type: "module",
    });
    worker.onmessage = (event: MessageEvent<Reply>) => this.#reply(event.data);
    worker.onerror = (event) => {
      event.preventDefault();
      if (this.#worker !== worker) return; // an ended thread: its calls were all answered
      this.#failAll(new IndexError(`the search thread failed: ${event.message}`, false));
      this.#endThread();
    };
    this.#worker = worker;
    if (this.#opened) worker.postMessage({ id: -1, type: "reopen", path: this.#options.path });
    else this.#opened = true;
    return worker;
  }

  #reply(reply: Reply): void {
    const call = this.#calls.get(reply.id);
    if (call === undefined) return;
    this.#calls.delete(reply.id);
    if (reply.ok) call.resolve(reply.value);
    else call.reject(new IndexError(reply.error, reply.damaged));
  }

  /** Terminates the thread now, if one runs. */
  #endThread(): void {
    this.#worker?.terminate();
    this.#worker = undefined;
  }

  #failAll(error: Error): void {
    for (const call of this.#calls.values()) call.reject(error);
    this.#calls.clear();
  }
}

/** `Omit` over each member of a union. */
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

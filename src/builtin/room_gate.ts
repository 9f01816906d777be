/**
 * Reading aloud that waits for disk space. On a full disk the relay's store gives up the room
 * it keeps for pulls and acks and refuses new content (docs/faults.md, "A full disk"); an
 * episode being spoken would go on writing its audio into that room. So each spoken chunk is
 * handed to the podcast only when the relay says there is room for new content, and the
 * episode waits, unfailed, where it stopped until there is.
 *
 * @module
 */

import { sleep } from "../util/backoff.ts";
import type { TtsEngine } from "./tts.ts";

/**
 * How often a waiting chunk asks again whether there is room, ms. Asking costs a look at the
 * free space (the store looks at most once a second), so the episode goes on about a second
 * after space is freed.
 */
export const ROOM_RECHECK_MS = 1_000;

/**
 * A spoken chunk let go without room for its audio because the relay is stopping: the episode
 * is neither written to nor failed, and resumes at the next start.
 */
export class HeldAtStop extends Error {
  constructor() {
    super("the relay stopped while this chunk waited for disk space");
    this.name = "HeldAtStop";
  }
}

/** Holds spoken chunks back while the relay has no room for new content. */
export class RoomGate {
  readonly #roomLeft: () => Promise<boolean>;
  readonly #log: (line: string) => void;
  #stopping = new AbortController();
  #waiting = false;

  /**
   * @param roomLeft Whether the relay has room for new content (the store's `roomForContent`).
   * @param log Where one line goes when chunks start waiting, and one when they go on.
   */
  constructor(roomLeft: () => Promise<boolean>, log: (line: string) => void) {
    this.#roomLeft = roomLeft;
    this.#log = log;
  }

  /**
   * Resolves once there is room, looking again every {@linkcode ROOM_RECHECK_MS}.
   *
   * @throws {HeldAtStop} when there is none after {@linkcode stop}: the podcast's worker, which
   *   finishes its chunk before it stops, is never held by a full disk, and writes nothing.
   */
  async untilRoom(): Promise<void> {
    const stopping = this.#stopping.signal;
    while (!await this.#roomLeft()) {
      if (stopping.aborted) throw new HeldAtStop();
      if (!this.#waiting) {
        this.#waiting = true;
        this.#log(
          "relay: podcast: the disk is full, and the room left is kept for pulls and acks: " +
            "reading aloud waits for space",
        );
      }
      await sleep(ROOM_RECHECK_MS, stopping);
    }
    if (this.#waiting) {
      this.#waiting = false;
      this.#log("relay: podcast: there is space again: reading aloud goes on");
    }
  }

  /** Lets every waiting chunk go, unwritten ({@linkcode HeldAtStop}): the relay is stopping. */
  stop(): void {
    this.#stopping.abort();
  }

  /** Holds chunks back again after a {@linkcode stop} (the podcast's worker started again). */
  start(): void {
    if (!this.#stopping.signal.aborted) return;
    this.#stopping = new AbortController();
    this.#waiting = false;
  }

  /**
   * `engine` whose spoken chunks are returned only once there is room for their audio
   * ({@linkcode untilRoom}); everything else is the engine's own.
   */
  gated(engine: TtsEngine): TtsEngine {
    return {
      name: engine.name,
      ...(engine.speaks === undefined ? {} : { speaks: (lang) => engine.speaks!(lang) }),
      synthesize: async (text, lang) => {
        const pcm = await engine.synthesize(text, lang);
        await this.untilRoom();
        return pcm;
      },
      ...(engine.close === undefined ? {} : { close: () => engine.close!() }),
    };
  }
}

/**
 * The household's own speech engine (`--speech-command`): a program the relay runs once per
 * chunk, the chunk's text on its standard input, a 16-bit PCM WAVE file expected on its
 * standard output. `{lang}` in the command becomes the chunk's language (`en`, `zh`, `ja`, …:
 * `speech_lang.ts`), so one wrapper can pick a voice per language.
 *
 * The command line is split into words as a POSIX shell would (`util/command_words.ts`: `'…'`
 * and `"…"` quote, `\` escapes) but no shell runs it: no variables, globs, pipes or redirections
 * (a command holding `|`, `>`, `;`, `&&` or a comment is refused when the relay starts: write a
 * script and name it instead).
 *
 * Each run is bounded: it may take {@linkcode DEFAULT_COMMAND_LIMITS} `.timeoutMs` and write
 * `.maxBytes` to standard output, else the program and whatever it started (its process group)
 * are killed and the chunk fails with one sentence, which the podcast records as the episode's
 * failure. So do an exit status other than 0 (with the first line of its standard error) and
 * output that is not 16-bit PCM WAVE, but one: exit status {@linkcode NO_VOICE_EXIT} says the
 * program has no voice for `{lang}` ({@linkcode NoVoiceError}), and the podcast then speaks the
 * chunk with the built-in engine, or leaves the passage out when that has no voice either.
 *
 * @module
 */

import { commandWords } from "../util/command_words.ts";
import { readAtMost, untilAborted } from "../util/streams.ts";
import type { SpeechLang } from "./speech_lang.ts";
import { parseWav, type Pcm, resample } from "./wav.ts";

/** How long one chunk may take, and how much it may write. */
export interface CommandLimits {
  /** Time for one chunk, ms: a 30-second chunk takes a slow engine on a Pi well under a minute. */
  readonly timeoutMs: number;
  /** Bytes of standard output for one chunk: 30 s of 48 kHz stereo is 5.8 MB. */
  readonly maxBytes: number;
}

/** Two minutes and 32 MiB a chunk. */
export const DEFAULT_COMMAND_LIMITS: CommandLimits = { timeoutMs: 120_000, maxBytes: 32 << 20 };

/** The exit status by which a speech command says it has no voice for `{lang}`. */
export const NO_VOICE_EXIT = 3;

/** A speech command has no voice for a language (it exited with {@linkcode NO_VOICE_EXIT}). */
export class NoVoiceError extends Error {
  /** The language it has no voice for. */
  readonly lang: SpeechLang;

  /** @param program The program's name, for the message. */
  constructor(program: string, lang: SpeechLang) {
    super(`${program} has no voice for ${lang}`);
    this.name = "NoVoiceError";
    this.lang = lang;
  }
}

/** Bytes of a failed run's standard error kept for its one sentence. */
const STDERR_BYTES = 2048;

/**
 * Why a program could not be started, in words a user can act on: Deno says `Failed to spawn
 * 'x': entity not found` for a program that is not there.
 */
function spawnFailure(error: unknown): string {
  if (error instanceof Deno.errors.NotFound) {
    return "no such program (install it, or give its full path in the speech command)";
  }
  if (error instanceof Deno.errors.PermissionDenied) {
    return "not allowed to run it (is it an executable file?)";
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * An engine that runs a program per chunk (`--speech-command`). It speaks every language: the
 * program decides what to do with `{lang}`.
 */
export class CommandEngine {
  /** The program's name and "(speech command)". */
  readonly name: string;
  readonly #words: readonly string[];
  readonly #limits: CommandLimits;

  /**
   * @param words The program and its arguments, at least one word (as
   *   {@linkcode CommandEngine.fromLine} splits a command line).
   * @param limits Bounds of one run; default {@linkcode DEFAULT_COMMAND_LIMITS}.
   */
  constructor(
    words: readonly [string, ...string[]],
    limits: CommandLimits = DEFAULT_COMMAND_LIMITS,
  ) {
    this.#words = words;
    this.name = `${words[0]} (speech command)`;
    this.#limits = limits;
  }

  /**
   * The engine of a command line, split into its words (`util/command_words.ts`).
   *
   * @param command The command line, e.g. `espeak-ng --stdin --stdout -v {lang}`.
   * @param limits Bounds of one run; default {@linkcode DEFAULT_COMMAND_LIMITS}.
   * @throws {Error} with one sentence when the command is empty or holds shell syntax.
   */
  static async fromLine(
    command: string,
    limits: CommandLimits = DEFAULT_COMMAND_LIMITS,
  ): Promise<CommandEngine> {
    let words: string[];
    try {
      words = await commandWords(command);
    } catch (error) {
      throw new Error(`the speech command ${error instanceof Error ? error.message : error}`);
    }
    // commandWords gives at least one word, or throws.
    return new CommandEngine(words as [string, ...string[]], limits);
  }

  /** Every language: the program gets `{lang}` and picks its voice. */
  speaks(_lang: SpeechLang): boolean {
    return true;
  }

  /**
   * Speaks `text` in `lang`: runs the program and reads its WAVE output, resampled to the
   * episode's rate.
   *
   * @throws {NoVoiceError} when it exits with {@linkcode NO_VOICE_EXIT}.
   * @throws {Error} with one sentence when it cannot start, takes too long, writes too much,
   *   exits with another status than 0, or writes something else than 16-bit PCM WAVE.
   */
  async synthesize(text: string, lang: SpeechLang): Promise<Pcm> {
    const [program, ...args] = this.#words.map((word) => word.replaceAll("{lang}", lang));
    let child: Deno.ChildProcess;
    try {
      child = new Deno.Command(program!, {
        args,
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
        // A process group of its own, so that what it starts is killed with it.
        detached: true,
      }).spawn();
    } catch (error) {
      throw new Error(`cannot run ${program}: ${spawnFailure(error)}`);
    }
    const run = new Run(child, this.#limits);
    const [stdout, stderr] = await run.collect(new TextEncoder().encode(text));
    const status = await child.status;
    if (run.stopped !== undefined) throw new Error(`${program} ${run.stopped}`);
    if (status.code === NO_VOICE_EXIT) throw new NoVoiceError(program!, lang);
    if (!status.success) {
      const reason = new TextDecoder().decode(stderr).trim().split("\n")[0] ?? "";
      throw new Error(
        `${program} failed (exit ${status.code}${status.signal ? `, ${status.signal}` : ""})` +
          (reason ? `: ${reason.slice(0, 200)}` : ""),
      );
    }
    try {
      return resample(parseWav(stdout));
    } catch (error) {
      throw new Error(`${program}: ${error instanceof Error ? error.message : error}`);
    }
  }
}

/** One run of the program: its input written, its outputs read within the limits. */
class Run {
  /** Why the run was stopped ("took longer than 120 s"), if it was. */
  stopped: string | undefined;
  readonly #child: Deno.ChildProcess;
  readonly #limits: CommandLimits;
  /** Aborted by a stop: the reads end (a child the program left may hold the pipes open). */
  readonly #abort = new AbortController();

  constructor(child: Deno.ChildProcess, limits: CommandLimits) {
    this.#child = child;
    this.#limits = limits;
  }

  /** Writes `input`, reads standard output and error; both outputs, or empty ones after a stop. */
  async collect(input: Uint8Array): Promise<[Uint8Array, Uint8Array]> {
    const timer = setTimeout(
      () => this.#stop(`took longer than ${Math.round(this.#limits.timeoutMs / 1000)} s`),
      this.#limits.timeoutMs,
    );
    try {
      const writing = this.#write(input);
      const [stdout, stderr] = await Promise.all([
        this.#output(),
        this.#errors(this.#child.stderr),
      ]);
      await writing;
      return [stdout, stderr];
    } finally {
      clearTimeout(timer);
    }
  }

  /** Standard output, up to the limit: past it the run is stopped at once. */
  async #output(): Promise<Uint8Array> {
    const max = this.#limits.maxBytes;
    const out = await readAtMost(this.#child.stdout, max, this.#abort.signal).catch(() => null);
    if (out === undefined) {
      this.#stop(`wrote more than ${Math.round(max / 1048576)} MiB of audio for one chunk`);
    }
    return out ?? new Uint8Array(0);
  }

  async #write(input: Uint8Array): Promise<void> {
    const writer = this.#child.stdin.getWriter();
    // A program that exits without reading its input is judged by its output, not by this.
    await writer.write(input).catch(() => {});
    await writer.close().catch(() => {});
  }

  /**
   * Standard error's first {@linkcode STDERR_BYTES}; the rest is read and dropped, so that the
   * program never blocks on a full pipe.
   */
  async #errors(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
    const reader = stream.getReader();
    const kept = new Uint8Array(STDERR_BYTES);
    let size = 0;
    try {
      for (;;) {
        const cancel = () => void reader.cancel().catch(() => {});
        const { done, value } = await untilAborted(reader.read(), this.#abort.signal, cancel);
        if (done) break;
        const part = value.subarray(0, STDERR_BYTES - size);
        kept.set(part, size);
        size += part.length;
      }
    } catch {
      // Stopped: what was kept is enough.
    }
    return kept.subarray(0, size);
  }

  /** Kills the program's process group and ends the reads. */
  #stop(why: string): void {
    if (this.stopped !== undefined) return;
    this.stopped = why;
    try {
      Deno.kill(-this.#child.pid, "SIGKILL");
    } catch {
      try {
        this.#child.kill("SIGKILL");
      } catch {
        // It has exited already.
      }
    }
    this.#abort.abort(new Error(why));
  }
}

/**
 * Text to speech for the podcast: the text is cut into chunks of whole sentences
 * (`speech_text.ts`, on a worker thread: {@linkcode splitOffThread}), each chunk gets a
 * voice chosen from its script (Mandarin for Chinese, English otherwise), and an engine
 * turns one chunk at a time into 16-bit PCM, so memory stays bounded whatever the article's
 * length.
 *
 * The built-in engine is eSpeak NG compiled to WebAssembly (the npm package `espeak-ng`),
 * which ships inside the relay's binary and needs no program and no network; an external
 * engine can be run instead (`--tts-command`, see docs/publishing-builtin.md).
 *
 * @module
 */

import {
  type CompiledEspeak,
  compileEspeak,
  EspeakInstance,
  EspeakLayoutError,
  packagedEspeak,
  PlainEspeak,
} from "./espeak_instance.ts";

/** Mono 16-bit PCM audio. */
export interface Pcm {
  /** Samples, one channel. */
  readonly samples: Int16Array;
  /** Samples per second, e.g. 22050. */
  readonly sampleRate: number;
}

/** A voice the relay chooses: Mandarin Chinese or English. */
export type Voice = "cmn" | "en-us";

/** Something that turns one chunk of text into speech. */
export interface TtsEngine {
  /** A short name for logs and docs, e.g. `espeak-ng (built in)`. */
  readonly name: string;
  /**
   * Speaks `text` with `voice`. The samples returned belong to the caller, who may free
   * them (the podcast detaches their buffer once the chunk is encoded).
   *
   * @throws {Error} with one sentence when the engine fails.
   */
  synthesize(text: string, voice: Voice): Promise<Pcm>;
  /** Frees what the engine holds (a worker thread); it may be used again after. */
  close?(): void;
}

/**
 * The voice for `text`: Mandarin when it has at least as many Chinese characters as Latin
 * words (Mandarin's voice reads Latin words as English), English otherwise.
 */
export function chooseVoice(text: string): Voice {
  const han = text.match(/\p{Script=Han}/gu)?.length ?? 0;
  const latinWords = text.match(/[A-Za-z]+/g)?.length ?? 0;
  return han > 0 && han >= latinWords ? "cmn" : "en-us";
}

/**
 * Reads a RIFF/WAVE file of 16-bit PCM, any channel count (mixed down to mono).
 *
 * @throws {Error} when it is not 16-bit PCM WAVE.
 */
export function parseWav(bytes: Uint8Array): Pcm {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const tag = (at: number) => String.fromCharCode(...bytes.subarray(at, at + 4));
  if (bytes.length < 12 || tag(0) !== "RIFF" || tag(8) !== "WAVE") {
    throw new Error("the engine's output is not a WAVE file");
  }
  let offset = 12;
  let channels = 0;
  let sampleRate = 0;
  let bits = 0;
  while (offset + 8 <= bytes.length) {
    const id = tag(offset);
    // Engines writing to a pipe cannot seek back: their data size is 0 or 0xFFFFFFFF.
    let size = view.getUint32(offset + 4, true);
    const body = offset + 8;
    if (id === "fmt ") {
      const format = view.getUint16(body, true);
      channels = view.getUint16(body + 2, true);
      sampleRate = view.getUint32(body + 4, true);
      bits = view.getUint16(body + 14, true);
      if ((format !== 1 && format !== 0xfffe) || bits !== 16 || channels < 1) {
        throw new Error("the engine's output is not 16-bit PCM");
      }
    } else if (id === "data") {
      if (channels === 0) throw new Error("the engine's WAVE file has no format before its data");
      if (size === 0 || body + size > bytes.length) size = bytes.length - body;
      const frames = Math.floor(size / (2 * channels));
      const samples = new Int16Array(frames);
      for (let i = 0; i < frames; i++) {
        let sum = 0;
        for (let c = 0; c < channels; c++) {
          sum += view.getInt16(body + (i * channels + c) * 2, true);
        }
        samples[i] = Math.round(sum / channels);
      }
      return { samples, sampleRate };
    }
    offset = body + size + (size % 2);
  }
  throw new Error("the engine's WAVE file has no data");
}

/**
 * The built-in engine: eSpeak NG as WebAssembly, in this thread. The WebAssembly module is
 * compiled once and instantiated once ({@linkcode EspeakInstance}): the instance's 32 MB of
 * memory serve chunk after chunk, reset after each, and are given back by {@linkcode close}.
 * A build of eSpeak NG laid out otherwise (an upgrade of the npm package) is spoken the
 * glue's own way instead ({@linkcode PlainEspeak}), a fresh instance per chunk.
 */
export class EspeakWasm implements TtsEngine {
  /** A short name for logs and docs. */
  readonly name = "espeak-ng (WebAssembly, built in)";
  readonly #given: CompiledEspeak | undefined;
  #instance: Promise<EspeakInstance> | undefined;
  #plain: PlainEspeak | undefined;

  /** @param compiled The module, compiled already; else compiled at the first chunk. */
  constructor(compiled?: CompiledEspeak) {
    this.#given = compiled;
  }

  /** Speaks `text` with `voice`; rejects with one sentence when the engine fails. */
  async synthesize(text: string, voice: Voice): Promise<Pcm> {
    if (this.#plain) return parseWav(await this.#plain.speak(text, voice));
    this.#instance ??=
      (async () => await EspeakInstance.create(this.#given ?? await compileEspeak()))();
    const instance = this.#instance;
    try {
      return parseWav((await instance).speak(text, voice));
    } catch (error) {
      // A failed run may leave the instance in a state its reset does not cover: the next
      // chunk gets a new one.
      if (this.#instance === instance) this.#instance = undefined;
      if (!(error instanceof EspeakLayoutError)) throw error;
      this.#plain ??= new PlainEspeak(this.#given?.leftOut.url ?? packagedEspeak());
      return parseWav(await this.#plain.speak(text, voice));
    }
  }

  /** Drops the instance (and the module, when this engine compiled it). */
  close(): void {
    this.#instance = undefined;
    this.#plain = undefined;
  }
}

/**
 * An external engine (`--tts-command`): a program that reads the text on standard input
 * and writes a 16-bit PCM WAVE file to standard output. The command is split at spaces
 * (no shell); `{voice}` in it becomes `cmn` or `en-us`. Example:
 * `espeak-ng -v {voice} --stdin --stdout`.
 */
export class CommandEngine implements TtsEngine {
  /** The program's name and "(external)". */
  readonly name: string;
  readonly #argv: readonly string[];
  readonly #timeoutMs: number;

  /**
   * An engine that runs `command` for each chunk.
   *
   * @param command The command line, e.g. `espeak-ng -v {voice} --stdin --stdout`.
   * @param timeoutMs How long one chunk may take, ms.
   * @throws {Error} when the command is empty.
   */
  constructor(command: string, timeoutMs = 120_000) {
    this.#argv = command.trim().split(/\s+/).filter((part) => part !== "");
    if (this.#argv.length === 0) throw new Error("the TTS command is empty");
    this.name = `${this.#argv[0]} (external)`;
    this.#timeoutMs = timeoutMs;
  }

  /** Speaks `text` with `voice`; rejects with one sentence when the engine fails. */
  async synthesize(text: string, voice: Voice): Promise<Pcm> {
    const [program, ...args] = this.#argv.map((part) => part.replaceAll("{voice}", voice));
    let child: Deno.ChildProcess;
    try {
      child = new Deno.Command(program!, {
        args,
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(this.#timeoutMs),
      }).spawn();
    } catch (error) {
      throw new Error(`cannot run ${program}: ${error instanceof Error ? error.message : error}`);
    }
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(text)).catch(() => {});
    await writer.close().catch(() => {});
    const output = await child.output();
    if (!output.success) {
      const reason = new TextDecoder().decode(output.stderr).trim().split("\n")[0] ?? "";
      throw new Error(
        `${program} failed (exit ${output.code}${output.signal ? `, ${output.signal}` : ""})` +
          (reason ? `: ${reason.slice(0, 200)}` : ""),
      );
    }
    return parseWav(output.stdout);
  }
}

/**
 * What `tts_worker.ts` is asked: speak a chunk (`id` numbers it, for its answer), or cut a
 * text into chunks.
 */
export type WorkerRequest =
  | { readonly kind: "speak"; readonly id: number; readonly text: string; readonly voice: Voice }
  | { readonly kind: "split"; readonly text: string; readonly maxChars?: number };

/**
 * What `tts_worker.ts` answers: a chunk's PCM (with the request's `id`), the text's chunks,
 * or why it failed (with the `id` of a chunk).
 */
export type WorkerReply =
  | { readonly id: number; readonly samples: Int16Array; readonly sampleRate: number }
  | { readonly chunks: string[] }
  | { readonly id?: number; readonly error: string };

/** A new worker thread running `tts_worker.ts`, or `undefined` when none can start. */
function newWorker(): Worker | undefined {
  try {
    return new Worker(new URL("./tts_worker.ts", import.meta.url).href, { type: "module" });
  } catch {
    return undefined;
  }
}

/**
 * Cuts `text` into chunks for speech ({@linkcode splitForSpeech} of `speech_text.ts`) on a
 * worker thread of its own, which ends with the job (a parsed article is freed at once), so
 * that parsing a long article never holds up the relay's requests; in this thread when no
 * worker can start or load (a build without it).
 *
 * @param maxChars Longest chunk, characters; default that of `speech_text.ts` (500).
 * @returns The chunks, in reading order.
 * @throws {Error} with the worker's one sentence when the job failed.
 */
export async function splitOffThread(text: string, maxChars?: number): Promise<string[]> {
  const worker = newWorker();
  if (worker !== undefined) {
    try {
      const reply = await new Promise<WorkerReply | undefined>((resolve) => {
        worker.onmessage = (event: MessageEvent<WorkerReply>) => resolve(event.data);
        worker.onerror = (event) => {
          event.preventDefault();
          resolve(undefined);
        };
        const request: WorkerRequest = {
          kind: "split",
          text,
          ...(maxChars === undefined ? {} : { maxChars }),
        };
        worker.postMessage(request);
      });
      if (reply !== undefined && "error" in reply) throw new Error(reply.error);
      if (reply !== undefined && "chunks" in reply) return reply.chunks;
    } finally {
      worker.terminate();
    }
  }
  const { splitForSpeech } = await import("./speech_text.ts");
  return splitForSpeech(text, maxChars);
}

/** A chunk sent to the speech thread and not answered yet. */
interface Waiting {
  readonly text: string;
  readonly voice: Voice;
  resolve(pcm: Pcm): void;
  reject(error: Error): void;
}

/**
 * The built-in engine ({@linkcode EspeakWasm}) on a speech thread of its own, so that the
 * relay keeps answering while a chunk is spoken. The thread starts with the first chunk,
 * compiles the module and makes one instance, and speaks chunk after chunk with it until
 * {@linkcode close} ends it (the podcast closes it when its queue is empty): an episode of any
 * length needs one instance's memory, and an idle relay holds none (docs/benchmarks.md,
 * "Reading aloud"). When no worker can start (a build without it), chunks are spoken in this
 * thread instead.
 */
export class EspeakWorker implements TtsEngine {
  /** A short name for logs and docs. */
  readonly name = "espeak-ng (WebAssembly, built in)";
  #worker: Worker | undefined;
  /** The thread has answered: it loaded, so an error now is a failure, not a missing file. */
  #answered = false;
  readonly #waiting = new Map<number, Waiting>();
  #nextId = 0;
  #fallback: EspeakWasm | undefined;

  /** Speaks `text` with `voice` on the speech thread; rejects with one sentence. */
  synthesize(text: string, voice: Voice): Promise<Pcm> {
    if (this.#fallback) return this.#fallback.synthesize(text, voice);
    const worker = this.#worker ?? this.#start();
    if (worker === undefined) {
      this.#fallback = new EspeakWasm();
      return this.#fallback.synthesize(text, voice);
    }
    const id = this.#nextId++;
    return new Promise<Pcm>((resolve, reject) => {
      this.#waiting.set(id, { text, voice, resolve, reject });
      const request: WorkerRequest = { kind: "speak", id, text, voice };
      worker.postMessage(request);
    });
  }

  /** Ends the speech thread, and with it the compiled module and the instance's memory. */
  close(): void {
    this.#stop(new Error("the speech engine was closed"));
    this.#fallback?.close();
  }

  #start(): Worker | undefined {
    const worker = newWorker();
    if (worker === undefined) return undefined;
    this.#worker = worker;
    this.#answered = false;
    worker.onmessage = (event: MessageEvent<WorkerReply>) => {
      this.#answered = true;
      const reply = event.data;
      if (!("id" in reply) || reply.id === undefined) return;
      const waiting = this.#waiting.get(reply.id);
      this.#waiting.delete(reply.id);
      if ("error" in reply) waiting?.reject(new Error(reply.error));
      else if ("samples" in reply) {
        waiting?.resolve({ samples: reply.samples, sampleRate: reply.sampleRate });
      }
    };
    worker.onerror = (event) => {
      event.preventDefault();
      if (this.#answered) {
        this.#stop(new Error(`the speech thread stopped: ${event.message}`));
        return;
      }
      // The thread could not load (a build without it): speak in this thread from now on,
      // the chunks already sent included.
      const waiting = [...this.#waiting.values()];
      this.#waiting.clear();
      this.#stop(new Error("the speech thread could not start"));
      const fallback = this.#fallback = new EspeakWasm();
      for (const chunk of waiting) {
        fallback.synthesize(chunk.text, chunk.voice).then(chunk.resolve, chunk.reject);
      }
    };
    return worker;
  }

  /** Ends the thread; chunks still waiting are rejected with `reason`. */
  #stop(reason: Error): void {
    this.#worker?.terminate();
    this.#worker = undefined;
    for (const waiting of this.#waiting.values()) waiting.reject(reason);
    this.#waiting.clear();
  }
}

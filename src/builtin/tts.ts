/**
 * Text to speech for the podcast: the text is cut into chunks of whole sentences of one
 * language each (`speech_text.ts`, on a worker thread: {@linkcode splitOffThread}), and an
 * engine turns one chunk at a time into 16-bit PCM in a voice for the chunk's language, so
 * memory stays bounded whatever the article's length.
 *
 * The built-in engine is eSpeak NG compiled to WebAssembly (the npm package `espeak-ng`),
 * which ships inside the relay's binary and needs no program and no network; the household's
 * own engine can be run instead (`--speech-command`, `speech_command.ts`).
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
import type { SpeechLang } from "./speech_lang.ts";
import type { SpeechChunk } from "./speech_chunks.ts";
import { parseWav, type Pcm, resample } from "./wav.ts";

export type { Pcm } from "./wav.ts";

/**
 * The eSpeak NG voice for each language the built-in engine speaks. Japanese has none: the
 * build's Japanese voice reads kana only, and every kanji as the English words "Chinese
 * letter".
 */
const ESPEAK_VOICES: Readonly<Partial<Record<SpeechLang, string>>> = {
  en: "en-us",
  zh: "cmn",
  ko: "ko",
  ru: "ru",
  el: "el",
  ar: "ar",
  he: "he",
  hi: "hi",
  th: "th",
};

/** eSpeak NG's WAVE output as the episode takes it (its rate is the episodes' already). */
function readWav(bytes: Uint8Array): Pcm {
  return resample(parseWav(bytes));
}

/** Whether the built-in engine has a voice for `lang`. */
export function builtInSpeaks(lang: SpeechLang): boolean {
  return ESPEAK_VOICES[lang] !== undefined;
}

/** The eSpeak NG voice of `lang`; any other name is taken as a voice name as it is. */
function espeakVoice(lang: string): string {
  return ESPEAK_VOICES[lang as SpeechLang] ?? lang;
}

/** Something that turns one chunk of text into speech. */
export interface TtsEngine {
  /** A short name for logs and docs, e.g. `espeak-ng (built in)`. */
  readonly name: string;
  /**
   * Whether it has a voice for `lang`: a chunk in a language it has none for is not spoken.
   * Without it, every language is taken to have one.
   */
  speaks?(lang: SpeechLang): boolean;
  /**
   * Speaks `text` in a voice for `lang`, at the episodes' rate (`EPISODE_RATE` of `wav.ts`). The samples returned
   * belong to the caller, who may free them (the podcast detaches their buffer once the chunk
   * is encoded).
   *
   * @throws {Error} with one sentence when the engine fails.
   */
  synthesize(text: string, lang: SpeechLang): Promise<Pcm>;
  /** Frees what the engine holds (a worker thread); it may be used again after. */
  close?(): void;
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

  /** Whether eSpeak NG has a voice for `lang` (all but Japanese). */
  speaks(lang: SpeechLang): boolean {
    return builtInSpeaks(lang);
  }

  /**
   * Speaks `text` in eSpeak NG's voice for `lang` (any other string is taken as a voice's
   * name); rejects with one sentence when the engine fails.
   */
  async synthesize(text: string, lang: SpeechLang): Promise<Pcm> {
    const voice = espeakVoice(lang);
    if (this.#plain) return readWav(await this.#plain.speak(text, voice));
    this.#instance ??=
      (async () => await EspeakInstance.create(this.#given ?? await compileEspeak()))();
    const instance = this.#instance;
    try {
      return readWav((await instance).speak(text, voice));
    } catch (error) {
      // A failed run may leave the instance in a state its reset does not cover: the next
      // chunk gets a new one.
      if (this.#instance === instance) this.#instance = undefined;
      if (!(error instanceof EspeakLayoutError)) throw error;
      this.#plain ??= new PlainEspeak(this.#given?.leftOut.url ?? packagedEspeak());
      return readWav(await this.#plain.speak(text, voice));
    }
  }

  /** Drops the instance (and the module, when this engine compiled it). */
  close(): void {
    this.#instance = undefined;
    this.#plain = undefined;
  }
}

/**
 * What `tts_worker.ts` is asked: speak a chunk (`id` numbers it, for its answer), or cut a
 * text into chunks.
 */
export type WorkerRequest =
  | {
    readonly kind: "speak";
    readonly id: number;
    readonly text: string;
    readonly lang: SpeechLang;
  }
  | { readonly kind: "split"; readonly text: string; readonly maxChars?: number };

/**
 * What `tts_worker.ts` answers: a chunk's PCM (with the request's `id`), the text's chunks,
 * or why it failed (with the `id` of a chunk).
 */
export type WorkerReply =
  | { readonly id: number; readonly samples: Int16Array; readonly sampleRate: number }
  | { readonly chunks: SpeechChunk[] }
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
 * Cuts `text` into chunks for speech (`speechChunks` of `speech_text.ts`) on a
 * worker thread of its own, which ends with the job (a parsed article is freed at once), so
 * that parsing a long article never holds up the relay's requests; in this thread when no
 * worker can start or load (a build without it).
 *
 * @param maxChars Longest chunk, characters; default that of `speech_text.ts` (500).
 * @returns The chunks, in reading order.
 * @throws {Error} with the worker's one sentence when the job failed.
 */
export async function splitOffThread(text: string, maxChars?: number): Promise<SpeechChunk[]> {
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
  const { speechChunks } = await import("./speech_text.ts");
  return speechChunks(text, maxChars);
}

/** A chunk sent to the speech thread and not answered yet. */
interface Waiting {
  readonly text: string;
  readonly lang: SpeechLang;
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

  /** Whether eSpeak NG has a voice for `lang` (all but Japanese). */
  speaks(lang: SpeechLang): boolean {
    return builtInSpeaks(lang);
  }

  /** Speaks `text` in `lang` on the speech thread; rejects with one sentence. */
  synthesize(text: string, lang: SpeechLang): Promise<Pcm> {
    if (this.#fallback) return this.#fallback.synthesize(text, lang);
    const worker = this.#worker ?? this.#start();
    if (worker === undefined) {
      this.#fallback = new EspeakWasm();
      return this.#fallback.synthesize(text, lang);
    }
    const id = this.#nextId++;
    return new Promise<Pcm>((resolve, reject) => {
      this.#waiting.set(id, { text, lang, resolve, reject });
      const request: WorkerRequest = { kind: "speak", id, text, lang };
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
        fallback.synthesize(chunk.text, chunk.lang).then(chunk.resolve, chunk.reject);
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

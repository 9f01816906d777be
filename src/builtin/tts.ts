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

/** The emscripten module of the `espeak-ng` package, as far as the relay uses it. */
interface EspeakModule {
  FS: { readFile(path: string): Uint8Array };
}

/** Options of the emscripten glue, as far as the relay uses them. */
interface EspeakOptions {
  arguments: string[];
  preRun: Array<(module: { FS: { writeFile(path: string, data: string): void } }) => void>;
  print: (line: string) => void;
  printErr: (line: string) => void;
  instantiateWasm?: (
    imports: WebAssembly.Imports,
    done: (instance: WebAssembly.Instance, module: WebAssembly.Module) => void,
  ) => object;
}

/** eSpeak NG's module factory, loaded with the first chunk spoken (docs/benchmarks.md). */
async function createEspeak(options: EspeakOptions): Promise<EspeakModule> {
  const { default: create } = await import("espeak-ng");
  return await (create as unknown as (options: EspeakOptions) => Promise<EspeakModule>)(options);
}

/**
 * Compiles eSpeak NG's WebAssembly module (18 MB, voices included). A compiled module can
 * be posted to a worker thread, which then instantiates it without compiling it again.
 *
 * @throws the file system's or WebAssembly's errors.
 */
export async function compileEspeak(): Promise<WebAssembly.Module> {
  const url = new URL("espeak-ng.wasm", import.meta.resolve("espeak-ng"));
  const bytes = await Deno.readFile(url);
  try {
    return await WebAssembly.compile(bytes);
  } finally {
    // The module keeps its own copy: give the file's 18 MB back now rather than at the
    // garbage collector's next pass, which may come long after (a 17 MB lower peak).
    bytes.buffer.transfer(0);
  }
}

/**
 * The built-in engine: eSpeak NG as WebAssembly, in this thread. The WebAssembly module
 * is compiled once; each chunk runs in a fresh instance with its own 32 MB of memory, which
 * the garbage collector frees some time after the chunk is done (so a thread that speaks
 * many chunks holds several instances' memory at once: {@linkcode EspeakWorker} avoids it).
 */
export class EspeakWasm implements TtsEngine {
  /** A short name for logs and docs. */
  readonly name = "espeak-ng (WebAssembly, built in)";
  #compiled: Promise<WebAssembly.Module> | undefined;

  /** @param compiled The module, compiled already (e.g. by another thread); else compiled at the first chunk. */
  constructor(compiled?: WebAssembly.Module) {
    if (compiled !== undefined) this.#compiled = Promise.resolve(compiled);
  }

  /** Speaks `text` with `voice`; rejects with one sentence when the engine fails. */
  async synthesize(text: string, voice: Voice): Promise<Pcm> {
    const compiled = await this.#module();
    const errors: string[] = [];
    const module = await createEspeak({
      // -b 1: the input is UTF-8; -f: read it from a file, so text starting with "-"
      // is never taken for an option.
      arguments: ["-b", "1", "-v", voice, "-w", "/out.wav", "-f", "/in.txt"],
      preRun: [(m) => m.FS.writeFile("/in.txt", text)],
      print: () => {},
      printErr: (line) => errors.push(line),
      instantiateWasm: (imports, done) => {
        void WebAssembly.instantiate(compiled, imports).then((instance) =>
          done(instance, compiled)
        );
        return {};
      },
    });
    let wav: Uint8Array;
    try {
      wav = module.FS.readFile("/out.wav");
    } catch {
      throw new Error(`espeak-ng wrote no audio${errors.length ? `: ${errors[0]}` : ""}`);
    }
    return parseWav(wav);
  }

  #module(): Promise<WebAssembly.Module> {
    this.#compiled ??= compileEspeak();
    return this.#compiled;
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

/** What `tts_worker.ts` is asked: speak one chunk, or cut a text into chunks. */
export type WorkerRequest =
  | {
    readonly kind: "speak";
    readonly module: WebAssembly.Module;
    readonly text: string;
    readonly voice: Voice;
  }
  | { readonly kind: "split"; readonly text: string; readonly maxChars?: number };

/** What `tts_worker.ts` answers: the chunk's PCM, the text's chunks, or why it failed. */
export type WorkerReply =
  | { readonly samples: Int16Array; readonly sampleRate: number }
  | { readonly chunks: string[] }
  | { readonly error: string };

/**
 * Runs one request on a new worker thread (`tts_worker.ts`) and ends the thread when it
 * answers, so that everything the job allocated (a WebAssembly instance's 32 MB, a parsed
 * article) is freed at once instead of whenever the garbage collector gets to it.
 *
 * @returns The reply, or `undefined` when the worker cannot start or load (a build without
 *   it): the caller then does the job in this thread.
 * @throws {Error} with the worker's one sentence when the job failed.
 */
async function onWorkerThread(request: WorkerRequest): Promise<WorkerReply | undefined> {
  let worker: Worker;
  try {
    worker = new Worker(new URL("./tts_worker.ts", import.meta.url).href, { type: "module" });
  } catch {
    return undefined;
  }
  try {
    const reply = await new Promise<WorkerReply | undefined>((resolve) => {
      worker.onmessage = (event: MessageEvent<WorkerReply>) => resolve(event.data);
      worker.onerror = (event) => {
        event.preventDefault();
        resolve(undefined);
      };
      worker.postMessage(request);
    });
    if (reply !== undefined && "error" in reply) throw new Error(reply.error);
    return reply;
  } finally {
    worker.terminate();
  }
}

/**
 * Cuts `text` into chunks for speech ({@linkcode splitForSpeech} of `speech_text.ts`) on a
 * worker thread of its own, so that parsing a long article never holds up the relay's
 * requests; in this thread when no worker can start.
 *
 * @param maxChars Longest chunk, characters; default that of `speech_text.ts` (500).
 * @returns The chunks, in reading order.
 */
export async function splitOffThread(text: string, maxChars?: number): Promise<string[]> {
  const reply = await onWorkerThread({
    kind: "split",
    text,
    ...(maxChars === undefined ? {} : { maxChars }),
  });
  if (reply !== undefined && "chunks" in reply) return reply.chunks;
  const { splitForSpeech } = await import("./speech_text.ts");
  return splitForSpeech(text, maxChars);
}

/**
 * The built-in engine on worker threads ({@linkcode EspeakWasm} in `tts_worker.ts`), so
 * that the relay keeps answering while a chunk is spoken. The module is compiled once, in
 * this thread, and handed to a new worker thread for each chunk, which ends with the chunk:
 * each instance's memory is given back at once, so an episode of any length needs one
 * instance's memory (docs/benchmarks.md, "Reading aloud"). When no worker can start (a build
 * without it), chunks are spoken in this thread instead.
 */
export class EspeakWorker implements TtsEngine {
  /** A short name for logs and docs. */
  readonly name = "espeak-ng (WebAssembly, built in)";
  #compiled: Promise<WebAssembly.Module> | undefined;
  #fallback: EspeakWasm | undefined;

  /** Speaks `text` with `voice` on a worker thread; rejects with one sentence. */
  async synthesize(text: string, voice: Voice): Promise<Pcm> {
    if (this.#fallback) return await this.#fallback.synthesize(text, voice);
    this.#compiled ??= compileEspeak();
    const module = await this.#compiled.catch((error) => {
      this.#compiled = undefined;
      throw error;
    });
    const reply = await onWorkerThread({ kind: "speak", module, text, voice });
    if (reply !== undefined && "samples" in reply) {
      return { samples: reply.samples, sampleRate: reply.sampleRate };
    }
    // No worker thread here: speak in this thread from now on.
    this.#fallback = new EspeakWasm(module);
    return await this.#fallback.synthesize(text, voice);
  }

  /** Drops the compiled module (it is compiled again for the next chunk). */
  close(): void {
    this.#compiled = undefined;
    this.#fallback = undefined;
  }
}

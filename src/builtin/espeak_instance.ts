/**
 * One eSpeak NG WebAssembly instance that speaks chunk after chunk. eSpeak NG is a
 * command-line program compiled with emscripten: each chunk is one run of its `main`, which
 * leaves its memory (parsed options, loaded voice, heap) as the run left it. A new instance
 * per chunk costs a new 32 MB memory, which the garbage collector frees only some time later,
 * so a thread speaking many chunks held several at once. Instead, after each run the
 * instance's writable memory is put back as it was before the first run, and the same 32 MB
 * serves every chunk.
 *
 * The memory's layout (emscripten's, checked when the instance is made): the stack at the
 * bottom, then read-only data (eSpeak's tables and its 445 data files, 18 MB, which its file
 * system reads in place), the table of those files, then the program's variables and its heap.
 * What a run may change starts at the table: that part is kept as it was before the first run
 * (a copy of about 110 KB, the rest being zeros) and written back after each run; pages above
 * the copy are zeroed only where a run wrote to them, so pages never touched stay unmapped. The
 * stack (64 KB) is written back too.
 *
 * The data files are most of the module's 18 MB (the Russian dictionary alone is 8.5 MB), and
 * English and Mandarin read about 2.5 MB of them. So the module is compiled without them (a
 * compiled module keeps its bytes: 58 MB of memory compiled whole, 6 MB without), and each
 * file is read from `espeak-ng.wasm` into the instance's memory when eSpeak NG first opens it.
 *
 * @module
 */

/** A file of emscripten's in-memory file system, as far as the relay uses it. */
interface GlueFile {
  contents: Uint8Array | null;
  usedBytes: number;
}

/** The parts of the emscripten glue the relay uses. */
interface EspeakGlue {
  FS: {
    create(path: string, mode: number): GlueFile;
    mkdir(path: string): void;
    writeFile(path: string, data: string): void;
    readFile(path: string): Uint8Array;
    unlink(path: string): void;
    streams: Array<{ fd: number } | null | undefined>;
    close(stream: { fd: number }): void;
  };
  _main(argc: number, argv: number): number;
}

/** The exports of eSpeak NG's WebAssembly module the relay uses. */
interface EspeakExports {
  memory: WebAssembly.Memory;
  stackSave(): number;
  emscripten_stack_get_end(): number;
  stackRestore(pointer: number): void;
  stackAlloc(bytes: number): number;
  __emscripten_embedded_file_data: WebAssembly.Global;
}

/** Options of the emscripten glue, as far as the relay uses them. */
interface GlueOptions {
  noInitialRun: boolean;
  print: (line: string) => void;
  printErr: (line: string) => void;
  /** What `exit()` does after its clean-up: throw `toThrow` (emscripten's `ExitStatus`). */
  quit: (status: number, toThrow: unknown) => never;
  instantiateWasm: (
    imports: WebAssembly.Imports,
    done: (instance: WebAssembly.Instance, module: WebAssembly.Module) => void,
  ) => object;
}

const PAGE = 4096;

/** Where the bytes left out of the compiled module are: in `url`, at `fileOffset`. */
interface LeftOut {
  readonly url: URL;
  /** Where they start in the file, bytes. */
  readonly fileOffset: number;
  /** The file's size when it was compiled, bytes: another size is another build. */
  readonly fileSize: number;
  /** Where they go in the instance's memory, bytes. */
  readonly address: number;
  /** How many, bytes. */
  readonly length: number;
}

/** eSpeak NG's WebAssembly module compiled without its data files ({@linkcode compileEspeak}). */
export interface CompiledEspeak {
  readonly module: WebAssembly.Module;
  /** The data segment left out: the instance's memory gets it from the file. */
  readonly leftOut: LeftOut;
}

/**
 * The module's memory is not laid out as {@linkcode EspeakInstance} expects (another build of
 * eSpeak NG): {@linkcode PlainEspeak} speaks instead.
 */
export class EspeakLayoutError extends Error {
  override readonly name = "EspeakLayoutError";
}

/** Reads an unsigned LEB128 number at `at`: its value and the offset after it. */
function leb(bytes: Uint8Array, at: number): [number, number] {
  let value = 0;
  for (let shift = 0;; shift += 7) {
    const byte = bytes[at++];
    if (byte === undefined) throw new Error("espeak-ng.wasm is cut short");
    value += (byte & 0x7f) * 2 ** shift;
    if ((byte & 0x80) === 0) return [value, at];
  }
}

/** `value` as unsigned LEB128. */
function toLeb(value: number): number[] {
  const out: number[] = [];
  do {
    const low = value % 128;
    value = Math.floor(value / 128);
    out.push(value > 0 ? low | 0x80 : low);
  } while (value > 0);
  return out;
}

/**
 * The module's bytes with its largest data segment emptied (it stays, at length 0, so the
 * segment count is unchanged), and where that segment was.
 *
 * @throws {EspeakLayoutError} when the bytes are not a module with an active data segment, or
 *   its memory may grow (growing would move the memory the data files are read into).
 */
function leaveOutData(
  bytes: Uint8Array,
  url: URL,
): { stripped: Uint8Array<ArrayBuffer>; leftOut: LeftOut } {
  let at = 8;
  let fixedSize = false;
  while (at < bytes.length) {
    const sectionStart = at;
    const id = bytes[at]!;
    const [size, body] = leb(bytes, at + 1);
    at = body + size;
    if (id === 5) {
      // One memory whose maximum is its initial size.
      const [count, limits] = leb(bytes, body);
      const [initial, afterInitial] = leb(bytes, limits + 1);
      fixedSize = count === 1 && bytes[limits] === 1 && leb(bytes, afterInitial)[0] === initial;
    }
    if (id !== 11) continue;
    if (!fixedSize) {
      throw new EspeakLayoutError(
        "espeak-ng's memory may grow, which the relay's reset cannot follow",
      );
    }
    let [count, p] = leb(bytes, body);
    let largest: { lengthAt: number; end: number; address: number } | undefined;
    for (; count > 0; count--) {
      const [flags, afterFlags] = leb(bytes, p);
      // Active segments of memory 0 at an i32.const address are all emscripten writes.
      if (flags !== 0 || bytes[afterFlags] !== 0x41) break;
      const [address, afterAddress] = leb(bytes, afterFlags + 1);
      const [length, data] = leb(bytes, afterAddress + 1);
      if (largest === undefined || length > largest.end - largest.lengthAt) {
        largest = { lengthAt: afterAddress + 1, end: data + length, address };
      }
      p = data + length;
    }
    if (count > 0 || largest === undefined) break;
    const [length, data] = leb(bytes, largest.lengthAt);
    const removed = largest.end - largest.lengthAt - 1;
    const header = [11, ...toLeb(size - removed)];
    const stripped = new Uint8Array(bytes.length - removed - (body - sectionStart) + header.length);
    stripped.set(bytes.subarray(0, sectionStart));
    stripped.set(header, sectionStart);
    let out = sectionStart + header.length;
    stripped.set(bytes.subarray(body, largest.lengthAt), out);
    out += largest.lengthAt - body;
    stripped[out++] = 0;
    stripped.set(bytes.subarray(largest.end), out);
    return {
      stripped,
      leftOut: { url, fileOffset: data, fileSize: bytes.length, address: largest.address, length },
    };
  }
  throw new EspeakLayoutError("espeak-ng.wasm has no data segment the relay can leave out");
}

/** The WebAssembly module of the npm package `espeak-ng`, which the relay ships. */
export function packagedEspeak(): URL {
  return new URL("espeak-ng.wasm", import.meta.resolve("espeak-ng"));
}

/**
 * Compiles eSpeak NG's WebAssembly module without its data files (see the module's notes).
 * A compiled module can be posted to another thread, which instantiates it without
 * compiling it again.
 *
 * @param url The module's file; default {@linkcode packagedEspeak}. Its data files are read
 *   from it again, chunk after chunk, so it must stay as it is.
 * @throws {EspeakLayoutError} when the module is not laid out as this module expects; the
 *   file system's or WebAssembly's errors.
 */
export async function compileEspeak(url = packagedEspeak()): Promise<CompiledEspeak> {
  const bytes = await Deno.readFile(url);
  try {
    const { stripped, leftOut } = leaveOutData(bytes, url);
    return { module: await WebAssembly.compile(stripped), leftOut };
  } finally {
    // Give the file's 18 MB back now rather than at the garbage collector's next pass,
    // which may come long after (a 17 MB lower peak).
    bytes.buffer.transfer(0);
  }
}

/** Reads the left-out segment from `espeak-ng.wasm` into an instance's memory, piece by piece. */
class SegmentReader {
  readonly #leftOut: LeftOut;
  /** The whole file, when it cannot be read in pieces; kept as long as the instance. */
  #whole: Uint8Array | undefined;

  constructor(leftOut: LeftOut) {
    this.#leftOut = leftOut;
  }

  /**
   * Reads the segment's bytes for the memory at `address` into `into`, all of it.
   *
   * @throws {Error} with one sentence naming the file when it cannot be opened or read, or
   *   its size is not what it was when it was compiled (cut short, or replaced by another
   *   build, whose bytes would be read as eSpeak NG's data files).
   */
  read(address: number, into: Uint8Array): void {
    const { url, fileSize } = this.#leftOut;
    const offset = this.#leftOut.fileOffset + address - this.#leftOut.address;
    const changed = (size: number) =>
      new Error(`it has ${size} bytes, not the ${fileSize} it had when it was compiled`);
    try {
      if (this.#whole === undefined) {
        using file = Deno.openSync(url, { read: true });
        let size = fileSize;
        try {
          size = file.statSync().size;
          file.seekSync(offset, Deno.SeekMode.Start);
        } catch {
          // A file system that cannot seek (a compiled program's own files, perhaps): the
          // whole file, once (about 330 of its files are read for English).
          this.#whole = Deno.readFileSync(url);
        }
        if (this.#whole === undefined) {
          if (size !== fileSize) throw changed(size);
          for (let done = 0; done < into.length;) {
            const n = file.readSync(into.subarray(done));
            if (n === null) throw changed(offset + done);
            done += n;
          }
          return;
        }
      }
      if (this.#whole.length !== fileSize) throw changed(this.#whole.length);
      into.set(this.#whole.subarray(offset, offset + into.length));
    } catch (error) {
      // One sentence for the episode's record, whatever the file system said.
      const reason = error instanceof Error ? error.message.split("\n")[0] : String(error);
      throw new Error(`cannot read eSpeak NG's data from ${url.pathname}: ${reason}`);
    }
  }
}

/** One of eSpeak NG's data files in the instance's memory. */
interface DataFile {
  /** Its path in emscripten's file system. */
  readonly name: string;
  /** Where its bytes go, bytes into the memory. */
  readonly address: number;
  readonly length: number;
}

/**
 * Fills the instance's memory with the left-out segment but its data files, and lists those
 * files. The files' table (at `table`, near the segment's end: per file, the addresses of its
 * name and bytes, and its length) is read first.
 */
function fillAllButFiles(
  memory: WebAssembly.Memory,
  leftOut: LeftOut,
  reader: SegmentReader,
  table: number,
): DataFile[] {
  const bytes = new Uint8Array(memory.buffer);
  const end = leftOut.address + leftOut.length;
  const fill = (from: number, to: number) => {
    if (to > from) {
      reader.read(from, bytes.subarray(from, to));
    }
  };
  if (!(table >= leftOut.address && table < end)) {
    throw new EspeakLayoutError("espeak-ng's file table is not where the relay expects it");
  }
  fill(table, end);
  const words = new Uint32Array(memory.buffer);
  const spans: Array<{ nameAt: number; address: number; length: number }> = [];
  for (let entry = table >> 2; words[entry] !== 0; entry += 3) {
    spans.push({ nameAt: words[entry]!, length: words[entry + 1]!, address: words[entry + 2]! });
  }
  spans.sort((a, b) => a.address - b.address);
  let from = leftOut.address;
  for (const span of spans) {
    if (span.address < from || span.address + span.length > table) {
      throw new EspeakLayoutError("espeak-ng's data files are not laid out as the relay expects");
    }
    fill(from, span.address);
    from = span.address + span.length;
  }
  fill(from, table);
  const decoder = new TextDecoder();
  return spans.map(({ nameAt, address, length }) => ({
    name: decoder.decode(bytes.subarray(nameAt, bytes.indexOf(0, nameAt))),
    address,
    length,
  }));
}

/** An instance of eSpeak NG that is reset after each chunk it speaks. */
export class EspeakInstance {
  readonly #glue: EspeakGlue;
  readonly #exports: EspeakExports;
  readonly #errors: string[];
  /** Where the part of memory a run may change starts, bytes. */
  readonly #writable: number;
  /** That part as it was before the first run, up to its last byte that is not zero. */
  readonly #pristine: Uint8Array;
  readonly #stack: number;
  /** Where the stack ends (its lowest address), bytes. */
  readonly #stackEnd: number;
  /**
   * The stack's bytes as before the first run (64 KB): a C function that reads a local
   * before writing it would otherwise read what the previous chunk left there.
   */
  readonly #stackImage: Uint8Array;

  private constructor(glue: EspeakGlue, exports: EspeakExports, errors: string[]) {
    this.#glue = glue;
    this.#exports = exports;
    this.#errors = errors;
    this.#stack = exports.stackSave();
    this.#stackEnd = exports.emscripten_stack_get_end();
    this.#writable = Number(exports.__emscripten_embedded_file_data.value);
    if (!(this.#writable > this.#stack && this.#stack > this.#stackEnd)) {
      throw new EspeakLayoutError("espeak-ng's memory is not laid out as expected");
    }
    this.#stackImage = new Uint8Array(exports.memory.buffer).slice(this.#stackEnd, this.#stack);
    const region = new Uint8Array(exports.memory.buffer, this.#writable);
    let end = region.length;
    while (end > 0 && region[end - 1] === 0) end--;
    this.#pristine = region.slice(0, end);
  }

  /**
   * Instantiates `compiled` (eSpeak NG's module) and runs its start-up, not its `main`.
   *
   * @throws {EspeakLayoutError} when its memory is not laid out as this class expects.
   * @throws {Error} when the module cannot be instantiated or its memory is not laid out as
   *   this class expects.
   */
  static async create(compiled: CompiledEspeak): Promise<EspeakInstance> {
    const errors: string[] = [];
    let exports: EspeakExports | undefined;
    // The glue never settles when instantiation fails: this does.
    let fail: (error: unknown) => void = () => {};
    const failure = new Promise<never>((_, reject) => fail = reject);
    const options: GlueOptions & { FS?: EspeakGlue["FS"] } = {
      noInitialRun: true,
      print: () => {},
      printErr: (line) => errors.push(line),
      // The glue's own sets the thread's exit code to eSpeak NG's (1 for a failed chunk),
      // which the relay's process would end with when no speech thread could start.
      quit: (_status, toThrow) => {
        throw toThrow;
      },
      instantiateWasm: (imports, done) => {
        const reader = new SegmentReader(compiled.leftOut);
        let files: DataFile[] = [];
        // The glue's own loader makes each directory again for each file, each refusal an
        // error with a stack trace: 22 MB of garbage for 445 files.
        (imports.env as Record<string, unknown>)._emscripten_fs_load_embedded_files = () =>
          addFiles(options.FS!, exports!.memory, reader, files);
        void WebAssembly.instantiate(compiled.module, imports).then((made) => {
          exports = made.exports as unknown as EspeakExports;
          // Before the glue's start-up, which reads the files' table.
          const table = Number(exports.__emscripten_embedded_file_data.value);
          files = fillAllButFiles(exports.memory, compiled.leftOut, reader, table);
          done(made, compiled.module);
        }).catch(fail);
        return {};
      },
    };
    const create = (await import("espeak-ng")).default as unknown as (
      options: GlueOptions,
    ) => Promise<EspeakGlue>;
    const glue = await Promise.race([create(options), failure]);
    if (exports === undefined) throw new Error("espeak-ng did not start");
    return new EspeakInstance(glue, exports, errors);
  }

  /**
   * Speaks `text` with `voice` (an eSpeak NG voice name) and resets the instance.
   *
   * @returns The WAVE file eSpeak NG wrote.
   * @throws {Error} with one sentence when eSpeak NG wrote no audio; the instance should then
   *   be dropped (a failed run may leave the runtime in a state the reset does not cover).
   */
  speak(text: string, voice: string): Uint8Array {
    const fs = this.#glue.FS;
    this.#errors.length = 0;
    fs.writeFile("/in.txt", text);
    try {
      // -b 1: the input is UTF-8; -f: read it from a file, so text starting with "-" is
      // never taken for an option.
      this.#main(["espeak-ng", "-b", "1", "-v", voice, "-w", "/out.wav", "-f", "/in.txt"]);
      try {
        return fs.readFile("/out.wav");
      } catch {
        const reason = this.#errors.length ? `: ${this.#errors[0]}` : "";
        throw new Error(`espeak-ng wrote no audio${reason}`);
      }
    } finally {
      for (const path of ["/in.txt", "/out.wav"]) {
        try {
          fs.unlink(path);
        } catch {
          // Not written.
        }
      }
      this.#reset();
    }
  }

  /** Runs `main` with `args` on the stack; `exit()` ends it as a return would. */
  #main(args: string[]): void {
    const exports = this.#exports;
    const encoder = new TextEncoder();
    const pointers = args.map((arg) => {
      const bytes = encoder.encode(`${arg}\0`);
      const at = exports.stackAlloc(bytes.length);
      new Uint8Array(exports.memory.buffer).set(bytes, at);
      return at;
    });
    const argv = exports.stackAlloc((pointers.length + 1) * 4);
    new Uint32Array(exports.memory.buffer, argv, pointers.length + 1).set([...pointers, 0]);
    try {
      this.#glue._main(pointers.length, argv);
    } catch (error) {
      // exit() throws emscripten's ExitStatus; anything else is a failure of the run.
      if ((error as { name?: unknown } | null)?.name !== "ExitStatus") throw error;
    }
  }

  /** Puts the writable memory, the stack and the open files back as before any run. */
  #reset(): void {
    const memory = new Uint8Array(this.#exports.memory.buffer);
    memory.set(this.#pristine, this.#writable);
    const words = new Int32Array(this.#exports.memory.buffer);
    const from = this.#writable + this.#pristine.length;
    const firstPage = Math.ceil(from / PAGE) * PAGE;
    memory.fill(0, from, Math.min(firstPage, memory.length));
    for (let page = firstPage; page < memory.length; page += PAGE) {
      for (let i = page >> 2, end = (page + PAGE) >> 2; i < end; i++) {
        if (words[i] !== 0) {
          memory.fill(0, page, page + PAGE);
          break;
        }
      }
    }
    memory.set(this.#stackImage, this.#stackEnd);
    this.#exports.stackRestore(this.#stack);
    // Files a run left open (its C streams are gone with the reset) would be kept forever.
    for (const stream of this.#glue.FS.streams) {
      if (stream && stream.fd > 2) this.#glue.FS.close(stream);
    }
  }
}

/**
 * Adds eSpeak NG's data files to the glue's file system, each read from `espeak-ng.wasm` into
 * the instance's memory when its contents are first asked for (the glue reads a file's bytes
 * in place, through its node's `contents`). Their bytes lie below the part of memory a reset
 * restores, so they stay once read.
 */
function addFiles(
  fs: EspeakGlue["FS"],
  memory: WebAssembly.Memory,
  reader: SegmentReader,
  files: readonly DataFile[],
): void {
  const made = new Set<string>(["", "/"]);
  for (const file of files) {
    const parts = file.name.split("/");
    for (let i = 2; i < parts.length; i++) {
      const dir = parts.slice(0, i).join("/");
      if (!made.has(dir)) fs.mkdir(dir);
      made.add(dir);
    }
    // Read and write for all, as the glue's own loader makes them.
    const node = fs.create(file.name, 0o666);
    const view = new Uint8Array(memory.buffer, file.address, file.length);
    node.usedBytes = file.length;
    Object.defineProperty(node, "contents", {
      configurable: true,
      enumerable: true,
      get() {
        reader.read(file.address, view);
        Object.defineProperty(node, "contents", { value: view, writable: true, enumerable: true });
        return view;
      },
      set(value: Uint8Array | null) {
        Object.defineProperty(node, "contents", { value, writable: true, enumerable: true });
      },
    });
  }
}

/**
 * eSpeak NG as its glue runs it by itself: the whole module (data files included, 58 MB once
 * compiled) compiled at the first chunk, and a fresh instance for each chunk, dropped after
 * it. Slower and larger than {@linkcode EspeakInstance}, for a build of eSpeak NG whose
 * memory that class does not know ({@linkcode EspeakLayoutError}).
 */
export class PlainEspeak {
  readonly #url: URL;
  #module: Promise<WebAssembly.Module> | undefined;

  /** @param url The module's file. */
  constructor(url: URL) {
    this.#url = url;
  }

  /**
   * Speaks `text` with `voice` (an eSpeak NG voice name) in a fresh instance.
   *
   * @returns The WAVE file eSpeak NG wrote.
   * @throws {Error} with one sentence when eSpeak NG wrote no audio.
   */
  async speak(text: string, voice: string): Promise<Uint8Array> {
    this.#module ??= Deno.readFile(this.#url).then((bytes) => WebAssembly.compile(bytes));
    const module = await this.#module;
    const errors: string[] = [];
    // The glue never settles when instantiation fails: this does.
    let fail: (error: unknown) => void = () => {};
    const failure = new Promise<never>((_, reject) => fail = reject);
    const create = (await import("espeak-ng")).default as unknown as (
      options: Omit<GlueOptions, "noInitialRun"> & {
        arguments: string[];
        preRun: Array<(glue: EspeakGlue) => void>;
      },
    ) => Promise<EspeakGlue>;
    const glue = await Promise.race([
      create({
        // As EspeakInstance runs it: the input is UTF-8, read from a file.
        arguments: ["-b", "1", "-v", voice, "-w", "/out.wav", "-f", "/in.txt"],
        preRun: [(glue) => glue.FS.writeFile("/in.txt", text)],
        print: () => {},
        printErr: (line) => errors.push(line),
        // The glue's own sets the process's exit code to eSpeak NG's, a failed chunk's 1.
        quit: (_status, toThrow) => {
          throw toThrow;
        },
        instantiateWasm: (imports, done) => {
          void WebAssembly.instantiate(module, imports).then((made) => done(made, module))
            .catch(fail);
          return {};
        },
      }),
      failure,
    ]);
    try {
      return glue.FS.readFile("/out.wav");
    } catch {
      throw new Error(`espeak-ng wrote no audio${errors.length ? `: ${errors[0]}` : ""}`);
    }
  }
}

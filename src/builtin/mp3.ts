/**
 * MP3 encoding for the podcast with LAME compiled to WebAssembly (the npm package
 * `wasm-media-encoders`, 130 KB): mono, constant bit rate, so a file's duration follows
 * from its size and every podcast app can seek in it.
 *
 * @module
 */

import type { WasmMediaEncoder } from "wasm-media-encoders";
import type { Pcm } from "./tts.ts";

/** Bit rate of the episodes, kbit/s: plenty for speech (6 minutes ≈ 2.2 MB). */
export const MP3_KBPS = 48;

/** Sample rates MP3 can carry. */
const MP3_RATES = [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000] as const;

/** Samples encoded between two yields to the event loop (1 s at 22 050 Hz). */
const SLICE_SAMPLES = 22050;

/**
 * Encodes PCM chunks into self-contained MP3 segments: each segment starts and ends on a
 * frame boundary, so segments appended one after another make one playable file, and a
 * file cut back to the end of a segment is still valid (this is how an interrupted episode
 * resumes).
 */
export class Mp3SegmentEncoder {
  #encoder: Promise<WasmMediaEncoder<"audio/mpeg">> | undefined;

  /**
   * Encodes one chunk of speech as an MP3 segment. Yields to the event loop every second of
   * audio so that requests keep being answered while a long episode is encoded.
   *
   * @throws {Error} when the sample rate is not one MP3 can carry.
   */
  async encode(pcm: Pcm): Promise<Uint8Array> {
    if (!(MP3_RATES as readonly number[]).includes(pcm.sampleRate)) {
      throw new Error(`MP3 cannot carry ${pcm.sampleRate} Hz audio`);
    }
    // Loaded with the first episode, not when the relay starts (docs/benchmarks.md).
    this.#encoder ??= import("wasm-media-encoders").then((m) => m.createMp3Encoder());
    const encoder = await this.#encoder;
    encoder.configure({ channels: 1, sampleRate: pcm.sampleRate, bitrate: MP3_KBPS });
    const parts: Uint8Array[] = [];
    const slice = new Float32Array(SLICE_SAMPLES);
    for (let start = 0; start < pcm.samples.length; start += SLICE_SAMPLES) {
      const end = Math.min(start + SLICE_SAMPLES, pcm.samples.length);
      for (let i = start; i < end; i++) slice[i - start] = pcm.samples[i]! / 32768;
      // The encoder reuses its output buffer: copy before the next call.
      parts.push(encoder.encode([slice.subarray(0, end - start)]).slice());
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    parts.push(encoder.finalize().slice());
    const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
    let offset = 0;
    for (const part of parts) {
      out.set(part, offset);
      offset += part.length;
    }
    return out;
  }
}

/** Layer III bit rates, kbit/s, by header index: MPEG 1, then MPEG 2 and 2.5 (ISO 11172-3, 13818-3). */
const KBPS_V1 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
const KBPS_V2 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];

/** Sample rates by the header's version bits (3: MPEG 1, 2: MPEG 2, 0: MPEG 2.5). */
const RATES_BY_VERSION: Readonly<Record<number, readonly number[]>> = {
  3: [44100, 48000, 32000],
  2: [22050, 24000, 16000],
  0: [11025, 12000, 8000],
};

/** The longest Layer III frame, bytes (MPEG 1 at 320 kbit/s and 32 kHz, padded: 1,441). */
const MAX_FRAME_BYTES = 1441;

/** The fields of one MPEG audio Layer III frame header that the relay needs. */
interface FrameHeader {
  /** The whole frame, header included, bytes. */
  readonly length: number;
  readonly sampleRate: number;
  /** 1,152 for MPEG 1, 576 for MPEG 2 and 2.5. */
  readonly samplesPerFrame: number;
  /** Where the frame's main data starts, bytes from the frame's start (after CRC and side information). */
  readonly dataOffset: number;
}

/** The Layer III frame header at `at`, or `undefined` when the bytes there are not one. */
function frameHeader(bytes: Uint8Array, at: number): FrameHeader | undefined {
  if (at + 4 > bytes.length) return undefined;
  const b1 = bytes[at + 1]!, b2 = bytes[at + 2]!, b3 = bytes[at + 3]!;
  if (bytes[at] !== 0xff || (b1 & 0xe0) !== 0xe0 || ((b1 >> 1) & 3) !== 1) return undefined;
  const version = (b1 >> 3) & 3;
  const rate = RATES_BY_VERSION[version]?.[(b2 >> 2) & 3];
  const kbps = (version === 3 ? KBPS_V1 : KBPS_V2)[b2 >> 4];
  if (rate === undefined || !kbps) return undefined;
  const samplesPerFrame = version === 3 ? 1152 : 576;
  const mono = b3 >> 6 === 3;
  const sideInfo = version === 3 ? (mono ? 17 : 32) : (mono ? 9 : 17);
  return {
    length: Math.floor((samplesPerFrame / 8) * kbps * 1000 / rate) + ((b2 >> 1) & 1),
    sampleRate: rate,
    samplesPerFrame,
    dataOffset: 4 + ((b1 & 1) === 0 ? 2 : 0) + sideInfo,
  };
}

/** Flags of the Info frame: frame count, byte count and table of contents present. */
const INFO_FLAGS = 0x7;
/** The Info frame's fields after its tag: flags, frames, bytes (4 each), a 100-byte TOC. */
const INFO_BODY_BYTES = 4 + 4 + 4 + 4 + 100;

/**
 * A Xing-style "Info" frame (the header LAME writes into constant-bit-rate files): a
 * silent frame at the start of the file that records how many audio frames and bytes the
 * file holds, so that players and ffprobe know its exact duration instead of estimating it
 * from the bit rate, plus a table of contents for seeking (linear, the bit rate being
 * constant).
 *
 * @param header The first 4 bytes of any audio frame of the file: the Info frame takes its
 *   version, rate, bit rate and channels, without padding or CRC.
 * @param counts The audio frames after the Info frame, and the file's whole length, bytes;
 *   zeros for the placeholder written before the audio is complete.
 * @throws {Error} when `header` is not a Layer III frame header.
 */
export function infoFrame(
  header: Uint8Array,
  counts: { readonly frames: number; readonly bytes: number } = { frames: 0, bytes: 0 },
): Uint8Array {
  const head = Uint8Array.of(header[0]!, header[1]! | 0x01, header[2]! & ~0x02, header[3]!);
  const parsed = frameHeader(head, 0);
  if (parsed === undefined || parsed.dataOffset + INFO_BODY_BYTES > parsed.length) {
    throw new Error("not an MP3 frame header an Info frame can follow");
  }
  const frame = new Uint8Array(parsed.length);
  const view = new DataView(frame.buffer);
  frame.set(head);
  const at = parsed.dataOffset;
  frame.set(new TextEncoder().encode("Info"), at);
  view.setUint32(at + 4, INFO_FLAGS);
  view.setUint32(at + 8, counts.frames);
  view.setUint32(at + 12, counts.bytes);
  for (let i = 0; i < 100; i++) frame[at + 16 + i] = Math.floor((i * 256) / 100);
  return frame;
}

/** What a walk over every frame of an MP3 file found. */
export interface Mp3Summary {
  /** Audio frames (an Info frame at the start is not one). */
  readonly frames: number;
  /** The file's length, bytes. */
  readonly bytes: number;
  /** Seconds of audio: frames × samples per frame ÷ sample rate. */
  readonly seconds: number;
  /** Samples per second, the same in every frame. */
  readonly sampleRate: number;
  /** What the Info (or Xing) frame at the start records, when the file has one. */
  readonly info?: { readonly frames: number; readonly bytes: number };
}

/**
 * Walks every frame of the MP3 file at `path`, reading it 64 KiB at a time (memory does
 * not grow with the file), and checks that it is Layer III frames from its first byte to its
 * last, all at one sample rate.
 *
 * @throws {Error} naming the byte offset of the first thing that is not a frame, and the file
 *   system's errors.
 */
export async function walkMp3File(path: string): Promise<Mp3Summary> {
  using file = await Deno.open(path, { read: true });
  const buffer = new Uint8Array(64 * 1024);
  let filled = 0, at = 0, base = 0, eof = false;
  let frames = 0, sampleRate = 0, samplesPerFrame = 0;
  let info: Mp3Summary["info"];
  for (;;) {
    if (!eof && filled - at < MAX_FRAME_BYTES) {
      buffer.copyWithin(0, at, filled);
      base += at;
      filled -= at;
      at = 0;
      while (!eof && filled < buffer.length) {
        const n = await file.read(buffer.subarray(filled));
        if (n === null) eof = true;
        else filled += n;
      }
    }
    if (at >= filled) break;
    const header = frameHeader(buffer.subarray(0, filled), at);
    if (header === undefined) throw new Error(`no MP3 frame at byte ${base + at}`);
    if (at + header.length > filled) throw new Error(`a cut-off MP3 frame at byte ${base + at}`);
    if (sampleRate !== 0 && header.sampleRate !== sampleRate) {
      throw new Error(`the sample rate changes at byte ${base + at}`);
    }
    sampleRate = header.sampleRate;
    samplesPerFrame = header.samplesPerFrame;
    const tag = base + at === 0 ? readTag(buffer, at + header.dataOffset) : undefined;
    if (tag === undefined) frames++;
    else info = tag;
    at += header.length;
  }
  return {
    frames,
    bytes: base + filled,
    seconds: sampleRate === 0 ? 0 : (frames * samplesPerFrame) / sampleRate,
    sampleRate,
    ...(info === undefined ? {} : { info }),
  };
}

/** The counts of an Info or Xing tag at `at` (both flags assumed present), if there is one. */
function readTag(bytes: Uint8Array, at: number): Mp3Summary["info"] {
  const tag = String.fromCharCode(...bytes.subarray(at, at + 4));
  if (tag !== "Info" && tag !== "Xing") return undefined;
  const view = new DataView(bytes.buffer, bytes.byteOffset + at);
  const flags = view.getUint32(4);
  let field = 8;
  const frames = flags & 1 ? view.getUint32(field) : 0;
  if (flags & 1) field += 4;
  const bytesCount = flags & 2 ? view.getUint32(field) : 0;
  return { frames, bytes: bytesCount };
}

/**
 * Seconds of audio in an MP3 segment held in memory: its frames × samples per frame ÷ rate,
 * which is what a player plays, encoder padding included (not the PCM's length).
 *
 * @throws {Error} naming the byte offset of the first thing that is not a whole frame.
 */
export function segmentSeconds(segment: Uint8Array): number {
  let samples = 0;
  let rate = 1;
  for (let at = 0; at < segment.length;) {
    const header = frameHeader(segment, at);
    if (header === undefined || at + header.length > segment.length) {
      throw new Error(`no whole MP3 frame at byte ${at} of a segment`);
    }
    samples += header.samplesPerFrame;
    rate = header.sampleRate;
    at += header.length;
  }
  return samples / rate;
}

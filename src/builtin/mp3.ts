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

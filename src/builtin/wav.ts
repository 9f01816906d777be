/**
 * Speech audio as the podcast takes it: mono 16-bit PCM at one rate per episode. A speech
 * command writes a RIFF/WAVE file of 16-bit PCM at whatever rate and channel count its voice
 * has (Piper's voices are 16 or 22.05 kHz, Debian's espeak-ng 22.05 kHz); it is mixed down
 * to one channel and resampled to {@linkcode EPISODE_RATE}, since an MP3 file keeps one rate
 * from its first frame to its last.
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

/** The rate of every episode's audio, Hz: the built-in engine's, and plenty for speech. */
export const EPISODE_RATE = 22050;

/**
 * Reads a RIFF/WAVE file of 16-bit PCM, any channel count (mixed down to mono). A data size
 * of 0 or 0xFFFFFFFF (a program writing to a pipe cannot seek back to fill it in) means "up to
 * the end".
 *
 * @throws {Error} with one sentence when it is not 16-bit PCM WAVE.
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
  while (offset + 8 <= bytes.length) {
    const id = tag(offset);
    let size = view.getUint32(offset + 4, true);
    const body = offset + 8;
    if (id === "fmt ") {
      if (body + 16 > bytes.length) break;
      const format = view.getUint16(body, true);
      channels = view.getUint16(body + 2, true);
      sampleRate = view.getUint32(body + 4, true);
      const bits = view.getUint16(body + 14, true);
      if ((format !== 1 && format !== 0xfffe) || bits !== 16 || channels < 1) {
        throw new Error("the engine's output is not 16-bit PCM");
      }
      if (sampleRate < 1000 || sampleRate > 384_000) {
        throw new Error(`the engine's output has a sample rate of ${sampleRate} Hz`);
      }
    } else if (id === "data") {
      if (channels === 0) throw new Error("the engine's WAVE file has no format before its data");
      if (size === 0 || body + size > bytes.length) size = bytes.length - body;
      return { samples: mixDown(view, body, size, channels), sampleRate };
    }
    offset = body + size + (size % 2);
  }
  throw new Error("the engine's WAVE file has no data");
}

/** The frames of interleaved 16-bit samples at `body`, averaged over their channels. */
function mixDown(view: DataView, body: number, size: number, channels: number): Int16Array {
  const frames = Math.floor(size / (2 * channels));
  const samples = new Int16Array(frames);
  for (let i = 0; i < frames; i++) {
    let sum = 0;
    for (let c = 0; c < channels; c++) sum += view.getInt16(body + (i * channels + c) * 2, true);
    samples[i] = Math.round(sum / channels);
  }
  return samples;
}

/**
 * `pcm` at `rate` Hz. Each output sample is the mean of the input over its own span (a box
 * filter, which keeps speech's energy below the new Nyquist frequency well enough when the rate
 * goes down) or, going up, linearly interpolated. Speech only: this is not a studio resampler.
 *
 * @param rate Samples per second wanted; default {@linkcode EPISODE_RATE}.
 * @returns `pcm` itself when it is at that rate already.
 */
export function resample(pcm: Pcm, rate = EPISODE_RATE): Pcm {
  if (pcm.sampleRate === rate) return pcm;
  const input = pcm.samples;
  const step = pcm.sampleRate / rate;
  const length = Math.floor(input.length / step);
  const out = new Int16Array(length);
  for (let i = 0; i < length; i++) {
    const start = i * step;
    if (step <= 1) {
      const at = Math.floor(start);
      const next = input[Math.min(at + 1, input.length - 1)]!;
      out[i] = Math.round(input[at]! + (next - input[at]!) * (start - at));
      continue;
    }
    const from = Math.floor(start);
    const to = Math.min(input.length, Math.floor(start + step));
    let sum = 0;
    for (let j = from; j < to; j++) sum += input[j]!;
    out[i] = Math.round(sum / Math.max(1, to - from));
  }
  return { samples: out, sampleRate: rate };
}

/**
 * The Info tag of the podcast's MP3 files: the Xing header as LAME writes it for a
 * constant-bit-rate file, in a silent first frame, holding the file's frame count, its size
 * and a seek table. Without it a player estimates an episode's length from its size and
 * the first frame's bit rate, and Apple Podcasts asks for it. Players that know the tag
 * (all the common ones) skip that frame; others play 26 ms of silence.
 *
 * An episode is spoken chunk by chunk and appended to its file, so its length is known only
 * at the end: the first chunk is written after an empty Info frame
 * ({@linkcode infoPlaceholder}), and {@linkcode writeInfoTag} fills it in when the episode
 * is done. Layout from the Xing header description (frames, bytes and TOC flags, then
 * those fields, big-endian) and the MPEG audio frame header (ISO/IEC 11172-3, 13818-3).
 *
 * @module
 */

const BITRATES_V1 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
const BITRATES_V2 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];
const RATES: Readonly<Record<number, readonly number[]>> = {
  3: [44100, 48000, 32000], // MPEG 1
  2: [22050, 24000, 16000], // MPEG 2
  0: [11025, 12000, 8000], // MPEG 2.5
};

/** "Info": LAME's tag name for a constant-bit-rate file ("Xing" is for variable ones). */
const INFO = [0x49, 0x6e, 0x66, 0x6f];
/** Flags: the frame count, the byte count and the seek table are present. */
const FLAGS = 0x7;
/** Tag name, flags, frames, bytes and a 100-byte seek table. */
const TAG_BYTES = 4 + 4 + 4 + 4 + 100;

/** A Layer III frame header, read. */
interface FrameHeader {
  readonly version: number;
  readonly bitrateIndex: number;
  readonly rate: number;
  readonly mono: boolean;
  readonly length: number;
}

function readHeader(bytes: Uint8Array, offset: number): FrameHeader | undefined {
  if (offset + 4 > bytes.length) return undefined;
  const b1 = bytes[offset + 1]!, b2 = bytes[offset + 2]!, b3 = bytes[offset + 3]!;
  if (bytes[offset] !== 0xff || (b1 & 0xe0) !== 0xe0) return undefined;
  const version = (b1 >> 3) & 3;
  if (version === 1 || ((b1 >> 1) & 3) !== 1) return undefined;
  const bitrateIndex = b2 >> 4;
  const bitrate = (version === 3 ? BITRATES_V1 : BITRATES_V2)[bitrateIndex];
  const rate = RATES[version]![(b2 >> 2) & 3];
  if (!bitrate || rate === undefined) return undefined;
  const samples = version === 3 ? 1152 : 576;
  const length = Math.floor((samples / 8) * bitrate * 1000 / rate) + ((b2 >> 1) & 1);
  return { version, bitrateIndex, rate, mono: (b3 >> 6) === 3, length };
}

/** Where the tag starts in a frame: after the header and the side information. */
function tagOffset(header: FrameHeader): number {
  return 4 + (header.version === 3 ? (header.mono ? 17 : 32) : (header.mono ? 9 : 17));
}

/**
 * An empty Info frame to write before an episode's first audio: the header of `audio`'s
 * first frame (same version, sample rate and channels; no padding, no CRC), a bit rate
 * large enough for the tag, silence, and the tag's name with zero counts.
 *
 * @throws {Error} when `audio` does not start with a Layer III frame.
 */
export function infoPlaceholder(audio: Uint8Array): Uint8Array {
  let header = readHeader(audio, 0);
  if (header === undefined) throw new Error("the audio does not start with an MP3 frame");
  const bytes = audio.slice(0, 4);
  bytes[1] = bytes[1]! | 0x01; // no CRC
  bytes[2] = bytes[2]! & ~0x02; // no padding
  // The lowest bit rates make frames too small for the tag: take the next that holds it.
  for (let index = header.bitrateIndex;; index++) {
    bytes[2] = (bytes[2]! & 0x0f) | (index << 4);
    header = readHeader(bytes, 0);
    if (header !== undefined && header.length >= tagOffset(header) + TAG_BYTES) break;
    if (index >= 14) throw new Error("no MP3 bit rate holds the Info tag");
  }
  const frame = new Uint8Array(header.length);
  frame.set(bytes.subarray(0, 4));
  frame.set(INFO, tagOffset(header));
  return frame;
}

/**
 * Fills in the Info frame at the start of an MP3 file: the audio frames after it, the
 * file's size in bytes, and a seek table for a constant bit rate (percent i of the time is
 * at i % of the bytes). A file that does not start with an empty Info frame (an episode
 * begun by an older relay) is left as it is.
 *
 * @returns Whether the tag was written.
 * @throws the file system's errors; {@link Error} when the file is not a sequence of frames.
 */
export async function writeInfoTag(path: string): Promise<boolean> {
  const bytes = await Deno.readFile(path);
  const first = readHeader(bytes, 0);
  if (first === undefined) return false;
  const at = tagOffset(first);
  const tagged = INFO.every((byte, i) => bytes[at + i] === byte);
  if (!tagged || new DataView(bytes.buffer).getUint32(at + 8) !== 0) return false;
  let frames = 0;
  for (let offset = first.length; offset < bytes.length; frames++) {
    const header = readHeader(bytes, offset);
    if (header === undefined) throw new Error(`no MP3 frame at byte ${offset} of ${path}`);
    offset += header.length;
  }
  const tag = new Uint8Array(TAG_BYTES);
  const view = new DataView(tag.buffer);
  tag.set(INFO, 0);
  view.setUint32(4, FLAGS);
  view.setUint32(8, frames);
  view.setUint32(12, bytes.length);
  for (let i = 0; i < 100; i++) tag[16 + i] = Math.floor((i * 256) / 100);
  const file = await Deno.open(path, { write: true });
  try {
    await file.seek(at, Deno.SeekMode.Start);
    let written = 0;
    while (written < tag.length) written += await file.write(tag.subarray(written));
    await file.sync();
  } finally {
    file.close();
  }
  return true;
}

/**
 * An MP3 frame walker for tests, written from the MPEG audio frame header layout and
 * independent of the relay's code: it checks that a file is a sequence of valid Layer III
 * frames from start to end and adds up their duration.
 *
 * @module
 */

const BITRATES_V1 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
const BITRATES_V2 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];
const RATES: Record<number, number[]> = {
  3: [44100, 48000, 32000], // MPEG 1
  2: [22050, 24000, 16000], // MPEG 2
  0: [11025, 12000, 8000], // MPEG 2.5
};

/** What the walk found. */
export interface Mp3Walk {
  frames: number;
  seconds: number;
  sampleRate: number;
  kbps: number;
}

/**
 * Walks every frame of `bytes` (an ID3v2 tag at the start is skipped).
 *
 * @throws {Error} at the first byte that is not a valid Layer III frame header.
 */
export function walkMp3(bytes: Uint8Array): Mp3Walk {
  let offset = 0;
  if (bytes[0] === 0x49 && bytes[1] === 0x44 && bytes[2] === 0x33) {
    const size = ((bytes[6]! & 0x7f) << 21) | ((bytes[7]! & 0x7f) << 14) |
      ((bytes[8]! & 0x7f) << 7) | (bytes[9]! & 0x7f);
    offset = 10 + size;
  }
  let frames = 0;
  let seconds = 0;
  let sampleRate = 0;
  let kbps = 0;
  while (offset < bytes.length) {
    if (offset + 4 > bytes.length) throw new Error(`truncated frame header at ${offset}`);
    const b1 = bytes[offset + 1]!, b2 = bytes[offset + 2]!;
    if (bytes[offset] !== 0xff || (b1 & 0xe0) !== 0xe0) {
      throw new Error(`no frame sync at byte ${offset}`);
    }
    const version = (b1 >> 3) & 3;
    const layer = (b1 >> 1) & 3;
    if (version === 1 || layer !== 1) throw new Error(`not MPEG Layer III at byte ${offset}`);
    const bitrate = (version === 3 ? BITRATES_V1 : BITRATES_V2)[b2 >> 4];
    const rate = RATES[version]![(b2 >> 2) & 3];
    if (!bitrate || rate === undefined) throw new Error(`bad bit rate or rate at ${offset}`);
    const padding = (b2 >> 1) & 1;
    const samples = version === 3 ? 1152 : 576;
    const length = Math.floor((samples / 8) * bitrate * 1000 / rate) + padding;
    if (offset + length > bytes.length) throw new Error(`truncated frame at ${offset}`);
    frames++;
    seconds += samples / rate;
    sampleRate = rate;
    kbps = bitrate;
    offset += length;
  }
  return { frames, seconds, sampleRate, kbps };
}

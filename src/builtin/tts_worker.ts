/**
 * The built-in speech engine's worker thread: eSpeak NG runs here, so that speaking a chunk
 * (up to a second of work on a small machine, in one piece) never holds up the relay's
 * requests. Messages: `{id, text, voice}` in; `{id, samples, sampleRate}` or
 * `{id, error}` out.
 *
 * @module
 */

/// <reference lib="deno.worker" />

import { EspeakWasm, type Voice } from "./tts.ts";

const engine = new EspeakWasm();

self.onmessage = async (event: MessageEvent<{ id: number; text: string; voice: Voice }>) => {
  const { id, text, voice } = event.data;
  try {
    const pcm = await engine.synthesize(text, voice);
    self.postMessage({ id, samples: pcm.samples, sampleRate: pcm.sampleRate }, [
      pcm.samples.buffer as ArrayBuffer,
    ]);
  } catch (error) {
    self.postMessage({ id, error: error instanceof Error ? error.message : String(error) });
  }
};

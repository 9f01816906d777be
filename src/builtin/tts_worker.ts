/**
 * The podcast's worker thread: each one does one job and is ended when it answers, so that
 * what the job allocated is freed at once. Jobs (`WorkerRequest` of `tts.ts`): speak one
 * chunk with eSpeak NG (up to a second of work on a small machine, in one piece), or cut an
 * article into chunks (markdown-it, about a second for 400 KB); neither holds up the relay's
 * requests. Answers (`WorkerReply`): `{samples, sampleRate}`, `{chunks}` or `{error}`.
 *
 * @module
 */

/// <reference lib="deno.worker" />

import { EspeakWasm, type WorkerReply, type WorkerRequest } from "./tts.ts";

self.onmessage = async (event: MessageEvent<WorkerRequest>) => {
  const request = event.data;
  try {
    if (request.kind === "split") {
      // Loaded here only: a speaking thread never loads markdown-it.
      const { splitForSpeech } = await import("./speech_text.ts");
      const reply: WorkerReply = { chunks: splitForSpeech(request.text, request.maxChars) };
      self.postMessage(reply);
      return;
    }
    const pcm = await new EspeakWasm(request.module).synthesize(request.text, request.voice);
    const reply: WorkerReply = { samples: pcm.samples, sampleRate: pcm.sampleRate };
    self.postMessage(reply, [pcm.samples.buffer as ArrayBuffer]);
  } catch (error) {
    const reply: WorkerReply = { error: error instanceof Error ? error.message : String(error) };
    self.postMessage(reply);
  }
};

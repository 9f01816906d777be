/**
 * The podcast's worker threads. A speech thread ({@linkcode EspeakWorker} of `tts.ts`) lives
 * while episodes are spoken: it keeps one eSpeak NG instance and speaks chunk after chunk
 * (up to a second of work each on a small machine, in one piece), one at a time, in the order
 * asked. A splitting thread cuts one article into chunks (markdown-it, about a second for
 * 400 KB) and is ended when it answers, so that the parsed article is freed at once. Neither
 * holds up the relay's requests. Requests and answers: `WorkerRequest` and `WorkerReply` of
 * `tts.ts`.
 *
 * @module
 */

/// <reference lib="deno.worker" />

import { EspeakWasm, type WorkerReply, type WorkerRequest } from "./tts.ts";

/** This thread's engine, made with its first chunk. */
let engine: EspeakWasm | undefined;
/** The chunks run one after another: each waits for the one before. */
let queue: Promise<void> = Promise.resolve();

self.onmessage = (event: MessageEvent<WorkerRequest>) => {
  const request = event.data;
  queue = queue.then(() => handle(request));
};

async function handle(request: WorkerRequest): Promise<void> {
  try {
    if (request.kind === "split") {
      // Loaded here only: a speaking thread never loads markdown-it.
      const { speechChunks } = await import("./speech_text.ts");
      const reply: WorkerReply = { chunks: speechChunks(request.text, request.maxChars) };
      self.postMessage(reply);
      return;
    }
    engine ??= new EspeakWasm();
    try {
      const pcm = await engine.synthesize(request.text, request.lang);
      const reply: WorkerReply = {
        id: request.id,
        samples: pcm.samples,
        sampleRate: pcm.sampleRate,
      };
      self.postMessage(reply, [pcm.samples.buffer as ArrayBuffer]);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      const reply: WorkerReply = { id: request.id, error: reason };
      self.postMessage(reply);
    }
  } catch (error) {
    const reply: WorkerReply = { error: error instanceof Error ? error.message : String(error) };
    self.postMessage(reply);
  }
}

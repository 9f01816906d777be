/**
 * The chunks of an episode as the podcast speaks them: their type (made by `speech_text.ts` on a
 * worker thread), the episode's main language, and a passage in a language without a voice
 * replaced by the sentence that says so. Kept apart from `speech_text.ts` so that the podcast's
 * worker loop does not load markdown-it when the relay starts.
 *
 * @module
 */

import { mainLanguage, phrasesFor, type SpeechLang } from "./speech_lang.ts";

/** One piece of speech for the engine: whole sentences of one language. */
export interface SpeechChunk {
  /** What is said. */
  readonly text: string;
  /** Its language: the engine speaks it with a voice for this language. */
  readonly lang: SpeechLang;
  /** When a chapter starts with this chunk: the chapter's title. */
  readonly chapter?: string;
}

/** A chunk as spoken: a passage without a voice says so instead, and names its language. */
export interface Spoken extends SpeechChunk {
  /** The language of the passage this chunk stands for, when it was left out. */
  readonly skipped?: SpeechLang;
}

/**
 * The chunks as they will be spoken: a chunk in a language `speaks` has no voice for (or one of
 * `skipped`, found to have none while speaking) is replaced by one sentence in the episode's main
 * language saying that it is left out (an empty text, nothing spoken, for the chunks after it in
 * the same run of that language); it keeps its chapter.
 */
export function spokenChunks(
  chunks: readonly SpeechChunk[],
  speaks: (lang: SpeechLang) => boolean,
  skipped: readonly string[] = [],
): Spoken[] {
  const phrases = phrasesFor(mainLanguage(chunks));
  let previous: string | undefined;
  return chunks.map((chunk) => {
    const ok = speaks(chunk.lang) && !skipped.includes(chunk.lang);
    const said = previous === chunk.lang;
    previous = ok ? undefined : chunk.lang;
    if (ok) return chunk;
    return {
      ...chunk,
      text: said ? "" : phrases.skipped(chunk.lang),
      lang: phrases.lang,
      skipped: chunk.lang,
    };
  });
}

/**
 * Summaries for `relay work --extract --summarize`: at most five sentences of an article, put
 * in its result's `## Summary` section (`article_result.ts`).
 *
 * Offline by default, with no model: an extractive summary, the article's own sentences
 * chosen by TextRank (Mihalcea and Tarau, 2004: sentences are nodes, edges weigh the words two
 * sentences share, normalised by the logarithms of their lengths, and PageRank's iteration
 * ranks them), in the order the article has them. Sentences and words come from
 * `Intl.Segmenter`, so Chinese and Japanese are split as well as English. No npm package does
 * this for any language with a maintained release, and it is a few dozen lines.
 *
 * With a model: from an OpenAI-compatible endpoint (`POST {url}/chat/completions`: Ollama,
 * llama.cpp's server, LocalAI, hosted services) through the `openai` npm client, loaded only
 * then, within a time limit and a cap on the answer's size. When it fails, the offline summary
 * is used and its note says why.
 *
 * @module
 */

import { readArticleResult, writeArticleResult } from "../article_result.ts";
import { errorMessage } from "../errors.ts";
import { readAtMost } from "../util/streams.ts";

/** Sentences in a summary at most. */
export const SUMMARY_SENTENCES = 5;
/** Characters of an article sent to a model at most (about 6,000 words of English). */
const MODEL_INPUT_CHARS = 24_000;
/** Characters of a summary kept at most, whatever a model answers. */
const SUMMARY_CHARS = 2_000;
/** Bytes of a model's answer read at most: a summary is a few hundred. */
export const MAX_ANSWER_BYTES = 256 * 1024;
/** Default time limit of a model's answer, ms. */
export const DEFAULT_SUMMARIZE_TIMEOUT_MS = 60_000;
/** Sentences of an article ranked at most: TextRank compares every pair. */
const RANKED_SENTENCES = 300;
/** PageRank's damping factor and rounds, as TextRank uses them. */
const DAMPING = 0.85;
const ROUNDS = 30;

/** How summaries are made: offline, or by a model. */
export interface SummarizeSettings {
  /** The endpoint's base URL (`http://host:11434/v1`); offline without it. */
  readonly url?: string | undefined;
  /** The model's name, with `url`. */
  readonly model?: string | undefined;
  /** The endpoint's key (`RELAY_SUMMARIZE_KEY` or a file), when it needs one. */
  readonly key?: string | undefined;
  /** Time limit of the model's answer, ms. */
  readonly timeoutMs: number;
}

/** A summary and how it was made. */
export interface Summary {
  /** One paragraph of at most {@linkcode SUMMARY_SENTENCES} sentences; empty when none. */
  readonly summary: string;
  /** What needs saying of how it was made (a model's name, a fallback and why). */
  readonly note?: string;
}

/** The sentences of `text`, trimmed, in order. */
export function sentencesOf(text: string): string[] {
  const segmenter = new Intl.Segmenter(undefined, { granularity: "sentence" });
  return [...segmenter.segment(text)].map((s) => s.segment.replace(/\s+/g, " ").trim())
    .filter((s) => s !== "");
}

/** The words of a sentence, lower-cased (letters and digits only). */
function wordsOf(sentence: string, segmenter: Intl.Segmenter): Set<string> {
  const words = new Set<string>();
  for (const part of segmenter.segment(sentence)) {
    if (part.isWordLike) words.add(part.segment.toLowerCase());
  }
  return words;
}

/** How many of `a`'s words `b` has. */
function shared(a: Set<string>, b: Set<string>): number {
  let count = 0;
  for (const word of a) if (b.has(word)) count++;
  return count;
}

/** How a sentence ends: a full stop of any script, then perhaps a quote or a bracket. */
const SENTENCE_END = /[.!?。！？．…‼⁉؟۔։።။។᙮।॥][\p{Pe}\p{Pf}"'」』]*$/u;

/** A sentence worth putting in a summary: not a fragment, not a wall of text. */
function usable(sentence: string): boolean {
  const letters = sentence.match(/\p{L}|\p{N}/gu)?.length ?? 0;
  return letters >= 8 && sentence.length <= 600;
}

/**
 * The usable sentences of `text`, without its headings: the article's text has its headings
 * as paragraphs of their own, short lines that end in no full stop. A text none of whose
 * sentences ends in one (Thai, which has none) keeps them all.
 */
function candidates(text: string): string[] {
  const sentences = sentencesOf(text).filter(usable);
  if (!sentences.some((s) => SENTENCE_END.test(s))) return sentences;
  return sentences.filter((s) => SENTENCE_END.test(s) || s.length >= 100);
}

/**
 * An extractive summary: the article's {@linkcode SUMMARY_SENTENCES} best sentences by
 * TextRank (fewer for a short article), in the article's order.
 *
 * @param text The article as plain text.
 * @returns One paragraph, or `""` when the text has no usable sentence.
 */
export function extractiveSummary(text: string): string {
  const sentences = candidates(text).slice(0, RANKED_SENTENCES);
  const wanted = Math.min(SUMMARY_SENTENCES, Math.max(1, Math.ceil(sentences.length / 3)));
  if (sentences.length <= wanted) return joinSentences(sentences);
  const segmenter = new Intl.Segmenter(undefined, { granularity: "word" });
  const words = sentences.map((s) => wordsOf(s, segmenter));
  const n = sentences.length;
  const weights = Array.from({ length: n }, () => new Float64Array(n));
  const totals = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      const common = shared(words[i]!, words[j]!);
      const norm = Math.log(words[i]!.size + 1) + Math.log(words[j]!.size + 1);
      const weight = common === 0 || norm === 0 ? 0 : common / norm;
      weights[i]![j] = weights[j]![i] = weight;
      totals[i]! += weight;
      totals[j]! += weight;
    }
  }
  let scores = new Float64Array(n).fill(1);
  for (let round = 0; round < ROUNDS; round++) {
    const next = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      let sum = 0;
      for (let j = 0; j < n; j++) {
        if (totals[j]! > 0) sum += (weights[j]![i]! / totals[j]!) * scores[j]!;
      }
      next[i] = 1 - DAMPING + DAMPING * sum;
    }
    scores = next;
  }
  const best = [...scores.keys()].sort((a, b) => scores[b]! - scores[a]! || a - b)
    .slice(0, wanted).sort((a, b) => a - b);
  return joinSentences(best.map((i) => sentences[i]!));
}

/** Sentences as one paragraph: no space after a sentence that ends in CJK punctuation. */
function joinSentences(sentences: readonly string[]): string {
  let out = "";
  for (const sentence of sentences) {
    out += out === "" || /[。！？」』）]$/.test(out) ? sentence : ` ${sentence}`;
  }
  return out;
}

/**
 * A fetch for the model's client that reads at most {@linkcode MAX_ANSWER_BYTES} of an answer
 * within the signal's time: a flood is cut off, never held in memory whole.
 */
function boundedFetch(signal: AbortSignal, failure: { reason?: string }): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, {
      ...init,
      signal: AbortSignal.any([signal, ...(init?.signal ? [init.signal] : [])]),
    });
    const body = await readAtMost(response.body, MAX_ANSWER_BYTES, signal);
    if (body === undefined) {
      // The client reports any error of its fetch as a connection error: keep the reason.
      failure.reason = `the answer was over ${MAX_ANSWER_BYTES} bytes`;
      throw new Error(failure.reason);
    }
    return new Response(body as Uint8Array<ArrayBuffer>, {
      status: response.status,
      headers: response.headers,
    });
  };
}

/**
 * A summary from the model: its answer folded to one paragraph, its first
 * {@linkcode SUMMARY_SENTENCES} sentences, at most {@linkcode SUMMARY_CHARS} characters.
 *
 * @throws when the endpoint cannot be reached, answers an error, garbage, nothing, too much,
 *   or not within `settings.timeoutMs`.
 */
async function modelSummary(
  title: string,
  text: string,
  settings: SummarizeSettings & { url: string; model: string },
): Promise<string> {
  const { default: OpenAI } = await import("openai");
  const signal = AbortSignal.timeout(settings.timeoutMs);
  const failure: { reason?: string } = {};
  const client = new OpenAI({
    baseURL: settings.url,
    apiKey: settings.key ?? "none",
    maxRetries: 0,
    timeout: settings.timeoutMs,
    fetch: boundedFetch(signal, failure),
  });
  const completion = await client.chat.completions.create({
    model: settings.model,
    messages: [
      {
        role: "system",
        content: `Summarise the article in at most ${SUMMARY_SENTENCES} sentences, in the ` +
          "article's own language. Answer with the summary only: plain sentences, one " +
          "paragraph, no list, no heading.",
      },
      { role: "user", content: `${title}\n\n${text.slice(0, MODEL_INPUT_CHARS)}` },
    ],
  }, { signal }).catch((error) => {
    throw new Error(failure.reason ?? failureReason(error, signal, settings));
  });
  const content = completion?.choices?.[0]?.message?.content;
  if (typeof content !== "string") throw new Error("the answer held no summary");
  const summary = joinSentences(sentencesOf(content).slice(0, SUMMARY_SENTENCES))
    .slice(0, SUMMARY_CHARS);
  if (summary === "") throw new Error("the summary was empty");
  return summary;
}

/**
 * Summarises an article: by the model when `settings.url` is given, else (or when the model
 * fails) offline.
 *
 * @param article The article's title and plain text.
 * @returns The summary, with a note for a model's summary or a fallback.
 */
export async function summarize(
  article: { title: string; text: string },
  settings: SummarizeSettings,
): Promise<Summary> {
  const { url, model } = settings;
  if (url !== undefined && model !== undefined) {
    try {
      const summary = await modelSummary(article.title, article.text, { ...settings, url, model });
      return { summary, note: `Summary by ${model}` };
    } catch (error) {
      const summary = extractiveSummary(article.text);
      return {
        summary,
        note: `Offline summary: ${model} failed (${oneLine(errorMessage(error))})`,
      };
    }
  }
  return { summary: extractiveSummary(article.text) };
}

/**
 * Why the model gave no summary, in words a user can act on: the `openai` client says
 * `Request was aborted.` when the time limit passes and `Connection error.` whatever kept it
 * from the endpoint, so the limit is named, and the endpoint and the cause are added.
 */
function failureReason(
  error: unknown,
  signal: AbortSignal,
  settings: { url: string; timeoutMs: number },
): string {
  if (signal.aborted) return `no answer within ${settings.timeoutMs / 1000} s`;
  const said = errorMessage(error);
  if (!/connection/i.test(said)) return said;
  // The first cause is fetch's "fetch failed"; the last one says what happened, after the
  // request's URL and the layers it went through.
  let cause: unknown = error;
  for (let next = error; typeof next === "object" && next !== null && "cause" in next;) {
    cause = next = next.cause;
  }
  const what = cause === error ? "" : `: ${errorMessage(cause).split(": ").at(-1)}`;
  return `${said} ${settings.url}${what}`;
}

function oneLine(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

/**
 * A reader's result with a `## Summary` section added: the result read back
 * (`readArticleResult`), given the summary, and written again, so that what the reader wrote
 * after the article (a note that the page was cut) stays.
 *
 * @param result The result text the reader made.
 * @param text The article as plain text (what is summarised), else its Markdown is.
 * @returns The result with its summary, or `result` as it was when it is not an article's or
 *   no summary could be made.
 */
export async function withSummary(
  result: string,
  text: string | undefined,
  settings: SummarizeSettings,
): Promise<string> {
  const article = readArticleResult(result);
  if (article === undefined) return result;
  const made = await summarize({ title: article.title, text: text ?? article.markdown }, settings);
  if (made.summary === "") return result;
  return writeArticleResult({
    ...article,
    summary: made.summary,
    ...(made.note === undefined ? {} : { summaryNote: made.note }),
  });
}

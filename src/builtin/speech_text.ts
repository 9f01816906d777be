/**
 * The text the podcast reads aloud, from an article in Markdown (or plain text, which is
 * Markdown too): markdown-it parses it, and the words of its tokens are read as a person would
 * read them aloud:
 *
 * - an article result (`# title`, byline, `Source: site, <url>`, an optional summary, the body;
 *   `article_result.ts`) is read as its title, a pause, "From <site>, by <author>." once (never
 *   the address), then its body; the summary is not read (it is the episode's description);
 * - a title and each heading end in a pause (`.`, or `。` in Chinese and Japanese, when they
 *   have no sentence end of their own), and each heading of levels 1 to 3 starts a chapter;
 * - tables are read row by row with their headers ("Variety: Roma; days to harvest: 75.");
 * - web addresses, link targets, images, HTML, footnote markers and notes are left out, and a
 *   code block becomes "Code omitted." once for a run of them;
 * - each block gets its language from its script (`speech_lang.ts`).
 *
 * The blocks are then cut into chunks of whole sentences, one language each, a chapter always
 * starting a chunk, for the speech engine.
 *
 * Everything here takes time in proportion to the text's length, whatever it holds (runs
 * of `[`, nested emphasis, lines with no space): markdown-it's parser keeps to that (see
 * the adversarial inputs of `bench/tts.ts`), and the rest is single passes and regular
 * expressions that cannot backtrack. The podcast runs it on a worker thread all the same
 * (`splitOffThread` in `tts.ts`), since parsing a 400 KB article takes about a second.
 *
 * @module
 */

import MarkdownIt from "markdown-it";
import { readArticleResult } from "../article_result.ts";
import { detectLanguage, mainLanguage, phrasesFor, type SpeechLang } from "./speech_lang.ts";
import type { SpeechChunk } from "./speech_chunks.ts";

export type { SpeechChunk } from "./speech_chunks.ts";

/** Longest chunk handed to the engine at once, characters (about 30 s of speech). */
export const MAX_CHUNK_CHARS = 500;

/** Deepest heading level that starts a chapter: deeper ones are too fine to skip to. */
const CHAPTER_LEVEL = 3;
/**
 * Chapters of an episode at most: the record, rewritten with each chunk, carries them, so a text
 * of thousands of headings must not make it grow with each; later headings are read, not listed.
 */
const MAX_CHAPTERS = 200;
/** Characters of a chapter's title at most (a longer heading is cut, with "…"). */
const MAX_TITLE_CHARS = 120;

/** One markdown-it token, as far as the text needs it. */
type Token = ReturnType<InstanceType<typeof MarkdownIt>["parse"]>[number];

// Raw HTML is parsed as HTML, so that its tags are dropped instead of read out; no linkify:
// a bare address is dropped below.
const markdown = new MarkdownIt({ html: true, linkify: false });

/** A block of the text read aloud: a title, heading, paragraph, list item or table row. */
export interface SpeechBlock {
  /** Its words, on one line. */
  readonly text: string;
  /** The language of its script. */
  readonly lang: SpeechLang;
  /** For a title or a heading of level 1 to 3: the chapter it starts, titled so. */
  readonly chapter?: string;
}

/**
 * Web addresses, without the sentence's end after them (a run of non-space after a fixed prefix,
 * giving back at most its last character: no backtracking beyond that).
 */
const ADDRESS = /\b(?:https?:\/\/|www\.)\S*[^\s.,;:!?)'"]/gi;
/** Emphasis and code marks that markdown-it left as text (unpaired): not to be read. */
const STRAY_MARKS = /[*_`~]+/g;
/** A footnote marker, `[^1]`, that markdown-it left as text. */
const FOOTNOTE_MARK = /\[\^[^\]\s]{1,40}\]/g;
/** A footnote's definition, `[^1]: …`: a note, not part of the reading. */
const FOOTNOTE_NOTE = /^\s*\[\^[^\]\s]{1,40}\]:/;
/** A sentence's end: a title or heading that has one needs no other. */
const ENDS_SENTENCE = /[.!?;:。！？；：…]$/;

/** Where a code block was left out: the sentence that says so is put in once the language is known. */
const CODE_OMITTED: SpeechBlock = { text: "code omitted", lang: "en" };

/** The state of one pass over an article's tokens. */
class Reader {
  readonly blocks: SpeechBlock[] = [];
  #heading: number | undefined;
  #headers: string[] | undefined;
  #row: string[] | undefined;
  #inHead = false;
  #codeSaid = false;
  #chapters = 0;

  /** Adds a block of `text`; a heading gets its pause and, when shallow, a chapter. */
  add(raw: string, heading?: number): void {
    const text = clean(raw);
    if (!/[\p{L}\p{N}]/u.test(text)) return;
    const lang = detectLanguage(text);
    this.#codeSaid = false;
    if (heading === undefined) {
      this.blocks.push({ text, lang });
      return;
    }
    const stop = lang === "zh" || lang === "ja" ? "。" : ".";
    const spoken = ENDS_SENTENCE.test(text) ? text : `${text}${stop}`;
    if (heading > CHAPTER_LEVEL || this.#chapters >= MAX_CHAPTERS) {
      this.blocks.push({ text: spoken, lang });
      return;
    }
    this.#chapters++;
    const title = text.length > MAX_TITLE_CHARS ? `${text.slice(0, MAX_TITLE_CHARS - 1)}…` : text;
    this.blocks.push({ text: spoken, lang, chapter: title });
  }

  /** Says that code is left out, once for a run of code blocks (in the main language, later). */
  code(): void {
    if (this.#codeSaid) return;
    this.blocks.push(CODE_OMITTED);
    this.#codeSaid = true;
  }

  /** Reads one token of the document. */
  token(token: Token): void {
    switch (token.type) {
      case "heading_open":
        this.#heading = Number(token.tag.slice(1));
        return;
      case "fence":
      case "code_block":
        return this.code();
      case "thead_open":
        this.#inHead = true;
        this.#headers = [];
        return;
      case "thead_close":
        this.#inHead = false;
        return;
      case "tr_open":
        this.#row = [];
        return;
      case "tr_close":
        return this.#endRow();
      case "table_close":
        this.#headers = undefined;
        return;
      case "inline":
        return this.#inline(token);
    }
  }

  #inline(token: Token): void {
    const text = inlineText(token.children ?? []);
    if (this.#row !== undefined) {
      this.#row.push(clean(text));
      return;
    }
    const heading = this.#heading;
    this.#heading = undefined;
    if (FOOTNOTE_NOTE.test(token.content)) return;
    this.add(text, heading);
  }

  /** A header row is kept for the rows below it; a body row is read with its headers. */
  #endRow(): void {
    const cells = this.#row ?? [];
    this.#row = undefined;
    if (this.#inHead) {
      this.#headers = cells;
      return;
    }
    const headers = this.#headers ?? [];
    const parts = cells.map((cell, i) => {
      const header = headers[i] ?? "";
      if (cell === "") return "";
      if (header === "") return cell;
      return `${i === 0 ? header : lowerFirst(header)}: ${cell}`;
    }).filter((part) => part !== "");
    const row = parts.join("; ");
    if (row !== "") this.add(ENDS_SENTENCE.test(row) ? row : `${row}.`);
  }
}

/** "Days to harvest" reads "days to harvest" after a semicolon; "DNA" stays "DNA". */
function lowerFirst(text: string): string {
  return /^\p{Lu}\p{Ll}/u.test(text) ? text[0]!.toLowerCase() + text.slice(1) : text;
}

/** One line without addresses, footnote markers or stray marks. */
function clean(text: string): string {
  return text.replace(ADDRESS, " ").replace(FOOTNOTE_MARK, "").replace(STRAY_MARKS, "")
    .replace(/\s+/g, " ").replace(/ ([.,;:!?])/g, "$1").trim();
}

/** The words of an inline token's children: text and inline code; no images, no HTML. */
function inlineText(children: readonly Token[]): string {
  const out: string[] = [];
  let superscript = 0;
  for (const child of children) {
    if (child.type === "html_inline") {
      // A footnote's number in <sup>…</sup> is a marker, not a word.
      if (/^<sup\b/i.test(child.content)) superscript++;
      else if (/^<\/sup>/i.test(child.content)) superscript = Math.max(0, superscript - 1);
    } else if (superscript > 0) continue;
    else if (child.type === "text" || child.type === "code_inline") out.push(child.content);
    else if (child.type === "softbreak" || child.type === "hardbreak") out.push(" ");
  }
  return out.join("");
}

/**
 * The blocks of `text` to be read aloud, in order (see this module's doc): an article result's
 * title, source line and body, or plain Markdown's blocks.
 */
export function speechBlocks(text: string): SpeechBlock[] {
  const article = readArticleResult(text);
  const reader = new Reader();
  if (article !== undefined) reader.add(article.title, 1);
  const head = reader.blocks.length;
  for (const token of markdown.parse(article?.markdown ?? text, {})) reader.token(token);
  // The relay's own sentences are said in the main language of the article.
  const phrases = phrasesFor(mainLanguage(reader.blocks.filter((b) => b !== CODE_OMITTED)));
  const own = (words: string): SpeechBlock => ({ text: words, lang: phrases.lang });
  const blocks = reader.blocks.map((block) =>
    block === CODE_OMITTED ? own(phrases.codeOmitted) : block
  );
  if (article !== undefined) {
    const author = article.byline?.replace(/^by\s+/i, "").trim();
    const source = phrases.source(article.siteName, author || undefined);
    if (source !== undefined) blocks.splice(head, 0, own(source));
  }
  return blocks;
}

/**
 * The words of `markdown` to be read aloud, a line per block ({@linkcode speechBlocks}).
 */
export function speechText(markdown_: string): string {
  return speechBlocks(markdown_).map((block) => block.text).join("\n");
}

/** A sentence: a run of anything but its ends, then its ends (or the end). */
const SENTENCE = /[^.!?;。！？；…]+(?:[.!?;。！？；…]+|$)/g;

/**
 * Cuts text into chunks of whole sentences of at most `maxChars` characters, each of one
 * language, a chapter always starting a chunk (a longer sentence is cut at a space or, for
 * Chinese, anywhere but inside a character). Sentences end at `.`, `!`, `?`, `;`, their Chinese
 * forms `。！？；`, `…`, and the end of a block.
 *
 * @param maxChars Longest chunk, characters; default {@linkcode MAX_CHUNK_CHARS}.
 * @returns Non-empty chunks in reading order; none for text with nothing to say.
 */
export function speechChunks(text: string, maxChars = MAX_CHUNK_CHARS): SpeechChunk[] {
  const chunks: SpeechChunk[] = [];
  let current = "";
  let lang: SpeechLang = "en";
  let chapter: string | undefined;
  const flush = () => {
    if (current !== "") {
      chunks.push(
        chapter === undefined ? { text: current, lang } : {
          text: current,
          lang,
          chapter,
        },
      );
    }
    current = "";
    chapter = undefined;
  };
  for (const block of speechBlocks(text)) {
    if (block.lang !== lang || block.chapter !== undefined) flush();
    lang = block.lang;
    if (block.chapter !== undefined) chapter = block.chapter;
    for (const [raw] of block.text.matchAll(SENTENCE)) {
      const sentence = raw.trim();
      if (sentence === "" || !/[\p{L}\p{N}]/u.test(sentence)) continue;
      // A chapter marks the chunk it starts in; the chunks after it carry none.
      if (current.length + sentence.length + 1 > maxChars) flush();
      if (sentence.length <= maxChars) {
        // Chinese and Japanese put no space between sentences.
        const space = lang === "zh" || lang === "ja" ? "" : " ";
        current = current === "" ? sentence : `${current}${space}${sentence}`;
        continue;
      }
      current = cutLong(sentence, maxChars, (piece) => {
        current = piece;
        flush();
      });
    }
  }
  flush();
  return chunks;
}

/**
 * Cuts one sentence longer than a chunk at spaces, else anywhere (never inside a character),
 * handing every full piece to `emit`; returns the rest. Each cut looks at one window of
 * `maxChars` only, so a long sentence costs its length, not its square.
 */
function cutLong(sentence: string, maxChars: number, emit: (piece: string) => void): string {
  let start = 0;
  while (sentence.length - start > maxChars) {
    const space = sentence.slice(start, start + maxChars + 1).lastIndexOf(" ");
    let cut = space > maxChars / 2 ? start + space : start + maxChars;
    if (isHighSurrogate(sentence.charCodeAt(cut - 1))) cut--;
    emit(sentence.slice(start, cut).trim());
    start = cut;
    while (sentence[start] === " ") start++;
  }
  return sentence.slice(start);
}

/**
 * The chunks' texts only ({@linkcode speechChunks}).
 *
 * @param maxChars Longest chunk, characters; default {@linkcode MAX_CHUNK_CHARS}.
 */
export function splitForSpeech(text: string, maxChars = MAX_CHUNK_CHARS): string[] {
  return speechChunks(text, maxChars).map((chunk) => chunk.text);
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

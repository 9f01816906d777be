/**
 * The text the podcast reads aloud, from an article in Markdown (or plain text, which is
 * Markdown too): markdown-it parses it, and only the words of its tokens are kept, so
 * markup (`#`, `*`, `>`, link targets, fenced code, HTML tags) is never read out. The
 * result is cut into chunks of whole sentences for the speech engine.
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

/** Longest chunk handed to the engine at once, characters (about 30 s of speech). */
export const MAX_CHUNK_CHARS = 500;

/** One markdown-it token, as far as the text needs it. */
type Token = ReturnType<InstanceType<typeof MarkdownIt>["parse"]>[number];

// Raw HTML is parsed as HTML, so that its tags are dropped instead of read out; no linkify:
// a bare address is dropped below.
const markdown = new MarkdownIt({ html: true, linkify: false });

/** Blocks whose end is a pause: the end of a sentence for the splitter. */
const BLOCK_ENDS = new Set([
  "paragraph_close",
  "heading_close",
  "th_close",
  "td_close",
  "list_item_close",
  "blockquote_close",
]);

/** Web addresses (no backtracking: a run of non-space after a fixed prefix). */
const ADDRESS = /https?:\/\/\S+/g;
/** Emphasis and code marks that markdown-it left as text (unpaired): not to be read. */
const STRAY_MARKS = /[*_`~]+/g;

/**
 * The words of `markdown` to be read aloud: the text of headings, paragraphs, lists,
 * quotes and table cells, inline code as its text, images as their description; fenced code,
 * HTML and web addresses left out. A line break ends each block (a pause).
 */
export function speechText(markdown_: string): string {
  const out: string[] = [];
  for (const token of markdown.parse(markdown_, {})) {
    if (token.type === "inline") inlineText(token.children ?? [], out);
    else if (token.type === "code_block") out.push(token.content, "\n");
    else if (BLOCK_ENDS.has(token.type)) out.push("\n");
  }
  return out.join("").replace(ADDRESS, " ").replace(STRAY_MARKS, "");
}

function inlineText(children: readonly Token[], out: string[]): void {
  for (const child of children) {
    if (child.type === "text" || child.type === "code_inline") out.push(child.content);
    else if (child.type === "image") inlineText(child.children ?? [], out);
    else if (child.type === "softbreak" || child.type === "hardbreak") out.push("\n");
  }
}

/** A sentence: a run of anything but its ends, then its ends (or a line break, or the end). */
const SENTENCE = /[^.!?;。！？；…\n]+(?:[.!?;。！？；…]+|\n|$)/g;

/**
 * Cuts text into chunks of whole sentences of at most `maxChars` characters (a longer
 * sentence is cut at a space or, for Chinese, anywhere but inside a character). Sentences
 * end at `.`, `!`, `?`, `;`, their Chinese forms `。！？；`, `…`, and line breaks; Markdown
 * markup is removed first ({@linkcode speechText}).
 *
 * @param maxChars Longest chunk, characters; default {@linkcode MAX_CHUNK_CHARS}.
 * @returns Non-empty chunks in reading order; none for text with nothing to say.
 */
export function splitForSpeech(text: string, maxChars = MAX_CHUNK_CHARS): string[] {
  const chunks: string[] = [];
  let current = "";
  const flush = () => {
    if (current !== "") chunks.push(current);
    current = "";
  };
  for (const [raw] of speechText(text).matchAll(SENTENCE)) {
    const sentence = raw.replace(/\s+/g, " ").trim();
    if (sentence === "" || !/[\p{L}\p{N}]/u.test(sentence)) continue;
    if (current.length + sentence.length + 1 > maxChars) flush();
    if (sentence.length <= maxChars) {
      current = current === "" ? sentence : `${current} ${sentence}`;
      continue;
    }
    // One sentence longer than a chunk: cut it at spaces, else anywhere. Each cut looks at
    // one window of maxChars only, so a long sentence costs its length, not its square.
    let start = 0;
    while (sentence.length - start > maxChars) {
      const space = sentence.slice(start, start + maxChars + 1).lastIndexOf(" ");
      let cut = space > maxChars / 2 ? start + space : start + maxChars;
      if (isHighSurrogate(sentence.charCodeAt(cut - 1))) cut--;
      chunks.push(sentence.slice(start, cut).trim());
      start = cut;
      while (sentence[start] === " ") start++;
    }
    current = sentence.slice(start);
  }
  flush();
  return chunks.filter((chunk) => chunk !== "");
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

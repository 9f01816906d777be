/**
 * The text side of search, with no database: what a document and a hit are, how a document's
 * text is made plain and split into words for the index, how a person's query becomes terms
 * that the index can only ever take as text, and how a hit's snippet is cut and marked.
 *
 * Words: SQLite's `trigram` tokenizer finds any run of three or more characters anywhere, inside
 * unspaced Chinese or Japanese too, but nothing shorter. A term of one or two characters (番茄,
 * 東京, "AI") is looked up instead among the words of a second table, whose text is split into
 * words by `Intl.Segmenter` (ICU's dictionary for Chinese and Japanese) before SQLite's
 * `unicode61` tokenizer sees it.
 *
 * @module
 */

/** What the index holds: notes, blog posts, podcast episodes and results. */
export const SEARCH_KINDS = ["note", "post", "episode", "result"] as const;

/** One kind of document. */
export type SearchKind = typeof SEARCH_KINDS[number];

/** A document as the index takes it. */
export interface SearchDocument {
  /** What it is. */
  readonly kind: SearchKind;
  /** Its id within its kind: a note's or post's id, an episode's id, a result's `t`. */
  readonly key: string;
  /** Its title, one line. */
  readonly title: string;
  /** Where it is read: a path on the relay (`/blog/<id>`) or the page a result came from. */
  readonly url: string;
  /** When it was made, epoch ms. */
  readonly t: number;
  /** Its text (Markdown is fine: links, emphasis and headings are made plain). */
  readonly text: string;
}

/** A search hit, as `GET /search` lists it. */
export interface SearchHit {
  /** What it is. */
  readonly kind: SearchKind;
  /** Its title. */
  readonly title: string;
  /** Where it is read. */
  readonly url: string;
  /** Part of its text around the first match, each match between « and ». */
  readonly snippet: string;
  /** When it was made, epoch ms. */
  readonly t: number;
}

/** The mark before a matched word in a snippet. */
export const MARK_START = "«";
/** The mark after a matched word in a snippet. */
export const MARK_END = "»";

/** Characters of a query at most; a longer one is refused, not cut. */
export const MAX_QUERY_CHARS = 1000;
/** Terms of a query used at most: every one must match, so more only narrow further. */
export const MAX_TERMS = 16;
/** Characters of a document's text indexed at most (about 100 pages of a book). */
export const MAX_TEXT_CHARS = 200_000;
/** Characters of a snippet, about, before its marks and ellipses. */
const SNIPPET_CHARS = 160;
/** Characters of a snippet before its first match, at most. */
const SNIPPET_LEAD = 50;

/** A query made safe: its terms, and the two match expressions the index runs. */
export interface ParsedQuery {
  /** The terms, as typed (normalised), for marking snippets. */
  readonly terms: readonly string[];
  /** For the trigram table: every term of three or more characters, each a quoted phrase. */
  readonly trigram: string | undefined;
  /** For the words table: every shorter term, split into words, each a quoted phrase. */
  readonly words: string | undefined;
}

// Scripts written without spaces between words: ICU splits them by dictionary.
const UNSPACED = /[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Thai}\p{sc=Lao}\p{sc=Khmer}]/u;
// What separates terms in a query: spaces, control and format characters, punctuation and
// symbols. Every FTS5 operator character ("*^:()+-) is among them, so none reaches SQLite.
const SEPARATORS = /[\p{Z}\p{C}\p{P}\p{S}]+/u;

let segmenter: Intl.Segmenter | undefined;

/** The words of `text` that are words (not spaces or punctuation), in order. */
function wordsOf(text: string): string[] {
  segmenter ??= new Intl.Segmenter(undefined, { granularity: "word" });
  const words: string[] = [];
  for (const part of segmenter.segment(text)) if (part.isWordLike) words.push(part.segment);
  return words;
}

/**
 * Text for the words table: unspaced scripts split into words with spaces between them; other
 * text as it is (SQLite's `unicode61` tokenizer splits it at spaces and punctuation itself).
 */
export function segmented(text: string): string {
  return UNSPACED.test(text) ? wordsOf(text).join(" ") : text;
}

/** The code points of `text`, counted (a surrogate pair is one). */
function length(text: string): number {
  let count = 0;
  for (const _ of text) count++;
  return count;
}

/** A phrase for FTS5: in double quotes, any double quote in it doubled. */
function phrase(text: string): string {
  return `"${text.replaceAll('"', '""')}"`;
}

/**
 * Turns a person's query into terms the index takes as text only: the query is split at
 * spaces, punctuation, symbols and control characters (so `AND`, `NEAR`, `*`, quotes and NUL
 * are never operators: a word such as AND is looked for as a word), and each term goes to
 * SQLite as a quoted phrase. Every term must match.
 *
 * @param query The query as received (any text).
 * @returns `undefined` when it holds no letter or digit to look for.
 */
export function parseQuery(query: string): ParsedQuery | undefined {
  const terms = [
    ...new Set(query.normalize("NFKC").split(SEPARATORS).filter((term) => term !== "")),
  ].slice(0, MAX_TERMS);
  if (terms.length === 0) return undefined;
  const long = terms.filter((term) => length(term) >= 3);
  const short = terms.filter((term) => length(term) < 3)
    .map((term) => wordsOf(term).join(" "))
    .filter((words) => words !== "");
  if (long.length === 0 && short.length === 0) return undefined;
  return {
    terms,
    trigram: long.length === 0 ? undefined : long.map(phrase).join(" AND "),
    words: short.length === 0 ? undefined : short.map(phrase).join(" AND "),
  };
}

/**
 * A document's text as the index keeps it: Markdown's links, images, emphasis, code marks and
 * heading marks made plain, NFKC-normalised (as queries are), cut at
 * {@linkcode MAX_TEXT_CHARS}.
 */
export function plainText(markdown: string): string {
  return markdown
    .slice(0, MAX_TEXT_CHARS * 2)
    .replace(/!?\[([^\]\n]*)\]\([^)\s]*(?:\s+"[^"\n]*")?\)/g, "$1")
    .replace(/<(https?:\/\/[^>\s]+)>/g, "$1")
    .replace(/^\s{0,3}(?:#{1,6}|>|[-*+]|\d+[.)])\s+/gm, "")
    .replace(/(\*\*|__|`+|~~)/g, "")
    .normalize("NFKC")
    .slice(0, MAX_TEXT_CHARS);
}

/** Escapes a term for a regular expression. */
function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&");
}

/**
 * A pattern that finds any of `terms`, ignoring case; longest first, so the longest wins. A
 * term under three characters in a spaced script matches only as a whole word, as the index
 * matches it (`us` marks "us", not "fr-us-tration"); longer terms and unspaced scripts match
 * anywhere, as the trigram table does.
 */
function termPattern(terms: readonly string[]): RegExp {
  const sorted = [...terms].sort((a, b) => b.length - a.length);
  const alternatives = sorted.map((term) =>
    length(term) < 3 && !UNSPACED.test(term)
      ? `(?<![\\p{L}\\p{M}\\p{N}])${escapeRegExp(term)}(?![\\p{L}\\p{M}\\p{N}])`
      : escapeRegExp(term)
  );
  return new RegExp(alternatives.join("|"), "giu");
}

/** Moves `at` off the second half of a surrogate pair, so that no cut splits a character. */
function charStart(text: string, at: number): number {
  const code = text.charCodeAt(at);
  return code >= 0xdc00 && code <= 0xdfff ? at + 1 : at;
}

/**
 * The snippet of a hit: about {@linkcode SNIPPET_CHARS} characters of `text` on one line,
 * starting a little before the first match (or at the start when only the title matched),
 * every match of a term between {@linkcode MARK_START} and {@linkcode MARK_END}, and `…`
 * where text was cut off.
 *
 * @param text The document's plain text.
 * @param terms The query's terms.
 */
export function snippet(text: string, terms: readonly string[]): string {
  const flat = text.replace(/\s+/g, " ").trim();
  const pattern = termPattern(terms);
  const first = pattern.exec(flat);
  const start = charStart(flat, first === null ? 0 : Math.max(0, first.index - SNIPPET_LEAD));
  const end = charStart(flat, Math.min(flat.length, start + SNIPPET_CHARS));
  const window = flat.slice(start, end);
  // The same pattern: `replace` starts a global pattern from the beginning again.
  const marked = window.replace(pattern, (match) => `${MARK_START}${match}${MARK_END}`);
  return `${start > 0 ? "…" : ""}${marked}${end < flat.length ? "…" : ""}`;
}

/**
 * The language of a passage read aloud, told from its script, and the few sentences the relay
 * says itself (an article's source, code left out, a passage with no voice) in the languages it
 * has words for. Scripts tell a language apart cheaply and surely where the script is the
 * language's own: Han with kana is Japanese, Han alone Mandarin, Hangul Korean, Cyrillic Russian,
 * Greek, Arabic, Hebrew, Devanagari (Hindi), Thai; Latin text is taken for English (telling
 * French from English needs a dictionary, not a script).
 *
 * @module
 */

/**
 * A language the relay tells from a passage's script, as the short tag `--speech-command` gets for
 * `{lang}` and the feed's `language` attributes take.
 */
export type SpeechLang = "en" | "zh" | "ja" | "ko" | "ru" | "el" | "ar" | "he" | "hi" | "th";

/** Every language {@linkcode detectLanguage} gives. */
export const SPEECH_LANGS: readonly SpeechLang[] = [
  "en",
  "zh",
  "ja",
  "ko",
  "ru",
  "el",
  "ar",
  "he",
  "hi",
  "th",
];

/** Scripts that are one language's own, in the order they are counted. */
const OWN_SCRIPTS: ReadonlyArray<readonly [SpeechLang, RegExp]> = [
  ["ko", /\p{Script=Hangul}/gu],
  ["ru", /\p{Script=Cyrillic}/gu],
  ["el", /\p{Script=Greek}/gu],
  ["ar", /\p{Script=Arabic}/gu],
  ["he", /\p{Script=Hebrew}/gu],
  ["hi", /\p{Script=Devanagari}/gu],
  ["th", /\p{Script=Thai}/gu],
];

/** Scripts that say in one character about what Latin letters say in three. */
const DENSE = new Set<SpeechLang>(["zh", "ja", "ko", "th"]);

/**
 * The language most of `blocks` is spoken in, by characters (three Latin letters to a Chinese,
 * Japanese, Korean or Thai character: about the time each takes to say); English for none.
 */
export function mainLanguage(blocks: readonly { text: string; lang: SpeechLang }[]): SpeechLang {
  const counts = new Map<SpeechLang, number>();
  for (const block of blocks) {
    const weight = DENSE.has(block.lang) ? 3 : 1;
    counts.set(block.lang, (counts.get(block.lang) ?? 0) + block.text.length * weight);
  }
  let best: SpeechLang = "en";
  let most = 0;
  for (const [lang, count] of counts) {
    if (count > most) [best, most] = [lang, count];
  }
  return best;
}

/** `text` without its fenced code blocks (` ``` ` or `~~~`, to the closing fence or the end). */
function withoutCode(text: string): string {
  return text.replace(/^ {0,3}(`{3,}|~{3,})[^\n]*\n[\s\S]*?(?:^ {0,3}\1[^\n]*$|(?![\s\S]))/gm, "");
}

/**
 * The BCP 47 tag of the language a script is heard in, from its first 2,000 characters: the
 * {@linkcode mainLanguage} of its paragraphs, each of the language {@linkcode detectLanguage}
 * finds in it, leaving out those in a language that had no voice (`skipped`: they were not
 * spoken). `zh-cn` when it is Mandarin, else `en`, `ja`, … The podcast's feed, page and
 * transcripts say it (`podcast:transcript`'s `language`, `lang`, `Content-Language`).
 *
 * @param skipped Languages of passages an episode left out (`Episode.skipped`).
 */
export function scriptLanguage(text: string, skipped: readonly string[] = []): string {
  // Code is never read aloud (the speech text leaves it out): its words do not count.
  // Bounded first: a long episode's whole text is not scanned on each page or feed.
  const paragraphs = withoutCode(text.slice(0, 8000)).slice(0, 2000).split(/\n\s*\n/)
    .map((paragraph) => ({ text: paragraph, lang: detectLanguage(paragraph) }));
  const heard = paragraphs.filter((paragraph) => !skipped.includes(paragraph.lang));
  const lang = mainLanguage(heard.length > 0 ? heard : paragraphs);
  return lang === "zh" ? "zh-cn" : lang;
}

/**
 * The language of `text` from its letters: Japanese when it has kana and its Han and kana
 * outnumber its Latin words, Mandarin when its Han characters do (so a Chinese paragraph with a
 * few English names stays Chinese, and the Mandarin voice reads the names as English), else the
 * script with the most letters among Hangul, Cyrillic, Greek, Arabic, Hebrew, Devanagari and
 * Thai when it outnumbers the Latin words, else English. Takes time in proportion to the text.
 */
export function detectLanguage(text: string): SpeechLang {
  const latinWords = text.match(/[A-Za-z\u00c0-\u024f]+/g)?.length ?? 0;
  const han = text.match(/\p{Script=Han}/gu)?.length ?? 0;
  const kana = text.match(/[\p{Script=Hiragana}\p{Script=Katakana}]/gu)?.length ?? 0;
  if (kana > 0 && han + kana >= latinWords) return "ja";
  if (han > 0 && han >= latinWords) return "zh";
  let best: SpeechLang = "en";
  let most = latinWords;
  for (const [lang, script] of OWN_SCRIPTS) {
    const count = text.match(script)?.length ?? 0;
    if (count > most) {
      best = lang;
      most = count;
    }
  }
  return best;
}

/** A language's name, in English and in Mandarin, for the sentence that says a passage is left out. */
const LANGUAGE_NAMES: Readonly<Record<SpeechLang, readonly [string, string]>> = {
  en: ["English", "英语"],
  zh: ["Chinese", "中文"],
  ja: ["Japanese", "日语"],
  ko: ["Korean", "韩语"],
  ru: ["Russian", "俄语"],
  el: ["Greek", "希腊语"],
  ar: ["Arabic", "阿拉伯语"],
  he: ["Hebrew", "希伯来语"],
  hi: ["Hindi", "印地语"],
  th: ["Thai", "泰语"],
};

/** The sentences the relay says itself, in one language. */
export interface Phrases {
  /** The language they are in. */
  readonly lang: SpeechLang;
  /** Said where code blocks are left out. */
  readonly codeOmitted: string;
  /** "From <site>, by <author>." with either part missing; `undefined` when both are. */
  source(site: string | undefined, author: string | undefined): string | undefined;
  /** Said in place of a passage in `lang` that no voice can read. */
  skipped(lang: SpeechLang): string;
  /** The end of a sentence: `.` or `。`, after a title or heading that has none. */
  readonly stop: string;
}

const ENGLISH: Phrases = {
  lang: "en",
  codeOmitted: "Code omitted.",
  source(site, author) {
    if (site && author) return `From ${site}, by ${author}.`;
    if (site) return `From ${site}.`;
    return author ? `By ${author}.` : undefined;
  },
  skipped: (lang) =>
    `A passage in ${LANGUAGE_NAMES[lang][0]} is left out: there is no voice for it.`,
  stop: ".",
};

const MANDARIN: Phrases = {
  lang: "zh",
  codeOmitted: "代码从略。",
  source(site, author) {
    if (site && author) return `来自${site}，作者${author}。`;
    if (site) return `来自${site}。`;
    return author ? `作者${author}。` : undefined;
  },
  skipped: (lang) => `这里有一段${LANGUAGE_NAMES[lang][1]}，没有可用的语音，略过。`,
  stop: "。",
};

/**
 * The sentences the relay says in an episode whose main language is `lang`: Mandarin's for
 * Chinese and Japanese (a Japanese episode then hears them in Mandarin, which has the voice),
 * English's for every other.
 */
export function phrasesFor(lang: SpeechLang): Phrases {
  return lang === "zh" || lang === "ja" ? MANDARIN : ENGLISH;
}

/** A language's English name ("Japanese"), for the episode's description. */
export function languageName(lang: SpeechLang): string {
  return LANGUAGE_NAMES[lang][0];
}

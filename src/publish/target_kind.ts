/**
 * What a publish target is made of: the article every target takes, what one target reports,
 * and the shape of one target kind's registration (its name, the option that points it at an
 * external service, the request and answer of that service, and how it reaches the relay's
 * own built-in service). Each kind is one module beside this one (`notes_target.ts`, …),
 * listed once in `registry.ts`; docs/design.md says how to add one.
 *
 * @module
 */

import type { Config } from "../config/config.ts";

/** Longest title, characters: a title is a line, not a text. */
export const TITLE_MAX = 500;
/** Longest tag list, characters. */
export const TAGS_MAX = 2000;
/** Longest content, characters: above the body limit's worth of text, so a bound only. */
export const CONTENT_MAX = 1_000_000;

/**
 * A validated publish request, checked once where it enters the relay (`POST /publish`, a
 * kept failed publish): title at most {@linkcode TITLE_MAX} characters, contents at most
 * {@linkcode CONTENT_MAX}, tags at most {@linkcode TAGS_MAX}. Optional fields are absent,
 * never empty.
 */
export interface Article {
  /** Non-empty title. */
  readonly title: string;
  /** Non-empty body text: plain summary for the blog, speech text for the podcast. */
  readonly content: string;
  /**
   * Markdown original; the notes store gets it instead of `content` when given. For an
   * article a reader read, the whole result text it pushed (src/article_result.ts), which
   * the built-in services read into its parts.
   */
  readonly content_md?: string;
  /** Comma-separated tags. */
  readonly tags?: string;
}

/** What one target did: its success report (one of three kinds), or why it failed. */
export type TargetResult =
  | { readonly status: "success"; readonly doc_id: string }
  | { readonly status: "success"; readonly url: string }
  | { readonly status: "success"; readonly message: string }
  | { readonly status: "error"; readonly error: string };

/**
 * The relay's own notes store, blog and podcast as the targets reach them: one call per target
 * kind. Implemented by `builtin/publishing.ts` (which matches this shape without importing
 * it, since the built-in services sit beside `publish/`, not above it); `server/` hands it
 * over in {@linkcode PublishConfig}-like settings. Each call may throw a file system error
 * (a full disk), which the fan-out reports as that target's error.
 */
export interface BuiltinTargets {
  /** Saves a note; resolves to its id. */
  saveNote(article: Article): Promise<{ readonly doc_id: string }>;
  /** Publishes a blog post; resolves to its page's address. */
  publishPost(article: Article): Promise<{ readonly url: string }>;
  /** Queues an episode to be read aloud; resolves to a sentence naming it. */
  queueEpisode(article: Article): Promise<{ readonly message: string }>;
}

/**
 * The request and answer of an external service speaking the relay's own shapes
 * (docs/publishing-targets.md), as a preset of the generic HTTP target: the targets file's
 * `"preset"` names one, and a target with a URL option is sent through it.
 */
export interface TargetPreset {
  /** The service's name in error sentences, e.g. `The blog`. */
  readonly label: string;
  /** Path appended to the target's base URL, e.g. `/api/publish`. */
  readonly path: string;
  /** The JSON body template: `{{title}}`, `{{content}}`, … (adapters.ts's renderTemplate). */
  readonly body: Readonly<Record<string, unknown>>;
  /** Success: this field of the JSON answer equals this value. */
  readonly success: { readonly path: string; readonly equals: unknown };
  /** What a success reports, and from which field of the answer. */
  readonly report: { readonly path: string; readonly as: "doc_id" | "url" | "message" };
}

/** One target kind, as registered in `registry.ts`. */
export interface TargetKind {
  /** Its name in requests, answers, options and the targets file, e.g. `"podcast"`. */
  readonly name: string;
  /** Other names it is accepted under (older requests and files), e.g. `["nas"]`. */
  readonly aliases: readonly string[];
  /** What it is, for lists: `"the podcast (read aloud)"`. */
  readonly description: string;
  /** The option that points it at an external service, as the command line spells it. */
  readonly urlFlag: string;
  /** That option's value in a configuration, or `undefined` when unset. */
  url(config: Config): string | undefined;
  /** Whether the external service needs the relay's `X-App-ID` (`RELAY_APP_ID`). */
  readonly needsAppId: boolean;
  /** The external service's request and answer. */
  readonly preset: TargetPreset;
  /** Publishes to the built-in service; may throw what the service throws. */
  builtin(services: BuiltinTargets, article: Article): Promise<TargetResult>;
}

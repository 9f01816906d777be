/**
 * Types of `turndown-plugin-gfm`, which ships none: each export is a Turndown plugin (a function
 * that adds rules to a Turndown service). Source: the package's README.
 */
import type TurndownService from "turndown";

/** A Turndown plugin: adds rules to the service it is given. */
type Plugin = (service: TurndownService) => void;

/** Tables, strikethrough and task list items together. */
export const gfm: Plugin;
/** GFM tables. */
export const tables: Plugin;
/** `~~strikethrough~~`. */
export const strikethrough: Plugin;
/** `- [x]` task list items. */
export const taskListItems: Plugin;
/** Keeps `<pre>` blocks GitHub marks with a language as fenced code. */
export const highlightedCodeBlock: Plugin;

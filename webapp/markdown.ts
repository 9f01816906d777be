/**
 * Markdown to DOM nodes for the web app's Results screen (an article a reader pushed is
 * Markdown: headings, lists, links, code, tables), with markdown-it. `deno task webapp`
 * bundles this file, with markdown-it, into `webapp/markdown.js`, the ES module the app loads;
 * the bundle also carries the relay's own reading of a result (src/article_result.ts) and its
 * queue names (src/queue_names.ts), re-exported here.
 *
 * Safe by configuration, for a result is whatever a worker pushed:
 * - raw HTML is off, so a `<script>` or an `<img onerror>` in a result is escaped and shown as
 *   the characters it is;
 * - a link keeps only an `http:`, `https:` or `mailto:` address; with any other
 *   (`javascript:`, `data:`, a relative one) its text is shown without it;
 * - an image becomes a link to its address, never loaded (the page's CSP would block it, and
 *   a phone on a metered line should not fetch what a result points at);
 * - the HTML is parsed by a `DOMParser` into a document that runs nothing and loads nothing,
 *   and only its nodes reach the page.
 *
 * @module
 */

import MarkdownIt, { type Token } from "markdown-it";

// The web app's one bundle also carries what it shares with the relay, so that both read a
// result and name the queues the same way.
export { readArticleResult, readFailureResult } from "../src/article_result.ts";
export { QUEUE_NAMES } from "../src/queue_names.ts";

/** The little of the DOM this module uses; Deno's types have no DOM (see content.ts). */
interface DomNode {
  readonly nodeType: number;
  readonly nodeName: string;
  readonly textContent: string | null;
  readonly childNodes: ArrayLike<DomNode>;
  readonly parentNode: DomNode | null;
}
interface DomFragment extends DomNode {
  append(...nodes: DomNode[]): void;
}
interface DomDocument {
  createDocumentFragment(): DomFragment;
  importNode(node: DomNode, deep: boolean): DomNode;
}
declare const document: DomDocument;
declare const DOMParser: {
  new (): { parseFromString(html: string, type: "text/html"): { body: DomNode } };
};

/** Addresses a link may have: the web, and mail. */
const SAFE_URL = /^(?:https?:\/\/|mailto:)/i;

const md = new MarkdownIt({
  html: false,
  linkify: true,
  // A single line break stays a line break, as in a chat message.
  breaks: true,
  typographer: false,
});
// A line break is one `<br>`, with no newline after it that the spoken text would double.
md.renderer.rules.softbreak = () => "<br>";
md.renderer.rules.hardbreak = () => "<br>";
// Results are often plain text about HTML: `&lt;` stays the four characters it was written as.
md.disable("entity");
// Every link is parsed, so that a refused one still shows its text (not its Markdown); the
// link and image renderers below decide which keep their address.
md.validateLink = () => true;

// A result's own # is the card's title: one level below the screen's `<h1>`, so that no
// level is skipped (screen readers list headings by level; WCAG's heading order).
md.renderer.rules.heading_open = (tokens, i) => {
  const level = Math.min(Number(tokens[i]!.tag.slice(1)) + 1, 6);
  return `<h${level}>`;
};
md.renderer.rules.heading_close = (tokens, i) => {
  const level = Math.min(Number(tokens[i]!.tag.slice(1)) + 1, 6);
  return `</h${level}>\n`;
};

/** Whether the link that `tokens[i]` opens goes to the web or to mail. */
function safeLink(tokens: Token[], i: number): boolean {
  return SAFE_URL.test(String(tokens[i]!.attrGet("href") ?? "").trim());
}

// A link opens outside the app and tells the site nothing about it; a link to anything else
// (`javascript:`, `data:`, a relative address) is its text alone.
md.renderer.rules.link_open = (tokens, i, options, _env, self) => {
  if (!safeLink(tokens, i)) return "<span>";
  tokens[i]!.attrSet("rel", "noreferrer noopener");
  tokens[i]!.attrSet("target", "_blank");
  return self.renderToken(tokens, i, options);
};
// Links do not nest, so the link a close ends is the nearest one opened before it.
md.renderer.rules.link_close = (tokens, i) => {
  let open = i - 1;
  while (open > 0 && tokens[open]!.type !== "link_open") open--;
  return safeLink(tokens, open) ? "</a>" : "</span>";
};

// An image is a link to its address, named by its description.
md.renderer.rules.image = (tokens, i) => {
  const token = tokens[i]!;
  const src = String(token.attrGet("src") ?? "");
  const name = `Image: ${token.content || src}`;
  const escaped = md.utils.escapeHtml(name);
  if (!SAFE_URL.test(src)) return `<span>${escaped}</span>`;
  const href = md.utils.escapeHtml(src);
  return `<a href="${href}" rel="noreferrer noopener" target="_blank">${escaped}</a>`;
};

// Wide tables scroll inside the card, not the page.
md.renderer.rules.table_open = () => `<div class="table"><table>\n`;
md.renderer.rules.table_close = () => `</table></div>\n`;

/**
 * Renders Markdown (or plain text, which is Markdown too) as DOM nodes.
 *
 * @param markdown The result's content.
 * @param doc The document the nodes are for (the page's by default).
 * @returns A fragment to append to the page; it holds no script, no event handler attribute
 *   and no link other than to `http:`, `https:` or `mailto:`.
 */
export function renderMarkdown(markdown: string, doc: DomDocument = document): DomFragment {
  const html = md.render(String(markdown));
  const parsed = new DOMParser().parseFromString(html, "text/html");
  const fragment = doc.createDocumentFragment();
  for (const node of Array.from(parsed.body.childNodes)) {
    fragment.append(doc.importNode(node, true));
  }
  return fragment;
}

/** Elements after which the spoken text has a paragraph break. */
const BLOCKS = new Set(["P", "LI", "H3", "H4", "H5", "H6", "PRE", "BLOCKQUOTE", "TR", "HR"]);

/**
 * The text of rendered Markdown, a paragraph per block: what a read-aloud service speaks.
 *
 * @param node What {@linkcode renderMarkdown} made (or an element holding it).
 * @returns The text, with no Markdown marks, blank lines between blocks, cells spaced.
 */
export function plainText(node: DomNode): string {
  const parts: string[] = [];
  const walk = (parent: DomNode) => {
    for (const child of Array.from(parent.childNodes)) {
      if (child.nodeType === 3) {
        // markdown-it puts a line break between the tags it writes; only code keeps them.
        const text = child.textContent ?? "";
        if (/^\n+$/.test(text) && parent.nodeName !== "CODE") continue;
        parts.push(text);
      } else if (child.nodeName === "BR") parts.push("\n");
      else {
        walk(child);
        if (BLOCKS.has(child.nodeName)) parts.push("\n\n");
        else if (child.nodeName === "TD" || child.nodeName === "TH") parts.push(" ");
      }
    }
  };
  walk(node);
  return parts.join("").replace(/[ \t]+\n/g, "\n").replace(/\n{3,}/g, "\n\n").trim();
}

/**
 * What the reader changes in a page around Readability (src/client/article.ts): site widgets taken
 * out before Readability scores the page, and the tables of the article it found rewritten so that
 * Turndown's GFM rule writes every data table as a Markdown table and no table as raw HTML. Plain
 * DOM calls only: the same code runs over linkedom in Deno and over the browser's DOM in the
 * extension.
 *
 * Each rule was kept because it raised the F1 of the article text on real pages
 * (docs/benchmarks.md, "Article quality").
 *
 * @module
 */

/** The parts of an element the tidying touches (a browser's and linkedom's have them). */
export interface TidyElement {
  /** Upper-case tag name, as the DOM gives it (`TABLE`, `TD`). */
  readonly tagName: string;
  /** The element's text. */
  readonly textContent: string | null;
  /** The element's children as HTML. */
  innerHTML: string;
  /** Child elements. */
  readonly children: ArrayLike<TidyElement>;
  /** The element it is in, or `null`. */
  readonly parentElement: TidyElement | null;
  /** An attribute's value, or `null`. */
  getAttribute(name: string): string | null;
  /** Takes the element out of its document. */
  remove(): void;
  /** Every descendant that matches a CSS selector. */
  querySelectorAll(selectors: string): ArrayLike<TidyElement>;
  /** Whether the element matches a CSS selector. */
  matches(selectors: string): boolean;
  /** The nearest ancestor-or-self that matches a CSS selector. */
  closest(selectors: string): TidyElement | null;
}

/** What makes an element a site widget: its role, or a word of its `id` or `class`. */
const WIDGET_ROLES = '[role="dialog"], [role="alertdialog"], [aria-modal="true"]';

/**
 * Words of an `id` or `class` that name a widget of the site rather than part of an article:
 * cookie and consent banners, keyboard-shortcut help, newsletter and sharing boxes.
 */
const WIDGET_WORDS =
  /(?:^|[\s_-])(?:cookie|cookies|consent|gdpr|cmp|keyboard-shortcuts?|shortcuts-help|newsletter|share-?(?:bar|buttons|tools|links)|social-?(?:share|links|icons))(?:$|[\s_-])/i;

/**
 * Takes the site's widgets out of `root` (a page's document), in place: dialogs and elements
 * whose `id` or `class` names a cookie or consent banner, keyboard-shortcut help, a newsletter or
 * a share bar (such a block can otherwise pass for the article on a short page, or trail it);
 * and the captions of figures, whose pictures stay.
 */
export function removeWidgets(root: Pick<TidyElement, "querySelectorAll">): void {
  for (const element of Array.from(root.querySelectorAll(WIDGET_ROLES))) element.remove();
  for (const element of Array.from(root.querySelectorAll("[id], [class]"))) {
    if (element.tagName === "BODY" || element.tagName === "HTML") continue;
    const names = `${element.getAttribute("id") ?? ""} ${element.getAttribute("class") ?? ""}`;
    if (WIDGET_WORDS.test(names)) element.remove();
  }
  // A figure keeps its pictures and loses its caption and credit line: on news pages they are
  // the photographer's and the agency's words, which the article's own text does not hold.
  for (const figure of Array.from(root.querySelectorAll("figure"))) {
    const images = Array.from(figure.querySelectorAll("img"));
    figure.innerHTML = "";
    (figure as TidyElement & { append(...nodes: unknown[]): void }).append(...images);
  }
}

/** Elements that make a table cell a block of the page rather than a datum. */
const BLOCKS = "p, div, ul, ol, table, h1, h2, h3, h4, h5, h6, blockquote, pre, figure, dl";

/**
 * Rewrites the tables of `root` (the article's HTML in an element) so that Markdown can hold
 * them. A table whose cells hold blocks (paragraphs, lists, other tables: a layout table) becomes
 * its cells' contents one after another; a data table gets its first row as the header row when
 * it has none, and line breaks in cells become spaces, as a GFM table row is one line.
 */
export function tidyTables(
  root: Pick<TidyElement, "querySelectorAll">,
  make: (tag: string) => TidyElement & { append(...nodes: unknown[]): void },
): void {
  // Innermost first: a layout table's nested tables are settled before it is taken apart.
  for (const table of Array.from(root.querySelectorAll("table")).reverse()) {
    const rows = Array.from(table.querySelectorAll("tr")).filter((row) =>
      row.closest("table") === table
    );
    const cells = rows.flatMap((row) => Array.from(row.children));
    const layout = rows.length < 2 || cells.some((cell) => cell.querySelectorAll(BLOCKS).length);
    const box = make("div");
    if (layout) {
      for (const cell of cells) {
        const block = make("div");
        block.innerHTML = cell.innerHTML;
        box.append(block);
      }
    } else {
      box.innerHTML = dataTable(rows);
    }
    replace(table, box);
  }
}

/** A data table's rows as HTML with a header row: `<table><thead>…</thead><tbody>…</tbody>`. */
function dataTable(rows: TidyElement[]): string {
  const width = Math.max(...rows.map((row) => row.children.length));
  const line = (row: TidyElement, tag: string) => {
    const cells = Array.from(row.children).map((cell) =>
      `<${tag}>${cell.innerHTML.replace(/<br\s*\/?>/gi, " ")}</${tag}>`
    );
    while (cells.length < width) cells.push(`<${tag}></${tag}>`);
    return `<tr>${cells.join("")}</tr>`;
  };
  const [head, ...body] = rows;
  return `<table><thead>${line(head!, "th")}</thead><tbody>${
    body.map((row) => line(row, "td")).join("")
  }</tbody></table>`;
}

/** Puts `box`'s children where `element` is, and takes `element` out. */
function replace(element: TidyElement, box: TidyElement): void {
  const at = element as unknown as { replaceWith(...nodes: unknown[]): void };
  const children = (box as unknown as { childNodes: ArrayLike<unknown> }).childNodes;
  at.replaceWith(...Array.from(children));
}

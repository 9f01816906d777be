// Markdown to DOM nodes, for the results the web app shows (an article a reader pushed is
// Markdown: headings, lists, links, code, tables).
//
// Safe by construction: the renderer never parses HTML. It builds elements with
// createElement and puts every piece of text in with textContent, so a `<script>` or an
// `<img onerror>` in a result is shown as the characters it is and can never become markup.
// Links keep only http:, https: and mailto: addresses (a `javascript:` link is shown as its
// text), and images are shown as links to their address, never loaded.
//
// The subset is what readers and workers write: ATX headings, paragraphs (a single line break
// stays a line break, as in a chat message), `-`/`*`/`1.` lists, `>` quotes, fenced code,
// rules, GFM tables, and inline code, links, images, autolinks, bold, italics and
// strikethrough.

const SAFE_URL = /^(?:https?:\/\/|mailto:)/i;
const FENCE = /^\s{0,3}(```+|~~~+)/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const TABLE_DIVIDER = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

/** A fragment with `markdown` rendered as elements of `doc`. */
export function renderMarkdown(markdown, doc = document) {
  const fragment = doc.createDocumentFragment();
  blocks(String(markdown).replace(/\r\n?/g, "\n").split("\n"), fragment, doc);
  return fragment;
}

const BLOCKS = new Set(["P", "LI", "H3", "H4", "H5", "H6", "PRE", "BLOCKQUOTE", "TR", "HR"]);

/** The text of rendered Markdown, a line per block: what a read-aloud service speaks. */
export function plainText(node) {
  const parts = [];
  const walk = (parent) => {
    for (const child of parent.childNodes) {
      if (child.nodeType === 3) parts.push(child.textContent);
      else if (child.nodeName === "BR") parts.push("\n");
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

function blocks(lines, parent, doc) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === "") {
      i++;
      continue;
    }
    const fence = FENCE.exec(line);
    const heading = HEADING.exec(line);
    if (fence) {
      const code = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) code.push(lines[i]);
      i++;
      const pre = el(doc, "pre");
      pre.append(el(doc, "code", code.join("\n")));
      parent.append(pre);
    } else if (heading) {
      // A result's own # is the card's title: one level below the screen's heading.
      const h = el(doc, `h${Math.min(heading[1].length + 2, 6)}`);
      inline(heading[2], h, doc);
      parent.append(h);
      i++;
    } else if (RULE.test(line)) {
      parent.append(el(doc, "hr"));
      i++;
    } else if (line.includes("|") && TABLE_DIVIDER.test(lines[i + 1] ?? "")) {
      i = table(lines, i, parent, doc);
    } else if (QUOTE.test(line)) {
      const quoted = [];
      for (; i < lines.length && QUOTE.test(lines[i]); i++) quoted.push(QUOTE.exec(lines[i])[1]);
      const quote = el(doc, "blockquote");
      blocks(quoted, quote, doc);
      parent.append(quote);
    } else if (ITEM.test(line)) {
      i = list(lines, i, parent, doc);
    } else {
      const text = [];
      for (; i < lines.length && lines[i].trim() !== "" && !startsBlock(lines, i); i++) {
        text.push(lines[i].trim());
      }
      if (text.length === 0) text.push(lines[i++].trim());
      const p = el(doc, "p");
      text.forEach((part, n) => {
        if (n > 0) p.append(el(doc, "br"));
        inline(part, p, doc);
      });
      parent.append(p);
    }
  }
}

function startsBlock(lines, i) {
  const line = lines[i];
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) ||
    ITEM.test(line) || (line.includes("|") && TABLE_DIVIDER.test(lines[i + 1] ?? ""));
}

/**
 * A list from line `i`: items at its first item's indentation and of its kind (numbered or
 * not); deeper lines belong to the item above (a nested list, a second paragraph). Returns
 * the next line.
 */
function list(lines, i, parent, doc) {
  const first = ITEM.exec(lines[i]);
  const indent = first[1].length;
  const ordered = /^\d/.test(first[2]);
  const items = [];
  for (; i < lines.length; i++) {
    const line = lines[i];
    const match = ITEM.exec(line);
    const depth = line.search(/\S/);
    if (match && depth <= indent) {
      if (/^\d/.test(match[2]) !== ordered) break;
      items.push([match[3]]);
    } else if (line.trim() !== "" && depth > indent) {
      items.at(-1).push(line.slice(Math.min(depth, indent + 4)));
    } else break;
  }
  const listEl = el(doc, ordered ? "ol" : "ul");
  for (const item of items) {
    const li = el(doc, "li");
    if (item.length === 1) inline(item[0], li, doc);
    else blocks(item, li, doc);
    listEl.append(li);
  }
  parent.append(listEl);
  return i;
}

/** A GFM table from line `i` (its header) until a line without a `|`. Returns the next line. */
function table(lines, i, parent, doc) {
  const row = (line, tag) => {
    const tr = el(doc, "tr");
    const text = line.trim().replace(/^\|/, "").replace(/(?<!\\)\|$/, "");
    for (const cell of text.split(/(?<!\\)\|/)) {
      nested(doc, tag, cell.trim().replace(/\\\|/g, "|"), tr);
    }
    return tr;
  };
  const tableEl = el(doc, "table");
  const head = el(doc, "thead");
  head.append(row(lines[i], "th"));
  const body = el(doc, "tbody");
  for (i += 2; i < lines.length && lines[i].includes("|"); i++) body.append(row(lines[i], "td"));
  tableEl.append(head, body);
  // Wide tables scroll inside the card, not the page.
  const wrap = el(doc, "div");
  wrap.className = "table";
  wrap.append(tableEl);
  parent.append(wrap);
  return i;
}

// Inline: code, image, link, autolink, bare URL, bold, strikethrough, italics, escapes.
const INLINE = new RegExp(
  [
    /(`+)([\s\S]*?[^`])\1(?!`)/.source, // 1, 2: code
    /!\[([^\]]*)\]\(\s*<?((?:[^\s()<>]|\([^\s()]*\))*)>?(?:\s+"[^"]*")?\s*\)/.source, // 3, 4: image
    /\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?((?:[^\s()<>]|\([^\s()]*\))*)>?(?:\s+"[^"]*")?\s*\)/
      .source, // 5, 6: link
    /<((?:https?:\/\/|mailto:)[^\s>]+)>/.source, // 7: autolink
    /(https?:\/\/[^\s<]*[^\s<.,;:!?)\]}'"])/.source, // 8: bare URL
    /(\*\*|__)(?=\S)([\s\S]*?\S)\9/.source, // 9, 10: bold
    /(~~?)(?=\S)([\s\S]*?\S)\11/.source, // 11, 12: strikethrough
    /(\*|_)(?=\S)([\s\S]*?\S)\13(?![\w*])/.source, // 13, 14: italics
    /\\([\\`*_{}\[\]()#+\-.!|~<>])/.source, // 15: escaped character
  ].join("|"),
  "g",
);

function inline(text, parent, doc) {
  let at = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > at) parent.append(text.slice(at, m.index));
    at = m.index + m[0].length;
    if (m[1] !== undefined) parent.append(el(doc, "code", m[2].trim()));
    else if (m[3] !== undefined) parent.append(link(doc, m[4], `Image: ${m[3] || m[4]}`));
    else if (m[5] !== undefined) {
      const a = link(doc, m[6]);
      inline(m[5], a, doc);
      parent.append(a);
    } else if (m[7] !== undefined) parent.append(link(doc, m[7], m[7]));
    else if (m[8] !== undefined) parent.append(link(doc, m[8], m[8]));
    else if (m[9] !== undefined) nested(doc, "strong", m[10], parent);
    else if (m[11] !== undefined) nested(doc, "del", m[12], parent);
    else if (m[13] !== undefined) nested(doc, "em", m[14], parent);
    else parent.append(m[15]);
  }
  if (at < text.length) parent.append(text.slice(at));
}

function nested(doc, tag, text, parent) {
  const node = el(doc, tag);
  inline(text, node, doc);
  parent.append(node);
}

/** A link to `url` when it is safe, else a span: the text stays, the address goes. */
function link(doc, url, text) {
  if (!SAFE_URL.test(url)) return el(doc, "span", text);
  const a = el(doc, "a", text);
  a.href = url;
  a.rel = "noreferrer noopener";
  a.target = "_blank";
  return a;
}

function el(doc, tag, text) {
  const node = doc.createElement(tag);
  if (text !== undefined) node.textContent = text;
  return node;
}

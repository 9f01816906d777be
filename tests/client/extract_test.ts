/**
 * Reading a link (src/client/extract.ts, fetch_page.ts, charset.ts) against loopback pages:
 * pages in GBK, GB18030, Big5 and Shift_JIS that name their charset only in a `<meta>`, one
 * that names none, a table; and the hostile ones, each ending as a reason within its bounds.
 *
 * @module
 */

import assert from "node:assert/strict";
import { checkShape, PageError, readLink, withoutScripts } from "../../src/client/extract.ts";
import { checkedUrl, fetchPage } from "../../src/client/fetch_page.ts";
import { MAX_ELEMENTS } from "../../src/client/page_shape.ts";
import { CJK_TEXT, CJK_TITLE, servePages } from "./_pages.ts";

/** The test pages are on 127.0.0.1, which the reader refuses unless allowed. */
const OPTIONS = {
  timeoutMs: 10_000,
  maxBytes: 5 * 1024 * 1024,
  acceptLanguage: "en",
  policy: { allow: [{ host: "127.0.0.1", port: undefined }], relay: [] },
};

/** The reason `readLink` gives for `url`. */
async function reason(url: string, options = OPTIONS): Promise<PageError> {
  const error = await readLink(url, options).then(() => undefined, (e) => e);
  assert.ok(error instanceof PageError, `${url}: ${error}`);
  return error;
}

Deno.test("readLink() decodes CJK pages by their <meta> charset, their header, or detection", async (t) => {
  await using pages = servePages();
  for (const label of Object.keys(CJK_TEXT)) {
    await t.step(`${label}, named only in <meta>`, async () => {
      const { result, article } = await readLink(`${pages.url}/cjk/${label}`, OPTIONS);
      assert.match(result, new RegExp(`^# ${CJK_TITLE[label]}\n`));
      assert.ok(result.includes(CJK_TEXT[label]!), result);
      assert.ok(!result.includes("\uFFFD"), "no undecodable bytes");
      assert.ok(article.text?.includes(CJK_TEXT[label]!));
    });
  }
  const cases: Array<[string, string, string]> = [
    ["/cjk-undeclared", "gbk", "GBK with no charset anywhere (detected)"],
    ["/cjk-header", "big5", "Big5 in the header, over a <meta> that says utf-8"],
    ["/cjk-http-equiv", "gbk", 'gb2312 in <meta http-equiv="Content-Type">'],
  ];
  for (const [path, label, name] of cases) {
    await t.step(name, async () => {
      const { result } = await readLink(`${pages.url}${path}`, OPTIONS);
      assert.ok(result.includes(CJK_TEXT[label]!), result);
      assert.match(result, new RegExp(`^# ${CJK_TITLE[label]}\n`));
    });
  }
});

Deno.test("readLink() writes a page with a table as Markdown with a GFM table, after redirects", async () => {
  await using pages = servePages();
  const { result, article } = await readLink(`${pages.url}/moved`, OPTIONS);
  assert.equal(
    article.url,
    `${pages.url}/table`,
    "the address after five redirects, the most followed",
  );
  assert.match(result, /^# Sowing calendar\n\nAna Gomez\n\nSource: Garden Weekly, </);
  assert.ok(result.includes(`<${pages.url}/table>\n`));
  assert.match(result, /^\| Vegetable \| Indoors \| Outdoors \|$/m);
  assert.match(result, /^\| --- \| --- \| --- \|$/m);
  assert.match(result, /^\| Bean \| April \| June \|$/m);
  assert.match(result, /~+sow them in March~+/);
  assert.doesNotMatch(result, /About us|Copyright/);
});

Deno.test("readLink() ends each hostile or unreadable page as a reason, within its bounds", async (t) => {
  await using pages = servePages();
  const cases: Array<[string, RegExp, boolean]> = [
    ["/missing", /^HTTP 404$/, true],
    ["/loop", /^more than 5 redirects$/, true],
    ["/to-file", /^only http and https links are read, not file:$/, false],
    ["/pdf", /^not a web page but application\/pdf$/, true],
    ["/untyped-binary", /^not a web page \(no Content-Type, and the body is not HTML\)$/, true],
    ["/login", /^no article found on the page$/, true],
    [
      "/shell",
      /^the page needs a browser \(JavaScript or sign-in\); send it with the browser extension$/,
      false,
    ],
    ["/signin", /^the page needs a browser \(JavaScript or sign-in\); send it/, false],
    ["/stub", /^no article found on the page \(only \d+ words of text\)$/, true],
    [
      "/crowded",
      new RegExp(`^the page is too large to read: \\d+ elements, the most is ${MAX_ELEMENTS}$`),
      false,
    ],
    ["/deep", /^the page is nested too deep to read: 6\d\d levels, the most is 500$/, false],
  ];
  for (const [path, expected, retryable] of cases) {
    await t.step(path, async () => {
      const error = await reason(`${pages.url}${path}`);
      assert.match(error.message, expected);
      assert.equal(error.retryable, retryable);
    });
  }
  await t.step("a javascript: or file: link is refused before any fetch", () => {
    for (const url of ["javascript:alert(1)", "file:///etc/passwd", "data:text/html,<p>x"]) {
      assert.throws(() => checkedUrl(url), (e) => e instanceof PageError && !e.retryable);
    }
  });
  await t.step("a page where nothing listens names the cause and what to do", async () => {
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (listener.addr as Deno.NetAddr).port;
    listener.close();
    const error = await reason(`http://127.0.0.1:${port}/`);
    assert.match(error.message, /^connection refused \(nothing answers at that address: .*\)$/);
  });
  await t.step("a slow drip is cut off at the time limit", async () => {
    const error = await reason(`${pages.url}/slow`, { ...OPTIONS, timeoutMs: 300 });
    assert.equal(error.message, "no complete answer within 0.3 s");
  });
  await t.step("an endless body is cut at the cap, and the result says so", async () => {
    const maxBytes = 64 * 1024;
    const page = await fetchPage(`${pages.url}/endless`, { ...OPTIONS, maxBytes });
    assert.equal(page.truncated, true);
    assert.ok(page.html.length <= maxBytes, `${page.html.length} characters`);
    const { result } = await readLink(`${pages.url}/endless`, { ...OPTIONS, maxBytes });
    assert.match(result, /Water at the root in the morning/);
    assert.match(result, /_The page was longer than 64 KiB: only its beginning was read\._\n$/);
  });
  await t.step("a page of scripts is read without running them", async () => {
    const { result } = await readLink(`${pages.url}/scripts`, OPTIONS);
    assert.match(result, /Water at the root in the morning/);
    assert.doesNotMatch(result, /while \(true\)|xxxx/);
  });
  await t.step("scripts, styles and comments are gone before parsing, closed or not", () => {
    assert.equal(
      withoutScripts("a<script>x</script >b<STYLE media=x>y</style>c<!-- z -->d<scripty>e"),
      "abcd<scripty>e",
    );
    assert.equal(withoutScripts("a<!-- never closed <p>b"), "a");
    // JSON-LD is data, kept for Readability's metadata (title, authors).
    const linked = '<script type="application/ld+json">{"@type":"Article"}</script>';
    assert.equal(withoutScripts(`a${linked}b<script>x</script>c`), `a${linked}bc`);
    assert.equal(withoutScripts("a" + "<script>".repeat(10_000)), "a");
  });
  await t.step("a page's depth counts closed and sibling-closed elements as a parser does", () => {
    checkShape("<ul>" + "<li>item".repeat(1_000) + "</ul>" + "<p>text".repeat(1_000));
    checkShape("<div><span>".repeat(200) + "</div>".repeat(200) + "<br>".repeat(1_000));
    assert.throws(() => checkShape("<div>".repeat(501)), /501 levels, the most is 500/);
    // A slash does not close an HTML element: "<div/>" nests like "<div>" (outside SVG).
    assert.throws(() => checkShape("<div/>".repeat(501)), /501 levels, the most is 500/);
    checkShape("<svg>" + "<path/>".repeat(1_000) + "</svg>");
    assert.throws(
      () => checkShape("<br>".repeat(MAX_ELEMENTS + 1)),
      new RegExp(`${MAX_ELEMENTS + 1} elements`),
    );
  });
  await t.step("malformed HTML still gives its article", async () => {
    const { result } = await readLink(`${pages.url}/malformed`, OPTIONS);
    assert.match(result, /^# Broken\n/);
    assert.match(result, /Water at the root in the morning/);
  });
});

/**
 * Loopback web pages for the extractor's tests: articles in GBK, GB18030, Big5 and Shift_JIS
 * that declare their charset only in a `<meta>`, one that declares none, a table, and the
 * hostile ones (a 404, a redirect loop, a slow drip, an endless body, a PDF, a page of scripts,
 * malformed HTML), on a real `Deno.serve` on 127.0.0.1.
 *
 * @module
 */

import { MAX_ELEMENTS } from "../../src/client/page_shape.ts";

/** The text of every CJK page's article, per encoding (long enough for Readability). */
export const CJK_TEXT: Record<string, string> = {
  gbk: "番茄需要阳光、水和耐心。每天早上在根部浇水，不要浇在叶子上。",
  gb18030: "秋天收获以后，把种子晒干，放在阴凉的地方保存到明年春天。",
  big5: "番茄需要陽光、水和耐心。每天早上在根部澆水，不要澆在葉子上。",
  shift_jis: "トマトには日光と水と忍耐が必要です。毎朝、根元に水をやりましょう。",
};

/** The title of every CJK page. */
export const CJK_TITLE: Record<string, string> = {
  gbk: "种番茄",
  gb18030: "留种子",
  big5: "種番茄",
  shift_jis: "トマトの育て方",
};

const encoders = new Map<string, Map<string, number[]>>();

/**
 * Encodes `text` in a legacy CJK encoding. Deno's `TextEncoder` writes only UTF-8, so the
 * table is built from its `TextDecoder`: every two-byte sequence, decoded, gives the bytes of
 * its character.
 */
export function encode(text: string, label: string): Uint8Array<ArrayBuffer> {
  let table = encoders.get(label);
  if (table === undefined) {
    table = new Map();
    const decoder = new TextDecoder(label, { fatal: true });
    for (let lead = 0x81; lead <= 0xfe; lead++) {
      for (let trail = 0x40; trail <= 0xfe; trail++) {
        try {
          const char = decoder.decode(Uint8Array.of(lead, trail));
          if (char.length === 1 && !table.has(char)) table.set(char, [lead, trail]);
        } catch {
          // not a character in this encoding
        }
      }
    }
    encoders.set(label, table);
  }
  const bytes: number[] = [];
  for (const char of text) {
    const code = char.codePointAt(0)!;
    if (code < 0x80) bytes.push(code);
    else {
      const found = table.get(char);
      if (found === undefined) throw new Error(`"${char}" has no ${label} encoding`);
      bytes.push(...found);
    }
  }
  return Uint8Array.from(bytes);
}

/** An article page: a title, navigation and a footer around an `<article>`. */
export function articlePage(title: string, body: string, head = ""): string {
  return `<!doctype html><html><head>${head}<title>${title}</title></head><body>
<nav><a href="/">Home</a> <a href="/about">About us</a></nav>
<article><h1>${title}</h1>${body}</article>
<footer>Copyright footer text</footer></body></html>`;
}

/** An article page in a CJK encoding: its text five times over, in paragraphs. */
function cjkPage(label: string, head: string): Uint8Array<ArrayBuffer> {
  const text = CJK_TEXT[label]!;
  const body = Array.from({ length: 5 }, () => `<p>${text}${text}</p>`).join("\n");
  return encode(articlePage(CJK_TITLE[label]!, body, head), label);
}

/** The whole article of {@linkcode TEASER_PAGE}, as its JSON-LD gives it: three paragraphs. */
export const TEASER_BODY = [
  "Seed potatoes go in the ground when the soil has warmed to eight degrees, usually in April.",
  "Plant them thirty centimetres apart in rows seventy apart, ten centimetres deep, sprouts up. " +
  "Earth them up when the shoots are twenty centimetres tall, and again three weeks later.",
  "*Early* varieties are lifted in June, maincrop ones in September once the haulm has died " +
  "back; let them dry for a few hours before they are stored in the dark.",
].join("\n");

/** A page whose markup shows a teaser, and whose JSON-LD holds the whole article. */
const TEASER_PAGE = articlePage(
  "Growing potatoes",
  "<p>Seed potatoes go in the ground when the soil has warmed to eight degrees, usually in " +
    "April. Subscribe to read how to plant, earth up and lift them.</p>",
  `<script type="application/ld+json">${
    JSON.stringify({
      "@context": "https://schema.org",
      "@graph": [
        { "@type": "WebSite", name: "Garden Weekly" },
        {
          "@type": ["NewsArticle"],
          headline: "Growing potatoes",
          author: [{ "@type": "Person", name: "Ana Gomez" }, "https://example.org/ana"],
          articleBody: TEASER_BODY,
        },
      ],
    })
  }</script>`,
);

/** The table page's article. */
export const TABLE_PAGE = articlePage(
  "Sowing calendar",
  `<p>When to sow what in a small garden: a table of the common vegetables and the months to
sow them, indoors and out, with a note on each. Long enough for Readability to take it.</p>
<table><thead><tr><th>Vegetable</th><th>Indoors</th><th>Outdoors</th></tr></thead>
<tbody><tr><td>Tomato</td><td>March</td><td>May</td></tr>
<tr><td>Bean</td><td>April</td><td>June</td></tr></tbody></table>
<p>Beans dislike cold soil; <del>sow them in March</del> wait for warm weather.</p>`,
  `<meta property="og:site_name" content="Garden Weekly"><meta name="author" content="Ana Gomez">`,
);

const PARAGRAPH = "<p>Water at the root in the morning, never on the leaves, and mulch the bed " +
  "so that the soil keeps its moisture through the hottest part of the day.</p>\n";

/** Endless: the start of an article, then paragraphs for ever, 16 KiB at a time. */
function endless(): ReadableStream<Uint8Array> {
  const start = new TextEncoder().encode(
    "<!doctype html><html><head><title>Endless</title></head><body><article><h1>Endless</h1>",
  );
  const chunk = new TextEncoder().encode(PARAGRAPH.repeat(Math.ceil(16384 / PARAGRAPH.length)));
  let started = false;
  return new ReadableStream({
    pull(controller) {
      controller.enqueue(started ? chunk : start);
      started = true;
    },
  });
}

/** One byte every 100 ms, for ever (until the client goes away). */
function drip(): ReadableStream<Uint8Array> {
  return new ReadableStream({
    async pull(controller) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      controller.enqueue(Uint8Array.of(0x3c));
    },
  });
}

/** The body of the 400 KB article: numbered paragraphs, so that its end is seen to arrive. */
const HUGE_BODY = Array.from({ length: 2_700 }, (_, i) => PARAGRAPH.replace("<p>", `<p>${i + 1}. `))
  .join("");

const HTML = "text/html";
const SCRIPT = `<script>while (true) {} /* ${"x".repeat(100_000)} */</script>`;

/** The pages, by path: body and content type (or a full response). */
function page(path: string, origin: string): Response {
  const html = (body: BodyInit, type = HTML) =>
    new Response(body, { headers: { "content-type": type } });
  const cjk = /^\/cjk\/([\w]+)$/.exec(path)?.[1];
  if (cjk !== undefined && cjk in CJK_TEXT) {
    return html(cjkPage(cjk, `<meta charset="${cjk === "shift_jis" ? "Shift_JIS" : cjk}">`));
  }
  switch (path) {
    case "/cjk-undeclared":
      return html(cjkPage("gbk", ""));
    case "/cjk-header": // the header wins over a <meta> that says otherwise
      return html(cjkPage("big5", `<meta charset="utf-8">`), "text/html; charset=big5");
    case "/cjk-http-equiv":
      return html(
        cjkPage("gbk", `<meta http-equiv="Content-Type" content="text/html; charset=gb2312">`),
      );
    case "/table":
      return html(TABLE_PAGE);
    case "/moved":
      return Response.redirect(`${origin}/hop/1`, 302);
    case "/loop":
      return Response.redirect(`${origin}/loop`, 301);
    case "/to-file":
      return new Response(null, { status: 302, headers: { location: "file:///etc/passwd" } });
    case "/slow":
      return html(drip());
    case "/endless":
      return html(endless());
    case "/pdf":
      return html(new Uint8Array(4096), "application/pdf");
    case "/untyped-binary":
      return new Response(Uint8Array.of(0x25, 0x50, 0x44, 0x46, 0, 1, 2));
    case "/crowded": // more elements than the reader reads
      return html(articlePage("Crowded", "<p>x</p>".repeat(MAX_ELEMENTS + 5_000)));
    case "/heavy": // within the limits, but seconds of work for the extractor
      return html(articlePage("Heavy", `<p>${PARAGRAPH} <b>bold</b> <i>it</i></p>`.repeat(4_000)));
    case "/huge": // an article of about 400 KB, its paragraphs numbered
      return html(articlePage("Huge", HUGE_BODY));
    case "/long": // an article of about 100 KB
      return html(articlePage("Long", PARAGRAPH.repeat(700)));
    case "/deep": // nested deeper than the reader reads
      return html(articlePage("Deep", "<div>".repeat(600) + PARAGRAPH));
    case "/login":
      return html("<html><head><title>Log in</title></head><body><form></form></body></html>");
    case "/shell": // a JavaScript app: an empty root that its scripts fill
      return html(
        '<html><head><title>App</title><script src="/app.js"></script></head><body>' +
          "<noscript>You need to enable JavaScript to run this app.</noscript>" +
          '<div id="root"></div></body></html>',
      );
    case "/signin": // a sign-in wall in front of the article
      return html(articlePage(
        "Members only",
        '<p>Sign in to read on.</p><form><input type="password" name="p"></form>',
      ));
    case "/teaser": // a teaser in the markup, the whole article in its JSON-LD
      return html(TEASER_PAGE);
    case "/stub": // near-empty: a few words and no sign of why
      return html(articlePage("Stub", "<p>More soon.</p>"));
    case "/scripts":
      return html(articlePage("Scripts", SCRIPT.repeat(20) + PARAGRAPH.repeat(4) + SCRIPT));
    case "/malformed":
      return html(
        // Stray and missing end tags, unclosed paragraphs, content after </html>.
        "<html><title>Broken</title><body></span><div><article><h1>Broken</h1>" +
          PARAGRAPH.replaceAll("</p>", "").repeat(4) +
          "<table><tr><td>cell<b><i>bold</div></td></b></html><p>tail",
      );
  }
  const hop = /^\/hop\/(\d)$/.exec(path)?.[1];
  if (hop !== undefined) {
    const n = Number(hop);
    return Response.redirect(n < 4 ? `${origin}/hop/${n + 1}` : `${origin}/table`, 307);
  }
  return new Response("no such page", { status: 404 });
}

/** The pages on a real loopback server. */
export interface Pages extends AsyncDisposable {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  url: string;
}

/** Serves the pages on 127.0.0.1, port 0. */
export function servePages(): Pages {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const url = new URL(req.url);
    return page(url.pathname, url.origin);
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
    },
  };
}

/**
 * A loopback "router admin" page that counts the requests it receives (`seen`: the `Host` and
 * path of each), and redirects to its `?to=` parameter: the private server of the address
 * policy's tests, which must receive nothing.
 */
export function countingServer() {
  const seen: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    seen.push(`${req.headers.get("host")} ${new URL(req.url).pathname}`);
    const to = new URL(req.url).searchParams.get("to");
    if (to !== null) return new Response(null, { status: 302, headers: { location: to } });
    return new Response(
      "<html><head><title>Router admin</title></head><body><article><h1>Router admin</h1>" +
        "<p>The admin password is hunter2. ".repeat(20) + "</p></article></body></html>",
      { headers: { "content-type": "text/html; charset=utf-8" } },
    );
  });
  return {
    port: server.addr.port,
    seen,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
    },
  };
}

/**
 * The loopback pages the extension's tests read: an article with page chrome and a table, a
 * page in GBK that names its charset only in a `<meta>`, a page that is not HTML, hostile ones;
 * and the loopback server that serves them. Bytes are built here, so no fixture file hides what
 * a test reads.
 *
 * @module
 */

/** One page: its body, `Content-Type` and status (200 unless given). */
export interface TestPage {
  body: Uint8Array<ArrayBuffer> | string;
  type: string;
  status?: number;
}

/** The text of a string in GBK (the Chinese national charset), built from Deno's decoder. */
export function gbkBytes(text: string): Uint8Array<ArrayBuffer> {
  const table = gbkTable();
  const out: number[] = [];
  for (const char of text) {
    const code = char.codePointAt(0)!;
    if (code < 0x80) out.push(code);
    else {
      const pair = table.get(char);
      if (pair === undefined) throw new Error(`${char} has no GBK code`);
      out.push(pair >> 8, pair & 0xff);
    }
  }
  return new Uint8Array(out);
}

let cachedTable: Map<string, number> | undefined;

/** Every two-byte GBK code, by the character it decodes to. */
function gbkTable(): Map<string, number> {
  if (cachedTable) return cachedTable;
  const decoder = new TextDecoder("gbk");
  const table = new Map<string, number>();
  for (let lead = 0x81; lead <= 0xfe; lead++) {
    for (let trail = 0x40; trail <= 0xfe; trail++) {
      if (trail === 0x7f) continue;
      const char = decoder.decode(new Uint8Array([lead, trail]));
      if (char.length === 1 && char !== "\ufffd" && !table.has(char)) {
        table.set(char, (lead << 8) | trail);
      }
    }
  }
  cachedTable = table;
  return table;
}

const ARTICLE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Why WAL needs fsync</title></head>
<body>
<nav><a href="/">Home</a> <a href="/about">About</a> Site navigation</nav>
<header><p>Example Blog, a blog about storage</p></header>
<main><article>
<h1>Why WAL needs fsync</h1>
<p>A write-ahead log makes a database durable only when the log reaches the disk before the
database says a commit is done. Without fsync the operating system keeps the log in its page
cache, and a power cut loses every commit it held, even those the database acknowledged.</p>
<p>The cost of fsync depends on the disk. On an SSD with a power-loss-protected cache it is
tiny; on an SD card, as in many small home servers, it is the largest cost of a commit:</p>
<table><thead><tr><th>Disk</th><th>fsync (ms)</th></tr></thead>
<tbody><tr><td>NVMe SSD</td><td>0.05</td></tr><tr><td>SD card</td><td>12</td></tr></tbody></table>
<p>Group commit is the answer: one fsync for many requests. See <a href="/group-commit">group
commit</a> for how a single writer batches them.</p>
</article></main>
<aside><p>Subscribe to our newsletter for more posts like this one.</p></aside>
<footer><p>Copyright Example Blog</p></footer>
</body></html>`;

const GBK_TEXT = "数据库在每次提交时都要把日志写到磁盘上，否则断电就会丢失已经确认的数据。" +
  "每次提交都调用同步写入的代价取决于磁盘：固态硬盘很快，而存储卡要慢得多。" +
  "所以数据库把许多请求合并成一次提交，一次同步写入服务许多请求，这就是组提交。";

const GBK_PAGE = `<!doctype html>
<html><head><meta charset="gbk"><title>为什么数据库需要同步写入</title></head>
<body><article><h1>为什么数据库需要同步写入</h1>
<p>${GBK_TEXT}</p><p>${GBK_TEXT}</p></article></body></html>`;

const LONG = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>A long read</title></head>
<body><article><h1>A long read</h1>
${
  "<p>Every paragraph of this article says the same thing at some length, so that its Markdown is larger than a small body limit allows.</p>\n"
    .repeat(40)
}
</article></body></html>`;

/** The pages by path. */
export const PAGES: Record<string, TestPage> = {
  "/article": { body: ARTICLE, type: "text/html; charset=utf-8" },
  "/long": { body: LONG, type: "text/html; charset=utf-8" },
  "/gbk": { body: gbkBytes(GBK_PAGE), type: "text/html" },
  "/spin": {
    body: "<!doctype html><title>Spin</title><script>for (;;) {}</script><p>Never shown.</p>",
    type: "text/html",
  },
  "/login": {
    body: "<!doctype html><title>Sign in</title><form><input name=user><button>Go</button></form>",
    type: "text/html",
  },
  "/malformed": {
    body: "<title>Broken</title><div><p>Unclosed <b>bold <i>and italic" +
      "<table><tr><td>cell<p>paragraph in a cell</table></div></span></html><p>" +
      "After the end, a paragraph long enough for a reader to take it as the article text, " +
      "which goes on for a while so that Readability finds more than a hundred characters.",
    type: "text/html",
  },
  "/plain.txt": { body: "Just text, not a page.\n".repeat(20), type: "text/plain" },
};

/** A loopback web server that serves {@linkcode PAGES} and records each request. */
export interface PageServer extends AsyncDisposable {
  /** Its address, `http://127.0.0.1:<port>`. */
  url: string;
  /** Every request so far: its address and headers. */
  requests: { url: string; headers: Record<string, string> }[];
}

/** The cookie that opens `/router`, as a signed-in browser would hold it. */
export const ROUTER_COOKIE = { name: "router_session", value: "signed-in" };
/** What `/router` shows a signed-in browser: the secret no reader may push anywhere. */
export const ROUTER_SECRET = "admin password: hunter2-router";

/**
 * Starts {@linkcode PageServer} on 127.0.0.1, port 0. Besides {@linkcode PAGES}: `/loop`
 * redirects to itself, `/drip` never ends, `/redirect/…` redirects to `/record`, `/away?to=X`
 * redirects to X, and `/router` is a router's admin page, shown only with
 * {@linkcode ROUTER_COOKIE}.
 */
export function startPages(): PageServer {
  const requests: PageServer["requests"] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    requests.push({ url: req.url, headers: Object.fromEntries(req.headers) });
    const url = new URL(req.url);
    if (url.pathname === "/loop") return Response.redirect(`${url.origin}/loop`, 302);
    if (url.pathname === "/drip") return drip();
    if (url.pathname === "/away") return Response.redirect(url.searchParams.get("to")!, 302);
    if (url.pathname === "/router") return routerPage(req);
    if (url.pathname.startsWith("/redirect/")) {
      return Response.redirect(`${url.origin}/record${url.search}`, 307);
    }
    const page = PAGES[url.pathname];
    if (!page) {
      return new Response("<title>Not here</title><p>No such page.</p>", {
        status: 404,
        headers: { "content-type": "text/html" },
      });
    }
    return new Response(page.body, {
      status: page.status ?? 200,
      headers: { "content-type": page.type },
    });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    requests,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

/** A router's admin page: its secret behind a session cookie, else a sign-in form. */
function routerPage(req: Request): Response {
  const signedIn = (req.headers.get("cookie") ?? "").includes(
    `${ROUTER_COOKIE.name}=${ROUTER_COOKIE.value}`,
  );
  const body = signedIn
    ? `<!doctype html><title>Router</title><article><h1>Router settings</h1><p>${ROUTER_SECRET}. ` +
      "Wireless network: home. Firmware up to date. Every setting of this router is shown on " +
      "this page to whoever holds the session.</p></article>"
    : "<!doctype html><title>Sign in</title><form><input name=password></form>";
  return new Response(body, {
    status: signedIn ? 200 : 403,
    headers: { "content-type": "text/html" },
  });
}

/** A page that never ends: a paragraph every 200 ms until the browser goes away. */
function drip(): Response {
  let timer: ReturnType<typeof setInterval> | undefined;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode("<!doctype html><title>Drip</title>"));
      timer = setInterval(() => {
        try {
          controller.enqueue(new TextEncoder().encode("<p>One more drop.</p>\n"));
        } catch {
          clearInterval(timer);
        }
      }, 200);
    },
    cancel() {
      clearInterval(timer);
    },
  });
  return new Response(body, { headers: { "content-type": "text/html" } });
}

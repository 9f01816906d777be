/**
 * The browser extension, loaded unpacked into Debian's Chromium (`--headless=new
 * --load-extension`) and driven by playwright-core: configured through its options page, it
 * sends the open page (the badge shows the relay's answer), and its Q&A reader takes the qa
 * queue of a real relay, opens each link in a background tab, reads it with the relay's own
 * extractor, pushes the Markdown, acknowledges the item and closes the tab. The pages are
 * real loopback servers, which also record every request, to show that the relay's key never
 * reaches them.
 *
 * The extension under test is built like the stores' (extension/build.ts) except that it is
 * granted `*://127.0.0.1/*` and `*://localhost/*` at install: a headless browser cannot click
 * the prompt with which the extension asks for a site at run time. The relay names 127.0.0.1 a
 * Q&A site, which the reader does not take for a loopback address: each test lists the page
 * server's `127.0.0.1:<port>` in the options, as a user lists a host of their own network.
 *
 * One Chromium, with the extension installed once, serves the file's tests (a start costs
 * seconds of CPU); each test has its own relay and page server, and first sets the extension
 * back to what a new install has: nothing stored, no badge, no cookies, only the options page.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type BrowserContext, chromium, type Page, type Worker } from "playwright-core";
import { buildExtension } from "../../extension/build.ts";
import {
  eventually,
  KEY,
  relayCall,
  type RelayProcess,
  ROOT,
  startRelayProcess,
  withTempDir,
} from "../_helpers.ts";
import { type PageServer, ROUTER_COOKIE, ROUTER_SECRET, startPages } from "./pages.ts";
import { CHROMIUM, CHROMIUM_ARGS } from "../_chromium.ts";
import { PROGRAMS, testGroup } from "../_optional.ts";

const test = testGroup("the extension in Chromium", PROGRAMS.chromium);

/** Upper bound for anything the browser waits for; a fast machine never gets near it. */
const WAIT_MS = 30_000;

// The functions given to evaluate() run in the extension's worker or pages. Deno's types have
// neither the DOM nor the extension API: this declares the little they use.
// deno-lint-ignore no-explicit-any
declare const chrome: any;
declare function stopReader(): void;
declare const reader: { done: Promise<void> } | undefined;
declare function onMenuClick(
  info: Record<string, string>,
  tab?: unknown,
): Promise<{ ok: boolean; message: string }>;

/** What a test gets: its relay, the page server and the browser with the extension. */
interface Session {
  relay: RelayProcess;
  pages: PageServer;
  context: BrowserContext;
  worker: Worker;
  extensionId: string;
  /** The options page, open in a tab of its own on a blank setup. */
  options: Page;
  call: (path: string, init?: RequestInit) => Promise<Response>;
}

/** The file's Chromium with the extension installed, and the temp directory of both. */
interface Install {
  dir: string;
  context: BrowserContext;
  extensionId: string;
}

/** Set by the file's `beforeAll` hook, when Chromium is there to run the tests. */
let install: Install | undefined;

/**
 * Builds the extension and starts Chromium with it in a fresh profile, once for the file: a
 * start costs seconds of CPU, and each test sets up the extension from blank anyway (see
 * {@linkcode withExtension}). A new install opens its options page by itself, since nothing is
 * set up yet: that is checked here, where the install happens.
 */
async function installExtension(): Promise<Install> {
  const dir = await Deno.makeTempDir({ prefix: "relay-extension-" });
  const extension = `${dir}/extension`;
  await buildExtension(extension, "chromium", {
    grantHosts: ["*://127.0.0.1/*", "*://localhost/*"],
  });
  const context = await chromium.launchPersistentContext(`${dir}/profile`, {
    executablePath: CHROMIUM,
    headless: false,
    args: [
      "--headless=new",
      ...CHROMIUM_ARGS,
      `--disable-extensions-except=${extension}`,
      `--load-extension=${extension}`,
    ],
  });
  context.setDefaultTimeout(WAIT_MS);
  const worker = context.serviceWorkers()[0] ?? await context.waitForEvent("serviceworker");
  const extensionId = new URL(worker.url()).host;
  const url = `chrome-extension://${extensionId}/options.html`;
  await eventually(
    () => context.pages().some((open) => open.url() === url),
    "the options page to open after the install",
  );
  return { dir, context, extensionId };
}

// Only when the group runs: without Chromium, testGroup registers one ignored test instead.
if (test === Deno.test) {
  Deno.test.beforeAll(async () => {
    install = await installExtension();
  });
  Deno.test.afterAll(async () => {
    await install?.context.close();
    if (install) await Deno.remove(install.dir, { recursive: true });
  });
}

/**
 * Puts the installed extension back as a new install has it: nothing stored (settings,
 * results, the reader's state), no badge, no cookies, no tab but a fresh options page. The
 * reader stops when its settings go and starts again when a test saves new ones.
 */
async function blankSetup(
  { context, extensionId }: Install,
): Promise<{ worker: Worker; options: Page }> {
  const worker = context.serviceWorkers()[0] ?? await context.waitForEvent("serviceworker");
  // The last test's reader may still be reading a link: with its settings gone and its tab
  // closed it ends (and takes no further item), and what it stored meanwhile goes with the
  // second clear, so that nothing of it reaches this test's relay or state.
  await worker.evaluate(() => chrome.storage.local.clear());
  const options = await context.newPage();
  for (const page of context.pages()) if (page !== options) await page.close();
  await worker.evaluate(async () => {
    stopReader();
    await reader?.done;
    await chrome.storage.local.clear();
    await chrome.action.setBadgeText({ text: "" });
    await chrome.action.setTitle({ title: chrome.runtime.getManifest().action.default_title });
  });
  await context.clearCookies();
  await options.goto(`chrome-extension://${extensionId}/options.html`);
  return { worker, options };
}

/**
 * Runs `job` with a relay of its own (qa hosts: 127.0.0.1), a page server of its own and the
 * file's Chromium, whose extension is set back to blank first.
 */
async function withExtension(
  job: (session: Session) => Promise<void>,
  options: { relayArgs?: string[] } = {},
): Promise<void> {
  const installed = install;
  if (installed === undefined) throw new Error("the extension is not installed (beforeAll)");
  const { context, extensionId } = installed;
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, {
      env: { RELAY_API_KEY: KEY },
      args: ["--qa-hosts", "127.0.0.1", ...options.relayArgs ?? []],
    });
    await using pages = startPages();
    const { worker, options: page } = await blankSetup(installed);
    const call = relayCall(relay.url);
    await job({ relay, pages, context, worker, extensionId, options: page, call });
  });
}

/**
 * Enters `link` as the pairing link in the options page, with `allow` as the hosts the reader
 * may read besides the relay's Q&A sites (default: the page server's); returns the page.
 */
async function pair(
  session: Session,
  link: string,
  allow = new URL(session.pages.url).host,
): Promise<Page> {
  const page = session.options;
  await page.fill("#allow-hosts", allow);
  await page.fill("#pairing", link);
  await page.click("#pair-form button");
  return page;
}

/** Waits until the element's text matches `pattern`; returns the text. */
async function textOf(page: Page, selector: string, pattern: RegExp): Promise<string> {
  let text = "";
  await eventually(
    async () => {
      text = (await page.textContent(selector)) ?? "";
      return pattern.test(text);
    },
    `${selector} to match ${pattern} (it says ${JSON.stringify(text)})`,
    WAIT_MS,
  );
  return text;
}

/**
 * Saves `docs/screenshots/<name>.png` with `RELAY_SCREENSHOTS=1`, as the web app's tests do, so
 * that an ordinary run leaves the committed picture alone; without it the picture is still
 * taken, so the page must render, and then dropped.
 */
async function screenshot(page: Page, name: string): Promise<void> {
  await page.mouse.move(0, 0);
  const png = await page.screenshot();
  assert.ok(png.byteLength > 0, `the ${name} page rendered to an empty picture`);
  if (Deno.env.get("RELAY_SCREENSHOTS") !== "1") return;
  await Deno.writeFile(`${ROOT}docs/screenshots/${name}.png`, png);
}

/** The relay's results feed, the contents only. */
async function results(call: Session["call"]): Promise<string[]> {
  const res = await call("/results");
  const feed = await res.json() as { items: { c: string }[] };
  return feed.items.map((item) => item.c);
}

/** Waits until the feed holds a result that starts with `prefix`; returns it. */
async function resultStarting(call: Session["call"], prefix: string): Promise<string> {
  let found: string | undefined;
  await eventually(
    async () => {
      found = (await results(call)).find((c) => c.startsWith(prefix));
      return found !== undefined;
    },
    `a result starting ${JSON.stringify(prefix)}`,
    WAIT_MS,
  );
  return found!;
}

test("the extension sends the open page and reads the qa queue in background tabs", async () => {
  await withExtension(async (session) => {
    const { call, pages, context, worker, relay } = session;

    // Options: the pairing link gives the relay's address and the key.
    const options = await pair(session, `${relay.url}/app/#key=${KEY}`);
    await textOf(
      options,
      "#notice",
      /^Saved\. Connected: \d+ item\(s\) in qa; Q&A sites: 127\.0\.0\.1\.$/,
    );
    assert.equal(await options.inputValue("#relay"), `${relay.url}/`);

    // Send this page: the open article goes to qa, and the badge says so.
    const article = await context.newPage();
    await article.goto(`${pages.url}/article`);
    const sent = await worker.evaluate(
      (url) => onMenuClick({ menuItemId: "send-page", pageUrl: url }),
      `${pages.url}/article`,
    );
    assert.deepEqual(sent, { ok: true, message: "OK (qa)" });
    assert.equal(await worker.evaluate(() => chrome.action.getBadgeText({})), "OK");
    assert.equal(
      await worker.evaluate(() => chrome.action.getTitle({})),
      "Content Relay: OK (qa)",
    );

    // Save the article as shown: read in the user's own tab and pushed at once.
    const saved = await worker.evaluate(async (url) => {
      const [tab] = await chrome.tabs.query({ url });
      return await onMenuClick({ menuItemId: "save-article", pageUrl: url }, tab);
    }, `${pages.url}/article`);
    assert.deepEqual(saved, { ok: true, message: "Saved: Why WAL needs fsync" });

    // The reader takes it, reads it in a tab of its own, pushes the article and acks.
    await eventually(
      async () => (await results(call)).filter((c) => c.startsWith("# Why WAL")).length === 2,
      "the saved article and the one the reader read",
    );
    const result = await resultStarting(call, "# Why WAL needs fsync");
    assert.match(result, new RegExp(`^Source: (.+, )?<${pages.url}/article>$`, "m"));
    assert.match(result, /\| Disk \| fsync \(ms\) \|/);
    assert.match(result, /\| SD card \| 12 \|/);
    assert.ok(!result.includes("Subscribe to our newsletter"), result);
    assert.ok(!result.includes("Site navigation"), result);

    // More links, submitted as a phone would: a GBK page, errors, a javascript: URL, text.
    for (
      const content of [
        `${pages.url}/gbk`,
        `${pages.url}/missing`,
        `${pages.url}/plain.txt`,
        `${pages.url}/loop`,
        `${pages.url}/login`,
        `${pages.url}/malformed`,
        "javascript:alert(1)",
        "What is a versionstamp?",
      ]
    ) {
      const res = await call("/submit?queue=qa", { method: "POST", body: content });
      assert.equal(await res.text(), "OK (qa)");
    }
    const gbk = await resultStarting(call, "# 为什么数据库需要同步写入");
    assert.ok(gbk.includes("每次提交"), gbk);
    assert.equal(
      await resultStarting(call, `Could not read ${pages.url}/missing`),
      `Could not read ${pages.url}/missing: HTTP 404`,
    );
    assert.equal(
      await resultStarting(call, `Could not read ${pages.url}/plain.txt`),
      `Could not read ${pages.url}/plain.txt: not an HTML page (text/plain)`,
    );
    assert.equal(
      await resultStarting(call, `Could not read ${pages.url}/loop`),
      `Could not read ${pages.url}/loop: the browser could not load it (no connection, or too many redirects)`,
    );
    assert.equal(
      await resultStarting(call, `Could not read ${pages.url}/login`),
      `Could not read ${pages.url}/login: no article found`,
    );
    assert.match(await resultStarting(call, "# Broken"), /paragraph in a cell[\s\S]*After the end/);
    await resultStarting(call, "Could not read javascript:alert(1): only http and https links");
    await resultStarting(call, "What is a versionstamp?");

    // Every item acknowledged, every tab it opened closed again.
    // (Each result is pushed before its item is acknowledged.)
    await eventually(async () => {
      const peek = await call("/peek?queue=qa");
      await peek.body?.cancel();
      return peek.status === 204;
    }, "qa to be empty");
    // The tabs loaded the pages as documents (the user's tab and the reader's for the article).
    const loads = pages.requests.filter((r) => r.headers["sec-fetch-dest"] === "document")
      .map((r) => new URL(r.url).pathname);
    assert.deepEqual(loads.filter((path) => path !== "/loop").sort(), [
      "/article",
      "/article",
      "/gbk",
      "/login",
      "/malformed",
      "/missing",
      "/plain.txt",
    ]);
    await eventually(async () => {
      const urls: (string | undefined)[] = await worker.evaluate(async () =>
        (await chrome.tabs.query({})).map((tab: { url: string }) => tab.url)
      );
      return urls.filter((url) => url?.startsWith(pages.url)).length === 1; // the article's
    }, "the reader's tabs to close");

    // The pages never saw the key, in a header or an address.
    assert.ok(pages.requests.length >= 4);
    for (const request of pages.requests) {
      assert.ok(!JSON.stringify(request).includes(KEY), JSON.stringify(request));
    }
  });
});

test("the extension's popup shows the queue and last results, and pauses the reader", async () => {
  await withExtension(async (session) => {
    const { call, pages, context, relay } = session;
    const options = await pair(session, `${relay.url}/app/#key=${KEY}`);
    await textOf(options, "#notice", /Connected/);
    const popup = await context.newPage();
    await popup.setViewportSize({ width: 380, height: 420 });
    await popup.goto(`chrome-extension://${session.extensionId}/popup.html`);
    await textOf(popup, "#reader", /^Reading qa from /);
    // The reader may read every site it would open (127.0.0.1): nothing to allow.
    assert.equal(await popup.isVisible("#allow"), false);
    await popup.click("#pause");
    await textOf(popup, "#reader", /^Paused\.$/);
    await call("/submit", { method: "POST", body: `${pages.url}/article` });
    await popup.reload();
    await textOf(popup, "#count", /^1 link\(s\) waiting in qa\.$/);
    await popup.click("#pause");
    await textOf(popup, "#recent", /Why WAL needs fsync/);
    await textOf(popup, "#reader", /^Reading qa from /);
    await textOf(popup, "#count", /^0 link\(s\) waiting in qa\.$/);
    await screenshot(popup, "extension-popup");

    // A listed host the browser has not let the extension read: the reader pauses and asks,
    // the link stays.
    // (Submitted before the options are saved, which starts the reader again at once: after,
    // it would wait for the reader's next look at qa.)
    const elsewhere = pages.url.replace("127.0.0.1", "127.0.0.2") + "/article";
    await call("/submit?queue=qa", { method: "POST", body: elsewhere });
    await options.fill("#allow-hosts", `${new URL(pages.url).host}, ${new URL(elsewhere).host}`);
    await options.click("#pair-form button");
    await textOf(options, "#notice", /Connected/);
    await textOf(
      popup,
      "#reader",
      /^The extension may not read 127\.0\.0\.2: allow reading pages$/,
    );
    assert.equal(await popup.isVisible("#allow"), true);
    const peek = await (await call("/peek?queue=qa")).json();
    assert.equal(peek.queues.qa[0].content, elsewhere);
  });
});

test("the extension refuses what would send its key elsewhere", async () => {
  await withExtension(async (session) => {
    const { pages, relay } = session;
    // A wrong key: saved, and the relay's reason shown.
    const options = await pair(session, `${relay.url}/app/#key=wrong`);
    await textOf(options, "#notice", /^Saved, but: Wrong API key/);
    // A "relay" that redirects elsewhere: the extension does not follow it with the key.
    await textOf(options, "#notice", /: enter the key again, or a new pairing link/);
    await options.fill("#relay", `${pages.url}/redirect/`);
    await options.fill("#key", KEY);
    await options.click("#form button");
    await textOf(
      options,
      "#notice",
      /^Saved, but: The relay at .* answered with a redirect, which the extension does not follow with the key: enter the address it redirects to/,
    );
    assert.ok(pages.requests.some((r) => new URL(r.url).pathname.startsWith("/redirect/")));
    for (const request of pages.requests) {
      assert.ok(!new URL(request.url).pathname.startsWith("/record"), request.url);
    }
    // An address where no relay answers (a web page), and one where nothing listens.
    await options.fill("#relay", `${pages.url}/elsewhere/`);
    await options.click("#form button");
    await textOf(
      options,
      "#notice",
      /^Saved, but: http:\/\/127\.0\.0\.1:\d+\/elsewhere\/ does not answer as a relay \(HTTP 404, text\/html\): enter the relay's own address/,
    );
    const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const nowhere = `http://127.0.0.1:${(closed.addr as Deno.NetAddr).port}/`;
    closed.close();
    await options.fill("#relay", nowhere);
    await options.click("#form button");
    await textOf(
      options,
      "#notice",
      /^Saved, but: The relay at .* could not be reached \(.*\): check the address and that the relay runs/,
    );
    // A javascript: link is not sent anywhere; the badge says why.
    const refused = await session.worker.evaluate(() =>
      onMenuClick({ menuItemId: "send-link", linkUrl: "javascript:alert(1)" })
    );
    assert.deepEqual(refused, {
      ok: false,
      message: 'Cannot send "javascript:alert(1)": only http and https pages and links are sent',
    });
    assert.equal(await session.worker.evaluate(() => chrome.action.getBadgeText({})), "!");
    // Not an address, and not a pairing link: refused before anything is saved.
    await options.fill("#pairing", `${relay.url}/somewhere#key=${KEY}`);
    await options.click("#pair-form button");
    await textOf(options, "#notice", /^That is not a pairing link/);
  });
});

test("the extension's reader gives up on pages that never finish loading, and goes on", async () => {
  await withExtension(async (session) => {
    const { call, pages, relay } = session;
    // A script that never ends, on a site of its own (localhost): it stalls its renderer.
    // The links are queued before the reader is set up, which starts it at once on them.
    const spin = pages.url.replace("127.0.0.1", "localhost") + "/spin";
    for (const content of [spin, `${pages.url}/drip`, `${pages.url}/article`]) {
      await call("/submit?queue=qa", { method: "POST", body: content });
    }
    const options = session.options;
    await options.fill("#relay", relay.url);
    await options.fill("#key", KEY);
    await options.fill("#timeout", "2");
    const port = new URL(pages.url).port;
    await options.fill("#allow-hosts", `127.0.0.1:${port} localhost:${port}`);
    await options.click("#form button");
    await textOf(options, "#notice", /Connected/);
    for (const url of [spin, `${pages.url}/drip`]) {
      assert.equal(
        await resultStarting(call, `Could not read ${url}`),
        `Could not read ${url}: the page did not finish loading within 2 s`,
      );
    }
    await resultStarting(call, "# Why WAL needs fsync");
  });
});

test("the extension reports an article larger than the relay takes, once", async () => {
  await withExtension(async (session) => {
    const { call, pages, relay } = session;
    // Queued before the reader is set up, which starts it at once on the link.
    await call("/submit?queue=qa", { method: "POST", body: `${pages.url}/long` });
    await textOf(await pair(session, `${relay.url}/app/#key=${KEY}`), "#notice", /Connected/);
    const failure = await resultStarting(call, `Could not read ${pages.url}/long`);
    assert.match(failure, /: the result is larger than the relay takes \(.*2048/);
    await eventually(async () => {
      const peek = await call("/peek?queue=qa");
      await peek.body?.cancel();
      return peek.status === 204;
    }, "qa to be empty");
  }, { relayArgs: ["--max-body", "2KiB"] });
});

test("the reader opens only Q&A sites and listed hosts, and leaves other links for the relay", async () => {
  await withExtension(async (session) => {
    const { call, pages, context, relay } = session;
    // A router's admin page on loopback, which this browser is signed in to. The relay routes
    // its link to qa (it names 127.0.0.1 a Q&A site), but the options list another port.
    await using router = startPages();
    await context.addCookies([{ ...ROUTER_COOKIE, url: router.url }]);
    const secret = `${router.url}/router`;
    // A listed page that redirects to a host not listed: loaded, but not read.
    const away = `${pages.url}/away?to=${
      encodeURIComponent(`${pages.url.replace("127.0.0.1", "localhost")}/article`)
    }`;
    for (const content of [`${pages.url}/article`, away, secret]) {
      assert.equal(
        await (await call("/submit", { method: "POST", body: content })).text(),
        "OK (qa)",
      );
    }
    // Set up after the links are queued, so that the reader starts at once on them.
    await textOf(await pair(session, `${relay.url}/app/#key=${KEY}`), "#notice", /Connected/);
    await resultStarting(call, "# Why WAL needs fsync");
    assert.match(
      await resultStarting(call, `Could not read ${away}`),
      /: it led to localhost:\d+, which the extension does not read/,
    );
    const popup = await context.newPage();
    await popup.goto(`chrome-extension://${session.extensionId}/popup.html`);
    await textOf(popup, "#left", /^1 link\(s\) left for the reader on the relay: not Q&A sites\.$/);
    await textOf(
      popup,
      "#reader",
      /left for the reader on the relay \(127\.0\.0\.1:\d+ is a loopback address\)/,
    );
    // The router's page was never asked for, its link is still queued and not leased, and no
    // result holds its secret.
    assert.deepEqual(router.requests, []);
    const peek = await (await call("/peek?queue=qa")).json();
    assert.deepEqual(peek.queues.qa.map((item: { content: string }) => item.content), [secret]);
    assert.equal(peek.queues.qa[0].lease_until, undefined);
    assert.ok(!(await results(call)).some((c) => c.includes(ROUTER_SECRET)));
    // Once listed by the user, the same page is read with the browser's cookie and pushed.
    await textOf(
      await pair(
        session,
        `${relay.url}/app/#key=${KEY}`,
        `${new URL(pages.url).host} ${new URL(router.url).host}`,
      ),
      "#notice",
      /Connected/,
    );
    const read = await resultStarting(call, `# Router\n\nSource: <${secret}>`);
    assert.ok(read.includes(ROUTER_SECRET), read);
    await textOf(popup, "#left", /^$/);
  });
});

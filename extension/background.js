// Content Relay browser extension: the background (a service worker in Chromium, an event page
// in Firefox). Plain JavaScript, one classic script, so that both browsers run it as it is.
//
// It is the only part that talks to the relay, and so the only part that holds the key: the
// options page stores the relay's address and key in chrome.storage.local, the popup and the
// options page ask this script by message, and every request goes through relayFetch(), which
// sends the key only to the configured relay and follows no redirect (a redirect keeps custom
// headers, so following one could hand the key to another origin).
//
// What it does:
// - "Send this page" (popup) and "Send this link" / "Send this page" (context menu) submit the
//   address with POST /submit; the badge shows the relay's answer ("OK (qa)") or the error.
// - "Save the article as shown" (popup, context menu) reads the open tab's article, as the
//   user sees it, and pushes it to the results feed at once.
// - The Q&A reader takes the qa queue with leased pulls, opens each link in a background tab
//   of this browser (so pages that need the user's login work), reads the article there with
//   the relay's own extractor (content.js), pushes the Markdown, acknowledges the item and
//   closes the tab. A link it cannot read is reported in the results feed and acknowledged.

/** Where the reader's state lives in chrome.storage.local (the options page uses the same). */
const STORED = [
  "relay",
  "key",
  "paused",
  "pauseReason",
  "recent",
  "lastSend",
  "status",
  "pageTimeoutS",
];

/** Items a leased pull holds: long enough to load and read one page several times over. */
const LEASE_S = 300;
/**
 * How long a pull waits for an item, s. Under 30 s: Chromium stops an extension's service
 * worker that has had no event for 30 s, and a request that ends restarts that count.
 */
const WAIT_S = 20;
/**
 * Time a page may take to load in its background tab before it counts as unreadable, s, unless
 * the options say otherwise: a page that never finishes (a slow drip, a script that never
 * ends) costs at most this.
 */
const PAGE_TIMEOUT_S = 30;
/** Time the content script may take to read a loaded page (a busy page can stall it), ms. */
const READ_MS = 20_000;
/** Time a request to the relay may take beyond its long-poll wait, ms. */
const REQUEST_MS = 15_000;
/** First wait after the relay could not be reached, doubled each time up to the maximum, ms. */
const RETRY_FIRST_MS = 2_000;
const RETRY_MAX_MS = 60_000;
/** Largest result pushed, bytes: under the relay's default body limit (512 KiB). */
const MAX_RESULT_BYTES = 400 * 1024;
/** Outcomes the popup lists. */
const RECENT_MAX = 10;
/** The alarm that restarts the reader after the browser stopped this worker, minutes. */
const WAKE_MINUTES = 1;

/** The reader's loop, while one runs, and how to stop its request in flight. */
let reader;

// --- settings and the one way to the relay ---

/** The stored settings and state (see STORED). */
function stored() {
  return chrome.storage.local.get(STORED);
}

/**
 * A request to the configured relay, with its key in the X-Auth-Key header.
 * @param {string} path Relative to the relay's address, e.g. "submit" or "pull?queue=qa".
 * @param {RequestInit & {timeoutMs?: number}} init
 * @returns {Promise<Response>} Any status; the caller reads it.
 * @throws {Error} When no relay is set up, or the request fails or takes too long.
 */
async function relayFetch(path, init = {}) {
  const { relay, key } = await stored();
  if (!relay || !key) {
    throw new Error("Not set up: enter the relay's address and key in the extension's options");
  }
  const base = new URL(relay);
  const url = new URL(path, base);
  // The key goes only under the relay's own address, whatever `path` says.
  if (url.origin !== base.origin || !url.href.startsWith(base.href)) {
    throw new Error(`Refused to send the key outside the relay: ${url.href}`);
  }
  const headers = new Headers(init.headers);
  headers.set("X-Auth-Key", key);
  const { timeoutMs = REQUEST_MS, signal, ...rest } = init;
  const signals = [AbortSignal.timeout(timeoutMs), ...(signal ? [signal] : [])];
  try {
    return await fetch(url, {
      ...rest,
      headers,
      credentials: "omit",
      redirect: "error",
      cache: "no-store",
      signal: AbortSignal.any(signals),
    });
  } catch (error) {
    if (signal?.aborted) throw error;
    throw new Error(`The relay at ${base.href} could not be reached (${error.message})`);
  }
}

/** What the relay's answer says went wrong: a problem document's detail, else the status. */
async function describe(response) {
  const text = await response.text().catch(() => "");
  try {
    const doc = JSON.parse(text);
    if (typeof doc?.detail === "string" && doc.detail) return doc.detail;
  } catch {
    // not a problem document
  }
  return `HTTP ${response.status}${text ? `: ${text.slice(0, 200)}` : ""}`;
}

/**
 * Sends JSON to the relay.
 * @returns {Promise<string>} The answer's text.
 * @throws {Error} With the relay's reason, and its HTTP status as `status`.
 */
async function relayPost(path, body) {
  const response = await relayFetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!response.ok) {
    throw Object.assign(new Error(await describe(response)), { status: response.status });
  }
  return await response.text();
}

// --- sending a page or a link ---

/**
 * Submits `url` to the relay and shows the answer on the badge and in the popup.
 * @param {string | undefined} url The page's or the link's address.
 * @returns {Promise<{ok: boolean, message: string}>} The relay's answer ("OK (qa)") or the error.
 */
async function sendUrl(url) {
  let outcome;
  try {
    const protocol = url ? new URL(url).protocol : "";
    if (protocol !== "http:" && protocol !== "https:") {
      throw new Error(`Cannot send "${url ?? ""}": only http and https pages and links are sent`);
    }
    outcome = { ok: true, message: (await relayPost("submit", { url })).trim() };
  } catch (error) {
    outcome = { ok: false, message: error.message };
  }
  return await showOutcome(outcome, url);
}

/**
 * Reads the article of the open tab as the user sees it (signed in, past any consent screen)
 * and pushes it to the results feed at once, without queueing the link. The browser lets the
 * extension into the tab because the user asked from the popup or the context menu.
 * @param {{id?: number, url?: string} | undefined} tab
 * @returns {Promise<{ok: boolean, message: string}>} "Saved: <title>", or why not.
 */
async function saveArticle(tab) {
  let outcome;
  try {
    if (tab?.id === undefined || !/^https?:/.test(tab.url ?? "")) {
      throw new Error(`Cannot save "${tab?.url ?? ""}": only http and https pages are read`);
    }
    const reading = await withTimeout(readTab(tab.id), READ_MS, "reading the page took over 20 s");
    if (!reading.ok) throw new Error(`Cannot save ${reading.url}: ${reading.reason}`);
    await relayPost("push", { content: cut(reading.result) });
    outcome = { ok: true, message: `Saved: ${reading.title}` };
  } catch (error) {
    outcome = { ok: false, message: error.message };
  }
  return await showOutcome(outcome, tab?.url);
}

/** Shows what came of a send or a save on the badge (and its tooltip) and in the popup. */
async function showOutcome(outcome, url) {
  await chrome.action.setBadgeBackgroundColor({ color: outcome.ok ? "#1b7f3b" : "#b3261e" });
  await chrome.action.setBadgeText({ text: outcome.ok ? "OK" : "!" });
  await chrome.action.setTitle({ title: `Content Relay: ${outcome.message}` });
  await chrome.storage.local.set({ lastSend: { ...outcome, url: url ?? "", at: Date.now() } });
  return outcome;
}

/** The context menu: send the page or the link under the pointer, or save the article. */
function createMenus() {
  chrome.contextMenus.removeAll(() => {
    chrome.contextMenus.create({ id: "send-page", title: "Send this page to the relay" });
    chrome.contextMenus.create({
      id: "save-article",
      title: "Save this article to the relay, as shown",
    });
    chrome.contextMenus.create({
      id: "send-link",
      title: "Send this link to the relay",
      contexts: ["link"],
    });
  });
}

/** A click on one of the context menu's entries. */
function onMenuClick(info, tab) {
  if (info.menuItemId === "save-article") return saveArticle(tab);
  const url = info.menuItemId === "send-link" ? info.linkUrl : info.pageUrl ?? tab?.url;
  return sendUrl(url);
}

// --- the Q&A reader ---

/** Records what the reader is doing, for the popup. */
function setStatus(status) {
  return chrome.storage.local.set({ status });
}

/** Starts the reader unless one runs, it is paused, or no relay is set up. */
function startReader() {
  if (reader) return reader.done;
  const stop = new AbortController();
  reader = { stop, done: readLoop(stop.signal).finally(() => (reader = undefined)) };
  return reader.done;
}

/** Stops the reader's request in flight; the loop ends after the item it is reading. */
function stopReader() {
  reader?.stop.abort();
}

/** The reader: leased pulls of qa, one item at a time, until paused or unset. */
async function readLoop(signal) {
  let retryMs = RETRY_FIRST_MS;
  while (!signal.aborted) {
    const { relay, key, paused } = await stored();
    if (!relay || !key) return await setStatus("not set up");
    if (paused) return await setStatus("paused");
    try {
      await setStatus("waiting for links in qa");
      const items = await pullQa(signal);
      for (const item of items) {
        if (signal.aborted || !(await readItem(item))) break;
      }
      retryMs = RETRY_FIRST_MS;
    } catch (error) {
      if (signal.aborted) break;
      await setStatus(`error: ${error.message} (trying again in ${retryMs / 1000} s)`);
      await new Promise((resolve) => setTimeout(resolve, retryMs));
      retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
    }
  }
}

/** One leased pull of qa: the items it hands out, `[]` when none came within the wait. */
async function pullQa(signal) {
  const response = await relayFetch(`pull?queue=qa&lease=${LEASE_S}&limit=1&wait=${WAIT_S}`, {
    signal,
    timeoutMs: WAIT_S * 1000 + REQUEST_MS,
  });
  if (response.status === 204) return [];
  if (!response.ok) throw new Error(`Cannot pull qa: ${await describe(response)}`);
  return await response.json();
}

/**
 * Reads one leased item and pushes what came of it: the article, the item itself when it is
 * not a link, or one line saying why the link could not be read. Then acknowledges it.
 * @param {{id: string, content: string}} item
 * @returns {Promise<boolean>} false when the reader paused instead (no permission for the site).
 */
async function readItem(item) {
  const content = item.content.trim();
  const link = /^\S+$/.test(content) ? parseUrl(content) : undefined;
  let result;
  let recent;
  if (link === undefined) {
    result = content;
    recent = { ok: true, title: content.slice(0, 80), url: "" };
  } else if (link.protocol !== "http:" && link.protocol !== "https:") {
    result = `Could not read ${content}: only http and https links are read`;
    recent = { ok: false, title: result, url: "" };
  } else {
    const origin = `${link.protocol}//${link.hostname}/*`;
    if (!(await chrome.permissions.contains({ origins: [origin] }))) {
      // The lease runs out and the item comes back once the user has allowed it.
      await chrome.storage.local.set({
        paused: true,
        pauseReason: `The extension may not read ${link.hostname}: allow reading pages`,
      });
      return false;
    }
    await setStatus(`reading ${link.href}`);
    const { pageTimeoutS } = await stored();
    const reading = await readInTab(link.href, (pageTimeoutS || PAGE_TIMEOUT_S) * 1000);
    result = reading.ok ? cut(reading.result) : `Could not read ${link.href}: ${reading.reason}`;
    recent = { ok: reading.ok, title: reading.ok ? reading.title : result, url: link.href };
  }
  try {
    await relayPost("push", { content: result });
  } catch (error) {
    // A result over the relay's body limit would fail again on every delivery: report it.
    if (error.status !== 413) throw error;
    const why = `the result is larger than the relay takes (${error.message})`;
    await relayPost("push", { content: `Could not read ${content}: ${why}` });
  }
  await relayPost("ack", { ids: [item.id] });
  const { recent: list = [] } = await stored();
  await chrome.storage.local.set({
    recent: [{ ...recent, at: Date.now() }, ...list].slice(0, RECENT_MAX),
  });
  return true;
}

function parseUrl(text) {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

/** A result cut to MAX_RESULT_BYTES, with a note saying so. */
function cut(text) {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length <= MAX_RESULT_BYTES) return text;
  const kept = new TextDecoder().decode(bytes.slice(0, MAX_RESULT_BYTES)).replace(/\uFFFD$/, "");
  return `${kept}\n\n(Cut here: the article is longer than ${MAX_RESULT_BYTES} bytes.)\n`;
}

/**
 * Opens `url` in a background tab, reads its article, closes the tab.
 * @param {string} url An http or https address.
 * @param {number} timeoutMs Time the page may take to load, ms.
 * @returns {Promise<{ok: true, title: string, result: string} | {ok: false, reason: string}>}
 */
async function readInTab(url, timeoutMs) {
  let tab;
  try {
    tab = await chrome.tabs.create({ url, active: false });
    const late = `the page did not finish loading within ${timeoutMs / 1000} s`;
    await withTimeout(loaded(tab.id), timeoutMs, late);
    return await withTimeout(readTab(tab.id), READ_MS, "reading the page took over 20 s");
  } catch (error) {
    // Chromium's words for a tab that shows its own error page rather than the site's.
    const reason = /error page/i.test(error.message)
      ? "the browser could not load it (no connection, or too many redirects)"
      : error.message;
    return { ok: false, reason };
  } finally {
    if (tab) await chrome.tabs.remove(tab.id).catch(() => {});
  }
}

/**
 * Resolves once tab `tabId` has loaded its http(s) page. Firefox reports a new tab's first
 * document, about:blank, as complete before the page starts loading: that one does not count.
 */
function loaded(tabId) {
  return new Promise((resolve, reject) => {
    const done = (error) => {
      chrome.tabs.onUpdated.removeListener(onUpdated);
      chrome.tabs.onRemoved.removeListener(onRemoved);
      if (error) reject(error);
      else resolve();
    };
    const isLoaded = (tab) => tab.status === "complete" && /^https?:/.test(tab.url ?? "");
    const onUpdated = (id, _change, tab) => {
      if (id === tabId && isLoaded(tab)) done();
    };
    const onRemoved = (id) => {
      if (id === tabId) done(new Error("the tab was closed"));
    };
    chrome.tabs.onUpdated.addListener(onUpdated);
    chrome.tabs.onRemoved.addListener(onRemoved);
    // It may have loaded before the listener was added.
    chrome.tabs.get(tabId).then((tab) => isLoaded(tab) && done(), done);
  });
}

/** Runs the content script in tab `tabId` (once) and returns what it read. */
async function readTab(tabId) {
  const target = { tabId };
  const [probe] = await chrome.scripting.executeScript({
    target,
    func: () => typeof globalThis.relayReadPage === "function",
  });
  if (!probe?.result) await chrome.scripting.executeScript({ target, files: ["content.js"] });
  const [reading] = await chrome.scripting.executeScript({
    target,
    func: () => globalThis.relayReadPage(),
  });
  if (!reading?.result) throw new Error("the page could not be read");
  return reading.result;
}

/** `promise`, or a rejection with `reason` after `ms`. */
function withTimeout(promise, ms, reason) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(reason)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

// --- messages from the popup and the options page ---

/** The qa queue's length, for the popup. */
async function queueCount() {
  const response = await relayFetch("peek?queue=qa");
  if (response.status === 204) return 0;
  if (!response.ok) throw new Error(await describe(response));
  return (await response.json()).total;
}

/** Answers one message; every answer is `{ok, …}` or `{ok: false, error}`. */
async function answer(message) {
  switch (message?.type) {
    case "send-page":
      return await sendUrl(message.url);
    case "save-article":
      return await saveArticle(message.tab);
    case "queue":
      return { ok: true, count: await queueCount() };
    case "check":
      return { ok: true, message: `Connected: ${await queueCount()} item(s) in qa` };
    case "pause":
      await chrome.storage.local.set({ paused: Boolean(message.paused), pauseReason: "" });
      return { ok: true };
    default:
      return { ok: false, error: `Unknown message ${JSON.stringify(message?.type)}` };
  }
}

chrome.runtime.onMessage.addListener((message, sender, respond) => {
  // Only the extension's own pages talk to this script.
  if (sender.id !== chrome.runtime.id || sender.tab?.url?.startsWith("http")) return false;
  answer(message).then(respond, (error) => respond({ ok: false, error: error.message }));
  return true;
});

chrome.storage.onChanged.addListener((changes, area) => {
  if (area !== "local") return;
  if (changes.relay || changes.key || changes.paused) {
    stopReader();
    // The stopped loop ends first; then a new one reads the new settings.
    Promise.resolve(reader?.done).finally(() => startReader());
  }
});

chrome.runtime.onInstalled.addListener(async ({ reason }) => {
  createMenus();
  // A new install has nowhere to send anything yet: show where to set it up.
  if (reason === "install" && !(await stored()).relay) await chrome.runtime.openOptionsPage();
});
chrome.contextMenus.onClicked.addListener(onMenuClick);
chrome.alarms.onAlarm.addListener(() => startReader());
chrome.alarms.create("wake", { periodInMinutes: WAKE_MINUTES });
startReader();

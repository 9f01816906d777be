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
//   It opens only links to the relay's Q&A sites and to hosts the user listed (hosts.js): it
//   looks at the queue first (a peek) and leaves any other link for the reader on the relay,
//   unpulled, so that whoever may submit cannot make it open a page with the user's cookies.

// Chromium's service worker loads the policy here; Firefox lists it as a background script.
if (typeof importScripts === "function" && !globalThis.relayHosts) importScripts("hosts.js");
if (typeof importScripts === "function" && !globalThis.relayTabs) importScripts("tabs.js");

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
  "allowHosts",
  "qaHosts",
  "leftForRelay",
];

/** Items a leased pull holds: long enough to load and read one page several times over. */
const LEASE_S = 300;
/**
 * Time a page may take to load in its background tab before it counts as unreadable, s, unless
 * the options say otherwise: a page that never finishes (a slow drip, a script that never
 * ends) costs at most this.
 */
const PAGE_TIMEOUT_S = 30;
/** Time a request to the relay may take beyond its long-poll wait, ms. */
const REQUEST_MS = 15_000;
/** First wait after the relay could not be reached, doubled each time up to the maximum, ms. */
const RETRY_FIRST_MS = 2_000;
const RETRY_MAX_MS = 60_000;
/** Largest result pushed, bytes: under the relay's default body limit (512 KiB). */
const MAX_RESULT_BYTES = 400 * 1024;
/** Outcomes the popup lists. */
const RECENT_MAX = 10;
/**
 * Time between looks at qa while it holds nothing this reader may read, ms. Well under 30 s:
 * Chromium stops an extension's service worker that has had no event for 30 s, and a request
 * restarts that count.
 */
const POLL_MS = 3_000;
/** How long the relay's Q&A domains are used before they are asked for again, ms. */
const QA_HOSTS_MS = 10 * 60_000;
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
      redirect: "manual",
      cache: "no-store",
      signal: AbortSignal.any(signals),
    }).then((response) => {
      if (response.type !== "opaqueredirect") return response;
      throw new Error(
        `The relay at ${base.href} answered with a redirect, which the extension does not ` +
          "follow with the key: enter the address it redirects to (https:// instead of " +
          "http://, or another path) in the options",
      );
    });
  } catch (error) {
    if (signal?.aborted || /answered with a redirect/.test(error.message)) throw error;
    throw new Error(
      `The relay at ${base.href} could not be reached (${error.message}): check the ` +
        "address and that the relay runs and this browser reaches it; a proxy in front of it " +
        "must pass the extension's requests (CORS) and the X-Auth-Key header",
    );
  }
}

/**
 * Why an answer of the relay is not what was asked for, with what to do about it: a wrong
 * key, a key without the scope, or an address where no relay answers.
 * @param {Response} response An answer that is not ok, or not JSON where JSON was expected.
 * @param {string} what What was asked, e.g. "look at qa".
 * @returns {Promise<Error>}
 */
async function relayError(response, what) {
  const type = response.headers.get("content-type") ?? "";
  const problem = /json/.test(type) ? await describe(response) : undefined;
  const { relay } = await stored();
  if (response.status === 401) {
    return new Error(
      `${problem ?? "Wrong API key"}: enter the key again, or a new pairing link ` +
        "(relay pair on the relay's machine)",
    );
  }
  if (response.status === 403 && problem) {
    return new Error(
      `${problem}: give the extension a key with the scopes it uses ` +
        "(relay keys add browser --scope submit,consume,push,read)",
    );
  }
  if (problem) return new Error(`Cannot ${what}: ${problem}`);
  await response.body?.cancel();
  return new Error(
    `${relay} does not answer as a relay (HTTP ${response.status}${type ? `, ${type}` : ""}): ` +
      "enter the relay's own address, the part of its web app's address before /app/",
  );
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
    const reading = await relayTabs.withTimeout(
      relayTabs.readTab(tab.id),
      relayTabs.READ_MS,
      "reading the page took over 20 s",
    );
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

/**
 * The reader: looks at qa, and when its oldest free item is one it reads, takes it with a
 * leased pull (which hands out the oldest free item); one item at a time, until paused or
 * unset. A link it does not read is never pulled: it stays for the reader on the relay.
 */
async function readLoop(signal) {
  let retryMs = RETRY_FIRST_MS;
  while (!signal.aborted) {
    const { relay, key, paused } = await stored();
    if (!relay || !key) return await setStatus("not set up");
    if (paused) return await setStatus("paused");
    try {
      const { next } = await surveyQa();
      if (next === undefined || !next.verdict.read) {
        await setStatus(
          next === undefined
            ? "waiting for links in qa"
            : `waiting: the next link in qa is left for the reader on the relay (${next.why})`,
        );
        await sleep(POLL_MS, signal);
        continue;
      }
      for (const item of await pullQa(signal)) {
        // Another reader may have taken the item looked at: judge what came. One left here
        // comes back to the queue when its lease ends, unacknowledged.
        if (!(await judgeItem(item.content)).read) continue;
        if (signal.aborted || !(await readItem(item))) break;
      }
      retryMs = RETRY_FIRST_MS;
    } catch (error) {
      if (signal.aborted) break;
      await setStatus(`error: ${error.message} (trying again in ${retryMs / 1000} s)`);
      await sleep(retryMs, signal);
      retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
    }
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });
}

/** One leased pull of qa's oldest free item: the items it hands out, `[]` when none. */
async function pullQa(signal) {
  const response = await relayFetch(`pull?queue=qa&lease=${LEASE_S}&limit=1`, { signal });
  if (response.status === 204) return [];
  if (!response.ok) throw await relayError(response, "pull qa");
  return await response.json();
}

/**
 * The relay's Q&A domains (GET /qa-hosts), asked for again after QA_HOSTS_MS; none from a
 * relay that does not say (an older one), so that only the hosts the user listed are read.
 * @returns {Promise<string[]>}
 */
async function relayQaHosts() {
  const { qaHosts } = await stored();
  if (qaHosts && Date.now() - qaHosts.at < QA_HOSTS_MS) return qaHosts.hosts;
  const response = await relayFetch("qa-hosts");
  let hosts = [];
  if (response.ok && /json/.test(response.headers.get("content-type") ?? "")) {
    hosts = (await response.json()).hosts ?? [];
  } else if (response.status !== 404) {
    throw await relayError(response, "read the relay's Q&A sites");
  } else {
    await response.body?.cancel();
  }
  await chrome.storage.local.set({ qaHosts: { hosts, at: Date.now() } });
  return hosts;
}

/**
 * Whether the reader handles item `content` itself: text and links it does not open (not
 * http or https) yes; an http or https link only when hosts.js says so.
 * @returns {Promise<{read: boolean, why?: string}>} `why` for a link left for the relay.
 */
async function judgeItem(content) {
  const text = content.trim();
  const link = /^\S+$/.test(text) ? parseUrl(text) : undefined;
  if (!link || (link.protocol !== "http:" && link.protocol !== "https:")) return { read: true };
  const verdict = relayHosts.judgeLink(link, await policy());
  if (verdict.read) return verdict;
  const why = verdict.local ? `${link.host} is ${verdict.local}` : `${link.host} is not a Q&A site`;
  return { read: false, why };
}

/** The reader's policy: the relay's Q&A domains and the hosts the user listed. */
async function policy() {
  const { allowHosts = [] } = await stored();
  return { qaHosts: await relayQaHosts(), allowed: allowHosts };
}

/**
 * Looks at qa: how many items it holds, how many of its links are left for the reader on the
 * relay (stored for the popup), and its oldest item no lease holds, with the verdict on it.
 * @returns {Promise<{count: number, left: number, next?: {verdict: object, why?: string}}>}
 */
async function surveyQa() {
  const response = await relayFetch("peek?queue=qa");
  let items = [];
  if (response.status !== 204) {
    const json = /json/.test(response.headers.get("content-type") ?? "");
    if (!response.ok || !json) throw await relayError(response, "look at qa");
    items = (await response.json()).queues?.qa ?? [];
  }
  const now = Date.now();
  let left = 0;
  let next;
  for (const item of items) {
    const verdict = await judgeItem(item.content);
    if (!verdict.read) left++;
    if (next === undefined && !(item.lease_until > now)) next = { verdict, why: verdict.why };
  }
  if ((await stored()).leftForRelay !== left) {
    await chrome.storage.local.set({ leftForRelay: left });
  }
  return { count: items.length, left, next };
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
    const timeoutMs = (pageTimeoutS || PAGE_TIMEOUT_S) * 1000;
    const reading = await relayTabs.readInTab(link.href, timeoutMs, await policy());
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

// --- messages from the popup and the options page ---

/**
 * Checks the relay's address and key, as the options page saves them: a look at qa and the
 * relay's Q&A sites, whose failures say what to do.
 * @returns {Promise<string>} e.g. "Connected: 2 item(s) in qa".
 */
async function checkRelay() {
  await chrome.storage.local.remove("qaHosts");
  const { count } = await surveyQa();
  const hosts = await relayQaHosts();
  const sites = hosts.length ? `; Q&A sites: ${hosts.join(", ")}` : "";
  return `Connected: ${count} item(s) in qa${sites}`;
}

/** Answers one message; every answer is `{ok, …}` or `{ok: false, error}`. */
async function answer(message) {
  switch (message?.type) {
    case "send-page":
      return await sendUrl(message.url);
    case "save-article":
      return await saveArticle(message.tab);
    case "queue":
      return { ok: true, ...(await surveyQa()), next: undefined };
    case "check":
      return { ok: true, message: await checkRelay() };
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
  if (changes.relay || changes.key || changes.paused || changes.allowHosts) {
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

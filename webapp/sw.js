// Service worker of the Content Relay web app.
//
// 1. App shell: the app's own files, network first (so an updated relay shows its new app
//    at once), from the cache when the relay cannot be reached. API answers are never cached.
// 2. Outbox: a POST /submit from the app that cannot reach the relay is kept in IndexedDB
//    and answered 202 "Saved: …" with `X-Relay-Outbox: queued`. The outbox is sent in order
//    on Background Sync ("outbox"), on activation and when the page asks ({type:
//    "flush-outbox"}: at start, on `online`, every 30 s). An entry is deleted after a 2xx, or
//    a 4xx other than 408/429 (it would never succeed); it stays after a network failure or
//    a 5xx, and sending stops there so that the order holds.

const SHELL_CACHE = "relay-shell-v1";
const SCOPE = new URL(self.registration.scope);
const SUBMIT_URL = new URL("../submit", SCOPE).href;
const SHELL_FILES = [
  "index.html",
  "app.js",
  "client.js",
  "queues.js",
  "results.js",
  "publish.js",
  "settings.js",
  "share.js",
  "library.js",
  "search.js",
  "markdown.js",
  "app.css",
  "manifest.webmanifest",
  "icon.svg",
  "icon-192.png",
  "icon-512.png",
];
/** Paths that answer with the app's page (the relay serves index.html for both). */
const PAGES = new Set([SCOPE.pathname, `${SCOPE.pathname}share`, `${SCOPE.pathname}index.html`]);
const OUTBOX_DB = "relay-outbox";
const OUTBOX_STORE = "requests";
const SYNC_TAG = "outbox";
const QUEUED_TEXT = "Saved: will be sent when the relay is back";
/** Longest wait for the relay when the app submits; then the item waits in the outbox. */
const SUBMIT_TIMEOUT_MS = 10_000;
/** Longest wait for the relay while sending the outbox: a dead LAN host must not hang it. */
const SEND_TIMEOUT_MS = 20_000;

self.addEventListener("install", (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(SHELL_CACHE);
    await cache.addAll(
      SHELL_FILES.map((name) => new Request(new URL(name, SCOPE), { cache: "reload" })),
    );
    await self.skipWaiting();
  })());
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) {
      if (name !== SHELL_CACHE) await caches.delete(name);
    }
    await self.clients.claim();
  })());
  // Not inside waitUntil: requests wait for activation, and must not wait for the relay.
  void flushOutbox();
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (url.origin !== SCOPE.origin) return;
  if (request.method === "POST" && `${url.origin}${url.pathname}` === SUBMIT_URL) {
    event.respondWith(submitOrKeep(request));
    return;
  }
  const key = request.method === "GET" ? shellKey(url) : undefined;
  if (key !== undefined) event.respondWith(networkFirst(request, key));
  // Anything else (the API, the results stream) goes to the network untouched.
});

self.addEventListener("sync", (event) => {
  if (event.tag !== SYNC_TAG) return;
  event.waitUntil(
    flushOutbox().then((empty) => {
      // Rejecting asks the browser to fire the sync again later.
      if (!empty) throw new Error("the relay is still unreachable");
    }),
  );
});

self.addEventListener("message", (event) => {
  if (event.data?.type === "flush-outbox") event.waitUntil(flushOutbox());
  // A page that loaded while this worker was activating missed the claim: it asks.
  if (event.data?.type === "claim") event.waitUntil(self.clients.claim());
  // The key was forgotten: items waiting with it must not be sent with it later.
  if (event.data?.type === "forget-key") {
    event.waitUntil(
      outbox("readwrite", (store) => store.clear())
        .then(() => notifyPages({ sent: 0, answers: [], refused: [] })),
    );
  }
});

// --- App shell

/** The cache key of an app file, or undefined when `url` is not one. */
function shellKey(url) {
  if (PAGES.has(url.pathname)) return new URL("index.html", SCOPE).href;
  if (!url.pathname.startsWith(SCOPE.pathname)) return undefined;
  const name = url.pathname.slice(SCOPE.pathname.length);
  return SHELL_FILES.includes(name) ? new URL(name, SCOPE).href : undefined;
}

async function networkFirst(request, key) {
  const cache = await caches.open(SHELL_CACHE);
  try {
    const response = await fetch(request);
    if (response.status === 200) await cache.put(key, response.clone());
    return response;
  } catch (error) {
    const cached = await cache.match(key);
    if (cached !== undefined) return cached;
    throw error;
  }
}

// --- Outbox

async function submitOrKeep(request) {
  const copy = request.clone();
  // Older submissions go first.
  const waiting = await outbox("readonly", (store) => store.count()).catch(() => 0);
  if (waiting > 0) await flushOutbox();
  try {
    // A home address that does not answer (the phone is on mobile data) must not leave
    // the page "Sending…" for minutes: after SUBMIT_TIMEOUT_MS the item goes to the outbox.
    const signal = AbortSignal.any([request.signal, AbortSignal.timeout(SUBMIT_TIMEOUT_MS)]);
    return await fetch(request, { signal });
  } catch (error) {
    if (request.signal.aborted) throw error;
    const entry = {
      url: request.url,
      key: request.headers.get("x-auth-key"),
      contentType: request.headers.get("content-type"),
      body: await copy.text(),
      time: Date.now(),
    };
    await outbox("readwrite", (store) => store.add(entry));
    try {
      await self.registration.sync?.register(SYNC_TAG);
    } catch {
      // no Background Sync here: the page's own triggers send it
    }
    await notifyPages({ sent: 0, answers: [], refused: [] });
    return new Response(QUEUED_TEXT, {
      status: 202,
      headers: { "content-type": "text/plain; charset=utf-8", "x-relay-outbox": "queued" },
    });
  }
}

let flushing;

/** Sends the outbox once at a time; resolves to true when it is empty afterwards. */
function flushOutbox() {
  flushing ??= sendOutbox().finally(() => {
    flushing = undefined;
  });
  return flushing;
}

async function sendOutbox() {
  const entries = await outbox("readonly", (store) => store.getAll());
  if (entries.length === 0) return true;
  const answers = [];
  const refused = [];
  for (const entry of entries) {
    const headers = new Headers();
    if (entry.key) headers.set("x-auth-key", entry.key);
    if (entry.contentType) headers.set("content-type", entry.contentType);
    let response;
    try {
      response = await fetch(entry.url, {
        method: "POST",
        headers,
        body: entry.body,
        cache: "no-store",
        signal: AbortSignal.timeout(SEND_TIMEOUT_MS),
      });
    } catch {
      break; // still unreachable: keep this one and the rest, in order
    }
    const status = response.status;
    const final = response.ok ||
      (status >= 400 && status < 500 && status !== 408 && status !== 429);
    if (!final) {
      await response.body?.cancel();
      break;
    }
    const text = (await response.text()).trim();
    if (response.ok) answers.push(text);
    else refused.push(problemDetail(text, status));
    await outbox("readwrite", (store) => store.delete(entry.id));
  }
  await notifyPages({ sent: answers.length, answers, refused });
  return answers.length + refused.length === entries.length;
}

function problemDetail(text, status) {
  try {
    const detail = JSON.parse(text)?.detail;
    if (typeof detail === "string") return detail;
  } catch {
    // not a problem document
  }
  return text.slice(0, 200) || `HTTP ${status}`;
}

async function notifyPages(message) {
  const count = await outbox("readonly", (store) => store.count());
  const pages = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  for (const page of pages) page.postMessage({ type: "outbox", count, ...message });
}

/** Runs one IndexedDB request on the outbox; resolves to its result once committed. */
async function outbox(mode, makeRequest) {
  const db = await new Promise((resolve, reject) => {
    const open = indexedDB.open(OUTBOX_DB, 1);
    open.onupgradeneeded = () => {
      open.result.createObjectStore(OUTBOX_STORE, { keyPath: "id", autoIncrement: true });
    };
    open.onsuccess = () => resolve(open.result);
    open.onerror = () => reject(open.error);
  });
  try {
    const transaction = db.transaction(OUTBOX_STORE, mode);
    const request = makeRequest(transaction.objectStore(OUTBOX_STORE));
    return await new Promise((resolve, reject) => {
      transaction.oncomplete = () => resolve(request.result);
      transaction.onerror = () => reject(transaction.error);
      transaction.onabort = () => reject(transaction.error);
    });
  } finally {
    db.close();
  }
}

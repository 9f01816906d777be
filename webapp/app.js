// Content Relay web app: plain JavaScript modules; the one built file is markdown.js (markdown-it,
// bundled from markdown.ts by `deno task webapp`).
//
// Screens are sections of index.html chosen by the URL's hash (#submit, #queues, #results,
// #publish, #settings, #share). The API key lives in this browser's localStorage and goes
// only to this relay, in the X-Auth-Key header (or ?key= for the results stream, since
// EventSource cannot set headers). Content from the relay is always shown with textContent,
// never as HTML written by the app: a result's Markdown is rendered by markdown.js, with
// markdown-it's raw HTML off and links only to the web or to mail.

import { plainText, renderMarkdown } from "./markdown.js";

/** The relay's root: the parent of the app's folder (/app/ → /), so a proxy may add a prefix. */
const RELAY = new URL("../", import.meta.url);
/** The app's folder, the service worker's scope. */
const APP = new URL("./", import.meta.url);

/** Names in localStorage (and sessionStorage for a share waiting for the key). */
const STORED = {
  key: "relay.key",
  since: "relay.results.since",
  results: "relay.results.items",
  share: "relay.share.pending",
  shareAnswer: "relay.share.answer",
};

/** The relay's feed keeps the newest 50 results (spec §4.4); the list keeps as many. */
const RESULTS_CAP = 50;
/** How often an open app asks the service worker to send the outbox; cheap when empty. */
const FLUSH_EVERY_MS = 30_000;
/** Wait before opening the results stream again after the relay closed it, ms. */
const STREAM_RETRY_MS = 5_000;
/** The outbox database, shared with sw.js (same names, same version). */
const OUTBOX_DB = "relay-outbox";
const OUTBOX_STORE = "requests";

const QUEUES = ["qa", "article", "general"];
const SCREENS = ["submit", "queues", "results", "publish", "library", "settings", "share"];
const TITLES = {
  submit: "Submit",
  queues: "Queues",
  results: "Results",
  publish: "Publish",
  library: "Library",
  settings: "Key",
  share: "Share",
};
const TARGET_NAMES = { notes: "Notes", blog: "Blog", nas: "Podcast" };

const byId = (id) => document.getElementById(id);

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const timeOnly = new Intl.DateTimeFormat(undefined, { timeStyle: "short" });

const state = {
  key: read(STORED.key),
  results: {
    source: undefined,
    retry: undefined,
    since: Number(read(STORED.since)) || 0,
    items: readResults(),
  },
};

// --- Storage: a browser may refuse it (private mode, full disk); the app then forgets.

function read(name, storage = localStorage) {
  try {
    return storage.getItem(name);
  } catch {
    return null;
  }
}

function write(name, value, storage = localStorage) {
  try {
    if (value === null) storage.removeItem(name);
    else storage.setItem(name, value);
    return true;
  } catch {
    return false;
  }
}

function readResults() {
  try {
    const items = JSON.parse(read(STORED.results) ?? "[]");
    return Array.isArray(items) ? items.filter((i) => typeof i?.c === "string") : [];
  } catch {
    return [];
  }
}

// --- Talking to the relay

/** `fetch` of a relay path (no leading slash) with the key. */
function api(path, init = {}, key = state.key) {
  const headers = new Headers(init.headers);
  if (key) headers.set("X-Auth-Key", key);
  return fetch(new URL(path, RELAY), { ...init, headers, cache: "no-store" });
}

/** What went wrong, for a person: a problem document's detail, else the body or status. */
async function describe(response) {
  try {
    const type = response.headers.get("content-type") ?? "";
    if (type.includes("json")) {
      const doc = await response.json();
      if (typeof doc?.detail === "string" && doc.detail !== "") return doc.detail;
      if (typeof doc?.title === "string") return doc.title;
    } else {
      const text = (await response.text()).trim();
      if (text !== "") return text.slice(0, 300);
    }
  } catch {
    // fall through to the status line
  }
  return `The relay answered ${response.status} ${response.statusText}`.trim();
}

/** `describe`, with what to do about a refused key. */
async function explain(response) {
  const detail = await describe(response);
  if (response.status === 401) return `${detail}: check the key on the Key screen.`;
  return detail;
}

const UNREACHABLE = "Cannot reach the relay: check the connection and try again.";

/**
 * Runs `job` unless `control` is already busy with it. The control is marked with
 * aria-disabled, not disabled, so that it keeps the keyboard focus.
 */
async function whileBusy(control, job) {
  if (control.getAttribute("aria-disabled") === "true") return;
  control.setAttribute("aria-disabled", "true");
  try {
    await job();
  } finally {
    control.removeAttribute("aria-disabled");
  }
}

function setStatus(element, text, kind = "info") {
  element.textContent = text;
  element.dataset.kind = kind;
}

function formatCreated(createdAt) {
  // Peek gives UTC as "YYYY-MM-DD HH:MM:SS" (spec §2.2).
  const date = new Date(`${createdAt.replace(" ", "T")}Z`);
  return Number.isNaN(date.getTime()) ? createdAt : dateTime.format(date);
}

function timeElement(date, text) {
  const time = document.createElement("time");
  time.dateTime = date.toISOString();
  time.textContent = text;
  return time;
}

// --- Screens

function currentScreen() {
  const name = location.hash.slice(1);
  return SCREENS.includes(name) ? name : "submit";
}

function render(moveFocus) {
  let name = currentScreen();
  const needsKey = !state.key && name !== "settings" && name !== "share";
  if (needsKey) name = "settings";
  byId("settings-intro").hidden = Boolean(state.key);
  for (const section of document.querySelectorAll("main > section")) {
    section.hidden = section.dataset.screen !== name;
  }
  for (const link of document.querySelectorAll("nav a")) {
    if (link.dataset.screen === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${TITLES[name]} · Content Relay`;
  SHOW[name]?.();
  if (moveFocus) byId(`${name}-title`)?.focus();
}

const SHOW = {
  submit: () => void showOutbox(),
  queues: () => void refreshQueues(),
  results: () => {
    renderResults();
    openStream();
  },
  publish: () => void refreshFailed(),
  library: () => void refreshLibrary(),
  settings: showKeyState,
  share: showShare,
};

// --- Submit

/**
 * Sends one submission; resolves to `{ ok, text, queued }`. `queued` is true when the
 * service worker kept it in the outbox because the relay could not be reached.
 */
async function submitContent(content, queue) {
  const body = JSON.stringify(queue ? { content, queue } : { content });
  let response;
  try {
    response = await api("submit", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
  } catch {
    return { ok: false, text: UNREACHABLE, queued: false };
  }
  if (!response.ok) return { ok: false, text: await explain(response), queued: false };
  const queued = response.headers.get("x-relay-outbox") === "queued";
  return { ok: true, text: (await response.text()).trim(), queued };
}

function onSubmit(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const status = byId("submit-status");
  return whileBusy(form.querySelector("button[type=submit]"), async () => {
    setStatus(status, "Sending…");
    const answer = await submitContent(form.elements.content.value, form.elements.queue.value);
    setStatus(status, answer.text, answerKind(answer));
    if (answer.ok) form.elements.content.value = "";
    await showOutbox();
  });
}

/** How to show a submit's answer: accepted, kept in the outbox, or refused. */
function answerKind(answer) {
  if (!answer.ok) return "error";
  return answer.queued ? "info" : "ok";
}

function onSubmitKey(event) {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    byId("submit-form").requestSubmit();
  }
}

// --- Outbox (kept by sw.js; the page only counts it and asks for it to be sent)

function openOutbox() {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(OUTBOX_DB, 1);
    request.onupgradeneeded = () => {
      request.result.createObjectStore(OUTBOX_STORE, { keyPath: "id", autoIncrement: true });
    };
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

async function outboxCount() {
  if (!navigator.serviceWorker || !globalThis.indexedDB) return 0;
  const db = await openOutbox();
  try {
    return await new Promise((resolve, reject) => {
      const request = db.transaction(OUTBOX_STORE).objectStore(OUTBOX_STORE).count();
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
  } finally {
    db.close();
  }
}

async function showOutbox() {
  let count = 0;
  try {
    count = await outboxCount();
  } catch {
    // no IndexedDB here: nothing can be waiting
  }
  byId("outbox").hidden = count === 0;
  byId("outbox-count").textContent = count === 1
    ? "1 item is waiting in the outbox for the relay."
    : `${count} items are waiting in the outbox for the relay.`;
}

async function flushOutbox() {
  if (!navigator.serviceWorker) return;
  const registration = await navigator.serviceWorker.ready;
  // Without a controller this page's submits would bypass the outbox.
  if (!navigator.serviceWorker.controller) registration.active?.postMessage({ type: "claim" });
  registration.active?.postMessage({ type: "flush-outbox" });
}

function onWorkerMessage(event) {
  const message = event.data;
  if (message?.type !== "outbox") return;
  void showOutbox();
  const notice = byId("notice");
  if (message.refused?.length > 0) {
    setStatus(notice, `The relay refused a saved item: ${message.refused.join("; ")}`, "error");
  } else if (message.sent > 0) {
    const items = message.sent === 1 ? "1 saved item" : `${message.sent} saved items`;
    setStatus(notice, `Sent ${items} from the outbox: ${message.answers.join(", ")}`, "ok");
  }
}

// --- Queues

function refreshQueues() {
  if (!state.key) return;
  const status = byId("queues-status");
  return whileBusy(byId("queues-refresh"), async () => {
    setStatus(status, "Loading…");
    let response;
    try {
      response = await api("peek");
    } catch {
      setStatus(status, UNREACHABLE, "error");
      return;
    }
    if (response.status === 204) {
      renderQueues({});
      setStatus(status, "All queues are empty", "ok");
    } else if (response.ok) {
      const body = await response.json();
      renderQueues(body.queues ?? {});
      const total = Number(body.total) || 0;
      const items = total === 1 ? "1 item" : `${total} items`;
      setStatus(status, `${items} waiting, as of ${timeOnly.format(new Date())}`, "ok");
    } else {
      setStatus(status, await explain(response), "error");
    }
  });
}

function renderQueues(queues) {
  const list = byId("queues-list");
  list.replaceChildren();
  const names = [...QUEUES, ...Object.keys(queues).filter((n) => !QUEUES.includes(n))];
  if (names.every((name) => !(queues[name]?.length > 0))) return;
  for (const name of names) {
    const items = Array.isArray(queues[name]) ? queues[name] : [];
    const section = document.createElement("section");
    section.className = "queue";
    const heading = document.createElement("h2");
    heading.textContent = name;
    const count = document.createElement("span");
    count.className = "count";
    count.textContent = items.length === 1 ? "1 item" : `${items.length} items`;
    heading.append(" ", count);
    section.append(heading);
    if (items.length === 0) {
      const empty = document.createElement("p");
      empty.className = "empty";
      empty.textContent = "Empty";
      section.append(empty);
    } else {
      const ol = document.createElement("ol");
      ol.className = "cards";
      for (const item of items) ol.append(queueItem(item));
      section.append(ol);
    }
    list.append(section);
  }
}

function queueItem(item) {
  const li = document.createElement("li");
  const content = document.createElement("div");
  content.className = "content";
  content.textContent = String(item.content ?? "");
  const meta = document.createElement("div");
  meta.className = "meta";
  const created = String(item.created_at ?? "");
  const date = new Date(`${created.replace(" ", "T")}Z`);
  meta.append(
    Number.isNaN(date.getTime()) ? created : timeElement(date, formatCreated(created)),
  );
  if (item.lease_until !== undefined) {
    const badge = document.createElement("span");
    badge.className = "badge";
    const until = new Date(Number(item.lease_until));
    badge.textContent = Number.isNaN(until.getTime())
      ? "leased"
      : `leased until ${timeOnly.format(until)}`;
    meta.append(badge);
  }
  li.append(content, meta);
  return li;
}

// --- Results: newest first, live from the relay's Server-Sent Events stream

function openStream() {
  const results = state.results;
  if (results.source || results.retry || !state.key) return;
  const url = new URL("results/stream", RELAY);
  url.searchParams.set("key", state.key);
  // Resume after the last result this device saw; without one, the relay sends its whole
  // feed. Within a session EventSource's Last-Event-ID resumes a dropped connection.
  if (results.since > 0) url.searchParams.set("since", String(results.since));
  const source = new EventSource(url);
  results.source = source;
  setStreamState("connecting");
  source.onopen = () => setStreamState("live");
  source.onmessage = (event) => addResult(Number(event.lastEventId), event.data);
  source.addEventListener("gap", () => {
    setStatus(
      byId("results-status"),
      "Some results were missed while this device was away: the relay keeps only the newest 50.",
    );
  });
  source.onerror = (event) => {
    if (event instanceof MessageEvent) {
      // The relay's own "error" event: it ends the stream, EventSource reconnects.
      setStatus(byId("results-status"), String(event.data), "error");
      return;
    }
    if (source.readyState === EventSource.CLOSED) {
      // A refused key or an error answer: EventSource gives up; find out why.
      results.source = undefined;
      void streamRefused();
    } else {
      setStreamState("reconnecting");
    }
  };
}

async function streamRefused() {
  const results = state.results;
  setStreamState("reconnecting");
  try {
    const response = await api("results?limit=1");
    if (response.status === 401 || response.status === 403) {
      setStreamState("stopped");
      setStatus(byId("results-status"), await explain(response), "error");
      return;
    }
    await response.body?.cancel();
  } catch {
    // unreachable: try again below
  }
  results.retry = setTimeout(() => {
    results.retry = undefined;
    openStream();
  }, STREAM_RETRY_MS);
}

function closeStream() {
  const results = state.results;
  results.source?.close();
  results.source = undefined;
  clearTimeout(results.retry);
  results.retry = undefined;
  setStreamState("off");
}

function setStreamState(name) {
  const pill = byId("results-state");
  pill.dataset.state = name;
  pill.textContent = name;
}

function addResult(t, c) {
  const results = state.results;
  if (Number.isFinite(t)) {
    if (t <= results.since) return; // already shown
    results.since = t;
    write(STORED.since, String(t));
  }
  results.items.unshift({ t, c });
  results.items.length = Math.min(results.items.length, RESULTS_CAP);
  const list = byId("results-list");
  list.prepend(resultItem({ t, c }));
  while (list.children.length > RESULTS_CAP) list.lastElementChild.remove();
  updateResultsEmpty();
  saveResults();
}

function saveResults() {
  const items = state.results.items;
  if (write(STORED.results, JSON.stringify(items))) return;
  // Too big for this browser's storage: keep the start of each result.
  const short = items.map(({ t, c }) => ({
    t,
    c: c.length > 4000 ? `${c.slice(0, 4000)}\n… (shortened on this device)` : c,
  }));
  if (!write(STORED.results, JSON.stringify(short))) write(STORED.results, null);
}

function resultItem({ t, c }) {
  const li = document.createElement("li");
  const content = document.createElement("div");
  content.className = "content markdown";
  content.append(renderMarkdown(c));
  li.append(content);
  const meta = document.createElement("div");
  meta.className = "meta";
  const date = new Date(t);
  if (Number.isFinite(t) && !Number.isNaN(date.getTime())) {
    meta.append(timeElement(date, dateTime.format(date)));
  }
  const publish = document.createElement("button");
  publish.type = "button";
  publish.className = "publish-result";
  publish.textContent = "Publish to blog and podcast";
  const status = document.createElement("p");
  status.className = "status";
  status.setAttribute("role", "status");
  publish.addEventListener("click", () => publishResult(c, content, publish, status));
  meta.append(publish);
  li.append(meta, status);
  return li;
}

/**
 * Sends one result to the blog and the podcast (POST /publish): its first line is the title,
 * its Markdown the post, its rendered text what the podcast reads aloud.
 */
function publishResult(markdown, rendered, button, status) {
  const firstLine = markdown.trim().split("\n", 1)[0].replace(/^#+\s*/, "").trim();
  const title = firstLine.length > 120 ? `${firstLine.slice(0, 119)}…` : firstLine;
  const body = {
    title: title || "Result",
    content: plainText(rendered) || markdown,
    content_md: markdown,
    targets: ["blog", "nas"],
    transform: "read",
  };
  return whileBusy(button, async () => {
    setStatus(status, "Publishing…");
    const answer = await postPublish("publish", body, status);
    if (answer === undefined) return;
    const outcomes = Object.entries(answer.results ?? {}).map(([target, outcome]) =>
      `${TARGET_NAMES[target] ?? target}: ${outcome?.status === "success" ? "published" : "failed"}`
    );
    setStatus(status, outcomes.join(", "), answer.status === "ok" ? "ok" : "error");
  });
}

function renderResults() {
  const list = byId("results-list");
  if (list.children.length !== state.results.items.length) {
    list.replaceChildren(...state.results.items.map(resultItem));
  }
  updateResultsEmpty();
}

function updateResultsEmpty() {
  const empty = state.results.items.length === 0;
  byId("results-empty").hidden = !empty;
  byId("results-clear").hidden = empty;
}

function clearResults() {
  state.results.items = [];
  write(STORED.results, null);
  byId("results-list").replaceChildren();
  updateResultsEmpty();
}

// --- Publish

/**
 * POSTs `body` as JSON to a publish endpoint; resolves to the relay's `{status, results}`
 * answer, or to `undefined` after saying in `status` why there is none (the relay cannot be
 * reached, or answered with a problem).
 */
async function postPublish(path, body, status) {
  let response;
  try {
    response = await api(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  } catch {
    setStatus(status, UNREACHABLE, "error");
    return undefined;
  }
  const type = response.headers.get("content-type") ?? "";
  if (!type.startsWith("application/json")) {
    setStatus(status, await explain(response), "error");
    return undefined;
  }
  return await response.json();
}

function onPublish(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const status = byId("publish-status");
  const list = byId("publish-results");
  const targets = [...form.querySelectorAll("input[name=target]:checked")].map((i) => i.value);
  if (targets.length === 0) {
    setStatus(status, "Choose at least one target.", "error");
    form.querySelector("input[name=target]").focus();
    return;
  }
  const markdown = form.elements.content.value;
  const body = { title: form.elements.title.value.trim(), content: markdown, content_md: markdown };
  const tags = form.elements.tags.value.split(",").map((t) => t.trim()).filter(Boolean);
  if (tags.length > 0) body.tags = tags.join(",");
  body.targets = targets;
  // The podcast reads the article aloud: the relay needs "transform": "read" for it.
  if (targets.includes("nas")) body.transform = "read";
  return whileBusy(form.querySelector("button[type=submit]"), async () => {
    list.replaceChildren();
    setStatus(status, "Publishing…");
    const answer = await postPublish("publish", body, status);
    if (answer === undefined) return;
    const summary = {
      ok: `Published to ${namesOf(targets)}.`,
      partial: "Published to some targets only.",
      error: "Every target failed.",
    };
    setStatus(
      status,
      summary[answer.status] ?? "The relay answered without a status",
      answer.status === "ok" ? "ok" : "error",
    );
    for (const [target, outcome] of Object.entries(answer.results ?? {})) {
      list.append(outcomeItem(target, outcome));
    }
    await refreshFailed();
  });
}

/** Targets by their names on the screen, as a sentence lists them: "Notes, Blog and Podcast". */
function namesOf(targets) {
  const names = targets.map((target) => TARGET_NAMES[target] ?? target);
  return names.length < 2 ? names.join("") : `${names.slice(0, -1).join(", ")} and ${names.at(-1)}`;
}

/**
 * Lists the failed publishes the relay keeps (GET /publish/failed), newest first, each with
 * its errors and a Retry button; the section stays hidden while there are none.
 */
async function refreshFailed() {
  const section = byId("failed");
  const status = byId("failed-status");
  let response;
  try {
    response = await api("publish/failed");
  } catch {
    return;
  }
  if (!response.ok) {
    // A key without the publish scope sees no list; the form says why when it is used.
    section.hidden = true;
    return;
  }
  const { entries = [] } = await response.json();
  byId("failed-list").replaceChildren(...[...entries].reverse().map(failedItem));
  section.hidden = entries.length === 0 && status.textContent === "";
}

function failedItem(entry) {
  const li = document.createElement("li");
  li.dataset.status = "error";
  const title = document.createElement("strong");
  title.textContent = String(entry.title ?? entry.id);
  const when = document.createElement("span");
  when.className = "hint";
  when.textContent = ` · ${String(entry.at ?? "").slice(0, 16).replace("T", " ")} UTC · ` +
    `${Number(entry.tries) || 1} ${Number(entry.tries) === 1 ? "try" : "tries"}`;
  const errors = document.createElement("ul");
  for (const [target, error] of Object.entries(entry.errors ?? {})) {
    const item = document.createElement("li");
    item.textContent = `${TARGET_NAMES[target] ?? target}: ${String(error)}`;
    errors.append(item);
  }
  const retry = document.createElement("button");
  retry.type = "button";
  retry.textContent = "Retry";
  retry.setAttribute("aria-label", `Retry “${title.textContent}”`);
  retry.addEventListener("click", () => void retryFailed(entry.id, retry));
  li.append(title, when, errors, retry);
  return li;
}

function retryFailed(id, button) {
  const status = byId("failed-status");
  return whileBusy(button, async () => {
    setStatus(status, "Retrying…");
    const answer = await postPublish("publish/retry", { id }, status);
    if (answer === undefined) return;
    setStatus(
      status,
      answer.status === "ok"
        ? "Published to the targets that had failed."
        : "Some targets failed again; the publish stays in the list.",
      answer.status === "ok" ? "ok" : "error",
    );
    await refreshFailed();
  });
}

function outcomeItem(target, outcome) {
  const li = document.createElement("li");
  const success = outcome?.status === "success";
  li.dataset.status = success ? "success" : "error";
  const name = document.createElement("strong");
  name.textContent = `${TARGET_NAMES[target] ?? target}: `;
  li.append(name, success ? "published" : "failed");
  const detail = outcome?.error ?? outcome?.message ?? outcome?.doc_id;
  if (typeof outcome?.url === "string" && /^https?:\/\//i.test(outcome.url)) {
    const link = document.createElement("a");
    link.href = outcome.url;
    link.textContent = outcome.url;
    link.rel = "noreferrer";
    li.append(" at ", link);
  } else if (detail !== undefined) {
    li.append(` (${String(detail)})`);
  }
  return li;
}

// --- Key

/**
 * Checks `key` against the relay and keeps it unless the relay refuses it. A key limited
 * to some scopes gets 403 on the check and is kept: the screens it may use still work.
 * Resolves to `{ saved, text, kind }`.
 */
async function saveKey(key) {
  let response;
  try {
    response = await api("peek", { method: "GET" }, key);
  } catch {
    storeKey(key);
    return {
      saved: true,
      text: "Key saved. The relay could not be reached to check it.",
      kind: "info",
    };
  }
  if (response.status === 401 || response.status === 429) {
    return {
      saved: false,
      text: `${await describe(response)}. The key was not saved.`,
      kind: "error",
    };
  }
  storeKey(key);
  if (response.status === 403) {
    return {
      saved: true,
      text: `Key saved. It is limited: ${await describe(response)}`,
      kind: "info",
    };
  }
  if (!response.ok) {
    return {
      saved: true,
      text: `Key saved. The relay answered: ${await describe(response)}`,
      kind: "info",
    };
  }
  await response.body?.cancel();
  return { saved: true, text: "Key saved. The relay accepted it.", kind: "ok" };
}

function storeKey(key) {
  if (key !== state.key) {
    // Another key may mean another relay: its results start afresh.
    forgetResults();
  }
  state.key = key;
  write(STORED.key, key);
}

function forgetResults() {
  closeStream();
  clearResults();
  state.results.since = 0;
  write(STORED.since, null);
  setStatus(byId("results-status"), "");
}

function onSaveKey(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const input = byId("key-input");
  const status = byId("key-status");
  const key = input.value.trim();
  if (key === "") return;
  return whileBusy(form.querySelector("button[type=submit]"), async () => {
    setStatus(status, "Checking the key…");
    const answer = await saveKey(key);
    setStatus(status, answer.text, answer.kind);
    if (!answer.saved) return;
    input.value = "";
    showKeyState();
    // A share that waited for the key is shown again, ready to send.
    if (read(STORED.share, sessionStorage) !== null) location.hash = "#share";
    else render(false);
  });
}

function onForgetKey() {
  state.key = null;
  write(STORED.key, null);
  forgetResults();
  // Submissions waiting in the outbox carry the key: they go with it.
  void navigator.serviceWorker?.ready.then((registration) =>
    registration.active?.postMessage({ type: "forget-key" })
  );
  setStatus(
    byId("key-status"),
    "Key forgotten on this device, with any submissions still waiting to be sent.",
    "ok",
  );
  render(false);
}

function showKeyState() {
  const key = state.key;
  byId("key-state").textContent = key
    ? `A key is saved on this device (ending in …${key.slice(-4)}).`
    : "No key is saved on this device.";
  byId("key-forget").disabled = !key;
  byId("pairing-example").textContent = `${APP.href}#key=…`;
}

/** A pairing link `/app/#key=<key>`: keep the key and take it out of the address bar. */
async function acceptPairingLink() {
  const match = /^#key=(.*)$/.exec(location.hash);
  if (match === null) return;
  history.replaceState(null, "", `${location.pathname}${location.search}#submit`);
  let key;
  try {
    key = decodeURIComponent(match[1]).trim();
  } catch {
    key = ""; // malformed %-escapes
  }
  if (key === "") {
    setStatus(byId("notice"), "The pairing link has no key in it.", "error");
    return;
  }
  const answer = await saveKey(key);
  setStatus(
    byId("notice"),
    answer.saved
      ? answer.text.replace("Key saved", "Key saved from the pairing link")
      : answer.text,
    answer.kind,
  );
}

// --- Share target: /app/share?title=…&text=…&url=…
//
// A shared link is sent alone, so that sharing the same link again is recognised by the
// relay's exact-content duplicate check; the title and text that came with it are shown
// and go only as a note the user adds (after the link, on its own line). Without a link
// the title and text are the content. Nothing is sent before the user taps Send.

/** Web links inside shared text: http(s) up to the next space. */
const LINKS = /\bhttps?:\/\/[^\s<>"]+/gi;

/** Characters that end a sentence around a link rather than belong to it. */
const AFTER_LINK = ".,;:!?'\"”’»";

/** `link` without the punctuation that followed it in a sentence: "see https://x.org/a." */
function trimLink(link) {
  let end = link.length;
  for (;;) {
    const last = link[end - 1];
    const body = link.slice(0, end);
    const unbalanced = (open, close) =>
      last === close && body.split(close).length > body.split(open).length;
    if (AFTER_LINK.includes(last) || unbalanced("(", ")") || unbalanced("[", "]")) end--;
    else return body;
  }
}

/**
 * Joins shared values one per line, leaving out empty ones and any that appears inside
 * another (a title repeated in the text).
 */
function joinShared(values) {
  const fields = values.map((value) => value.trim()).filter((value) => value !== "");
  return fields
    .filter((value, i) =>
      !fields.some((other, j) =>
        j !== i && other.includes(value) && (other.length > value.length || j < i)
      )
    )
    .join("\n");
}

/**
 * What a share brings: `{ link, content, extra }`. With a link (the `url` field, else the
 * only link inside `text`, as Android apps send it) the content is the link alone and
 * `extra` the title and text without it; otherwise the content is the title and text.
 */
function readShare(params) {
  const [title, text, url] = ["title", "text", "url"].map((name) =>
    (params.get(name) ?? "").trim()
  );
  const found = [...new Set((text.match(LINKS) ?? []).map(trimLink))];
  const link = url !== "" ? url : found.length === 1 ? found[0] : "";
  if (link === "") return { link: false, content: joinShared([title, text]), extra: "" };
  // The text without the link (and the punctuation that closed it), one space between words.
  const rest = text.replace(LINKS, (match) => trimLink(match) === link ? " " : match)
    .split(link).join(" ")
    .split("\n").map((line) => line.replace(/[ \t]+/g, " ").trim()).filter(Boolean).join("\n");
  return { link: true, content: link, extra: joinShared([title, rest].filter((v) => v !== link)) };
}

/** The share waiting to be sent, as stored: `{ link, content, extra, note, noting }`. */
function pendingShare() {
  const stored = read(STORED.share, sessionStorage);
  if (stored === null) return null;
  try {
    const share = JSON.parse(stored);
    if (typeof share?.content === "string") {
      return {
        link: share.link === true,
        content: share.content,
        extra: String(share.extra ?? ""),
        note: String(share.note ?? ""),
        noting: share.noting === true,
      };
    }
  } catch {
    // an item kept by an older version of the app: its text is the content
  }
  return { link: false, content: stored, extra: "", note: "", noting: false };
}

function keepShare(share) {
  write(STORED.share, share === null ? null : JSON.stringify(share), sessionStorage);
}

function acceptShare() {
  if (location.pathname !== new URL("share", APP).pathname) return;
  const shared = readShare(new URLSearchParams(location.search));
  keepShare(shared.content === "" ? null : { ...shared, note: shared.extra, noting: false });
  const nothing = { text: "Nothing was shared: no title, text or link arrived.", kind: "error" };
  write(
    STORED.shareAnswer,
    shared.content === "" ? JSON.stringify(nothing) : null,
    sessionStorage,
  );
  // Off the address bar: a reload must not share it again.
  history.replaceState(null, "", `${APP.pathname}#share`);
}

function lastShareAnswer() {
  try {
    const answer = JSON.parse(read(STORED.shareAnswer, sessionStorage) ?? "null");
    return typeof answer?.text === "string" ? answer : undefined;
  } catch {
    return undefined;
  }
}

function showShare() {
  const pending = pendingShare();
  const answer = byId("share-answer");
  byId("share-form").hidden = !pending;
  byId("share-needkey").hidden = !(pending && !state.key);
  byId("share-send").hidden = !state.key;
  if (!pending) {
    const last = lastShareAnswer() ??
      { text: "Nothing to send. Share a link to Relay from another app.", kind: "info" };
    setStatus(answer, last.text, last.kind);
    byId("share-sent").hidden = typeof last.sent !== "string";
    byId("share-sent-content").textContent = last.sent ?? "";
    return;
  }
  byId("share-sent").hidden = true;
  byId("share-content-label").textContent = pending.link ? "Link" : "Text";
  byId("share-content").value = pending.content;
  byId("share-extras").hidden = !pending.link;
  byId("share-extra-text").textContent = pending.extra;
  byId("share-note").value = pending.note;
  showNote(pending);
  setStatus(answer, state.key ? "" : "Waiting for the key", "info");
}

function showNote({ link, extra, noting }) {
  byId("share-content-hint").hidden = !link || noting;
  byId("share-extra").hidden = noting || extra === "";
  byId("share-note-box").hidden = !noting;
  const toggle = byId("share-note-toggle");
  toggle.setAttribute("aria-expanded", String(noting));
  toggle.textContent = noting ? "Remove the note" : "Add a note";
}

/** Keeps the user's edits, so that a reload or a trip to the Key screen loses nothing. */
function onShareEdit() {
  const pending = pendingShare();
  if (pending === null) return;
  pending.content = byId("share-content").value;
  pending.note = byId("share-note").value;
  keepShare(pending);
}

function onShareNoteToggle() {
  const pending = pendingShare();
  if (pending === null) return;
  pending.noting = !pending.noting;
  keepShare(pending);
  showNote(pending);
  if (pending.noting) byId("share-note").focus();
}

/** The content a share sends: the content box, then the note when the user added one. */
function shareContent(pending) {
  const content = pending.content.trim();
  const note = pending.link && pending.noting ? pending.note.trim() : "";
  return note === "" ? content : `${content}\n${note}`;
}

function onShareSend(event) {
  event.preventDefault();
  const answer = byId("share-answer");
  return whileBusy(byId("share-send"), async () => {
    onShareEdit();
    const pending = pendingShare();
    if (pending === null || !state.key) return;
    const content = shareContent(pending);
    setStatus(answer, "Sending…", "info");
    const result = await submitContent(content);
    const kind = answerKind(result);
    setStatus(answer, result.text, kind);
    if (result.ok) {
      // Kept for this tab: a reload shows the answer again without sending again.
      const last = { text: result.text, kind, sent: content };
      write(STORED.shareAnswer, JSON.stringify(last), sessionStorage);
      keepShare(null);
      showShare();
    }
    void showOutbox();
  });
}

// --- Library: the built-in podcast, blog and notes

const EPISODE_STATES = {
  queued: "queued",
  synthesising: "being read aloud",
  ready: "ready",
  failed: "failed",
};

/** While an episode is being made, the list is refreshed this often, ms. */
const LIBRARY_POLL_MS = 3000;
let libraryTimer;

/** `M:SS` (or `H:MM:SS`), as podcast apps show a length. */
function minutesSeconds(seconds) {
  const total = Math.max(0, Math.round(seconds));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = String(total % 60).padStart(2, "0");
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${s}` : `${m}:${s}`;
}

function card(title, metaParts, extra) {
  const item = document.createElement("li");
  const heading = document.createElement("p");
  heading.className = "card-title";
  if (title instanceof Node) heading.append(title);
  else heading.textContent = title;
  const meta = document.createElement("div");
  meta.className = "meta";
  for (const part of metaParts) {
    if (part instanceof Node) meta.append(part);
    else {
      const span = document.createElement("span");
      span.textContent = part;
      meta.append(span);
    }
  }
  item.append(heading, meta);
  if (extra) item.append(extra);
  return item;
}

function tagBadges(tags) {
  return tags.map((tag) => {
    const badge = document.createElement("span");
    badge.className = "badge";
    badge.textContent = tag;
    return badge;
  });
}

function fillList(list, empty, items) {
  list.replaceChildren(...items);
  empty.hidden = items.length > 0;
}

async function refreshPodcast() {
  const response = await api("podcast/episodes");
  if (!response.ok) throw new Error(await explain(response));
  const { feed_url: feed, episodes } = await response.json();
  const link = byId("podcast-feed");
  link.textContent = feed;
  link.href = feed;
  const qr = new URL("podcast/qr.svg", RELAY);
  if (state.key) qr.searchParams.set("key", state.key);
  if (byId("podcast-qr").getAttribute("src") !== qr.href) byId("podcast-qr").src = qr.href;
  fillList(
    byId("podcast-list"),
    byId("podcast-empty"),
    episodes.map((episode) => {
      const when = new Date(episode.created_at);
      const status = document.createElement("span");
      status.className = "episode-state";
      status.dataset.state = episode.state;
      status.textContent = episode.state === "synthesising"
        ? `${EPISODE_STATES.synthesising} (${episode.chunks_done} of ${episode.chunks_total})`
        : episode.state === "failed"
        ? `failed: ${episode.error ?? "no reason given"}`
        : episode.state === "ready"
        ? `ready, ${minutesSeconds(episode.duration_s)}`
        : EPISODE_STATES[episode.state] ?? episode.state;
      let player;
      if (episode.state === "ready" && episode.audio_url) {
        player = document.createElement("audio");
        player.controls = true;
        player.preload = "none";
        player.src = episode.audio_url;
      }
      return card(episode.title, [timeElement(when, dateTime.format(when)), status], player);
    }),
  );
  return episodes.some((e) => e.state === "queued" || e.state === "synthesising");
}

async function refreshBlog() {
  const response = await api("blog/posts");
  if (!response.ok) throw new Error(await explain(response));
  const { feed_url: feed, posts } = await response.json();
  byId("blog-link").href = new URL("blog/", RELAY).href;
  byId("blog-feed").textContent = feed;
  fillList(
    byId("blog-list"),
    byId("blog-empty"),
    posts.map((post) => {
      const when = new Date(post.created_at);
      const link = document.createElement("a");
      link.href = post.url;
      link.textContent = post.title;
      return card(link, [timeElement(when, dateTime.format(when)), ...tagBadges(post.tags)]);
    }),
  );
}

async function refreshNotes() {
  const response = await api("notes/");
  if (!response.ok) throw new Error(await explain(response));
  const { notes } = await response.json();
  fillList(
    byId("notes-list"),
    byId("notes-empty"),
    notes.map((note) => {
      const when = new Date(note.created);
      const details = document.createElement("details");
      const summary = document.createElement("summary");
      summary.textContent = "Show the file";
      const body = document.createElement("pre");
      body.className = "content";
      details.append(summary, body);
      details.addEventListener("toggle", async () => {
        if (!details.open || body.textContent !== "") return;
        const file = await api(`notes/${encodeURIComponent(note.doc_id)}`);
        body.textContent = file.ok ? await file.text() : await explain(file);
      });
      return card(
        note.title,
        [timeElement(when, dateTime.format(when)), ...tagBadges(note.tags)],
        details,
      );
    }),
  );
}

async function refreshLibrary() {
  clearTimeout(libraryTimer);
  const status = byId("library-status");
  try {
    const [busy] = await Promise.all([refreshPodcast(), refreshBlog(), refreshNotes()]);
    setStatus(status, "");
    // An episode on its way: look again while the screen is open.
    if (busy && currentScreen() === "library") {
      libraryTimer = setTimeout(() => void refreshLibrary(), LIBRARY_POLL_MS);
    }
  } catch (error) {
    setStatus(status, error instanceof TypeError ? UNREACHABLE : error.message, "error");
  }
}

// --- Start

async function registerWorker() {
  if (!navigator.serviceWorker) return; // plain http on a LAN: an ordinary page
  navigator.serviceWorker.addEventListener("message", onWorkerMessage);
  navigator.serviceWorker.startMessages();
  try {
    await navigator.serviceWorker.register(new URL("sw.js", APP), { scope: APP.pathname });
  } catch (error) {
    console.warn("relay: the service worker did not register:", error);
    return;
  }
  void flushOutbox();
  globalThis.addEventListener("online", () => void flushOutbox());
  setInterval(() => {
    if (document.visibilityState === "visible") void flushOutbox();
  }, FLUSH_EVERY_MS);
}

async function start() {
  byId("submit-form").addEventListener("submit", onSubmit);
  byId("submit-content").addEventListener("keydown", onSubmitKey);
  byId("outbox-send").addEventListener("click", () => void flushOutbox());
  byId("queues-refresh").addEventListener("click", () => void refreshQueues());
  byId("results-clear").addEventListener("click", clearResults);
  byId("publish-form").addEventListener("submit", onPublish);
  byId("failed-refresh").addEventListener("click", () => void refreshFailed());
  byId("library-refresh").addEventListener("click", () => void refreshLibrary());
  byId("key-form").addEventListener("submit", onSaveKey);
  byId("key-forget").addEventListener("click", onForgetKey);
  byId("key-show").addEventListener("change", (event) => {
    byId("key-input").type = event.currentTarget.checked ? "text" : "password";
  });
  byId("share-form").addEventListener("submit", onShareSend);
  byId("share-form").addEventListener("input", onShareEdit);
  byId("share-note-toggle").addEventListener("click", onShareNoteToggle);
  byId("insecure-note").hidden = globalThis.isSecureContext;
  globalThis.addEventListener("hashchange", async () => {
    setStatus(byId("notice"), "");
    // A pairing link opened while the app is already open in this tab.
    await acceptPairingLink();
    render(true);
  });

  acceptShare();
  await acceptPairingLink();
  render(false);
  await registerWorker();
}

void start();

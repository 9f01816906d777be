// The Submit and Queues screens, and the offline outbox that Submit and Share send through:
// a submission the relay cannot take now waits in sw.js's outbox and goes when it is back.

import {
  api,
  byId,
  explain,
  formatCreated,
  setStatus,
  state,
  timeElement,
  UNREACHABLE,
  whileBusy,
} from "./client.js";
import { QUEUE_NAMES } from "./markdown.js";

/** The outbox database, shared with sw.js (same names, same version). */
const OUTBOX_DB = "relay-outbox";
const OUTBOX_STORE = "requests";
/** The relay's queues, in pull order: src/queue_names.ts, carried by the bundle. */
const QUEUES = QUEUE_NAMES;
const timeOnly = new Intl.DateTimeFormat(undefined, { timeStyle: "short" });

// --- Submit

/**
 * Sends one submission; resolves to `{ ok, text, queued }`. `queued` is true when the
 * service worker kept it in the outbox because the relay could not be reached.
 */
export async function submitContent(content, queue) {
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

/** Offers every queue in the Submit form: the page names the first ones, with their use. */
export function listQueues(select) {
  const offered = new Set([...select.options].map((option) => option.value));
  for (const name of QUEUES.filter((queue) => !offered.has(queue))) {
    select.add(new Option(name, name));
  }
}

export function onSubmit(event) {
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
export function answerKind(answer) {
  if (!answer.ok) return "error";
  return answer.queued ? "info" : "ok";
}

export function onSubmitKey(event) {
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

export async function showOutbox() {
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

export async function flushOutbox() {
  if (!navigator.serviceWorker) return;
  const registration = await navigator.serviceWorker.ready;
  // Without a controller this page's submits would bypass the outbox.
  if (!navigator.serviceWorker.controller) registration.active?.postMessage({ type: "claim" });
  registration.active?.postMessage({ type: "flush-outbox" });
}

export function onWorkerMessage(event) {
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

export function refreshQueues() {
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

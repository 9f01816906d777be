// Content Relay web app: plain JavaScript modules; the one built file is markdown.js (markdown-it,
// bundled from markdown.ts by `deno task webapp`).
//
// Screens are sections of index.html chosen by the URL's hash (#submit, #queues, #results,
// #publish, #settings, #share). The API key lives in this browser's localStorage and goes
// only to this relay, in the X-Auth-Key header (or ?key= for the results stream, since
// EventSource cannot set headers). Content from the relay is always shown with textContent,
// never as HTML written by the app: a result's Markdown is rendered by markdown.js, with
// markdown-it's raw HTML off and links only to the web or to mail.
//
// This module wires the screens (one module each) to the page and starts the app.

import { APP, byId, render, setStatus, SHOW } from "./client.js";
import {
  flushOutbox,
  listQueues,
  onSubmit,
  onSubmitKey,
  onWorkerMessage,
  refreshQueues,
  showOutbox,
} from "./queues.js";
import { clearResults, openStream, renderResults } from "./results.js";
import { onPublish, refreshFailed } from "./publish.js";
import { acceptPairingLink, onForgetKey, onSaveKey, showKeyState } from "./settings.js";
import { acceptShare, onShareEdit, onShareNoteToggle, onShareSend, showShare } from "./share.js";
import { refreshLibrary } from "./library.js";
import { setUpSearch } from "./search.js";

/** How often an open app asks the service worker to send the outbox; cheap when empty. */
const FLUSH_EVERY_MS = 30_000;

Object.assign(SHOW, {
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
});

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
  listQueues(byId("submit-queue"));
  byId("submit-form").addEventListener("submit", onSubmit);
  byId("submit-content").addEventListener("keydown", onSubmitKey);
  byId("outbox-send").addEventListener("click", () => void flushOutbox());
  byId("queues-refresh").addEventListener("click", () => void refreshQueues());
  byId("results-clear").addEventListener("click", clearResults);
  byId("publish-form").addEventListener("submit", onPublish);
  byId("failed-refresh").addEventListener("click", () => void refreshFailed());
  byId("library-refresh").addEventListener("click", () => void refreshLibrary());
  setUpSearch();
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

// The Key screen: checks a key before keeping it on the device, forgets it, and takes a key
// from a pairing link (/app/#key=…).

import {
  api,
  APP,
  byId,
  describe,
  read,
  render,
  setStatus,
  state,
  STORED,
  whileBusy,
  write,
} from "./client.js";
import { clearResults, closeStream } from "./results.js";

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

export function onSaveKey(event) {
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

export function onForgetKey() {
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

export function showKeyState() {
  const key = state.key;
  byId("key-state").textContent = key
    ? `A key is saved on this device (ending in …${key.slice(-4)}).`
    : "No key is saved on this device.";
  byId("key-forget").disabled = !key;
  byId("pairing-example").textContent = `${APP.href}#key=…`;
}

/** A pairing link `/app/#key=<key>`: keep the key and take it out of the address bar. */
export async function acceptPairingLink() {
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

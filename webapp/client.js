// The web app's shared client: where the relay is, what the app keeps in this browser's
// storage, talking to the relay with the key, and which screen shows. Every screen's module
// imports this one; none imports app.js, which wires the screens together.

/** The relay's root: the parent of the app's folder (/app/ → /), so a proxy may add a prefix. */
export const RELAY = new URL("../", import.meta.url);
/** The app's folder, the service worker's scope. */
export const APP = new URL("./", import.meta.url);

/** Names in localStorage (and sessionStorage for a share waiting for the key). */
export const STORED = {
  key: "relay.key",
  since: "relay.results.since",
  results: "relay.results.items",
  share: "relay.share.pending",
  shareAnswer: "relay.share.answer",
};

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

export const byId = (id) => document.getElementById(id);

export const dateTime = new Intl.DateTimeFormat(undefined, {
  dateStyle: "medium",
  timeStyle: "short",
});

export const state = {
  key: read(STORED.key),
  results: {
    source: undefined,
    retry: undefined,
    since: Number(read(STORED.since)) || 0,
    items: readResults(),
  },
};

// --- Storage: a browser may refuse it (private mode, full disk); the app then forgets.

export function read(name, storage = localStorage) {
  try {
    return storage.getItem(name);
  } catch {
    return null;
  }
}

export function write(name, value, storage = localStorage) {
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
export function api(path, init = {}, key = state.key) {
  const headers = new Headers(init.headers);
  if (key) headers.set("X-Auth-Key", key);
  return fetch(new URL(path, RELAY), { ...init, headers, cache: "no-store" });
}

/** What went wrong, for a person: a problem document's detail, else the body or status. */
export async function describe(response) {
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
export async function explain(response) {
  const detail = await describe(response);
  if (response.status === 401) return `${detail}: check the key on the Key screen.`;
  return detail;
}

export const UNREACHABLE = "Cannot reach the relay: check the connection and try again.";

/**
 * Runs `job` unless `control` is already busy with it. The control is marked with
 * aria-disabled, not disabled, so that it keeps the keyboard focus.
 */
export async function whileBusy(control, job) {
  if (control.getAttribute("aria-disabled") === "true") return;
  control.setAttribute("aria-disabled", "true");
  try {
    await job();
  } finally {
    control.removeAttribute("aria-disabled");
  }
}

export function setStatus(element, text, kind = "info") {
  element.textContent = text;
  element.dataset.kind = kind;
}

export function formatCreated(createdAt) {
  // Peek gives UTC as "YYYY-MM-DD HH:MM:SS", as the API documents it.
  const date = new Date(`${createdAt.replace(" ", "T")}Z`);
  return Number.isNaN(date.getTime()) ? createdAt : dateTime.format(date);
}

export function timeElement(date, text) {
  const time = document.createElement("time");
  time.dateTime = date.toISOString();
  time.textContent = text;
  return time;
}

// --- Screens

export function currentScreen() {
  const name = location.hash.slice(1);
  return SCREENS.includes(name) ? name : "submit";
}

/**
 * What each screen does when it shows (loads its list, opens a stream), by screen name.
 * app.js fills it: a screen's module that imported the others would make a cycle.
 */
export const SHOW = {};

/** Shows the screen the URL's hash names (the Key screen while there is no key). */
export function render(moveFocus) {
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

// Content Relay extension: the options page. It stores the relay's address and key, and the
// hosts the Q&A reader may read besides the relay's Q&A sites, in chrome.storage.local, and
// asks the browser, at the moment of saving, for access to the relay's address only; the
// background sends every request. Plain JavaScript, no build step.

const byId = (id) => document.getElementById(id);

/**
 * The relay's address from what the user typed: http(s) only, ending in "/", no query or
 * fragment (a relay behind a proxy may sit under a path prefix, which is kept).
 * @throws {Error} For anything else.
 */
function relayBase(text) {
  let url;
  try {
    url = new URL(text.trim());
  } catch {
    throw new Error(`"${text}" is not an address: enter one like http://nas.local:8787/`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new Error(`"${text}" is not an http or https address`);
  }
  url.search = "";
  url.hash = "";
  if (!url.pathname.endsWith("/")) url.pathname += "/";
  return url;
}

/**
 * A pairing link, `<relay>/app/#key=<key>`, as the relay's address and key.
 * @throws {Error} When the link has no key or is not a relay's app address.
 */
function fromPairingLink(text) {
  const url = relayBase(text.replace(/#.*$/, ""));
  const key = new URLSearchParams(new URL(text.trim()).hash.slice(1)).get("key");
  if (!key || !url.pathname.endsWith("/app/")) {
    throw new Error("That is not a pairing link: it looks like https://relay.example/app/#key=…");
  }
  return { relay: new URL("../", url), key };
}

/** The page time limit entered, s; 0 (the reader's default) when empty or out of range. */
function pageTimeout() {
  const seconds = Number(byId("timeout").value);
  return Number.isInteger(seconds) && seconds >= 1 && seconds <= 300 ? seconds : 0;
}

/** The match pattern for the relay's host (patterns leave the port out). */
function hostPattern(url) {
  return `${url.protocol}//${url.hostname}/*`;
}

/**
 * Saves the settings once the browser allowed access to the relay's host. Called straight from
 * the click, before any other await: browsers ask for a permission only during a user action.
 */
async function save(settings) {
  const notice = byId("notice");
  const allowed = await chrome.permissions.request({ origins: [hostPattern(settings.relay)] });
  if (!allowed) {
    notice.textContent = "Not saved: the extension needs access to the relay's address.";
    return;
  }
  await chrome.storage.local.remove("qaHosts");
  await chrome.storage.local.set({
    relay: settings.relay.href,
    key: settings.key,
    allowHosts: settings.allowHosts,
    pageTimeoutS: pageTimeout(),
    paused: false,
    pauseReason: "",
  });
  byId("relay").value = settings.relay.href;
  byId("key").value = settings.key;
  byId("allow-hosts").value = settings.allowHosts.join(", ");
  notice.textContent = "Saved. Checking the relay…";
  const answer = await chrome.runtime.sendMessage({ type: "check" });
  notice.textContent = answer.ok ? `Saved. ${answer.message}.` : `Saved, but: ${answer.error}`;
}

function onSubmit(read) {
  return (event) => {
    event.preventDefault();
    let settings;
    try {
      // The listed hosts go with either form.
      settings = { ...read(), allowHosts: relayHosts.parseAllowed(byId("allow-hosts").value) };
    } catch (error) {
      byId("notice").textContent = error.message;
      return;
    }
    save(settings).catch((error) => (byId("notice").textContent = error.message));
  };
}

byId("form").addEventListener(
  "submit",
  onSubmit(() => ({ relay: relayBase(byId("relay").value), key: byId("key").value.trim() })),
);
byId("pair-form").addEventListener(
  "submit",
  onSubmit(() => fromPairingLink(byId("pairing").value)),
);

chrome.storage.local.get(["relay", "key", "pageTimeoutS", "allowHosts"]).then((stored) => {
  if (stored.relay) byId("relay").value = stored.relay;
  if (stored.key) byId("key").value = stored.key;
  if (stored.pageTimeoutS) byId("timeout").value = String(stored.pageTimeoutS);
  if (stored.allowHosts) byId("allow-hosts").value = stored.allowHosts.join(", ");
});

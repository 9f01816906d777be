// Content Relay extension: the popup. It sends the open page, shows the qa queue's length, how
// many of its links are left for the reader on the relay, and the reader's last results,
// pauses and resumes the reader, and asks for access to the sites it reads. Everything that
// reaches the relay goes through the background. Plain JavaScript.

const byId = (id) => document.getElementById(id);

/**
 * What the reader may read: the relay's Q&A sites and the hosts listed in the options
 * (hosts.js), asked for only when the user clicks "Allow reading pages". Kept from the last
 * render, because the browser asks for a permission only straight from the click.
 */
let pages = { origins: [] };

/** Shows the stored state: the reader's status, the last send, the last results. */
async function render() {
  const state = await chrome.storage.local.get([
    "relay",
    "paused",
    "pauseReason",
    "status",
    "lastSend",
    "recent",
    "qaHosts",
    "allowHosts",
    "leftForRelay",
  ]);
  if (!state.relay) {
    byId("reader").textContent = "Not set up: open the options and enter the relay and key.";
  } else if (state.paused) {
    byId("reader").textContent = state.pauseReason || "Paused.";
  } else {
    byId("reader").textContent = `Reading qa from ${state.relay}: ${state.status ?? "starting"}`;
  }
  byId("pause").textContent = state.paused ? "Resume" : "Pause";
  pages = {
    origins: relayHosts.originsFor({
      qaHosts: state.qaHosts?.hosts ?? [],
      allowed: state.allowHosts ?? [],
    }),
  };
  byId("allow").hidden = pages.origins.length === 0 ||
    await chrome.permissions.contains(pages);
  const left = state.relay ? state.leftForRelay ?? 0 : 0;
  byId("left").textContent = left
    ? `${left} link(s) left for the reader on the relay: not Q&A sites.`
    : "";
  if (state.lastSend) byId("send-answer").textContent = state.lastSend.message;
  const list = byId("recent");
  list.replaceChildren(...(state.recent ?? []).map(recentItem));
}

/** One of the reader's last results as a list item; text only, never the page's HTML. */
function recentItem(entry) {
  const item = document.createElement("li");
  item.className = entry.ok ? "ok" : "failed";
  item.textContent = entry.title;
  if (entry.url) {
    const link = document.createElement("a");
    link.href = entry.url;
    link.target = "_blank";
    link.textContent = new URL(entry.url).hostname;
    item.append(" ", link);
  }
  return item;
}

async function showCount() {
  const answer = await chrome.runtime.sendMessage({ type: "queue" });
  byId("count").textContent = answer.ok
    ? `${answer.count} link(s) waiting in qa.`
    : `Queue unknown: ${answer.error}`;
}

byId("send").addEventListener("click", async () => {
  const [tab] = await chrome.tabs.query({ active: true, currentWindow: true });
  const answer = await chrome.runtime.sendMessage({ type: "send-page", url: tab?.url });
  byId("send-answer").textContent = answer.message ?? answer.error;
  showCount();
});

byId("save").addEventListener("click", async () => {
  const [tab] = await chrome.tabs.query({ active: true, currentWindow: true });
  byId("send-answer").textContent = "Reading the page…";
  const answer = await chrome.runtime.sendMessage({
    type: "save-article",
    tab: tab && { id: tab.id, url: tab.url },
  });
  byId("send-answer").textContent = answer.message ?? answer.error;
});

byId("pause").addEventListener("click", async () => {
  const { paused } = await chrome.storage.local.get("paused");
  await chrome.runtime.sendMessage({ type: "pause", paused: !paused });
});

byId("allow").addEventListener("click", () => {
  // Asked straight from the click: browsers ask for a permission only during a user action.
  chrome.permissions.request(pages).then((allowed) => {
    if (allowed) chrome.runtime.sendMessage({ type: "pause", paused: false });
    render();
  });
});

// Access granted or taken back elsewhere (the browser's own settings) shows here at once.
chrome.permissions.onAdded.addListener(render);
chrome.permissions.onRemoved.addListener(render);
chrome.storage.onChanged.addListener((changes) => {
  render();
  // The queue changed when the reader finished a link or a page was sent.
  if (changes.recent || changes.lastSend) showCount();
});
render();
showCount();

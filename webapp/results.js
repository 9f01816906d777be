// The Results screen: the results feed, newest first, live from the relay's Server-Sent Events
// stream, kept on the device, each result rendered from Markdown by markdown.js (markdown-it
// with raw HTML off and links only to the web or to mail) with a button that publishes it.

import { plainText, readArticleResult, readFailureResult, renderMarkdown } from "./markdown.js";
import {
  api,
  byId,
  dateTime,
  explain,
  RELAY,
  setStatus,
  state,
  STORED,
  timeElement,
  whileBusy,
  write,
} from "./client.js";
import { postPublish, TARGET_NAMES } from "./publish.js";

/** The relay's feed keeps the newest 50 results; the list keeps as many. */
const RESULTS_CAP = 50;
/** Wait before opening the results stream again after the relay closed it, ms. */
const STREAM_RETRY_MS = 5_000;

// --- Results: newest first, live from the relay's Server-Sent Events stream

export function openStream() {
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

export function closeStream() {
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
  li.append(meta);
  // A link that could not be read has nothing to publish.
  if (readFailureResult(c)) return li;
  const publish = document.createElement("button");
  publish.type = "button";
  publish.className = "publish-result";
  publish.textContent = "Publish to blog and podcast";
  const status = document.createElement("p");
  status.className = "status";
  status.setAttribute("role", "status");
  publish.addEventListener("click", () => publishResult(c, content, publish, status));
  meta.append(publish);
  li.append(status);
  return li;
}

/**
 * Sends one result to the blog and the podcast (POST /publish) as `relay work --publish` sends
 * an article: a reader's result goes whole as `content_md` (the relay's services read its
 * title, source and body from it), its title from its fields and its body's text as `content`;
 * any other result is titled by its first line, its rendered text the `content`.
 */
function publishResult(markdown, rendered, button, status) {
  const article = readArticleResult(markdown);
  const firstLine = markdown.trim().split("\n", 1)[0].replace(/^#+\s*/, "").trim();
  const title = article?.title ?? firstLine;
  const text = article ? plainText(renderMarkdown(article.markdown)) : plainText(rendered);
  const body = {
    title: (title.length > 120 ? `${title.slice(0, 119)}…` : title) || "Result",
    content: text || markdown,
    content_md: markdown,
    targets: ["blog", "podcast"],
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

export function renderResults() {
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

export function clearResults() {
  state.results.items = [];
  write(STORED.results, null);
  byId("results-list").replaceChildren();
  updateResultsEmpty();
}

// The Library screen's search box: GET /search with the app's key, results with the matched
// words marked.

import { api, byId, explain, RELAY, setStatus, UNREACHABLE, whileBusy } from "./client.js";

/** The relay marks each match in a snippet between these two characters. */
const MARK_START = "«";
const MARK_END = "»";
const KINDS = { note: "Note", post: "Blog post", episode: "Episode", result: "Result" };

/**
 * A snippet as nodes: the marked parts in <mark>, everything else as text, so that nothing in
 * a saved document can become markup.
 */
function markedSnippet(snippet) {
  const nodes = [];
  let rest = snippet;
  while (rest !== "") {
    const start = rest.indexOf(MARK_START);
    const end = start < 0 ? -1 : rest.indexOf(MARK_END, start + 1);
    if (start < 0 || end < 0) {
      nodes.push(document.createTextNode(rest));
      break;
    }
    if (start > 0) nodes.push(document.createTextNode(rest.slice(0, start)));
    const mark = document.createElement("mark");
    mark.textContent = rest.slice(start + 1, end);
    nodes.push(mark);
    rest = rest.slice(end + 1);
  }
  return nodes;
}

function resultItem(item) {
  const li = document.createElement("li");
  const heading = document.createElement("p");
  heading.className = "card-title";
  const link = document.createElement("a");
  // The relay answers paths on itself (/blog/…): resolved against it, not against /app/.
  link.href = new URL(item.url, RELAY).href;
  link.textContent = item.title || item.url;
  heading.append(link);
  const meta = document.createElement("div");
  meta.className = "meta";
  const kind = document.createElement("span");
  kind.className = "badge";
  kind.textContent = KINDS[item.kind] ?? item.kind;
  meta.append(kind);
  const snippet = document.createElement("p");
  snippet.className = "snippet";
  snippet.append(...markedSnippet(item.snippet ?? ""));
  li.append(heading, meta, snippet);
  return li;
}

async function runSearch() {
  const query = byId("search-input").value.trim();
  const status = byId("search-status");
  const retry = byId("search-retry");
  retry.hidden = true;
  // An empty query is refused by the relay: nothing to ask.
  if (query === "") return;
  try {
    const response = await api(`search?q=${encodeURIComponent(query)}`);
    if (response.status === 503) {
      const wait = Number(response.headers.get("retry-after") ?? "");
      setStatus(
        status,
        `The search index is being rebuilt${
          Number.isFinite(wait) && wait > 0 ? `: try again in ${wait} s` : ""
        }.`,
        "error",
      );
      retry.hidden = false;
      return;
    }
    if (!response.ok) throw new Error(await explain(response));
    const { items } = await response.json();
    byId("search-list").replaceChildren(...items.map(resultItem));
    setStatus(status, items.length === 0 ? "Nothing found." : `${items.length} found.`);
  } catch (error) {
    setStatus(status, error instanceof TypeError ? UNREACHABLE : error.message, "error");
  }
}

/** Wires the search form and its retry button. */
export function setUpSearch() {
  const form = byId("search-form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void whileBusy(byId("search-submit"), runSearch);
  });
  byId("search-retry").addEventListener("click", () => {
    void whileBusy(byId("search-submit"), runSearch);
  });
}

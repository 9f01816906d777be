// The Publish screen: sends an article to the notes store, the blog and the podcast, shows each
// target's outcome, and lists the publishes that failed, to retry them.

import { api, byId, explain, setStatus, UNREACHABLE, whileBusy } from "./client.js";

export const TARGET_NAMES = { notes: "Notes", blog: "Blog", podcast: "Podcast", nas: "Podcast" };

// --- Publish

/**
 * POSTs `body` as JSON to a publish endpoint; resolves to the relay's `{status, results}`
 * answer, or to `undefined` after saying in `status` why there is none (the relay cannot be
 * reached, or answered with a problem).
 */
export async function postPublish(path, body, status) {
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

export function onPublish(event) {
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
export async function refreshFailed() {
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

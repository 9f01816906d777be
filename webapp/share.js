// The Share screen, the Web Share Target: /app/share?title=…&text=…&url=….

import { APP, byId, read, setStatus, state, STORED, whileBusy, write } from "./client.js";
import { answerKind, showOutbox, submitContent } from "./queues.js";

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

export function acceptShare() {
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

export function showShare() {
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
export function onShareEdit() {
  const pending = pendingShare();
  if (pending === null) return;
  pending.content = byId("share-content").value;
  pending.note = byId("share-note").value;
  keepShare(pending);
}

export function onShareNoteToggle() {
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

export function onShareSend(event) {
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

// The Library screen: the built-in podcast, blog and notes, as their pages list them.

import {
  api,
  byId,
  currentScreen,
  dateTime,
  explain,
  RELAY,
  setStatus,
  timeElement,
  UNREACHABLE,
} from "./client.js";

// --- Library: the built-in podcast, blog and notes

const EPISODE_STATES = {
  queued: "queued",
  synthesising: "being read aloud",
  ready: "ready",
  failed: "failed",
};

/** While an episode is being made, the list is refreshed this often, ms. */
const LIBRARY_POLL_MS = 3000;
let libraryTimer;

/** `M:SS` (or `H:MM:SS`), as podcast apps show a length. */
function minutesSeconds(seconds) {
  const total = Math.max(0, Math.round(seconds));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = String(total % 60).padStart(2, "0");
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${s}` : `${m}:${s}`;
}

function card(title, metaParts, extra) {
  const item = document.createElement("li");
  const heading = document.createElement("p");
  heading.className = "card-title";
  if (title instanceof Node) heading.append(title);
  else heading.textContent = title;
  const meta = document.createElement("div");
  meta.className = "meta";
  for (const part of metaParts) {
    if (part instanceof Node) meta.append(part);
    else {
      const span = document.createElement("span");
      span.textContent = part;
      meta.append(span);
    }
  }
  item.append(heading, meta);
  if (extra) item.append(extra);
  return item;
}

function tagBadges(tags) {
  return tags.map((tag) => {
    const badge = document.createElement("span");
    badge.className = "badge";
    badge.textContent = tag;
    return badge;
  });
}

function fillList(list, empty, items) {
  list.replaceChildren(...items);
  empty.hidden = items.length > 0;
}

async function refreshPodcast() {
  const response = await api("podcast/episodes");
  if (!response.ok) throw new Error(await explain(response));
  const { feed_url: feed, episodes } = await response.json();
  const link = byId("podcast-feed");
  link.textContent = feed;
  link.href = feed;
  // An <img> sends no header: a private podcast's QR code is fetched with the feed key its
  // feed address carries, which opens the podcast only, never with this app's own key.
  const qr = new URL("podcast/qr.svg", RELAY);
  const feedKey = new URL(feed).searchParams.get("key");
  if (feedKey) qr.searchParams.set("key", feedKey);
  if (byId("podcast-qr").getAttribute("src") !== qr.href) byId("podcast-qr").src = qr.href;
  // Shown once it holds the QR code: before, it holds the icon, only so that it has a src.
  byId("podcast-qr").hidden = false;
  fillList(
    byId("podcast-list"),
    byId("podcast-empty"),
    episodes.map((episode) => {
      const when = new Date(episode.created_at);
      const status = document.createElement("span");
      status.className = "episode-state";
      status.dataset.state = episode.state;
      status.textContent = episode.state === "synthesising"
        ? `${EPISODE_STATES.synthesising} (${episode.chunks_done} of ${episode.chunks_total})`
        : episode.state === "failed"
        ? `failed: ${episode.error ?? "no reason given"}`
        : episode.state === "ready"
        ? `ready, ${minutesSeconds(episode.duration_s)}`
        : EPISODE_STATES[episode.state] ?? episode.state;
      let player;
      if (episode.state === "ready" && episode.audio_url) {
        player = document.createElement("audio");
        player.controls = true;
        player.preload = "none";
        player.src = episode.audio_url;
      }
      return card(episode.title, [timeElement(when, dateTime.format(when)), status], player);
    }),
  );
  return episodes.some((e) => e.state === "queued" || e.state === "synthesising");
}

async function refreshBlog() {
  const response = await api("blog/posts");
  if (!response.ok) throw new Error(await explain(response));
  const { feed_url: feed, posts } = await response.json();
  byId("blog-link").href = new URL("blog/", RELAY).href;
  byId("blog-feed").textContent = feed;
  fillList(
    byId("blog-list"),
    byId("blog-empty"),
    posts.map((post) => {
      const when = new Date(post.created_at);
      const link = document.createElement("a");
      link.href = post.url;
      link.textContent = post.title;
      return card(link, [timeElement(when, dateTime.format(when)), ...tagBadges(post.tags)]);
    }),
  );
}

async function refreshNotes() {
  const response = await api("notes/");
  if (!response.ok) throw new Error(await explain(response));
  const { notes } = await response.json();
  fillList(
    byId("notes-list"),
    byId("notes-empty"),
    notes.map((note) => {
      const when = new Date(note.created);
      const details = document.createElement("details");
      const summary = document.createElement("summary");
      summary.textContent = "Show the file";
      const body = document.createElement("pre");
      body.className = "content";
      details.append(summary, body);
      details.addEventListener("toggle", async () => {
        if (!details.open || body.textContent !== "") return;
        const file = await api(`notes/${encodeURIComponent(note.doc_id)}`);
        body.textContent = file.ok ? await file.text() : await explain(file);
      });
      return card(
        note.title,
        [timeElement(when, dateTime.format(when)), ...tagBadges(note.tags)],
        details,
      );
    }),
  );
}

export async function refreshLibrary() {
  clearTimeout(libraryTimer);
  const status = byId("library-status");
  try {
    const [busy] = await Promise.all([refreshPodcast(), refreshBlog(), refreshNotes()]);
    setStatus(status, "");
    // An episode on its way: look again while the screen is open.
    if (busy && currentScreen() === "library") {
      libraryTimer = setTimeout(() => void refreshLibrary(), LIBRARY_POLL_MS);
    }
  } catch (error) {
    setStatus(status, error instanceof TypeError ? UNREACHABLE : error.message, "error");
  }
}

/**
 * Reliability: the built-in services (notes, blog, podcast) on a full disk answer as the API
 * does, 507 with `Retry-After` and a reason, never 500; so `POST /publish` reports a reason
 * a person can act on. The disk is a real tmpfs, filled up. Needs root; skipped, with a line
 * saying why, where mounting is not possible.
 *
 * @module
 */

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import {
  assertProblem,
  eventually,
  KEY,
  printedLines,
  relayCall,
  type RelayProcess,
  startRelayProcess,
} from "../_helpers.ts";
import { fillDisk, fillUntilRefused, mountTmpfs, NO_MOUNT } from "./_mounts.ts";

/**
 * Starts a relay on a tmpfs of 8 MiB and gives `job` a way to save a note; saves the note
 * "before" first and waits until the search index has it. The index writes its file in the
 * background once it has a note, and a write it failed on a full disk would give back the
 * room it had taken: so a test fills the disk only after that.
 */
async function withNoteSaved(
  args: string[],
  job: (session: {
    disk: { dir: string };
    relay: RelayProcess;
    call: ReturnType<typeof relayCall>;
    note: (title: string) => Promise<Response>;
  }) => Promise<void>,
): Promise<void> {
  await using disk = await mountTmpfs("8m");
  await using relay = await startRelayProcess(disk.dir, { env: { RELAY_API_KEY: KEY }, args });
  const call = relayCall(relay.url);
  const note = (title: string) =>
    call("/downstream/api/notes/import", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ title, content: "# A note\n\nKept as Markdown." }),
    });
  const before = await note("before");
  assert.equal(before.status, 200, await before.text());
  await indexed(call, "before");
  await job({ disk, relay, call, note });
}

/** Waits until a search for `word` finds something: the index has written what it holds. */
async function indexed(call: ReturnType<typeof relayCall>, word: string): Promise<void> {
  await eventually(async () => {
    const res = await call(`/search?q=${word}`);
    const found = res.status === 200 && (await res.json()).items.length > 0;
    if (res.status !== 200) await res.body?.cancel();
    return found;
  }, `${word} in the search index`);
}

Deno.test({
  name:
    "the built-in notes on a full disk: 507 with Retry-After and the reason, and POST /publish reports it",
  ignore: NO_MOUNT !== undefined,
  fn: () =>
    withNoteSaved([], async ({ disk, call, note }) => {
      await fillDisk(disk.dir);
      const refused = await note("on a full disk");
      assert.equal(
        refused.headers.get("retry-after"),
        "30",
        `${refused.status} ${await refused.clone().text()}`,
      );
      assert.match(
        await assertProblem(refused, 507),
        /^Cannot POST \/downstream\/api\/notes\/import: the relay's disk is full\./,
      );
      const published = await call("/publish", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ title: "On a full disk", content: "Text", targets: ["notes"] }),
      });
      const body = JSON.stringify(await published.json());
      assert.match(body, /507/, body);
      assert.doesNotMatch(body, /HTTP 500/, body);
    }),
});

Deno.test({
  name:
    "once the store gave up room for pulls on a full disk, the built-in services write nothing into it",
  ignore: NO_MOUNT !== undefined,
  fn: () =>
    withNoteSaved([], async ({ disk, call, note }) => {
      const post = (path: string, body: string, type = "application/json") =>
        call(path, { method: "POST", headers: { "content-type": type }, body });
      // An item the relay keeps, and a pull of it once the disk is full.
      assert.equal(
        (await post("/submit?queue=general", "kept for a pull", "text/plain")).status,
        200,
      );
      await fillUntilRefused(disk.dir, call);
      const refused = await note("into the pulls' room");
      assert.equal(refused.headers.get("retry-after"), "30");
      assert.match(
        await assertProblem(refused, 507),
        /^Cannot save the note: the relay's disk is full\. Pulls, acks and clears still work/,
      );
      const published = await post(
        "/publish",
        JSON.stringify({ title: "Into the room", content: "Text", targets: ["notes", "blog"] }),
      );
      const body = JSON.stringify(await published.json());
      assert.match(body, /HTTP 507: Cannot save the note: the relay's disk is full/, body);
      assert.match(body, /HTTP 507: Cannot publish the post: the relay's disk is full/, body);
      // The failed publish is kept to be retried, in memory: its file, written whole, would
      // take the room too.
      const kept = await (await call("/publish/failed")).json();
      assert.deepEqual(kept.entries.map((e: { title: string }) => e.title), ["Into the room"]);
      assert.equal(existsSync(`${disk.dir}/failed-publishes.json`), false);
      // The room is still there for what it was given up for.
      const pulled = await call("/pull?queue=general");
      assert.equal(pulled.status, 200);
      assert.match(await pulled.text(), /kept for a pull/);
    }),
});

/** Whether Debian's espeak-ng program is installed (`.ci/run` installs it). */
const espeak = await new Deno.Command("espeak-ng", { args: ["--version"], stdout: "null" })
  .output().then((out) => out.success, () => false);

/**
 * Runs `job` once an episode is being spoken on a full disk and waits for space: the speech
 * command (espeak-ng) is held until the disk is full and the store has given up its room
 * for pulls, so the first chunk is spoken just then. `job` gets the relay, its API, the
 * episode counts from `/stats` and the filler file to remove.
 */
async function withEpisodeWaiting(
  job: (session: {
    dir: string;
    relay: RelayProcess;
    episodes: () => Promise<Record<string, number>>;
    filler: string;
    args: string[];
  }) => Promise<void>,
): Promise<void> {
  const gates = await Deno.makeTempDir({ prefix: "relay-speech-gate-" });
  const gate = `${gates}/open`;
  const command = `sh -c 'while [ ! -e ${gate} ]; do sleep 0.05; done; ` +
    `exec espeak-ng --stdin --stdout -v "$0"' {lang}`;
  const args = ["--speech-command", command];
  try {
    await withNoteSaved(args, async ({ disk, relay, call }) => {
      const published = await call("/publish", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          title: "Gated",
          content: "Tomatoes want sun.",
          targets: ["podcast"],
        }),
      });
      assert.equal(published.status, 200, await published.text());
      await indexed(call, "Gated");
      const filler = await fillUntilRefused(disk.dir, call);
      await Deno.writeTextFile(gate, "");
      await eventually(
        () => printedLines(relay).some((line) => line.includes("reading aloud waits for space")),
        "the episode to wait for space",
      );
      await job({ dir: disk.dir, relay, episodes: episodesOf(call), filler, args });
    });
  } finally {
    await Deno.remove(gates, { recursive: true });
  }
}

/** The podcast's episode counts from `/stats`: `ready`, `failed` and the others. */
function episodesOf(call: ReturnType<typeof relayCall>): () => Promise<Record<string, number>> {
  return async () => (await (await call("/stats")).json()).publishing.podcast.episodes;
}

Deno.test({
  name:
    "an episode being spoken when the disk fills waits, unfailed, and is finished once there is space",
  ignore: NO_MOUNT !== undefined || !espeak,
  fn: () =>
    withEpisodeWaiting(async ({ episodes, filler }) => {
      const waiting = await episodes();
      assert.equal(waiting.failed, 0);
      assert.equal(waiting.ready, 0);
      await Deno.remove(filler);
      await eventually(async () => (await episodes()).ready === 1, "the episode to be ready");
      assert.equal((await episodes()).failed, 0);
    }),
});

Deno.test({
  name: "a relay stopped while an episode waits for space neither fails it nor writes its audio",
  ignore: NO_MOUNT !== undefined || !espeak,
  fn: () =>
    withEpisodeWaiting(async ({ dir, relay }) => {
      assert.equal((await relay.stop()).code, 0);
      const said = printedLines(relay).filter((line) => /relay: podcast episode/.test(line));
      assert.deepEqual(said, [], "the episode was neither failed nor finished");
      // The part file an episode's audio goes to is made when it starts: it stays empty.
      const audio = [...Deno.readDirSync(`${dir}/podcast`)]
        .filter((entry) => /\.mp3(\.part)?$/.test(entry.name))
        .map((entry) => [entry.name, Deno.statSync(`${dir}/podcast/${entry.name}`).size])
        .filter(([, size]) => size !== 0);
      assert.deepEqual(audio, []);
    }),
});

Deno.test({
  name:
    "a relay restarted on a full disk while an episode waits refuses new content from the start: the episode waits, unfailed, and is finished once there is space",
  ignore: NO_MOUNT !== undefined || !espeak,
  fn: () =>
    withEpisodeWaiting(async ({ dir, relay, filler, args }) => {
      assert.equal((await relay.stop()).code, 0);
      // The stop folded the database's log into it, which gave space back: filled again, but
      // for room enough to open the database (SQLite cannot open it on a disk with none) and
      // for the episode's audio. The room given up for pulls stays given up: the new relay
      // finds no room to set it aside again, and must not speak into what is left.
      assert.equal(await fillDisk(dir), filler);
      await Deno.truncate(filler, Deno.statSync(filler).size - 256 * 1024);
      await using again = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY }, args });
      const episodes = episodesOf(relayCall(again.url));
      await eventually(
        () => printedLines(again).some((line) => line.includes("reading aloud waits for space")),
        "the resumed episode to wait for space",
      );
      assert.equal((await episodes()).failed, 0);
      await Deno.remove(filler);
      await eventually(async () => (await episodes()).ready === 1, "the episode to be ready");
      assert.equal((await episodes()).failed, 0);
    }),
});

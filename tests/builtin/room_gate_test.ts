/**
 * The gate that holds spoken chunks back while the relay has no room for new content: it
 * waits while the relay says no, lets go at a stop, and says in the log when it starts and
 * ends waiting. The whole path, on a full tmpfs with a real relay, is in
 * tests/reliability/builtin_storage_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { HeldAtStop, RoomGate } from "../../src/builtin/room_gate.ts";
import type { Pcm } from "../../src/builtin/wav.ts";
import { eventually } from "../_helpers.ts";

Deno.test("RoomGate holds a spoken chunk while there is no room, lets it go unwritten at a stop, and logs once each way", async () => {
  let room = false;
  const lines: string[] = [];
  const gate = new RoomGate(() => Promise.resolve(room), (line) => lines.push(line));
  const pcm: Pcm = { samples: new Int16Array(4), sampleRate: 22050 };
  let spoken = 0;
  const engine = gate.gated({
    name: "test engine",
    synthesize: () => {
      spoken++;
      return Promise.resolve(pcm);
    },
  });
  assert.equal(engine.name, "test engine");
  assert.equal(engine.speaks, undefined);
  // The chunk is spoken, then held: the relay says there is no room.
  let handed = false;
  const held = engine.synthesize("words", "en").then(() => handed = true);
  await eventually(() => lines.length === 1, "the gate to say it waits");
  assert.equal(spoken, 1);
  assert.equal(handed, false);
  assert.match(lines[0]!, /^relay: podcast: the disk is full.*reading aloud waits for space$/);
  // A stop lets it go unwritten: the podcast neither writes nor fails the episode.
  gate.stop();
  await assert.rejects(held, HeldAtStop);
  assert.equal(handed, false);
  assert.equal(lines.length, 1, "a stop is not space again");

  // Started again: held while there is no room, said again, and handed over once there is.
  gate.start();
  const later = engine.synthesize("more", "en");
  await eventually(() => lines.length === 2, "the gate to say it waits again");
  room = true;
  assert.equal(await later, pcm);
  assert.deepEqual(lines.slice(1), [
    lines[0],
    "relay: podcast: there is space again: reading aloud goes on",
  ]);
  assert.equal(spoken, 2);
});

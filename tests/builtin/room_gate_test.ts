/**
 * The gate that holds spoken chunks back while the relay has no room for new content: it
 * waits while the relay says no, lets go at a stop, and says in the log when it starts and
 * ends waiting. The whole path, on a full tmpfs with a real relay, is in
 * tests/reliability/builtin_storage_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { RoomGate } from "../../src/builtin/room_gate.ts";
import type { Pcm } from "../../src/builtin/wav.ts";
import { eventually } from "../_helpers.ts";

Deno.test("RoomGate holds a spoken chunk while there is no room, lets it go at a stop, and logs once each way", async () => {
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
  let handed = false;
  const chunk = engine.synthesize("words", "en").then((got) => {
    handed = true;
    return got;
  });
  // The chunk is spoken, then held: the relay says there is no room.
  await eventually(() => lines.length > 0, "the gate to say it waits");
  assert.equal(spoken, 1);
  assert.equal(handed, false);
  assert.match(lines[0]!, /^relay: podcast: the disk is full.*reading aloud waits for space$/);
  gate.stop();
  assert.equal(await chunk, pcm);
  assert.equal(lines.length, 1, "a stop is not space again");

  // Started again with room: the next chunk goes at once, and the log says so.
  gate.start();
  room = true;
  assert.equal(await engine.synthesize("more", "en"), pcm);
  assert.deepEqual(lines.slice(1), ["relay: podcast: there is space again: reading aloud goes on"]);
  assert.equal(spoken, 2);
});

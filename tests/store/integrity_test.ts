import assert from "node:assert/strict";
import { countersPath, keepCounters } from "../../src/store/integrity.ts";
import { push } from "../../src/store/store.ts";
import { makeStore, within } from "../_helpers.ts";

// The keeper pauses between writes; a stop must end the pause, not wait it out. With an
// interval of an hour, a keeper that waits could not stop within the minute allowed here.
Deno.test("the counters keeper stops at once, with the file written, however long its interval", async () => {
  await using s = await makeStore({ systemClock: true });
  const keeper = keepCounters(s.store, s.temp.path, () => {}, 3_600_000);
  await push(s.store, "one result");
  const outcome = await within(keeper.stop().then(() => "stopped"), 60_000);
  assert.equal(outcome ?? "still waiting", "stopped");
  const file = JSON.parse(await Deno.readTextFile(countersPath(s.temp.path)));
  assert.equal(file.counters["results.pushed"], 1, "the last write counts the push");
});

/**
 * A link whose reading kills the reader: a real `relay work --extract` is killed with SIGKILL
 * while it reads a loopback page, and started again, until the item has stopped it
 * `--attempts` times; then it ends as one `Could not read` result and is acknowledged, never
 * read again. And the record itself: what it counts and when it starts again.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  eventually,
  getStats,
  runCli,
  spawnRelay,
  startRelayProcess,
  withTempDir,
} from "../_helpers.ts";
import { defaultStateDir, ReadingRecords } from "../../src/client/reading_record.ts";

const KEY = "reading-record-test-key-0123456789";

/** A loopback page that answers nothing, ever: the reader hangs on it until it is killed. */
function hangingServer() {
  const requests: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    requests.push(new URL(req.url).pathname);
    return new Promise<Response>((resolve) =>
      req.signal.addEventListener("abort", () => resolve(new Response(null)))
    );
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    requests,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
    },
  };
}

Deno.test("relay work --extract gives up on a link that killed the reader --attempts times, and acks it", async () => {
  await withTempDir(async (dir) => {
    await using page = hangingServer();
    await using relay = await startRelayProcess(join(dir, "data"), {
      env: { RELAY_API_KEY: KEY },
    });
    const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
    const link = `${page.url}/eats-the-reader`;
    assert.equal((await runCli(["submit", "--queue", "general", link], { env })).code, 0);
    const stateDir = join(dir, "reader-state");
    const start = () =>
      spawnRelay([
        "work",
        "--queue",
        "general",
        "--extract",
        "--attempts",
        "2",
        "--backoff",
        "10ms",
        "--lease",
        "2s",
        "--timeout",
        "10m",
        "--state-dir",
        stateDir,
        "--allow-private",
        new URL(page.url).host,
      ], { env });

    for (let killed = 1; killed <= 2; killed++) {
      const worker = start();
      await eventually(() => page.requests.length === killed, `reading ${killed}`, 60_000);
      worker.child.kill("SIGKILL");
      assert.equal((await worker.done).signal, "SIGKILL");
    }
    const [record] = [...Deno.readDirSync(stateDir)].map((entry) => entry.name);
    assert.match(record!, /^general:\d+$/);
    assert.equal(
      JSON.parse(Deno.readTextFileSync(join(stateDir, record!))).count,
      2,
      "two readings began and never ended",
    );

    const worker = start();
    const feed = async () => {
      const res = await fetch(`${relay.url}/results`, { headers: { "x-auth-key": KEY } });
      return ((await res.json()) as { items: { c: string }[] }).items.map((item) => item.c);
    };
    let results: string[] = [];
    await eventually(async () => (results = await feed()).length === 1, "the result", 60_000);
    assert.deepEqual(results, [
      `Could not read ${link}: reading this page stopped the reader 2 times`,
    ]);
    await eventually(async () => {
      const stats = await getStats((path) =>
        fetch(`${relay.url}${path}`, { headers: { "x-auth-key": KEY } })
      );
      return stats.queues.general.depth === 0 && stats.queues.general.in_flight === 0;
    }, "the item acknowledged");
    worker.child.kill("SIGTERM");
    assert.equal((await worker.done).code, 0, worker.stderr.join("\n"));
    assert.equal(page.requests.length, 2, "the page was not read a third time");
    assert.deepEqual([...Deno.readDirSync(stateDir)], [], "the record is removed");
    assert.match(
      worker.stderr.join("\n"),
      /could not read \S+ \(item general:\d+\): reading this page stopped the reader 2 times; reported/,
    );
  });
});

Deno.test("a reading record counts the readings that never ended, per item and its content", async () => {
  await withTempDir(async (dir) => {
    const records = new ReadingRecords(join(dir, "state"));
    assert.equal(await records.begin("general:1", "https://example.org/a"), 0);
    assert.equal(await records.begin("general:1", "https://example.org/a"), 1);
    assert.equal(await records.begin("general:1", "https://example.org/a"), 2);
    // The same id for another link (a relay whose data was reset) starts again.
    assert.equal(await records.begin("general:1", "https://example.org/b"), 0);
    // A reading ended by the worker stopping keeps the count it found.
    await records.end("general:1", "https://example.org/b", 3);
    assert.equal(await records.begin("general:1", "https://example.org/b"), 3);
    await records.end("general:1", "https://example.org/b");
    assert.equal(await records.begin("general:1", "https://example.org/b"), 0);
    // An id that is no plain file name is not recorded, and never counted.
    assert.equal(await records.begin("../escape", "https://example.org/c"), 0);
    assert.equal(await records.begin("../escape", "https://example.org/c"), 0);
    assert.deepEqual([...Deno.readDirSync(join(dir, "state"))].map((e) => e.name), ["general:1"]);
    assert.equal(Deno.statSync(join(dir, "state", "general:1")).mode! & 0o777, 0o600);
    // A file cut short (a full disk) counts as no reading.
    Deno.writeTextFileSync(join(dir, "state", "general:1"), '{"count":');
    assert.equal(await records.begin("general:1", "https://example.org/b"), 0);
  });
});

Deno.test("the reader's state directory: systemd's, else under HOME", () => {
  const env = (vars: Record<string, string>) => (name: string) => vars[name];
  assert.equal(
    defaultStateDir(env({ STATE_DIRECTORY: "/var/lib/relay-reader:/x", HOME: "/h" })),
    "/var/lib/relay-reader",
  );
  assert.equal(defaultStateDir(env({ HOME: "/h" })), "/h/.local/state/relay/reader");
  assert.equal(defaultStateDir(env({ STATE_DIRECTORY: "", HOME: "" })), undefined);
});

/**
 * `relay work` with real processes (docs/cli/work.md, "relay work in detail"): a command that cannot start
 * stops the worker at once with exit 1 and the item stays in its queue; a failing command
 * runs at most `--attempts` times, with doubling waits, and then the item is left for its
 * lease to return.
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

const KEY = "work-test-key-0123456789";

/** Starts a relay in `dir` and returns what the tests need of it. */
async function relayIn(dir: string) {
  const relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
  const call = (path: string) => fetch(`${relay.url}${path}`, { headers: { "x-auth-key": KEY } });
  const submit = async (text: string, queue = "general") =>
    assert.equal((await runCli(["submit", "--queue", queue, text], { env })).code, 0);
  return { relay, env, call, submit };
}

/** Waits for a spawned worker to exit; fails (and kills it) if it keeps running. */
async function exited(worker: ReturnType<typeof spawnRelay>): Promise<Deno.CommandStatus> {
  let status: Deno.CommandStatus | undefined;
  worker.done.then((s) => status = s);
  try {
    await eventually(() => status !== undefined, "the worker to stop by itself");
  } finally {
    if (status === undefined) worker.child.kill("SIGKILL");
  }
  return (await worker.done);
}

Deno.test("relay work stops at once with exit 1 when its command cannot start, and the item stays in its queue", async (t) => {
  await withTempDir(async (dir) => {
    const { relay, env, call, submit } = await relayIn(join(dir, "data"));
    await using _ = relay;
    const notExecutable = join(dir, "script.sh");
    await Deno.writeTextFile(notExecutable, "#!/bin/sh\ncat\n", { mode: 0o644 });
    const cases: Array<[string, string[], RegExp]> = [
      ["not found", [join(dir, "no-such-program")], /no such program/],
      ["not executable", [notExecutable], /not executable/],
    ];
    for (const [name, command, reason] of cases) {
      await t.step(name, async () => {
        await submit(`item for ${name}`);
        const worker = spawnRelay(
          ["work", "--queue", "general", "--lease", "1s", "--", ...command],
          { env },
        );
        const status = await exited(worker);
        assert.equal(status.code, 1, worker.stderr.join("\n"));
        const last = worker.stderr.at(-1)!;
        assert.match(last, new RegExp(`^relay: cannot run "${command[0]}": `));
        assert.match(last, reason);
        assert.match(last, /; stopped: item general:\d+ stays on "general" and the relay hands it/);
        // Not acknowledged: still in its queue, and handed out again once the lease ends.
        assert.equal((await getStats(call)).queues.general.depth, 1);
        let left: string[] = [];
        await eventually(async () => {
          const out = await runCli(["pull", "--json", "--queue", "general"], { env });
          left = JSON.parse(out.stdout);
          return left.length > 0;
        }, "the item back after its lease");
        assert.deepEqual(left, [`item for ${name}`]);
      });
    }
    await relay.stop();
  });
});

Deno.test("relay work runs a failing command --attempts times with doubling --backoff, then leaves the item to its lease", async () => {
  await withTempDir(async (dir) => {
    const { relay, env, call, submit } = await relayIn(join(dir, "data"));
    await using _ = relay;
    const runs = join(dir, "runs");
    await submit("always fails");
    const worker = spawnRelay(
      [
        "work",
        "--queue",
        "general",
        "--attempts",
        "3",
        "--backoff",
        "50ms",
        "--lease",
        "1h",
        "--",
        "sh",
        "-c",
        `echo run >> ${runs}; exit 7`,
      ],
      { env },
    );
    await eventually(
      () => worker.stderr.some((line) => line.includes("all 3 attempts failed")),
      "the worker to give up",
    );
    worker.child.kill("SIGTERM");
    assert.equal((await worker.done).code, 0);
    assert.equal((await Deno.readTextFile(runs)).split("\n").filter((l) => l).length, 3);
    const tries = worker.stderr.filter((line) => /exited with code 7/.test(line));
    assert.match(tries[0]!, /\(attempt 1 of 3\); trying again in 50 ms$/);
    assert.match(tries[1]!, /\(attempt 2 of 3\); trying again in 100 ms$/);
    assert.match(
      tries[2]!,
      /for item general:\d+: all 3 attempts failed; it stays on "general" and the relay hands it out again when its lease ends \(at most 3600 s\)$/,
    );
    assert.equal(tries.length, 3);
    assert.match(worker.stderr.at(-1)!, /^relay: stopped after 0 done and 1 given up on$/);
    // Left under its lease, not acknowledged and not put back as a copy.
    const stats = (await getStats(call)).queues.general;
    assert.deepEqual([stats.depth, stats.delivered], [1, 0]);
    await relay.stop();
  });
});

Deno.test("relay work retries a command that fails once, then pushes its output and acknowledges the item", async () => {
  await withTempDir(async (dir) => {
    const { relay, env, call, submit } = await relayIn(join(dir, "data"));
    await using _ = relay;
    const marker = join(dir, "failed-once");
    await submit("flaky");
    const script = `[ -e ${marker} ] || { touch ${marker}; exit 1; }; tr a-z A-Z`;
    const worker = spawnRelay(
      ["work", "--queue", "general", "--backoff", "10ms", "--", "sh", "-c", script],
      { env },
    );
    await eventually(
      async () => (await runCli(["results", "--json"], { env })).stdout.includes("FLAKY"),
      "the result after the second attempt",
    );
    worker.child.kill("SIGTERM");
    assert.equal((await worker.done).code, 0);
    assert.ok(
      worker.stderr.some((line) => /\(attempt 1 of 3\); trying again in 10 ms$/.test(line)),
    );
    assert.match(worker.stderr.at(-1)!, /^relay: stopped after 1 done and 0 given up on$/);
    const stats = (await getStats(call)).queues.general;
    assert.deepEqual([stats.depth, stats.delivered], [0, 1]);
    await relay.stop();
  });
});

Deno.test("relay work counts output that is not UTF-8 as a failed run and pushes no U+FFFD", async () => {
  await withTempDir(async (dir) => {
    const { relay, env, call, submit } = await relayIn(join(dir, "data"));
    await using _ = relay;
    await submit("latin-1 output");
    // "café" in Latin-1: the byte 0xE9 is not UTF-8.
    const worker = spawnRelay(
      ["work", "--queue", "general", "--attempts", "1", "--", "printf", "caf\\351"],
      { env },
    );
    await eventually(
      () => worker.stderr.some((line) => line.includes("the only attempt failed")),
      "the worker to give up",
    );
    worker.child.kill("SIGTERM");
    assert.equal((await worker.done).code, 0);
    assert.ok(
      worker.stderr.some((line) =>
        /^relay: printf printed output that is not UTF-8 \(convert it, e\.g\. with iconv\) for item general:\d+: the only attempt failed/
          .test(line)
      ),
      worker.stderr.join("\n"),
    );
    const results = JSON.parse((await runCli(["results", "--json"], { env })).stdout);
    assert.deepEqual(results.items, []);
    const stats = (await getStats(call)).queues.general;
    assert.deepEqual([stats.depth, stats.delivered], [1, 0]);
    await relay.stop();
  });
});

Deno.test("relay work refuses bad --attempts and --backoff values with exit 2", async () => {
  for (
    const [args, pattern] of [
      [["--attempts", "0"], /invalid --attempts "0": must be a whole number from 1 to 100/],
      [["--attempts", "x"], /invalid --attempts "x"/],
      [["--backoff", "soon"], /invalid --backoff "soon"/],
    ] as const
  ) {
    const out = await runCli(["work", "--queue", "qa", ...args, "--", "cat"], {
      env: { RELAY_API_KEY: KEY },
    });
    assert.equal(out.code, 2, out.stderr);
    assert.match(out.stderr, pattern);
  }
});

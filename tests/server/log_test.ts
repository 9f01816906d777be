import assert from "node:assert/strict";
import { LOG_LEVELS } from "../../src/constants.ts";
import { BatchedLog, Logger, type LogOutput, logSafe } from "../../src/server/log.ts";

const ENTRY = {
  method: "GET",
  path: "/peek?key=REDACTED",
  status: 200,
  durationMs: 1.26,
  bytes: 345,
  client: "192.168.1.20",
};

Deno.test("Logger writes each level and the ones after it, access lines at info", () => {
  const shown: Record<string, string[]> = {};
  for (const level of LOG_LEVELS) {
    const lines: string[] = [];
    const logger = new Logger({ level, write: (line) => lines.push(line) });
    for (const at of LOG_LEVELS) logger[at](`${at} message`);
    logger.access(ENTRY);
    shown[level] = lines.map((line) => line.split(" ")[0]!.replace(/^\S+Z$/, "access"));
  }
  assert.deepEqual(shown, {
    debug: ["debug", "info", "warn", "error", "access"],
    info: ["info", "warn", "error", "access"],
    warn: ["warn", "error"],
    error: ["error"],
  });
});

Deno.test("Logger text lines: a message as it is, an access line with client, bytes and ms", () => {
  const lines: string[] = [];
  const logger = new Logger({ write: (line) => lines.push(line) });
  logger.info("relay listening on http://0.0.0.0:8787");
  logger.access(ENTRY);
  logger.access({ ...ENTRY, bytes: undefined, client: undefined });
  assert.equal(lines[0], "relay listening on http://0.0.0.0:8787");
  assert.match(lines[1]!, /^\S+Z 192\.168\.1\.20 GET \/peek\?key=REDACTED 200 345 1\.3ms$/);
  assert.match(lines[2]!, /^\S+Z - GET \/peek\?key=REDACTED 200 - 1\.3ms$/);
});

Deno.test("Logger JSON lines have time, level and msg; errors go to their own writer with the cause", () => {
  const out: string[] = [];
  const err: string[] = [];
  const logger = new Logger({
    format: "json",
    level: "debug",
    write: (line) => out.push(line),
    writeError: (line) => err.push(line),
  });
  logger.warn("relay: warning");
  logger.access({ ...ENTRY, bytes: undefined, client: undefined });
  logger.error("relay: unexpected error", new Error("boom"));
  const [warn, access] = out.map((line) => JSON.parse(line));
  assert.deepEqual(Object.keys(warn), ["time", "level", "msg"]);
  assert.equal(warn.level, "warn");
  assert.equal(warn.msg, "relay: warning");
  assert.deepEqual({ ...access, time: "" }, {
    time: "",
    level: "info",
    msg: "GET /peek?key=REDACTED 200",
    method: "GET",
    path: "/peek?key=REDACTED",
    status: 200,
    duration_ms: 1.3,
    bytes: null,
    client: null,
  });
  assert.equal(err.length, 1);
  const error = JSON.parse(err[0]!);
  assert.equal(error.level, "error");
  assert.equal(error.msg, "relay: unexpected error");
  assert.match(error.error, /^Error: boom\n\s+at /);
});

Deno.test("logSafe() escapes control, bidirectional and zero-width characters and cuts long text", () => {
  assert.equal(
    logSafe("/a\u202Eb c\u001b[1m\\\u0085\u2028\u200B\ud800é中", 100),
    "/a\\u{202e}b\\x20c\\x1b[1m\\\\\\x85\\u{2028}\\u{200b}\\u{d800}é中",
  );
  assert.equal(logSafe("x".repeat(30), 10), `${"x".repeat(10)}…(+20)`);
});

Deno.test("Logger access lines escape the method and path in both formats and cut a long path", () => {
  for (const format of ["text", "json"] as const) {
    const lines: string[] = [];
    const logger = new Logger({ format, write: (line) => lines.push(line) });
    logger.access({ ...ENTRY, method: "GE\u0007T", path: `/x\u202Ey\n${"z".repeat(5000)}` });
    const [line] = lines;
    // deno-lint-ignore no-control-regex
    assert.ok(!/[\u0000-\u001f\u202e]/.test(line!), line!);
    assert.ok(line!.length < 2400, `${line!.length} characters`);
    const path = format === "json" ? JSON.parse(line!).path : line!.split(" ")[3];
    assert.match(path, /^\/x\\u\{202e\}y\\x0az{1000,}…\(\+\d+\)$/);
  }
});

/** A writer that keeps what it is given, as standard output would take it. */
function collector(): {
  out: { write(p: Uint8Array): Promise<number> };
  text(): string;
  writes: number;
} {
  const chunks: Uint8Array[] = [];
  const sink = {
    writes: 0,
    out: {
      write(p: Uint8Array): Promise<number> {
        sink.writes++;
        chunks.push(p.slice());
        return Promise.resolve(p.length);
      },
    },
    text: () => new TextDecoder().decode(new Uint8Array(chunks.flatMap((c) => [...c]))),
  };
  return sink;
}

Deno.test("BatchedLog hands 64 KiB of lines to its writer at once, in order, without waiting for a timer", async () => {
  const sink = collector();
  const log = new BatchedLog(sink.out);
  const lines = Array.from({ length: 700 }, (_, i) => `line ${i} ${"x".repeat(100)}`);
  for (const line of lines) log.line(line); // 700 × ~110 bytes: over 64 KiB
  // A few turns of the microtask queue, no timer: the batch is already on its way.
  for (let i = 0; i < 5; i++) await Promise.resolve();
  assert.ok(sink.writes >= 1, "the full batch waited for a timer");
  log.line("last");
  await log.flush();
  assert.equal(sink.text(), [...lines, "last"].join("\n") + "\n");
});

Deno.test("BatchedLog writes a short batch once it is flushed, each line once", async () => {
  const sink = collector();
  const log = new BatchedLog(sink.out);
  log.line("a");
  log.line("b");
  assert.equal(sink.writes, 0);
  await log.flush();
  await log.flush();
  assert.equal(sink.text(), "a\nb\n");
  assert.equal(sink.writes, 1);
});

/**
 * A real pipe into `cat`, whose own output is not read until `drain()`: once the pipes are
 * full, every write waits, as on a stalled journal or a paused terminal.
 */
function stalledPipe(): { out: LogOutput; release(): void; close(): Promise<string> } {
  const child = new Deno.Command("cat", { stdin: "piped", stdout: "piped" }).spawn();
  const writer = child.stdin.getWriter();
  let text: Promise<string> | undefined;
  const release = () => void (text ??= new Response(child.stdout).text());
  return {
    out: {
      async write(p: Uint8Array): Promise<number> {
        await writer.write(p.slice());
        return p.length;
      },
    },
    release,
    async close(): Promise<string> {
      release();
      await writer.close();
      await child.status;
      return await text!;
    },
  };
}

Deno.test("BatchedLog holds at most its bound while the output takes nothing, then reports what it dropped", async () => {
  const pipe = stalledPipe();
  const max = 64 * 1024;
  const log = new BatchedLog(pipe.out, { maxWaitingBytes: max, notice: (n) => `dropped ${n}` });
  const lines = Array.from({ length: 40_000 }, (_, i) => `line ${i} ${"x".repeat(90)}`);
  let most = 0;
  for (const [i, line] of lines.entries()) {
    log.line(line);
    most = Math.max(most, log.waitingBytes);
    // Let the writes start, as requests arriving over time would.
    if (i % 500 === 0) await new Promise((r) => setTimeout(r, 0));
  }
  // 4 MB sent against the pipes' few hundred KiB: the rest was dropped, not held.
  assert.ok(most <= max, `held ${most} bytes`);
  assert.ok(log.droppedLines > 30_000, `dropped only ${log.droppedLines}`);
  // The output still takes nothing: a bounded flush returns all the same.
  await log.flush(50);
  // Once it takes lines again, the lines held and a notice of the rest are written.
  pipe.release();
  await log.flush();
  assert.equal(log.waitingBytes, 0);
  log.line("after");
  await log.flush();
  const out = (await pipe.close()).trimEnd().split("\n");
  // Every line sent is written once, in order, or counted by a notice (the pipes took some
  // lines now and then, so there may be several notices).
  const notices = out.filter((l) => l.startsWith("dropped "));
  const written = out.filter((l) => !l.startsWith("dropped "));
  assert.ok(notices.length >= 1);
  assert.equal(
    notices.reduce((n, l) => n + Number(l.slice("dropped ".length)), 0),
    log.droppedLines,
  );
  assert.equal(out.at(-1), "after");
  assert.equal(written.length - 1 + log.droppedLines, lines.length);
  const order = written.slice(0, -1).map((l) => lines.indexOf(l));
  assert.ok(order.every((at, i) => at >= 0 && (i === 0 || at > order[i - 1]!)), "out of order");
  assert.equal(order[0], 0);
});

Deno.test("BatchedLog counts the lines of a failed write, and of one that takes no bytes, in the next notice", async () => {
  // An error, then a write that takes no bytes (it would otherwise loop forever), then all.
  const output = scripted(["fail", 0]);
  const log = new BatchedLog(output.out, { notice: (n) => `dropped ${n}` });
  log.line("a");
  log.line("b");
  await log.flush();
  assert.equal(log.droppedLines, 2);
  assert.equal(log.waitingBytes, 0);
  log.lineNow("c");
  await log.flush();
  assert.equal(log.droppedLines, 3);
  log.lineNow("d");
  await log.flush();
  assert.equal(output.text(), "dropped 3\nd\n");
  assert.equal(log.droppedLines, 3);
});

Deno.test("BatchedLog keeps what a failing write wrote whole, counts the rest, and starts the next write on a new line", async () => {
  const output = scripted([4, "fail"]); // "ab\nc", then an error
  const log = new BatchedLog(output.out, { notice: (n) => `dropped ${n}` });
  for (const line of ["ab", "cd", "ef"]) log.line(line);
  await log.flush();
  assert.equal(log.droppedLines, 2); // "cd" (cut) and "ef"; "ab" was written whole
  log.lineNow("gh");
  await log.flush();
  assert.equal(output.text(), "ab\nc\ndropped 2\ngh\n");
});

Deno.test("BatchedLog writes its own notice when the given one throws, and goes on", async () => {
  const sink = collector();
  let fail = true;
  const log = new BatchedLog(sink.out, {
    maxWaitingBytes: 4,
    notice: (n) => {
      if (fail) throw new Error("no notice");
      return `dropped ${n}`;
    },
  });
  log.line("abc"); // 4 bytes with its newline: the bound
  log.line("d"); // dropped
  await log.flush();
  log.line("e");
  await log.flush();
  fail = false;
  log.line("f");
  log.line("g"); // with "f", the bound
  log.line("x"); // dropped
  await log.flush();
  log.line("h");
  await log.flush();
  // A notice goes first in the batch that follows the drops.
  assert.equal(
    sink.text(),
    "relay: warning: 1 log line(s) dropped: the output was not taking them\nabc\ne\n" +
      "dropped 1\nf\ng\nh\n",
  );
  assert.equal(log.droppedLines, 2);
});

/** An output that takes what `answers` say (bytes, or "fail") one write after another, then all. */
function scripted(answers: Array<number | "fail">): { out: LogOutput; text(): string } {
  let text = "";
  return {
    out: {
      write(p: Uint8Array): Promise<number> {
        const answer = answers.shift() ?? p.length;
        if (answer === "fail") return Promise.reject(new Error("broken pipe"));
        text += new TextDecoder().decode(p.subarray(0, answer));
        return Promise.resolve(answer);
      },
    },
    text: () => text,
  };
}

Deno.test("BatchedLog counts an entry of several lines (an error's stack) cut by a failing write as one line lost", async () => {
  const output = scripted([12, "fail"]); // "e: Error\n  a", then an error
  const log = new BatchedLog(output.out, { notice: (n) => `dropped ${n}` });
  log.line("e: Error\n  at a\n  at b");
  log.line("next");
  await log.flush();
  assert.equal(log.droppedLines, 2);
  log.lineNow("z");
  await log.flush();
  assert.equal(output.text(), "e: Error\n  a\ndropped 2\nz\n");
});

Deno.test("BatchedLog counts an entry written but for its newline as written, and ends its line first", async () => {
  const output = scripted([5, "fail"]); // "ab\ncd" of "ab\ncd\n", then an error
  const log = new BatchedLog(output.out, { notice: (n) => `dropped ${n}` });
  log.line("ab");
  log.line("cd");
  await log.flush();
  assert.equal(log.droppedLines, 0);
  log.lineNow("ef");
  await log.flush();
  assert.equal(output.text(), "ab\ncd\nef\n");
});

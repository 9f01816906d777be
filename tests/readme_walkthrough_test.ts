/**
 * README.md's walkthrough, run for real against a fresh clone: its commands are read from the
 * README's console blocks, the relay starts as `deno task start` runs it with the walkthrough's
 * `--db` in a scratch directory, and afterwards the clone holds nothing it did not hold before,
 * not even ignored files, while the scratch directory holds the relay's data.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  eventually,
  relayCommand,
  ROOT,
  runRelay,
  startRelayProcess,
  withTempDir,
} from "./_helpers.ts";

const README = Deno.readTextFileSync(`${ROOT}README.md`);

/** Every `$ ` command line of the README's console blocks, without the prompt. */
function consoleCommands(): string[] {
  const blocks = [...README.matchAll(/```console\n([\s\S]*?)```/g)].map((m) => m[1]!);
  return blocks.flatMap((block) =>
    block.split("\n").filter((line) => line.startsWith("$ ")).map((line) => line.slice(2))
  );
}

/** The one README command that starts with `prefix`. */
function command(prefix: string): string {
  const found = consoleCommands().filter((line) => line.startsWith(prefix));
  assert.equal(found.length, 1, `README shows one command starting with ${prefix}: ${found}`);
  return found[0]!;
}

/**
 * The arguments of a `task relay …` or `task start …` line after the task name, with `"$W/…"`
 * made a path in `w` and the page's `127.0.0.1:8000` made `page`.
 */
function taskArgs(line: string, w: string, page: string): string[] {
  return line.replace(/^npx -y deno@2\.9\.5 task (start|relay)\s*/, "").split(/\s+/)
    .filter((word) => word !== "" && word !== "|" && !["tail", "-n", "1"].includes(word))
    .map((word) => word.replace(/^"\$W\/(.*)"$/, `${w}/$1`).replace("127.0.0.1:8000", page));
}

/** The tomatoes page the README saves with a here-document. */
function tomatoesPage(): string {
  const match = /cat > tomatoes\.html <<'EOF'\n([\s\S]*?)\nEOF\n/.exec(README);
  assert.ok(match, "README saves tomatoes.html with a here-document");
  return `${match[1]}\n`;
}

Deno.test("README's walkthrough keeps its data in one scratch directory", () => {
  assert.equal(command("W=$(mktemp -d)"), "W=$(mktemp -d); echo $W");
  assert.equal(
    command("npx -y deno@2.9.5 task start"),
    'npx -y deno@2.9.5 task start --db "$W/relay.kv"',
  );
  assert.match(command("W=/tmp/tmp.Hh3kA1; KEY"), /KEY=\$\(cat "\$W\/api-key"\)/);
  for (const client of ["work", "results"]) {
    assert.match(command(`npx -y deno@2.9.5 task relay ${client}`), / --db "\$W\/relay\.kv"/);
  }
  assert.ok(!/cat data\/api-key/.test(README), "the walkthrough reads the key from $W");
});

Deno.test("README's walkthrough, run in a fresh clone, leaves nothing in the repository", async () => {
  await withTempDir(async (dir) => {
    const clone = `${dir}/clone`;
    const cloned = await new Deno.Command("git", {
      args: ["clone", "--quiet", ROOT, clone],
      stdout: "null",
      stderr: "piped",
    }).output();
    assert.ok(cloned.success, new TextDecoder().decode(cloned.stderr));
    const w = `${dir}/w`;
    await Deno.mkdir(w);

    // The task's own arguments (`serve`), then the README's, then an address a test may use.
    const start = taskArgs(command("npx -y deno@2.9.5 task start"), w, "");
    assert.deepEqual(start, ["--db", `${w}/relay.kv`]);
    await using relay = await startRelayProcess(w, {
      root: `${clone}/`,
      cwd: clone,
      entry: { script: "main.ts", args: [] }, // as users run it
    });
    // What the README shows the relay printing at start, with this scratch directory.
    const shownStart = /\$ npx -y deno@2\.9\.5 task start [^\n]*\n([\s\S]*?)\nrelay listening on /
      .exec(README)?.[1];
    assert.ok(shownStart, "README shows the relay's start lines");
    for (const line of shownStart.split("\n")) {
      const expected = line.replaceAll("/tmp/tmp.Hh3kA1", w);
      assert.ok(relay.stdout.includes(expected), `${expected}\n${relay.stdout.join("\n")}`);
    }
    const key = (await Deno.readTextFile(`${w}/api-key`)).trim();
    const R = relay.url;
    const call = (path: string, init: RequestInit = {}) =>
      fetch(`${R}${path}`, { ...init, headers: { "X-Auth-Key": key, ...init.headers } });
    const json = { "Content-Type": "application/json" };
    const text = async (res: Promise<Response>) => await (await res).text();

    assert.equal(await text(fetch(`${R}/health`)).then((t) => JSON.parse(t).ok), true);
    const qa = "https://stackoverflow.com/questions/11227809";
    assert.equal(await text(call("/submit", { method: "POST", body: qa })), "OK (qa)");
    assert.equal(await text(call("/submit", { method: "POST", body: qa })), "OK (duplicate)");
    const note = JSON.stringify({ content: "Remember to water the plants" });
    assert.equal(
      await text(call("/submit", { method: "POST", headers: json, body: note })),
      "OK (general)",
    );
    const article = JSON.stringify({ url: "https://example.com/long-read", queue: "article" });
    assert.equal(
      await text(call("/submit", { method: "POST", headers: json, body: article })),
      "OK (article)",
    );
    const peek = JSON.parse(await text(fetch(`${R}/peek?key=${key}&queue=article`)));
    assert.equal(peek.total, 1);
    assert.deepEqual(JSON.parse(await text(call("/pull?queue=qa"))), [qa]);
    const empty = await call("/pull?queue=qa");
    await empty.body?.cancel();
    assert.equal(empty.status, 204);
    assert.deepEqual(JSON.parse(await text(call("/pull"))), ["https://example.com/long-read"]);
    assert.equal(
      await text(call("/push", { method: "POST", body: "# Summary: why SQLite WAL needs fsync" })),
      "OK",
    );
    assert.equal(JSON.parse(await text(call("/results"))).items.length, 1);
    const publish = JSON.stringify({
      title: "Why WAL needs fsync",
      content: "A short plain summary.",
      content_md: "# Why WAL needs fsync\n\nA *short* summary.",
      tags: "sqlite,durability",
      targets: ["notes", "blog", "nas"],
      transform: "read",
    });
    const published = JSON.parse(
      await text(call("/publish", { method: "POST", headers: json, body: publish })),
    );
    assert.equal(published.status, "ok", JSON.stringify(published));

    // The page, saved in the scratch directory and served from there.
    await Deno.writeTextFile(`${w}/tomatoes.html`, tomatoesPage());
    await using server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      () =>
        new Response(Deno.readTextFileSync(`${w}/tomatoes.html`), {
          headers: { "content-type": "text/html" },
        }),
    );
    const page = `127.0.0.1:${server.addr.port}`;
    assert.equal(
      await text(call("/submit", { method: "POST", body: `http://${page}/tomatoes` })),
      "OK (general)",
    );

    // The client finds the key and the relay's address beside --db, as the README runs it
    // (the relay here is not on the README's default port).
    const workArgs = taskArgs(command("npx -y deno@2.9.5 task relay work"), w, page);
    const work = relayCommand(workArgs, {
      root: `${clone}/`,
      entry: "main.ts",
      cwd: clone,
    }, "null").spawn();
    const resultsArgs = taskArgs(command("npx -y deno@2.9.5 task relay results"), w, page);
    assert.deepEqual(resultsArgs, ["results", "--db", `${w}/relay.kv`]);
    let shown = "";
    await eventually(
      async () => {
        const out = await runRelay(resultsArgs, {
          root: `${clone}/`,
          cwd: clone,
        });
        shown = out.stdout + out.stderr;
        return out.stdout.includes("# Tending tomatoes");
      },
      "the reader's result",
      120_000,
    );
    assert.match(shown, /Roma \| 75/);
    work.kill("SIGTERM");
    const worked = await work.output();
    const workErr = new TextDecoder().decode(worked.stderr) +
      new TextDecoder().decode(worked.stdout);
    // What the README shows the reader printing, line for line, with this page's address.
    const shownWork = /task relay work [^\n]*\n([\s\S]*?)\n\$ /.exec(README)?.[1] ?? "";
    const printed = workErr.split("\n");
    for (const line of shownWork.split("\n").filter((l) => l !== "^C")) {
      assert.ok(printed.includes(line.replaceAll("127.0.0.1:8000", page)), `${line}\n${workErr}`);
    }
    assert.match(shownWork, /stopped after 2 done and 0 given up on/);
    await relay.stop();

    const status = await new Deno.Command("git", {
      args: ["-C", clone, "status", "--porcelain", "--ignored"],
      stdout: "piped",
    }).output();
    assert.equal(new TextDecoder().decode(status.stdout), "");
    const made = [...Deno.readDirSync(w)].map((e) => e.name);
    for (
      const name of ["relay.kv", "relay.kv.address", "api-key", "notes", "blog", "tomatoes.html"]
    ) {
      assert.ok(made.includes(name), `${name} in the scratch directory: ${made}`);
    }
  });
});

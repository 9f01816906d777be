/**
 * The optional test groups on a machine without their Debian packages: real groups run by a
 * real `deno test` whose `PATH` holds none of the programs. Each group is one ignored line
 * naming its package and the run passes; with `RELAY_REQUIRE_ALL=1` (set by CI) the same
 * absence fails the run.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ROOT, withTempDir } from "./_helpers.ts";
import { PROGRAMS, testGroup, which } from "./_optional.ts";

/** Two groups whose every test needs a browser: nothing else of theirs runs without it. */
const GROUPS = ["tests/extension/firefox_test.ts", "tests/builtin/webapp_test.ts"];

/** Runs the groups with `PATH` set to the empty directory `bin`; returns the exit and output. */
async function runWithout(
  bin: string,
  extra: Record<string, string>,
): Promise<{ success: boolean; output: string }> {
  const env: Record<string, string> = { ...Deno.env.toObject(), PATH: bin, ...extra };
  if (!("RELAY_REQUIRE_ALL" in extra)) delete env.RELAY_REQUIRE_ALL;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["test", "-A", "--no-check", "--config", "tests/deno.json", ...GROUPS],
    cwd: ROOT,
    env,
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  // deno-lint-ignore no-control-regex
  return { success: out.success, output: text.replace(/\x1b\[[0-9;]*m/g, "") };
}

Deno.test("which() finds a program on PATH and not elsewhere", async () => {
  await withTempDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/tool`, "#!/bin/sh\n");
    await Deno.chmod(`${dir}/tool`, 0o755);
    await Deno.writeTextFile(`${dir}/plain`, "not executable");
    const saved = Deno.env.get("PATH") ?? "";
    try {
      Deno.env.set("PATH", `/no/such/dir::${dir}`);
      assert.equal(which("tool"), `${dir}/tool`);
      assert.equal(which("plain"), undefined);
      assert.equal(which(PROGRAMS.ffprobe.program), undefined);
      assert.equal(testGroup("a group", { program: "tool", debian: "tool" }), Deno.test);
    } finally {
      Deno.env.set("PATH", saved);
    }
  });
});

Deno.test("without their packages, each group is one ignored line naming it; CI fails instead", async () => {
  await withTempDir(async (bin) => {
    const plain = await runWithout(bin, {});
    assert.ok(plain.success, plain.output);
    const skipped = plain.output.split("\n").filter((line) => line.includes("skipped"));
    assert.deepEqual(skipped.map((line) => line.replace(/ \.\.\. ignored.*/, "")), [
      "the extension in Firefox: skipped, firefox-esr not found; " +
      "Debian's firefox-esr would run it (apt-get install firefox-esr)",
      "the Library screen in Chromium: skipped, chromium not found; " +
      "Debian's chromium would run it (apt-get install chromium)",
    ]);
    assert.match(plain.output, /ok \| 0 passed \| 0 failed \| 2 ignored/);

    const required = await runWithout(bin, { RELAY_REQUIRE_ALL: "1" });
    assert.equal(required.success, false, required.output);
    assert.match(required.output, /0 passed \| 2 failed/);
    assert.match(required.output, /RELAY_REQUIRE_ALL=1 and firefox-esr not found: apt-get install/);
  });
});

/**
 * The tasks of deno.json as a person runs them: `deno task relay …` prints no warning about
 * experimental permission sets; the run and compile tasks grant exactly the permission set
 * `relay` (which the tests' relay processes use); and `deno task start` on an empty Deno
 * cache downloads only the npm packages the relay needs at run time, none of the tests'.
 *
 * Why two configurations: `deno task` first caches every npm package of the lockfile it
 * finds (Deno 2.9), whatever the task runs. So deno.json and deno.lock hold only the relay's
 * run-time packages, and tests/deno.json (with tests/deno.lock) adds the tests' own; the
 * test and check tasks use it. The last tests here keep the two in step.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import denoConfig from "../deno.json" with { type: "json" };
import testConfig from "./deno.json" with { type: "json" };
import { childEnv, ROOT, STRESS, withTempDir } from "./_helpers.ts";

/** The tasks that run or build the relay. */
const RELAY_TASKS = ["start", "relay", "compile", "compile:arm64"] as const;

/** npm packages only the tests use: a fresh `deno task start` must not fetch them. */
const TEST_ONLY_PACKAGES = [
  "fast-check",
  "playwright-core",
  "@seriousme/openapi-schema-validator",
  "@types/qrcode",
  "fast-xml-parser",
  "ajv",
];

/** The `--allow-*` flags that grant a permission set of deno.json, sorted. */
function flagsOf(set: Record<string, boolean | readonly string[]>): string[] {
  return Object.entries(set).map(([name, value]) =>
    value === true ? `--allow-${name}` : `--allow-${name}=${(value as string[]).join(",")}`
  ).sort();
}

Deno.test("the relay's run and compile tasks grant exactly the permission set relay, with explicit flags", () => {
  const expected = flagsOf(denoConfig.permissions.relay);
  for (const name of RELAY_TASKS) {
    const task: string = denoConfig.tasks[name];
    const words = task.split(/\s+/);
    assert.ok(
      !words.some((w) => /^(-P|--permission-set)\b/.test(w)),
      `${name}: ${task}`,
    );
    assert.deepEqual(
      words.filter((w) => w.startsWith("--allow-")).sort(),
      expected,
      name,
    );
    assert.ok(!words.some((w) => w === "-A" || w === "--allow-all"), name);
  }
});

Deno.test("deno task relay help prints the help and no warning about experimental permissions", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["task", "relay", "help"],
    cwd: ROOT,
    env: childEnv({ NO_COLOR: "1" }),
    clearEnv: true,
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, stderr);
  assert.match(new TextDecoder().decode(out.stdout), /^relay \d+\.\d+\.\d+: /);
  assert.ok(!/warning|experimental/i.test(stderr), stderr);
  // The environment permission reaches the relay: it reads RELAY_PORT (and refuses it).
  const port = await new Deno.Command(Deno.execPath(), {
    args: ["task", "relay", "serve"],
    cwd: ROOT,
    env: childEnv({ NO_COLOR: "1", RELAY_PORT: "eighty" }),
    clearEnv: true,
  }).output();
  assert.equal(port.code, 2);
  assert.match(
    new TextDecoder().decode(port.stderr),
    /relay: invalid RELAY_PORT "eighty": /,
  );
});

/** The npm packages in a Deno cache directory, e.g. `hono`, `@types/qrcode`. */
function cachedPackages(denoDir: string): string[] {
  const registry = join(denoDir, "npm", "registry.npmjs.org");
  const names: string[] = [];
  for (const entry of Deno.readDirSync(registry)) {
    if (!entry.isDirectory) continue;
    if (!entry.name.startsWith("@")) names.push(entry.name);
    else {
      for (const scoped of Deno.readDirSync(join(registry, entry.name))) {
        names.push(`${entry.name}/${scoped.name}`);
      }
    }
  }
  return names.sort();
}

Deno.test({
  name: "deno task start on an empty Deno cache downloads only the relay's run-time npm packages",
  // Fetches from the npm registry into a fresh cache, as a fresh clone does: 15 s of
  // downloads and unpacking, run with the long runs (`RELAY_STRESS=1`, as CI runs them).
  ignore: !STRESS,
  sanitizeResources: false,
  fn: async () => {
    await withTempDir(async (dir) => {
      const denoDir = join(dir, "deno-dir");
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "task",
          "start",
          "--hostname",
          "127.0.0.1",
          "--port",
          "0",
          "--db",
          `${dir}/relay.kv`,
        ],
        cwd: ROOT,
        env: childEnv({
          DENO_DIR: denoDir,
          NO_COLOR: "1",
          RELAY_API_KEY: "k".repeat(32),
        }),
        clearEnv: true,
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const stderr = new Response(child.stderr).text();
      let seen = "";
      for await (
        const chunk of child.stdout.pipeThrough(new TextDecoderStream())
      ) {
        seen += chunk;
        if (/relay listening on /.test(seen)) break;
      }
      const listening = /relay listening on /.test(seen);
      if (listening) child.kill("SIGTERM");
      const status = await child.status;
      assert.ok(
        listening,
        `the relay did not start (exit ${status.code}):\n${await stderr}`,
      );
      const packages = cachedPackages(denoDir);
      for (const needed of ["hono", "zod", "prom-client"]) {
        assert.ok(
          packages.includes(needed),
          `${needed} in ${packages.join(", ")}`,
        );
      }
      for (const testOnly of TEST_ONLY_PACKAGES) {
        assert.ok(
          !packages.includes(testOnly),
          `${testOnly} was downloaded to start the relay`,
        );
      }
    });
  },
});

Deno.test("tests/deno.json is deno.json plus the tests' own packages, with the same compiler options", () => {
  for (const [name, specifier] of Object.entries(denoConfig.imports)) {
    assert.equal(
      (testConfig.imports as Record<string, string>)[name],
      specifier,
      name,
    );
  }
  const extra = Object.keys(testConfig.imports).filter((name) => !(name in denoConfig.imports));
  assert.deepEqual(extra.sort(), [...TEST_ONLY_PACKAGES].sort());
  assert.deepEqual(testConfig.compilerOptions, denoConfig.compilerOptions);
  assert.deepEqual(testConfig.unstable, denoConfig.unstable);
  assert.equal(testConfig.fmt.lineWidth, denoConfig.fmt.lineWidth);
  assert.deepEqual(testConfig.lint.rules, denoConfig.lint.rules);
  assert.deepEqual(testConfig.lock, { path: "./deno.lock", frozen: true });
  assert.deepEqual(denoConfig.lock, { frozen: true });
});

Deno.test("tests/deno.lock pins the relay's packages exactly as deno.lock does", async () => {
  const read = async (path: string) => JSON.parse(await Deno.readTextFile(join(ROOT, path)));
  const [main, tests] = [
    await read("deno.lock"),
    await read("tests/deno.lock"),
  ];
  for (const [specifier, version] of Object.entries(main.specifiers)) {
    assert.equal(tests.specifiers[specifier], version, specifier);
  }
  for (const [name, entry] of Object.entries(main.npm)) {
    assert.deepEqual(tests.npm[name], entry, name);
  }
  const testOnly = Object.keys(main.npm).filter((name) =>
    TEST_ONLY_PACKAGES.some((pkg) => name.startsWith(`${pkg}@`))
  );
  assert.deepEqual(testOnly, []);
});

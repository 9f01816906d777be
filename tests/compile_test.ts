/**
 * The compile task: builds the single binary and runs it, when Deno's runtime
 * for compiled programs (denort) is at hand: `DENORT_BIN` set, or the zip Deno caches on
 * the first compile. Our build machines cannot download it, so there the test is skipped
 * and says why.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT } from "./_helpers.ts";

function denortAvailable(): string | undefined {
  const explicit = Deno.env.get("DENORT_BIN");
  if (explicit) return `DENORT_BIN=${explicit}`;
  const home = Deno.env.get("HOME") ?? "";
  const denoDir = Deno.env.get("DENO_DIR") ?? join(home, ".cache", "deno");
  const zip = join(
    denoDir,
    "dl",
    "release",
    `v${Deno.version.deno}`,
    `denort-${Deno.build.target}.zip`,
  );
  try {
    Deno.statSync(zip);
    return zip;
  } catch {
    return undefined;
  }
}

const runtime = denortAvailable();
if (runtime === undefined) {
  console.log(
    `compile_test: skipped: no denort for Deno ${Deno.version.deno} (set DENORT_BIN, or run ` +
      "`deno task compile` once where dl.deno.land can be reached)",
  );
}

Deno.test({
  name: "deno task compile builds a binary that serves under the baked-in permission set",
  ignore: runtime === undefined,
  async fn() {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["task", "compile"],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    const binary = join(ROOT, "dist", `relay-${Deno.build.target}`);
    const version = await new Deno.Command(binary, { args: ["--version"] }).output();
    assert.match(new TextDecoder().decode(version.stdout), /^relay \d+\.\d+\.\d+ \(deno /);
    const dir = await Deno.makeTempDir();
    const child = new Deno.Command(binary, {
      args: ["serve", "--hostname", "127.0.0.1", "--port", "0", "--db", `${dir}/relay.kv`],
      env: { RELAY_API_KEY: "compiled-0123456789" },
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    let url: string | undefined;
    let seen = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      seen += chunk;
      url = /relay listening on (http:\/\/\S+)/.exec(seen)?.[1];
      if (url !== undefined) break;
    }
    assert.ok(url, seen);
    assert.equal((await fetch(`${url}/health`)).status, 200);
    child.kill("SIGTERM");
    assert.equal((await child.status).code, 0);
    await Deno.remove(dir, { recursive: true });
  },
});

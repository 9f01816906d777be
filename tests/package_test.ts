/**
 * The Debian package and the stand-in's launcher (docs/install.md): the launcher runs the
 * relay with exactly the permission flags the compile task bakes into the binary; and
 * deploy/package.sh, given a compiled binary (here: this Deno, a real x86-64 program), writes
 * relay_<version>_amd64.deb with the program, the unit pointed at it, the settings file as a
 * conffile and the maintainer scripts, and refuses a binary built for another architecture.
 * Installing, upgrading and purging the package on a booted Debian is .ci/package-smoke.sh.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import denoConfig from "../deno.json" with { type: "json" };
import { ROOT, withTempDir } from "./_helpers.ts";

/** Whether a program is on PATH. */
function have(program: string): boolean {
  try {
    return new Deno.Command("sh", { args: ["-c", `command -v ${program}`] }).outputSync().success;
  } catch {
    return false;
  }
}

/** The `--allow-*` words of a command line, quotes removed, sorted. */
function allowFlags(text: string): string[] {
  return text.split(/[\s\\]+/).map((w) => w.replace(/^'(.*)'$/, "$1")).filter((w) =>
    w.startsWith("--allow-")
  ).sort();
}

const decoder = new TextDecoder();

Deno.test("the stand-in's launcher grants exactly the compile task's permission flags", async () => {
  const launcher = await Deno.readTextFile(join(ROOT, "deploy", "launcher.sh"));
  const exec = launcher.slice(launcher.indexOf("\nexec "));
  assert.deepEqual(allowFlags(exec), allowFlags(denoConfig.tasks.compile));
  assert.deepEqual(allowFlags(exec), allowFlags(denoConfig.tasks["compile:arm64"]));
  assert.ok(!/\s(-A|--allow-all|-P\S*|--permission-set\S*)\s/.test(exec), exec);
  assert.match(exec, /--no-prompt --cached-only --frozen/);
});

Deno.test("the launcher runs the relay from lib/relay beside its bin folder", async () => {
  await withTempDir(async (dir) => {
    // A stand-in layout whose "deno" prints its arguments and DENO_DIR.
    const lib = join(dir, "usr", "local", "lib", "relay");
    await Deno.mkdir(join(dir, "usr", "local", "bin"), { recursive: true });
    await Deno.mkdir(lib, { recursive: true });
    await Deno.writeTextFile(
      join(lib, "deno"),
      '#!/bin/sh\necho "DENO_DIR=$DENO_DIR"\nfor a in "$@"; do echo "$a"; done\n',
      { mode: 0o755 },
    );
    const bin = join(dir, "usr", "local", "bin", "relay");
    await Deno.copyFile(join(ROOT, "deploy", "launcher.sh"), bin);
    await Deno.chmod(bin, 0o755);
    const out = await new Deno.Command(bin, { args: ["serve", "--port", "9"] }).output();
    assert.equal(out.code, 0, decoder.decode(out.stderr));
    const lines = decoder.decode(out.stdout).trim().split("\n");
    assert.equal(lines[0], `DENO_DIR=${lib}/deno-dir`);
    assert.equal(lines[1], "run");
    assert.deepEqual(lines.slice(-5), [
      `${lib}/app/deno.json`,
      `${lib}/app/main.ts`,
      "serve",
      "--port",
      "9",
    ]);
    assert.ok(lines.includes("--allow-env=RELAY_*,STATE_DIRECTORY,HOME,XDG_CONFIG_HOME"));
  });
});

const canPackage = have("dpkg-deb") && have("readelf") && Deno.build.target.startsWith("x86_64");
if (!canPackage) {
  console.log("package_test: packaging skipped: needs dpkg-deb, readelf and an x86_64 Deno");
}

/** Runs deploy/package.sh with `args`; its exit code and output. */
async function packageScript(args: string[]): Promise<{ code: number; text: string }> {
  const out = await new Deno.Command(join(ROOT, "deploy", "package.sh"), {
    args,
    env: { RELAY_BINARY_AMD64: "", RELAY_BINARY_ARM64: "" },
  }).output();
  return { code: out.code, text: decoder.decode(out.stdout) + decoder.decode(out.stderr) };
}

/** `dpkg-deb ARGS…` output. */
async function dpkgDeb(...args: string[]): Promise<string> {
  const out = await new Deno.Command("dpkg-deb", { args }).output();
  assert.equal(out.code, 0, decoder.decode(out.stderr));
  return decoder.decode(out.stdout);
}

Deno.test({
  name: "deploy/package.sh packages a given binary with the unit, the conffile and the scripts",
  ignore: !canPackage,
  async fn() {
    await withTempDir(async (dir) => {
      const binary = Deno.execPath();
      const run = await packageScript([
        "--arch",
        "amd64",
        "--binary-amd64",
        binary,
        "--out",
        dir,
        "--compression",
        "none",
      ]);
      assert.equal(run.code, 0, run.text);
      const deb = join(dir, `relay_${denoConfig.version}_amd64.deb`);
      assert.match(run.text, /the single binary/);

      const field = (name: string) => dpkgDeb("--field", deb, name).then((v) => v.trim());
      assert.equal(await field("Package"), "relay");
      assert.equal(await field("Version"), denoConfig.version);
      assert.equal(await field("Architecture"), "amd64");
      assert.match(await field("Depends"), /^libc6 \(>= 2\.\d+\), libgcc-s1 \(>= 3\.0\)$/);

      // Contents: path → [mode, size].
      const listing = await dpkgDeb("--contents", deb);
      const files = new Map<string, [string, number]>();
      for (const line of listing.trim().split("\n")) {
        const [mode, owner, size, , , path] = line.split(/\s+/);
        assert.equal(owner, "root/root", line);
        files.set(path!, [mode!, Number(size)]);
      }
      const size = (await Deno.stat(binary)).size;
      assert.deepEqual(files.get("./usr/bin/relay"), ["-rwxr-xr-x", size]);
      assert.deepEqual(files.get("./etc/relay/")?.[0], "drwx------");
      assert.deepEqual(files.get("./etc/relay/env")?.[0], "-rw-------");
      assert.deepEqual(files.get("./lib/systemd/system/relay.service")?.[0], "-rw-r--r--");
      assert.deepEqual(files.get("./lib/systemd/system/relay-reader.service")?.[0], "-rw-r--r--");
      assert.deepEqual(files.get("./etc/relay/reader.env")?.[0], "-rw-------");
      assert.ok(files.has("./usr/share/doc/relay/docs/operations.md"));
      assert.ok(
        files.has("./usr/share/doc/relay/docs/api/basics.md"),
        "the split references' pages",
      );
      assert.ok(![...files.keys()].some((p) => p.startsWith("./usr/lib/relay")), listing);

      const extracted = join(dir, "root");
      await dpkgDeb("--raw-extract", deb, extracted);
      const unit = await Deno.readTextFile(join(extracted, "lib/systemd/system/relay.service"));
      const source = await Deno.readTextFile(join(ROOT, "deploy", "relay.service"));
      assert.equal(unit, source.replaceAll("/usr/local/bin/relay", "/usr/bin/relay"));
      assert.match(unit, /^ExecStart=\/usr\/bin\/relay serve$/m);
      assert.match(unit, /^DynamicUser=yes$/m);
      const reader = await Deno.readTextFile(
        join(extracted, "lib/systemd/system/relay-reader.service"),
      );
      assert.match(
        reader,
        /^ExecStart=\/usr\/bin\/relay work --queue general --extract \$RELAY_READER_ARGS$/m,
      );
      assert.equal(
        await Deno.readTextFile(join(extracted, "DEBIAN/conffiles")),
        "/etc/relay/env\n/etc/relay/reader.env\n",
      );
      for (const script of ["postinst", "prerm", "postrm"]) {
        const path = join(extracted, "DEBIAN", script);
        assert.equal((await Deno.stat(path)).mode! & 0o777, 0o755, script);
        const text = await Deno.readTextFile(path);
        assert.ok(!text.includes("@VERSION@"), script);
        const syntax = await new Deno.Command("sh", { args: ["-n", path] }).output();
        assert.equal(syntax.code, 0, `${script}: ${decoder.decode(syntax.stderr)}`);
      }
      const postinst = await Deno.readTextFile(join(extracted, "DEBIAN/postinst"));
      assert.match(postinst, new RegExp(`relay ${denoConfig.version.replaceAll(".", "\\.")} is`));
      assert.match(postinst, /\/var\/lib\/relay\/api-key/);
      // It may restart a running relay (try-restart), never start one.
      assert.ok(
        !/^\s*(systemctl|deb-systemd-invoke)\b[^\n]*\s(start|restart)\s/m.test(postinst),
        "postinst must not start the relay",
      );
      assert.match(postinst, /^\s*systemctl try-restart "\$unit"/m);
      const postrm = await Deno.readTextFile(join(extracted, "DEBIAN/postrm"));
      assert.match(postrm, /purge\)[\s\S]*rm -rf \/var\/lib\/private\/relay \/var\/lib\/relay/);
      const md5sums = await Deno.readTextFile(join(extracted, "DEBIAN/md5sums"));
      assert.match(md5sums, /^[0-9a-f]{32} {2}usr\/bin\/relay$/m);
    });
  },
});

Deno.test({
  name: "deploy/package.sh refuses a binary built for another architecture",
  ignore: !canPackage,
  async fn() {
    await withTempDir(async (dir) => {
      const run = await packageScript([
        "--arch",
        "arm64",
        "--binary-arm64",
        Deno.execPath(),
        "--out",
        dir,
        "--compression",
        "none",
      ]);
      assert.equal(run.code, 1, run.text);
      assert.match(
        run.text,
        /is not an arm64 program \(its ELF machine: Advanced Micro Devices X86-64\)/,
      );
      assert.deepEqual([...Deno.readDirSync(dir)], []);
    });
  },
});

/** The `Name=value` lines of a unit's section, in order. */
function unitLines(unit: string, from: string, to: string): string[] {
  const part = unit.slice(unit.indexOf(from), unit.indexOf(to));
  return part.split("\n").filter((line) => /^\w+=/.test(line));
}

Deno.test("relay-reader.service runs the reader with the relay's hardening, disabled until enabled", async () => {
  const relay = await Deno.readTextFile(join(ROOT, "deploy", "relay.service"));
  const reader = await Deno.readTextFile(join(ROOT, "deploy", "relay-reader.service"));
  const hardening = unitLines(relay, "# Hardening.", "MemoryMax=");
  assert.ok(hardening.length > 20, "the relay's hardening was found");
  assert.deepEqual(unitLines(reader, "# Hardening.", "MemoryMax="), hardening);
  for (const line of ["DynamicUser=yes", "UMask=0077", "TasksMax=64"]) {
    assert.ok(reader.split("\n").includes(line), line);
  }
  assert.doesNotMatch(reader, /^MemoryDenyWriteExecute=/m);
  assert.match(
    reader,
    /^ExecStart=\/usr\/local\/bin\/relay work --queue general --extract \$RELAY_READER_ARGS$/m,
  );
  assert.match(reader, /^EnvironmentFile=\/etc\/relay\/reader\.env$/m);
  // A folder of its own for its reading records (found through $STATE_DIRECTORY), not the
  // relay's: it cannot touch the relay's database.
  assert.match(reader, /^StateDirectory=relay-reader$/m);
  // The reader's smaller young generation (its peak memory), not the relay's.
  assert.match(reader, /^Environment=DENO_V8_FLAGS=--max-semi-space-size=1$/m);
  assert.doesNotMatch(relay, /DENO_V8_FLAGS/);
  assert.equal(reader.match(/^StateDirectory=/gm)?.length, 1);
  const env = await Deno.readTextFile(join(ROOT, "deploy", "debian", "reader.env"));
  assert.match(env, /--scope consume,push,publish/);
  // The package installs it; the admin enables it (docs/install.md, "The reader").
  const postinst = await Deno.readTextFile(join(ROOT, "deploy", "debian", "postinst"));
  assert.doesNotMatch(postinst, /\b(enable|start)\b[^\n]*relay-reader/);
});

Deno.test("deploy/package.sh answers a wrong option with its usage and exit code 2", async () => {
  const run = await packageScript(["--arch", "i386"]);
  assert.equal(run.code, 2);
  assert.match(run.text, /^usage: deploy\/package\.sh /);
});

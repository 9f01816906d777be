import assert from "node:assert/strict";
import { join } from "node:path";
import {
  createPrivateFile,
  makePrivateDirectory,
  restrictFile,
  writeAtomically,
  writePrivateFile,
} from "../../src/util/files.ts";

/** Permission bits of `path`, as an octal string such as `"600"`. */
function mode(path: string): string {
  return (Deno.statSync(path).mode! & 0o777).toString(8);
}

/** Runs `job` with a fresh temp directory, removed afterwards. */
function inTempDir(job: (dir: string) => void): void {
  const dir = Deno.makeTempDirSync({ prefix: "relay-files-test-" });
  try {
    job(dir);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

/** Runs `job` under `umask`, restoring the test process's umask after. */
function underUmask(umask: number, job: () => void): void {
  const before = Deno.umask(umask);
  try {
    job();
  } finally {
    Deno.umask(before);
  }
}

Deno.test("makePrivateDirectory() creates only the missing directories, each 0700, whatever the umask", () => {
  inTempDir((base) => {
    Deno.chmodSync(base, 0o751);
    for (const umask of [0o000, 0o277]) {
      const leaf = join(base, `u${umask}`, "b", "c");
      underUmask(umask, () => makePrivateDirectory(leaf));
      assert.deepEqual(
        [join(base, `u${umask}`), join(base, `u${umask}`, "b"), leaf].map(mode),
        ["700", "700", "700"],
      );
    }
    assert.equal(mode(base), "751", "an existing parent is not changed");
    Deno.chmodSync(join(base, "u0", "b"), 0o755);
    makePrivateDirectory(join(base, "u0", "b"));
    assert.equal(mode(join(base, "u0", "b")), "755", "an existing directory is not changed");
    Deno.writeTextFileSync(join(base, "file"), "");
    assert.throws(() => makePrivateDirectory(join(base, "file", "sub")));
  });
});

Deno.test("writePrivateFile() writes 0600 whatever the umask, replaces in one step and leaves no temporary file", () => {
  inTempDir((dir) => {
    const path = join(dir, "new", "keys.json");
    underUmask(0o000, () => writePrivateFile(path, "one\n"));
    assert.equal(mode(path), "600");
    assert.equal(mode(join(dir, "new")), "700");
    Deno.chmodSync(path, 0o644);
    underUmask(0o277, () => writePrivateFile(path, "two\n"));
    assert.equal(mode(path), "600");
    assert.equal(Deno.readTextFileSync(path), "two\n");
    assert.deepEqual([...Deno.readDirSync(join(dir, "new"))].map((e) => e.name), ["keys.json"]);
  });
});

Deno.test("writePrivateFile() with createNew creates a missing file once and never replaces one, leaving no temporary file", () => {
  inTempDir((dir) => {
    const path = join(dir, "api-key");
    writePrivateFile(path, new TextEncoder().encode("first\n"), { createNew: true });
    assert.equal(mode(path), "600");
    assert.throws(
      () => writePrivateFile(path, "second\n", { createNew: true }),
      Deno.errors.AlreadyExists,
    );
    assert.equal(Deno.readTextFileSync(path), "first\n");
    assert.equal(Deno.statSync(path).nlink, 1, "the temporary name is gone");
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["api-key"]);
  });
});

Deno.test("writeAtomically() leaves the main thread before its first file operation: nothing is written when the call returns", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-files-test-" });
  try {
    const path = join(dir, "new", "note.md");
    const writing = writeAtomically(path, "text\n");
    // A synchronous writer would have created the folder and the file by now.
    assert.deepEqual([...Deno.readDirSync(dir)], []);
    await writing;
    assert.equal(Deno.readTextFileSync(path), "text\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeAtomically() writes 0600 whatever the umask, replaces in one step, refuses to replace with createNew, and leaves no temporary file", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-files-test-" });
  const before = Deno.umask(0o000);
  try {
    const path = join(dir, "new", "post.json");
    await writeAtomically(path, "one\n");
    assert.equal(mode(path), "600");
    assert.equal(mode(join(dir, "new")), "700");
    Deno.chmodSync(path, 0o644);
    Deno.umask(0o277);
    await writeAtomically(path, new TextEncoder().encode("two\n"));
    assert.equal(mode(path), "600");
    assert.equal(Deno.readTextFileSync(path), "two\n");
    await assert.rejects(
      writeAtomically(path, "three\n", { createNew: true }),
      Deno.errors.AlreadyExists,
    );
    await writeAtomically(join(dir, "new", "counters"), "1\n", { noSync: true });
    assert.equal(Deno.readTextFileSync(path), "two\n");
    assert.deepEqual(
      [...Deno.readDirSync(join(dir, "new"))].map((e) => e.name).sort(),
      ["counters", "post.json"],
    );
  } finally {
    Deno.umask(before);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("createPrivateFile() makes a missing file 0600 and restricts an existing one without touching its contents", () => {
  inTempDir((dir) => {
    const path = join(dir, "relay.kv");
    underUmask(0o000, () => createPrivateFile(path));
    assert.equal(mode(path), "600");
    assert.equal(Deno.statSync(path).size, 0);
    Deno.writeTextFileSync(path, "data");
    Deno.chmodSync(path, 0o664);
    createPrivateFile(path);
    assert.equal(mode(path), "600");
    assert.equal(Deno.readTextFileSync(path), "data");
    restrictFile(join(dir, "missing")); // nothing to do, no error
    restrictFile(dir); // a directory is left alone
    assert.notEqual(mode(dir), "600");
  });
});

Deno.test({
  name:
    "writePrivateFile() run by root keeps the owner of the file it replaces, else takes the directory's",
  ignore: Deno.uid() !== 0,
  fn: () => {
    inTempDir((dir) => {
      const data = join(dir, "data");
      Deno.mkdirSync(data);
      Deno.chownSync(data, 65534, 65534);
      const path = join(data, "keys.json");
      writePrivateFile(path, "new\n");
      assert.deepEqual([Deno.statSync(path).uid, Deno.statSync(path).gid], [65534, 65534]);
      Deno.chownSync(path, 12345, 12346);
      writePrivateFile(path, "replaced\n");
      assert.deepEqual([Deno.statSync(path).uid, Deno.statSync(path).gid], [12345, 12346]);
      assert.equal(mode(path), "600");
    });
  },
});

/**
 * Test groups that need a program from a Debian package the relay itself does not need
 * (Chromium, Firefox ESR, FFmpeg, Info-ZIP). On a machine without it, the group registers one
 * ignored test whose name says which package would run it, and nothing else, so that
 * `deno task test` passes with the two set-up commands alone and says once per group what it
 * left out. CI installs the packages and sets `RELAY_REQUIRE_ALL=1`: then a missing program is
 * one failed test instead, so that a group never goes quiet there.
 *
 * @module
 */

import { delimiter, join } from "node:path";

/** A program a test group runs, and the Debian package that installs it. */
export interface Need {
  /** The program's name, looked up on `PATH` (e.g. `ffprobe`). */
  program: string;
  /** The Debian package that installs it (e.g. `ffmpeg`). */
  debian: string;
}

/** The programs the optional groups run, each with the Debian package that installs it. */
export const PROGRAMS = {
  /** Debian's Chromium, which playwright-core drives; the tests never download a browser. */
  chromium: { program: "chromium", debian: "chromium" },
  /** Debian's Firefox ESR, driven over WebDriver BiDi. */
  firefox: { program: "firefox-esr", debian: "firefox-esr" },
  /** FFmpeg's ffprobe, which reads an MP3's duration the way podcast apps do. */
  ffprobe: { program: "ffprobe", debian: "ffmpeg" },
  /** Info-ZIP's zip, which packs the browser extension. */
  zip: { program: "zip", debian: "zip" },
  /** Info-ZIP's unzip, which lists a packed extension. */
  unzip: { program: "unzip", debian: "unzip" },
} as const satisfies Record<string, Need>;

/**
 * The absolute path of `program` in the first directory of `PATH` that holds it as an
 * executable file, or `undefined` when none does (or `PATH` cannot be read).
 */
export function which(program: string): string | undefined {
  const path = Deno.env.get("PATH") ?? "";
  for (const dir of path.split(delimiter)) {
    if (dir === "") continue;
    const candidate = join(dir, program);
    try {
      const info = Deno.statSync(candidate);
      if (info.isFile && ((info.mode ?? 0o111) & 0o111) !== 0) return candidate;
    } catch {
      // Not in this directory: look in the next.
    }
  }
  return undefined;
}

/** The path of a needed program; throws when it is missing (call it inside a group). */
export function pathOf(need: Need): string {
  const path = which(need.program);
  if (path === undefined) throw new Error(`${need.program} is not on PATH`);
  return path;
}

/** Does nothing: the tests of a group whose programs are missing are not registered. */
const skipped = (() => {}) as unknown as typeof Deno.test;

/**
 * The `Deno.test` of a group of tests named `group` that run the programs `needs`: Deno's own
 * when all of them are on `PATH`. Otherwise one test named after the group and the missing
 * packages is registered instead, ignored (or failing, with `RELAY_REQUIRE_ALL=1`), and the
 * function returned registers nothing.
 */
export function testGroup(group: string, ...needs: Need[]): typeof Deno.test {
  const missing = needs.filter((need) => which(need.program) === undefined);
  if (missing.length === 0) return Deno.test;
  const debian = [...new Set(missing.map((need) => need.debian))].join(" ");
  const programs = missing.map((need) => need.program).join(", ");
  const name = `${group}: skipped, ${programs} not found; ` +
    `Debian's ${debian} would run it (apt-get install ${debian})`;
  const required = Deno.env.get("RELAY_REQUIRE_ALL") === "1";
  Deno.test({
    name,
    ignore: !required,
    fn: () => {
      throw new Error(`RELAY_REQUIRE_ALL=1 and ${programs} not found: apt-get install ${debian}`);
    },
  });
  return skipped;
}

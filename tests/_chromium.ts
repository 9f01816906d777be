/**
 * Debian's Chromium as the browser tests launch it: its path, and the flags it needs on a
 * machine with no network but loopback.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { ROOT } from "./_helpers.ts";
import { PROGRAMS, which } from "./_optional.ts";

/** A phone's screen, CSS pixels: the size the web app's pictures are taken at. */
export const PHONE = { width: 360, height: 740 };

const SCREENSHOTS = `${ROOT}docs/screenshots/`;

// What the pictures' page functions touch of the page's document (they run in the browser).
declare const document: {
  documentElement: { scrollTop: number };
  activeElement: { blur(): void } | null;
};

/**
 * Debian's Chromium (`apt-get install chromium`) as found on `PATH`; the tests never download a
 * browser. Its groups are made with `testGroup(…, PROGRAMS.chromium)`, which skips them without it.
 */
export const CHROMIUM: string = which(PROGRAMS.chromium.program) ?? "/usr/bin/chromium";

/**
 * The flags of every launch: no sandbox (the tests run as root), no GPU, and none of the
 * background calls to Google's hosts (update checks, sync, QUIC probes), which a closed network
 * refuses many at a time.
 */
export const CHROMIUM_ARGS: string[] = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/**
 * Takes the screen's picture, which must not be empty; it is saved in docs/screenshots/ as
 * `<name>.png` only with `RELAY_SCREENSHOTS=1`, so that an ordinary test run leaves the
 * committed pictures alone.
 */
export async function screenshot(page: Page, name: string): Promise<void> {
  await page.evaluate(() => document.activeElement?.blur());
  await page.mouse.move(PHONE.width - 1, PHONE.height - 1);
  await page.evaluate(() => document.documentElement.scrollTop = 0);
  const png = await page.screenshot({ fullPage: true });
  assert.ok(png.byteLength > 0, `the ${name} screen rendered to an empty picture`);
  if (Deno.env.get("RELAY_SCREENSHOTS") !== "1") return;
  await Deno.mkdir(SCREENSHOTS, { recursive: true });
  await Deno.writeFile(`${SCREENSHOTS}${name}.png`, png);
}

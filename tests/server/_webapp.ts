/**
 * Helpers of the web app's browser tests (webapp_test.ts, webapp_results_test.ts,
 * webapp_pwa_test.ts): one Chromium per file, a relay and a fresh browser context per test, the
 * pairing link, and waits on the page.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { KEY, relayCall, type RelayProcess, startRelayProcess, withTempDir } from "../_helpers.ts";
import { CHROMIUM, CHROMIUM_ARGS, PHONE } from "../_chromium.ts";
import { PROGRAMS, testGroup } from "../_optional.ts";

const chromiumGroup = testGroup("web app in Chromium", PROGRAMS.chromium);

/**
 * A LAN name the file's Chromium resolves to 127.0.0.1, for a relay reached over plain http
 * (not a secure context, unlike 127.0.0.1 and localhost). It names no other host, so it
 * changes nothing for the tests that do not use it, and they need no Chromium of their own.
 */
export const LAN_NAME = "relay.lan";

/** The tests registered by {@linkcode browserTest} in this file, and their Chromium while they run. */
const browserSteps: { name: string; fn: () => Promise<void> }[] = [];
let fileBrowser: Browser | undefined;

/**
 * Registers a test that drives the app in Chromium (the others need no browser). A file's such
 * tests run as the steps of one test that launches Chromium once, since a start costs seconds of
 * CPU; {@linkcode withApp} gives each its own browser context (storage, cookies, service
 * workers), so they stay independent, and a step that fails does not stop the next. Without
 * Chromium on `PATH` the group is skipped as {@linkcode testGroup} says.
 */
export function browserTest(name: string, fn: () => Promise<void>): void {
  if (browserSteps.length === 0) {
    chromiumGroup("web app in Chromium", async (t) => {
      fileBrowser = await chromium.launch({
        executablePath: CHROMIUM,
        args: [...CHROMIUM_ARGS, `--host-resolver-rules=MAP ${LAN_NAME} 127.0.0.1`],
      });
      try {
        for (const step of browserSteps) await t.step(step.name, step.fn);
      } finally {
        await fileBrowser.close();
        fileBrowser = undefined;
      }
    });
  }
  browserSteps.push({ name, fn });
}

/** Upper bound for anything the page waits for; a fast machine never gets near it. */
export const WAIT_MS = 20_000;

// The functions given to page.evaluate run in the page. Deno's types have no DOM, and a
// `lib="dom"` reference would change the types of every file `deno task check` reads, so
// this module declares the little of the DOM those functions use (and each test file that
// uses `document` or `navigator` in the page declares them with these types).
/** One element of the page, as the tests' page functions use it. */
export interface PageElement {
  id: string;
  textContent: string | null;
  innerText: string;
  outerHTML: string;
  dataset: Record<string, string | undefined>;
  labels?: { length: number } | null;
  offsetParent: unknown;
  getAttribute(name: string): string | null;
  getBoundingClientRect(): { height: number };
  blur(): void;
}
/** The little of the page's `document` the tests' page functions use. */
export interface PageDocument {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement>;
  activeElement: PageElement | null;
  documentElement: { scrollWidth: number; scrollTop: number };
}
/** The little of the page's `navigator` the tests' page functions use. */
export interface PageNavigator {
  serviceWorker?: {
    controller: unknown;
    getRegistration(): Promise<{ scope: string } | undefined>;
  };
}
declare const document: PageDocument;

/** What a test gets: its relay, a page in a fresh browser context, and the relay's API. */
export interface Session {
  dir: string;
  relay: RelayProcess;
  context: BrowserContext;
  page: Page;
  call: (path: string, init?: RequestInit) => Promise<Response>;
}

/**
 * Runs `job` with a relay (key {@linkcode KEY}) in a temp directory and a fresh context of the
 * file's Chromium at phone size; fails if the page throws an uncaught error. With `profile`,
 * it launches a Chromium of its own with a profile on disk in the temp directory, which a test
 * of installability needs (Chromium answers `in-incognito` to it in a context without one).
 * Throws outside a {@linkcode browserTest}.
 */
export async function withApp(
  options: { env?: Record<string, string>; profile?: boolean },
  job: (session: Session) => Promise<void>,
): Promise<void> {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, {
      env: { RELAY_API_KEY: KEY, ...options.env },
    });
    const browser = fileBrowser;
    if (browser === undefined) throw new Error("withApp runs inside a browserTest");
    const contextOptions = {
      viewport: PHONE,
      deviceScaleFactor: 1,
      locale: "en-GB",
      timezoneId: "UTC",
    };
    let context: BrowserContext | undefined;
    try {
      context = options.profile === true
        ? await chromium.launchPersistentContext(`${dir}/profile`, {
          executablePath: CHROMIUM,
          args: CHROMIUM_ARGS,
          ...contextOptions,
        })
        : await browser.newContext(contextOptions);
      context.setDefaultTimeout(WAIT_MS);
      const page = context.pages()[0] ?? await context.newPage();
      const errors: string[] = [];
      page.on("pageerror", (error) => errors.push(error.message));
      await job({ dir, relay, context, page, call: relayCall(relay.url) });
      assert.deepEqual(errors, [], "the page threw");
    } finally {
      await context?.close();
    }
  });
}

/** Opens the app with the key given by a pairing link, on `screen`. */
export async function openApp(page: Page, relay: RelayProcess, screen = "submit"): Promise<void> {
  await page.goto(`${relay.url}/app/#key=${encodeURIComponent(KEY)}`);
  await textOf(page, "#notice", /^Key saved from the pairing link/);
  await page.goto(`${relay.url}/app/#${screen}`);
  await page.reload();
  await page.locator(`#screen-${screen}`).waitFor({ state: "visible" });
}

/** Waits until the element's text matches `pattern`, then returns the text. */
export async function textOf(page: Page, selector: string, pattern: RegExp): Promise<string> {
  try {
    await page.waitForFunction(
      ([selector, source, flags]) =>
        new RegExp(source, flags).test(document.querySelector(selector)?.textContent ?? ""),
      [selector, pattern.source, pattern.flags] as const,
    );
  } catch (error) {
    const text = await page.textContent(selector).catch(() => null);
    throw new Error(`${selector} never matched ${pattern}; it says ${JSON.stringify(text)}`, {
      cause: error,
    });
  }
  return (await page.textContent(selector)) ?? "";
}

/** The relay's queues, as `{queue: [content, …]}`. */
export async function queued(call: Session["call"]): Promise<Record<string, string[]>> {
  const res = await call("/peek");
  if (res.status === 204) return {};
  assert.equal(res.status, 200);
  const body = await res.json() as { queues: Record<string, { content: string }[]> };
  return Object.fromEntries(
    Object.entries(body.queues)
      .filter(([, items]) => items.length > 0)
      .map(([name, items]) => [name, items.map((i) => i.content)]),
  );
}

/** POSTs `body` to `path` with the key; asserts a 200 and returns the answer's text. */
export async function post(call: Session["call"], path: string, body: string): Promise<string> {
  const res = await call(path, { method: "POST", body });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return text;
}

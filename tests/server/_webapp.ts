/**
 * Helpers of the web app's browser tests (webapp_test.ts, webapp_results_test.ts,
 * webapp_pwa_test.ts): a relay and a fresh Chromium profile per test, the pairing link, and
 * waits on the page.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { KEY, relayCall, type RelayProcess, startRelayProcess, withTempDir } from "../_helpers.ts";
import { CHROMIUM, CHROMIUM_ARGS, PHONE } from "../_chromium.ts";
import { PROGRAMS, testGroup } from "../_optional.ts";

/** The tests that drive the app in Chromium; the others need no browser. */
export const browserTest = testGroup("web app in Chromium", PROGRAMS.chromium);

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

/** What a test gets: its relay, a page in a fresh browser profile, and the relay's API. */
export interface Session {
  dir: string;
  relay: RelayProcess;
  context: BrowserContext;
  page: Page;
  call: (path: string, init?: RequestInit) => Promise<Response>;
}

/**
 * Runs `job` with a relay (key {@linkcode KEY}) in a temp directory and a fresh Chromium
 * profile at phone size; fails if the page throws an uncaught error.
 */
export async function withApp(
  options: { env?: Record<string, string>; args?: string[] },
  job: (session: Session) => Promise<void>,
): Promise<void> {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, {
      env: { RELAY_API_KEY: KEY, ...options.env },
    });
    const context = await chromium.launchPersistentContext(`${dir}/profile`, {
      executablePath: CHROMIUM,
      args: [...CHROMIUM_ARGS, ...options.args ?? []],
      viewport: PHONE,
      deviceScaleFactor: 1,
      locale: "en-GB",
      timezoneId: "UTC",
    });
    try {
      context.setDefaultTimeout(WAIT_MS);
      const page = context.pages()[0] ?? await context.newPage();
      const errors: string[] = [];
      page.on("pageerror", (error) => errors.push(error.message));
      await job({ dir, relay, context, page, call: relayCall(relay.url) });
      assert.deepEqual(errors, [], "the page threw");
    } finally {
      await context.close();
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

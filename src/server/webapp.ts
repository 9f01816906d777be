/**
 * The phone web app's static files, served under `/app/` from the `webapp/` folder as
 * committed (`markdown.js` among them is a bundle made by `deno task webapp` and committed too,
 * so that no way of starting the relay depends on a build step). The compile tasks embed each of them with `--include webapp/<file>`, so the
 * single binary carries them; {@linkcode WEBAPP_FILES} is the list, and a test checks that
 * each file is served and that both compile tasks include it.
 *
 * @module
 */

import { WEBAPP_PATH } from "../constants.ts";

/** Each file of the web app and its media type. Only these are served. */
export const WEBAPP_FILES: Readonly<Record<string, string>> = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "client.js": "text/javascript; charset=utf-8",
  "queues.js": "text/javascript; charset=utf-8",
  "results.js": "text/javascript; charset=utf-8",
  "publish.js": "text/javascript; charset=utf-8",
  "settings.js": "text/javascript; charset=utf-8",
  "share.js": "text/javascript; charset=utf-8",
  "library.js": "text/javascript; charset=utf-8",
  "search.js": "text/javascript; charset=utf-8",
  "markdown.js": "text/javascript; charset=utf-8",
  "app.css": "text/css; charset=utf-8",
  "sw.js": "text/javascript; charset=utf-8",
  "manifest.webmanifest": "application/manifest+json; charset=utf-8",
  "icon.svg": "image/svg+xml",
  "icon-192.png": "image/png",
  "icon-512.png": "image/png",
};

/**
 * Paths that answer with the app's page: the app itself and the Web Share Target's
 * action, where the page reads the shared `title`, `text` and `url` from the query.
 */
export const WEBAPP_PAGES: readonly string[] = [WEBAPP_PATH, `${WEBAPP_PATH}share`];

/**
 * Headers of every web app file: the page may load only its own files and talk only to
 * this relay, so it works on a LAN with no internet and nothing else can be injected.
 */
const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": "default-src 'self'; img-src 'self' data:; " +
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  // Revalidate each time: an updated relay must not serve an old app.
  "cache-control": "no-cache",
};

/** File contents, read once: they cannot change while the relay runs. */
const cache = new Map<string, Promise<Uint8Array<ArrayBuffer>>>();

/**
 * The response for a web app file.
 *
 * @param name A key of {@linkcode WEBAPP_FILES}, e.g. `app.js`. (Hono answers `HEAD`
 *   with this response's headers and no body.)
 * @returns 200 with the file, its media type and {@linkcode SECURITY_HEADERS}.
 * @throws {Deno.errors.NotFound} when the file is missing from the build (a packaging bug,
 *   which the app's error handler turns into a logged 500).
 */
export async function webappFile(name: string): Promise<Response> {
  const type = WEBAPP_FILES[name];
  if (type === undefined) throw new Error(`not a web app file: ${name}`);
  let bytes = cache.get(name);
  if (bytes === undefined) {
    bytes = Deno.readFile(new URL(`../../webapp/${name}`, import.meta.url));
    cache.set(name, bytes);
    bytes.catch(() => cache.delete(name));
  }
  const body = await bytes;
  return new Response(body, {
    headers: { ...SECURITY_HEADERS, "content-type": type },
  });
}

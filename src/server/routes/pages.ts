/**
 * The pages a browser opens: `GET /` sends it to the phone web app, whose files
 * are served under `/app/` with no key (the key stays on the device); and the catalogue of
 * problem types, which every problem document's `type` points into.
 *
 * @module
 */

import { WEBAPP_PATH } from "../../constants.ts";
import { PROBLEM_PAGE } from "../../errors.ts";
import type { Route, Routes } from "../route.ts";
import { WEBAPP_FILES, WEBAPP_PAGES, webappFile } from "../webapp.ts";

/** docs/problems.md, read once: it cannot change while the relay runs. */
let catalogue: Promise<Uint8Array<ArrayBuffer>> | undefined;

/**
 * The catalogue of problem types, docs/problems.md as it is in the repository (the compile
 * tasks embed it), so that a problem's `type` resolves on the relay that sent it, with or
 * without a copy of the docs at hand.
 *
 * @throws the file system's errors when the file is missing from an installation (a 500).
 */
async function problemCatalogue(): Promise<Response> {
  catalogue ??= Deno.readFile(new URL("../../../docs/problems.md", import.meta.url)).catch(
    (error) => {
      catalogue = undefined;
      throw error;
    },
  );
  return new Response(await catalogue, {
    headers: {
      "content-type": "text/markdown; charset=utf-8",
      "x-content-type-options": "nosniff",
      "cache-control": "no-cache",
    },
  });
}

/**
 * The routes of the web app, all open: `/`, `/app`, the app's pages and its files; and the
 * catalogue of problem types.
 */
export function pageRoutes(): Routes {
  return {
    [PROBLEM_PAGE]: { methods: ["GET", "HEAD"], open: true, handler: problemCatalogue },
    // A browser pointed at the relay's address finds the web app; no key needed.
    "/": {
      methods: ["GET", "HEAD"],
      open: true,
      handler: () =>
        Promise.resolve(
          new Response(null, { status: 302, headers: { location: WEBAPP_PATH } }),
        ),
    },
    // the phone web app; its files are public, the key stays on the device.
    "/app": {
      methods: ["GET", "HEAD"],
      open: true,
      handler: (_c, url) =>
        Promise.resolve(
          new Response(null, {
            status: 308,
            headers: { location: `${WEBAPP_PATH}${url.search}` },
          }),
        ),
    },
    ...Object.fromEntries(
      [
        ...WEBAPP_PAGES.map((path) => [path, "index.html"] as const),
        ...Object.keys(WEBAPP_FILES).map((name) => [`${WEBAPP_PATH}${name}`, name] as const),
      ].map(([path, name]): [string, Route] => [path, {
        methods: ["GET", "HEAD"],
        open: true,
        handler: () => webappFile(name),
      }]),
    ),
  };
}

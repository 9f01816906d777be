/**
 * The pages a browser opens: `GET /` sends it to the phone web app, whose files
 * are served under `/app/` with no key (the key stays on the device).
 *
 * @module
 */

import { WEBAPP_PATH } from "../../constants.ts";
import type { Route, Routes } from "../route.ts";
import { WEBAPP_FILES, WEBAPP_PAGES, webappFile } from "../webapp.ts";

/** The routes of the web app, all open: `/`, `/app`, the app's pages and its files. */
export function pageRoutes(): Routes {
  return {
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

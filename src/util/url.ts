/**
 * URL helpers shared by the HTTP client and the publishing client.
 *
 * @module
 */

/** Appends `path` to a base URL, keeping any path the base has (`http://h/x` + `/api`). */
export function joinUrl(base: string, path: string): string {
  return base.replace(/\/+$/, "") + path;
}

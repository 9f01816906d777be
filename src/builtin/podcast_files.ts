/**
 * The podcast's files other than audio. Its artwork, `podcast-artwork.png` beside this
 * module: 3000 × 3000 px, RGB, flat colours (55 KB), because Apple Podcasts lists only a
 * podcast with square artwork of 1400 to 3000 px, JPEG or PNG in RGB (the web app's 512 px
 * icon was too small); the compile tasks embed it with `--include`. It is the relay's logo,
 * so it is public even when the podcast is private. And each episode's transcript, the text
 * that was read aloud, which the feed names in `podcast:transcript`.
 *
 * @module
 */

import type { Episode } from "./podcast.ts";

/** Where the artwork is served; the feed's `itunes:image` and `<image>` name it. */
export const ARTWORK_PATH = "/podcast/artwork.png";

let artwork: Promise<Uint8Array<ArrayBuffer>> | undefined;

/**
 * The artwork as a response: PNG, cached for a day by apps and proxies (it changes only
 * with the relay's version).
 *
 * @throws the file system's errors, when the file is missing from an installation.
 */
export async function artworkResponse(): Promise<Response> {
  artwork ??= Deno.readFile(new URL("./podcast-artwork.png", import.meta.url)).catch((error) => {
    artwork = undefined;
    throw error;
  });
  return new Response(await artwork, {
    headers: { "content-type": "image/png", "cache-control": "public, max-age=86400" },
  });
}

/** An episode's transcript: the text it reads aloud, as UTF-8 plain text. */
export function transcriptResponse(episode: Episode): Response {
  return new Response(episode.text, { headers: { "content-type": "text/plain; charset=utf-8" } });
}

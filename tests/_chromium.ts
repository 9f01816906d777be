/**
 * Debian's Chromium as the browser tests launch it: its path, and the flags it needs on a
 * machine with no network but loopback.
 *
 * @module
 */

/** Debian's Chromium (`apt-get install chromium`); the tests never download a browser. */
export const CHROMIUM = "/usr/bin/chromium";

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

/**
 * Pairing a phone with the relay (issue 7): a link to the web app that carries a key in
 * its fragment (`<relay>/app/#key=<key>`), shown as text and as a QR code for a terminal.
 * The fragment never reaches a server or a log: the app stores the key on the device and
 * removes the fragment from the address bar.
 *
 * @module
 */

import { stripVTControlCharacters } from "node:util";
import { WEBAPP_PATH } from "./webapp.ts";

/**
 * The pairing link for a relay.
 *
 * @param baseUrl The relay's address as the phone reaches it, e.g. `https://nas.example:8787`.
 * @param key The key the app should keep.
 * @returns e.g. `https://nas.example:8787/app/#key=…`.
 */
export function pairingLink(baseUrl: string, key: string): string {
  return `${baseUrl.replace(/\/+$/, "")}${WEBAPP_PATH}#key=${encodeURIComponent(key)}`;
}

/**
 * The lines that show a pairing link: a QR code drawn with block characters for a
 * terminal, then the link itself.
 *
 * @param link From {@linkcode pairingLink}.
 */
export async function pairingLines(link: string): Promise<string[]> {
  // Loaded when needed: the relay pairs at most once per start.
  const { default: QRCode } = await import("qrcode");
  const qr: string = await QRCode.toString(link, { type: "terminal", small: true });
  // The library ends with a line of colour codes only; drop lines with nothing to see.
  const drawn = qr.split("\n").filter((line) => stripVTControlCharacters(line).trim() !== "");
  return [...drawn, link];
}

/**
 * Pairing a phone with the relay: a link to the web app that carries a key in
 * its fragment (`<relay>/app/#key=<key>`), shown as text and as a QR code for a terminal.
 * The fragment never reaches a server or a log: the app stores the key on the device and
 * removes the fragment from the address bar.
 *
 * @module
 */

import { stripVTControlCharacters } from "node:util";
import { errorMessage } from "../errors.ts";
import { WEBAPP_PATH } from "../constants.ts";

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
 * terminal, then the link itself. Never rejects: a link too long for a QR code gets a line
 * saying so instead of the code.
 *
 * @param link From {@linkcode pairingLink}.
 */
export async function pairingLines(link: string): Promise<string[]> {
  // Loaded when needed: the relay pairs at most once per start.
  const { default: QRCode } = await import("qrcode");
  let qr: string;
  try {
    qr = await QRCode.toString(link, { type: "terminal", small: true });
  } catch (error) {
    // A key too long for a QR code: the link alone still pairs.
    return [`(no QR code: ${errorMessage(error)})`, link];
  }
  // The library ends with a line of colour codes only; drop lines with nothing to see.
  const drawn = qr.split("\n").filter((line) => stripVTControlCharacters(line).trim() !== "");
  return [...drawn, link];
}

/**
 * The address a phone on the LAN can reach for a listening address: for a wildcard
 * (`0.0.0.0`, `::`), the first non-loopback IPv4 address of this machine, when the
 * permission to list interfaces is granted (`sys: networkInterfaces` in the permission
 * set), else `localhost`; any other address as it is (IPv6 in brackets).
 *
 * @param hostname The address listened on, e.g. `0.0.0.0` or `192.168.1.20`.
 * @returns A host for a URL, e.g. `192.168.1.20` or `[fd00::1]`.
 */
export function lanAddress(hostname: string): string {
  if (hostname !== "0.0.0.0" && hostname !== "::") {
    return hostname.includes(":") ? `[${hostname}]` : hostname;
  }
  try {
    const found = Deno.networkInterfaces().find((i) =>
      i.family === "IPv4" && !i.address.startsWith("127.")
    );
    if (found !== undefined) return found.address;
  } catch {
    // No permission to list interfaces: fall through.
  }
  return "localhost";
}

/**
 * Which addresses the reader of `relay work --extract` may connect to. Any link in a queue, or
 * any redirect of a shared page, could point the reader at the household's own network: a
 * router's admin page, a NAS, the relay itself. Read and pushed to the results feed (or
 * published to the public blog), such a page would leak what only the household network may
 * see. So the reader refuses loopback, private, shared (carrier-grade NAT), link-local,
 * unspecified, multicast and reserved addresses, in every spelling (IPv4-mapped and
 * NAT64 IPv6 forms included), and the relay's own addresses, unless the household allows a
 * host with `--allow-private` (docs/cli/work.md, "relay work --extract").
 *
 * Everything here is pure: the fetch (src/client/fetch_page.ts) resolves the name itself, asks
 * {@linkcode refusal} about every address it got, and connects only to those addresses.
 *
 * Sources: RFC 1918 (private IPv4), RFC 6598 (100.64.0.0/10), RFC 3927 (169.254.0.0/16),
 * RFC 4193 (fc00::/7), RFC 4291 (IPv6 scopes, IPv4-mapped ::ffff:0:0/96), RFC 6052
 * (64:ff9b::/96), RFC 6761 (`localhost` names), the IANA special-purpose address registries.
 *
 * @module
 */

/** Hosts the household allows despite the policy: `all`, or some hosts (and ports). */
export type AllowList = "all" | readonly AllowedHost[];

/** One `HOST[:PORT]` of `--allow-private`. */
export interface AllowedHost {
  /** The host as the URL parser writes it: `127.0.0.1`, `[::1]`, `nas.home`. */
  host: string;
  /** The port allowed, or `undefined` for every port. */
  port: number | undefined;
}

/** What the reader refuses beyond the address classes: the relay's own addresses. */
export interface AddressPolicy {
  /** Hosts allowed despite the policy. */
  allow: AllowList;
  /** The relay's own addresses (of `--url`), written as {@linkcode canonicalIp} writes them. */
  relay: readonly string[];
}

/** An IP address as bytes: 4 for IPv4, 16 for IPv6. */
type IpBytes = number[];

/** Parses dotted-decimal IPv4 (`192.168.0.1`, four decimal parts only), or `undefined`. */
function parseIpv4(text: string): IpBytes | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  const bytes = parts.map((p) => (/^\d{1,3}$/.test(p) ? Number(p) : NaN));
  return bytes.every((b) => b >= 0 && b <= 255) ? bytes : undefined;
}

/** Parses IPv6 text (`::1`, `fe80::1%eth0`, `::ffff:127.0.0.1`) to 16 bytes, or `undefined`. */
function parseIpv6(text: string): IpBytes | undefined {
  let body = text.replace(/^\[|\]$/g, "").replace(/%.*$/, "").toLowerCase();
  const dotted = /:(\d+\.\d+\.\d+\.\d+)$/.exec(body);
  if (dotted) {
    // The last 32 bits written as IPv4: rewritten as two groups of hex.
    const v4 = parseIpv4(dotted[1]!);
    if (v4 === undefined) return undefined;
    const hex = (a: number, b: number) => ((a << 8) | b).toString(16);
    body = `${body.slice(0, dotted.index + 1)}${hex(v4[0]!, v4[1]!)}:${hex(v4[2]!, v4[3]!)}`;
  }
  const halves = body.split("::");
  if (halves.length > 2) return undefined;
  const [head, rest] = halves.map((half) => (half === "" ? [] : half.split(":")));
  const tail = rest ?? [];
  if (![...head!, ...tail].every((g) => /^[0-9a-f]{1,4}$/.test(g))) return undefined;
  const fill = 8 - head!.length - tail.length;
  if (halves.length === 1 ? fill !== 0 : fill < 1) return undefined;
  const words = [...head!, ...Array(halves.length === 2 ? fill : 0).fill("0"), ...tail]
    .map((g) => parseInt(g, 16));
  return words.flatMap((w) => [w >> 8, w & 0xff]);
}

/** Parses an IP address (IPv4 dotted decimal, or IPv6 with or without brackets). */
function parseIp(text: string): IpBytes | undefined {
  return text.includes(":") ? parseIpv6(text) : parseIpv4(text);
}

/** Whether `bytes` starts with the first `bits` bits of `prefix`. */
function inPrefix(bytes: IpBytes, prefix: IpBytes, bits: number): boolean {
  for (let i = 0; i < bits; i += 8) {
    const mask = bits - i >= 8 ? 0xff : (0xff << (8 - (bits - i))) & 0xff;
    if ((bytes[i / 8]! & mask) !== (prefix[i / 8]! & mask)) return false;
  }
  return true;
}

/** IPv4 ranges refused, with what they are. */
const IPV4_RANGES: Array<[IpBytes, number, string]> = [
  [[0, 0, 0, 0], 8, "an unspecified (this-network) address"],
  [[127, 0, 0, 0], 8, "a loopback address (this machine)"],
  [[10, 0, 0, 0], 8, "a private address"],
  [[172, 16, 0, 0], 12, "a private address"],
  [[192, 168, 0, 0], 16, "a private address"],
  [[100, 64, 0, 0], 10, "a shared address (carrier-grade NAT)"],
  [[169, 254, 0, 0], 16, "a link-local address"],
  [[192, 0, 0, 0], 24, "a reserved address"],
  [[198, 18, 0, 0], 15, "a reserved address (benchmarking)"],
  [[224, 0, 0, 0], 4, "a multicast address"],
  [[240, 0, 0, 0], 4, "a reserved address"],
];

/** IPv6 ranges refused, with what they are (embedded IPv4 forms are judged by their IPv4). */
const IPV6_RANGES: Array<[IpBytes, number, string]> = [
  [Array(16).fill(0), 128, "an unspecified address"],
  [[...Array(15).fill(0), 1], 128, "a loopback address (this machine)"],
  [[0xfc, ...Array(15).fill(0)], 7, "a private address"],
  [[0xfe, 0x80, ...Array(14).fill(0)], 10, "a link-local address"],
  [[0xfe, 0xc0, ...Array(14).fill(0)], 10, "a private (site-local) address"],
  [[0xff, ...Array(15).fill(0)], 8, "a multicast address"],
  [[0x01, 0, ...Array(14).fill(0)], 64, "a discard address"],
];

/** Prefixes of IPv6 forms that carry an IPv4 address in their last four bytes. */
const EMBEDDED_V4: Array<[IpBytes, number]> = [
  [[...Array(10).fill(0), 0xff, 0xff, 0, 0, 0, 0], 96], // IPv4-mapped, ::ffff:a.b.c.d
  [Array(16).fill(0), 96], // IPv4-compatible (deprecated), ::a.b.c.d
  [[0, 0x64, 0xff, 0x9b, ...Array(12).fill(0)], 96], // NAT64, 64:ff9b::a.b.c.d
];

/**
 * What kind of refused address `ip` is, or `undefined` for an address the reader may connect
 * to (a global unicast one).
 *
 * @param ip An IPv4 address in dotted decimal or an IPv6 address (brackets and zone allowed).
 * @returns A few words for the reader's result (`a loopback address (this machine)`);
 *   `not an IP address` for text that is none.
 */
export function addressClass(ip: string): string | undefined {
  const bytes = parseIp(ip);
  if (bytes === undefined) return "not an IP address";
  if (bytes.length === 4) return IPV4_RANGES.find(([p, bits]) => inPrefix(bytes, p, bits))?.[2];
  for (const [prefix, bits] of EMBEDDED_V4) {
    if (inPrefix(bytes, prefix, bits) && !bytes.slice(0, 15).every((b) => b === 0)) {
      return addressClass(bytes.slice(12).join("."));
    }
  }
  return IPV6_RANGES.find(([p, bits]) => inPrefix(bytes, p, bits))?.[2];
}

/**
 * An IP address written one way, so that two spellings compare equal: IPv4 dotted decimal,
 * IPv6 in brackets as the WHATWG URL parser writes it (`[::ffff:7f00:1]`); `undefined` for text
 * that is no IP address.
 */
export function canonicalIp(ip: string): string | undefined {
  const bytes = parseIp(ip);
  if (bytes === undefined) return undefined;
  if (bytes.length === 4) return bytes.join(".");
  const words = Array.from({ length: 8 }, (_, i) => ((bytes[2 * i]! << 8) | bytes[2 * i + 1]!));
  return new URL(`http://[${words.map((w) => w.toString(16)).join(":")}]/`).hostname;
}

/** A URL's host without the trailing dot of a fully qualified name, lower case. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/\.$/, "").toLowerCase();
}

/** A URL's port, or the default of its scheme. */
export function portOf(url: URL): number {
  return url.port !== "" ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
}

/** Whether the household allows `host` (a name or a canonical IP) on `port`. */
function allowed(allow: AllowList, host: string, port: number): boolean {
  if (allow === "all") return true;
  return allow.some((entry) => entry.host === host && (entry.port ?? port) === port);
}

/**
 * Why the reader must not connect to `address` for `url`, or `undefined` when it may.
 *
 * @param url The link (or redirect) being read.
 * @param address The address it is about to connect to: the URL's own host when that is an IP
 *   literal, else each address its name resolved to.
 * @param policy The allowed hosts and the relay's own addresses.
 * @returns The reason, ending with how to allow it: `127.0.0.1 is a loopback address (this
 *   machine) (allow it with --allow-private 127.0.0.1:8080)`.
 */
export function refusal(url: URL, address: string, policy: AddressPolicy): string | undefined {
  const host = hostOf(url);
  const port = portOf(url);
  const ip = canonicalIp(address) ?? address;
  if (allowed(policy.allow, host, port) || allowed(policy.allow, ip, port)) return undefined;
  const named = host === ip ? ip : `${host} (${ip})`;
  const hint = ` (allow it with --allow-private ${host}:${port})`;
  const kind = addressClass(ip);
  if (kind !== undefined) return `${named} is ${kind}${hint}`;
  return policy.relay.includes(ip) ? `${named} is the relay's own address${hint}` : undefined;
}

/**
 * Why the reader must not even resolve `url`'s host, or `undefined`: `localhost` and names
 * under `.localhost` mean this machine whatever a resolver says (RFC 6761), and an IP literal
 * is judged as it is.
 */
export function hostRefusal(url: URL, policy: AddressPolicy): string | undefined {
  const host = hostOf(url);
  if (host === "localhost" || host.endsWith(".localhost")) {
    if (allowed(policy.allow, host, portOf(url))) return undefined;
    return `${host} is this machine (allow it with --allow-private ${host}:${portOf(url)})`;
  }
  return canonicalIp(host) === undefined ? undefined : refusal(url, host, policy);
}

/** Whether `host` (as a URL's host) is an IP literal, which needs no resolving. */
export function isIpLiteral(host: string): boolean {
  return canonicalIp(host) !== undefined;
}

/**
 * Parses `--allow-private`: `all`, or `HOST[:PORT]` entries separated by commas
 * (`127.0.0.1:8080,nas.home,[::1]:3000`).
 *
 * @returns The allow list; `[]` for an empty text.
 * @throws {Error} naming the entry that is not `HOST[:PORT]`.
 */
export function parseAllowList(text: string): AllowList {
  const entries = text.split(",").map((e) => e.trim()).filter((e) => e !== "");
  if (entries.length === 1 && entries[0]!.toLowerCase() === "all") return "all";
  return entries.map((entry) => {
    const match = /^(\[[0-9a-fA-F:.]+\]|[^:\[\]/\s]+)(?::(\d{1,5}))?$/.exec(entry);
    const port = match?.[2] === undefined ? undefined : Number(match[2]);
    let host: string | undefined;
    try {
      host = match ? hostOf(new URL(`http://${match[1]}/`)) : undefined;
    } catch {
      host = undefined;
    }
    if (host === undefined || (port !== undefined && (port < 1 || port > 65535))) {
      throw new Error(`"${entry}" is not HOST or HOST:PORT (e.g. 192.168.1.20:8080, nas.home)`);
    }
    return { host: canonicalIp(host) ?? host, port };
  });
}

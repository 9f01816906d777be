// Content Relay extension: which links the Q&A reader opens. Plain JavaScript, one classic
// script that sets `globalThis.relayHosts`, so that the background (importScripts in Chromium,
// a second background script in Firefox), the popup and the options page load it as it is, and
// a Deno test imports it as a module.
//
// Why a policy at all: the reader opens each link with the user's cookies, in the user's
// network. Whoever may submit to the relay chooses the links; without a policy a submit-only key
// could make the browser open the user's router page, or a page of a site the user is signed in
// to, and push what it shows to the results feed (a confused deputy). So the reader opens only
// links to the relay's Q&A sites and to hosts the user listed in the options, and never, unless
// listed, a host whose name or address is local: the judge below looks at the address as written
// (the browser gives extensions no way to see what a name resolves to).

(() => {
  /**
   * Why `hostname` names a host of this machine or its network, or `undefined` when it does not
   * look like one. Judged on the literal: IPv4 in every spelling the URL standard accepts
   * (`127.1`, `0x7f.1`, `2130706433`), IPv6 with its forms that carry an IPv4 address
   * (mapped, compatible, NAT64, 6to4), and names that only a local network resolves.
   * @param {string} hostname A URL's `hostname` (IPv6 in brackets), or a host as typed.
   * @returns {string | undefined} e.g. "a loopback address".
   */
  function localHostReason(hostname) {
    const host = canonicalHost(hostname);
    if (host === undefined) return "not a host name";
    if (host.startsWith("[")) return ipv6Reason(host.slice(1, -1));
    const v4 = ipv4Parts(host);
    if (v4) return ipv4Reason(v4);
    return nameReason(host);
  }

  /** The host as the URL standard writes it (IPv4 dotted, IPv6 compressed), lower case. */
  function canonicalHost(hostname) {
    const text = String(hostname).trim();
    if (text === "" || /[/?#@\s]/.test(text)) return undefined;
    try {
      return new URL(`http://${text}/`).hostname.replace(/\.+$/, "");
    } catch {
      return undefined;
    }
  }

  function ipv4Parts(host) {
    const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
    if (!match) return undefined;
    const parts = match.slice(1).map(Number);
    return parts.every((part) => part <= 255) ? parts : undefined;
  }

  /** Special-purpose IPv4 blocks a page on the Internet never lives in (RFC 6890). */
  function ipv4Reason([a, b, c]) {
    if (a === 127) return "a loopback address";
    if (a === 0) return "an unspecified address";
    if (a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168)) {
      return "a private address";
    }
    if (a === 100 && b >= 64 && b <= 127) return "a private address (shared, carrier-grade NAT)";
    if (a === 169 && b === 254) return "a link-local address";
    if (a === 192 && b === 0 && c === 0) return "a reserved address";
    if (a === 198 && (b === 18 || b === 19)) return "a reserved address (benchmarking)";
    if (a >= 224 && a <= 239) return "a multicast address";
    if (a >= 240) return "a reserved address";
    return undefined;
  }

  /** The eight 16-bit groups of an IPv6 address as the URL standard writes it. */
  function ipv6Groups(text) {
    const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
    const split = (part) => (part ? part.split(":") : []);
    const left = split(head);
    const right = split(tail);
    const groups = tail === undefined
      ? left
      : [...left, ...Array(8 - left.length - right.length).fill("0"), ...right];
    return groups.map((group) => parseInt(group, 16));
  }

  function ipv6Reason(text) {
    const g = ipv6Groups(text);
    if (g.length !== 8 || g.some((group) => !(group >= 0 && group <= 0xffff))) {
      return "not a host name";
    }
    const zeros = (from, to) => g.slice(from, to).every((group) => group === 0);
    const v4 = (hi, lo) => [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff];
    if (zeros(0, 8)) return "an unspecified address";
    if (zeros(0, 7) && g[7] === 1) return "a loopback address";
    // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) reach the IPv4 address.
    if (zeros(0, 5) && (g[5] === 0xffff || g[5] === 0)) return ipv4Reason(v4(g[6], g[7]));
    // NAT64 (64:ff9b::/96) reaches the IPv4 address; its local-use block is private.
    if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return ipv4Reason(v4(g[6], g[7]));
    if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return "a private address (NAT64)";
    // 6to4 (2002::/16) carries the IPv4 address in its next 32 bits.
    if (g[0] === 0x2002) return ipv4Reason(v4(g[1], g[2]));
    if ((g[0] & 0xfe00) === 0xfc00) return "a private address (unique local)";
    if ((g[0] & 0xffc0) === 0xfe80) return "a link-local address";
    if ((g[0] & 0xffc0) === 0xfec0) return "a private address (site-local)";
    if ((g[0] & 0xff00) === 0xff00) return "a multicast address";
    return undefined;
  }

  /** Suffixes only a local network resolves (RFC 6761, RFC 6762, RFC 8375, common uses). */
  const LOCAL_SUFFIXES = ["localhost", "local", "internal", "home.arpa", "lan", "localdomain"];

  function nameReason(host) {
    if (host === "localhost" || host.endsWith(".localhost")) return "a loopback name";
    if (!host.includes(".")) return "a single-label name (a local network name)";
    if (LOCAL_SUFFIXES.some((suffix) => host === suffix || host.endsWith(`.${suffix}`))) {
      return "a local network name";
    }
    return undefined;
  }

  /** Whether `host` is `domain` or a subdomain of it (host names only, not addresses). */
  function withinDomain(host, domain) {
    if (host === domain) return true;
    return !host.startsWith("[") && !ipv4Parts(host) && host.endsWith(`.${domain}`);
  }

  /**
   * The hosts the user listed, from what was typed: `host` or `host:port`, separated by commas
   * or white space.
   * @param {string} text
   * @returns {string[]} Each as `URL.host` writes it (lower case, no default port).
   * @throws {Error} Naming the first entry that is not a host or host and port.
   */
  function parseAllowed(text) {
    const entries = String(text).split(/[\s,]+/).filter(Boolean);
    return entries.map((entry) => {
      let url;
      try {
        url = /[/?#@]/.test(entry) ? undefined : new URL(`http://${entry}/`);
      } catch {
        url = undefined;
      }
      if (!url) {
        throw new Error(
          `"${entry}" is not a host: enter one like intranet.example or 10.0.0.5:8080`,
        );
      }
      return url.host.replace(/\.$/, "");
    });
  }

  /** Whether `url` is on a host the user listed (a listed name covers its subdomains). */
  function userAllowed(url, allowed) {
    const hostname = canonicalHost(url.hostname);
    return allowed.some((entry) => {
      const listed = new URL(`${url.protocol}//${entry}/`);
      const host = canonicalHost(listed.hostname);
      if (listed.port !== "" && listed.port !== url.port) return false;
      return listed.port !== "" ? host === hostname : withinDomain(hostname, host);
    });
  }

  /**
   * Whether the Q&A reader opens `url`, and if not, why.
   * @param {URL} url An http or https link.
   * @param {{qaHosts: string[], allowed: string[]}} policy The relay's Q&A domains and the
   *   hosts the user listed (see parseAllowed).
   * @returns {{read: true} | {read: false, local?: string}} `local` says why a host is local.
   */
  function judgeLink(url, policy) {
    if (userAllowed(url, policy.allowed ?? [])) return { read: true };
    const local = localHostReason(url.hostname);
    if (local) return { read: false, local };
    const host = canonicalHost(url.hostname);
    const qa = (policy.qaHosts ?? []).some((domain) => withinDomain(host, domain.toLowerCase()));
    return qa ? { read: true } : { read: false };
  }

  /**
   * The match patterns the reader needs permission for: the Q&A domains and the listed hosts,
   * subdomains included for names (patterns leave ports out).
   * @returns {string[]} e.g. ["*://stackoverflow.com/*", "*://*.stackoverflow.com/*"].
   */
  function originsFor(policy) {
    const names = [
      ...(policy.qaHosts ?? []),
      ...(policy.allowed ?? []).map((entry) => new URL(`http://${entry}/`).hostname),
    ];
    const patterns = new Set();
    for (const name of names) {
      const host = canonicalHost(name);
      if (host === undefined) continue;
      patterns.add(`*://${host}/*`);
      if (!host.startsWith("[") && !ipv4Parts(host)) patterns.add(`*://*.${host}/*`);
    }
    return [...patterns];
  }

  globalThis.relayHosts = { localHostReason, parseAllowed, judgeLink, originsFor };
})();

/**
 * The Q&A reader's judge of which links it opens (extension/hosts.js), loaded as the browser
 * loads it: a plain script that sets `globalThis.relayHosts`. Every spelling of a local address
 * is refused on the literal, before anything is connected to; the relay's Q&A domains and the
 * hosts the user listed are read.
 *
 * @module
 */

import assert from "node:assert/strict";
import "../../extension/hosts.js";

interface Policy {
  qaHosts?: string[];
  allowed?: string[];
}
const { localHostReason, parseAllowed, judgeLink, originsFor } = (globalThis as unknown as {
  relayHosts: {
    localHostReason(host: string): string | undefined;
    parseAllowed(text: string): string[];
    judgeLink(url: URL, policy: Policy): { read: boolean; local?: string };
    originsFor(policy: Policy): string[];
  };
}).relayHosts;

Deno.test("every spelling of a loopback, private, link-local or local host is judged local", () => {
  const local: Record<string, RegExp> = {
    "127.0.0.1": /loopback/,
    "127.1": /loopback/,
    "0x7f.1": /loopback/,
    "0177.0.0.1": /loopback/,
    "2130706433": /loopback/,
    "127.255.255.254": /loopback/,
    "0.0.0.0": /unspecified/,
    "0": /unspecified/,
    "10.1.2.3": /private/,
    "172.16.0.1": /private/,
    "172.31.255.255": /private/,
    "192.168.1.1": /private/,
    "3232235777": /private/, // 192.168.1.1 in decimal
    "100.64.0.1": /shared/,
    "169.254.169.254": /link-local/,
    "224.0.0.1": /multicast/,
    "255.255.255.255": /reserved/,
    "[::1]": /loopback/,
    "[0:0:0:0:0:0:0:1]": /loopback/,
    "[::]": /unspecified/,
    "[::ffff:127.0.0.1]": /loopback/,
    "[::ffff:7f00:1]": /loopback/,
    "[::ffff:192.168.0.1]": /private/,
    "[::127.0.0.1]": /loopback/,
    "[64:ff9b::a00:1]": /private/,
    "[2002:c0a8:101::1]": /private/,
    "[fd00::1]": /unique local/,
    "[fc12:3456::1]": /unique local/,
    "[fe80::1]": /link-local/,
    "[ff02::1]": /multicast/,
    "localhost": /loopback name/,
    "LOCALHOST.": /loopback name/,
    "app.localhost": /loopback name/,
    "nas.local": /local network name/,
    "metadata.google.internal": /local network name/,
    "router.home.arpa": /local network name/,
    "router": /single-label/,
    "": /not a host/,
  };
  for (const [host, reason] of Object.entries(local)) {
    assert.match(localHostReason(host) ?? "(not local)", reason, host);
  }
  for (const host of ["stackoverflow.com", "8.8.8.8", "172.32.0.1", "[2001:db8::1]", "1.1.1.1"]) {
    assert.equal(localHostReason(host), undefined, host);
  }
});

Deno.test("the reader opens Q&A domains and listed hosts, never a local one unless listed", () => {
  const policy = { qaHosts: ["stackoverflow.com", "127.0.0.1"], allowed: ["127.0.0.1:8080"] };
  const judge = (url: string) => judgeLink(new URL(url), policy);
  assert.deepEqual(judge("https://stackoverflow.com/q/1"), { read: true });
  assert.deepEqual(judge("https://meta.stackoverflow.com/q/1"), { read: true });
  assert.deepEqual(judge("https://notstackoverflow.com/q/1"), { read: false });
  assert.deepEqual(judge("https://example.com/"), { read: false });
  // The relay's list names a loopback address: still refused, except on the port listed.
  assert.deepEqual(judge("http://127.0.0.1:8080/secret"), { read: true });
  assert.deepEqual(judge("http://127.0.0.1:9090/admin"), {
    read: false,
    local: "a loopback address",
  });
  assert.deepEqual(judge("http://127.1:8080/"), { read: true });
  assert.equal(judge("http://[::ffff:127.0.0.1]:9090/").local, "a loopback address");
  // A listed name covers its subdomains; an address does not match other addresses.
  const named = { allowed: ["wiki.home.arpa"] };
  assert.deepEqual(judgeLink(new URL("http://wiki.home.arpa/p"), named), { read: true });
  assert.deepEqual(judgeLink(new URL("http://a.wiki.home.arpa/p"), named), { read: true });
  assert.equal(judgeLink(new URL("http://nas.home.arpa/"), named).local, "a local network name");
});

Deno.test("listed hosts are parsed as host or host:port, and anything else is refused", () => {
  assert.deepEqual(parseAllowed(" Wiki.Example, 10.0.0.5:8080\n[::1]:99 "), [
    "wiki.example",
    "10.0.0.5:8080",
    "[::1]:99",
  ]);
  assert.deepEqual(parseAllowed(""), []);
  for (const bad of ["http://x/", "a/b", "user@host", "exa mple:99999"]) {
    assert.throws(() => parseAllowed(bad), /is not a host/, bad);
  }
  assert.deepEqual(originsFor({ qaHosts: ["zhihu.com"], allowed: ["127.0.0.1:8080"] }), [
    "*://zhihu.com/*",
    "*://*.zhihu.com/*",
    "*://127.0.0.1/*",
  ]);
});

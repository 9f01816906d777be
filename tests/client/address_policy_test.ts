/**
 * The reader's address policy (src/client/address_policy.ts) as tables: every class of address
 * it refuses, in every spelling a link can carry, decided before any connection; and the
 * fetch (src/client/fetch_page.ts) against a loopback server that counts its requests, so that
 * each refusal is seen to send nothing, including after a redirect and for a name that
 * resolves to loopback (an injected resolver stands for DNS).
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  addressClass,
  type AddressPolicy,
  canonicalIp,
  hostRefusal,
  parseAllowList,
  refusal,
} from "../../src/client/address_policy.ts";
import { fetchPage, PageError } from "../../src/client/fetch_page.ts";
import { countingServer } from "./_pages.ts";

Deno.test("addressClass() names every refused class and passes global addresses", () => {
  const table: Array<[string, string | undefined]> = [
    ["127.0.0.1", "a loopback address (this machine)"],
    ["127.255.255.254", "a loopback address (this machine)"],
    ["10.1.2.3", "a private address"],
    ["172.16.0.1", "a private address"],
    ["172.31.255.255", "a private address"],
    ["192.168.1.1", "a private address"],
    ["100.64.0.1", "a shared address (carrier-grade NAT)"],
    ["100.127.255.255", "a shared address (carrier-grade NAT)"],
    ["169.254.169.254", "a link-local address"],
    ["0.0.0.0", "an unspecified (this-network) address"],
    ["224.0.0.251", "a multicast address"],
    ["255.255.255.255", "a reserved address"],
    ["::1", "a loopback address (this machine)"],
    ["[::1]", "a loopback address (this machine)"],
    ["0:0:0:0:0:0:0:1", "a loopback address (this machine)"],
    ["::", "an unspecified address"],
    ["fc00::1", "a private address"],
    ["fd12:3456::1", "a private address"],
    ["fe80::1%eth0", "a link-local address"],
    ["febf::1", "a link-local address"],
    ["ff02::1", "a multicast address"],
    ["::ffff:127.0.0.1", "a loopback address (this machine)"],
    ["::ffff:7f00:1", "a loopback address (this machine)"],
    ["[::ffff:c0a8:101]", "a private address"],
    ["::ffff:169.254.169.254", "a link-local address"],
    ["::127.0.0.1", "a loopback address (this machine)"],
    ["64:ff9b::10.0.0.1", "a private address"],
    ["not-an-ip", "not an IP address"],
    ["1.2.3.4.5", "not an IP address"],
    ["1::2::3", "not an IP address"],
    // Global addresses pass (only classified here, never contacted).
    ["93.184.216.34", undefined],
    ["172.32.0.1", undefined],
    ["100.128.0.1", undefined],
    ["2606:4700::1111", undefined],
    ["::ffff:93.184.216.34", undefined],
  ];
  for (const [ip, expected] of table) assert.equal(addressClass(ip), expected, ip);
});

Deno.test("canonicalIp() writes every spelling of one address alike", () => {
  assert.equal(canonicalIp("::ffff:127.0.0.1"), "[::ffff:7f00:1]");
  assert.equal(canonicalIp("[0:0::1]"), "[::1]");
  assert.equal(canonicalIp("010.0.0.1"), "10.0.0.1");
  assert.equal(canonicalIp("nas.home"), undefined);
});

const NONE: AddressPolicy = { allow: [], relay: [] };

Deno.test("hostRefusal() refuses every spelling of a loopback or private host before resolving", () => {
  // The WHATWG URL parser reads 127.1, 0x7f.1 and 2130706433 as 127.0.0.1 for http(s).
  const refused: Array<[string, RegExp]> = [
    ["http://127.0.0.1/", /^127\.0\.0\.1 is a loopback address/],
    ["http://127.1/", /^127\.0\.0\.1 is a loopback address/],
    ["http://0x7f.1/", /^127\.0\.0\.1 is a loopback address/],
    ["http://2130706433/", /^127\.0\.0\.1 is a loopback address/],
    ["http://0177.0.0.1/", /^127\.0\.0\.1 is a loopback address/],
    ["http://[::1]:8080/", /^\[::1\] is a loopback address.*--allow-private \[::1\]:8080\)$/],
    ["http://[::ffff:127.0.0.1]/", /^\[::ffff:7f00:1\] is a loopback address/],
    ["http://[0:0:0:0:0:ffff:7f00:1]/", /^\[::ffff:7f00:1\] is a loopback address/],
    ["http://0.0.0.0/", /^0\.0\.0\.0 is an unspecified/],
    ["http://0/", /^0\.0\.0\.0 is an unspecified/],
    [
      "https://localhost/",
      /^localhost is this machine \(allow it with --allow-private localhost:443\)$/,
    ],
    ["http://LOCALHOST./", /^localhost is this machine/],
    ["http://admin.localhost:81/", /^admin\.localhost is this machine/],
    ["http://192.168.1.1/", /^192\.168\.1\.1 is a private address.*192\.168\.1\.1:80\)$/],
    ["http://3232235777/", /^192\.168\.1\.1 is a private address/],
    ["http://[fd00::1]/", /^\[fd00::1\] is a private address/],
    ["http://169.254.169.254/latest/meta-data/", /^169\.254\.169\.254 is a link-local/],
    ["http://[fe80::1]/", /^\[fe80::1\] is a link-local/],
    ["http://100.100.100.100/", /^100\.100\.100\.100 is a shared address/],
    ["http://239.1.1.1/", /^239\.1\.1\.1 is a multicast/],
  ];
  for (const [url, expected] of refused) {
    assert.match(hostRefusal(new URL(url), NONE) ?? "passed", expected, url);
  }
  // A name is judged by the addresses it resolves to, not here.
  assert.equal(hostRefusal(new URL("http://example.com/"), NONE), undefined);
  assert.equal(hostRefusal(new URL("http://93.184.216.34/"), NONE), undefined);
});

Deno.test("refusal() honours --allow-private by host and port, and refuses the relay's own address", () => {
  const allow = parseAllowList("127.0.0.1:8080, nas.home, [::1]:3000, localhost:5000");
  const policy: AddressPolicy = { allow, relay: ["203.0.113.7"] };
  const url = (text: string) => new URL(text);
  assert.equal(refusal(url("http://127.0.0.1:8080/"), "127.0.0.1", policy), undefined);
  assert.equal(refusal(url("http://127.1:8080/"), "127.0.0.1", policy), undefined);
  assert.match(refusal(url("http://127.0.0.1:8081/"), "127.0.0.1", policy)!, /loopback/);
  assert.equal(refusal(url("http://nas.home/"), "192.168.1.20", policy), undefined);
  assert.equal(refusal(url("http://nas.home.:9000/"), "192.168.1.20", policy), undefined);
  assert.match(
    refusal(url("http://printer.home/"), "192.168.1.30", policy)!,
    /^printer\.home \(192\.168\.1\.30\) is a private address \(allow it with --allow-private printer\.home:80\)$/,
  );
  assert.equal(refusal(url("http://[::1]:3000/"), "::1", policy), undefined);
  assert.equal(hostRefusal(url("http://localhost:5000/"), policy), undefined);
  assert.match(hostRefusal(url("http://localhost:5001/"), policy)!, /this machine/);
  // The relay's address is refused although it is public: its machine may serve more.
  assert.match(
    refusal(url("http://relay.example:8787/"), "203.0.113.7", policy)!,
    /^relay\.example \(203\.0\.113\.7\) is the relay's own address \(allow it with/,
  );
  assert.equal(refusal(url("http://news.example/"), "93.184.216.34", policy), undefined);
  const all: AddressPolicy = { allow: parseAllowList("all"), relay: ["127.0.0.1"] };
  assert.equal(refusal(url("http://127.0.0.1:1/"), "127.0.0.1", all), undefined);
});

Deno.test("parseAllowList() takes HOST[:PORT] entries and all, and names a wrong entry", () => {
  assert.deepEqual(parseAllowList("127.1:80,[0::1],NAS.home."), [
    { host: "127.0.0.1", port: 80 },
    { host: "[::1]", port: undefined },
    { host: "nas.home", port: undefined },
  ]);
  assert.equal(parseAllowList("ALL"), "all");
  assert.deepEqual(parseAllowList(""), []);
  for (const wrong of ["host:0", "host:70000", "http://host/", "a b", "[zz]:1", "host:port"]) {
    assert.throws(() => parseAllowList(wrong), /is not HOST or HOST:PORT/, wrong);
  }
});

const BASE = { timeoutMs: 10_000, maxBytes: 1 << 20, acceptLanguage: "en" };

/** The refusal `fetchPage` ends with. */
async function refused(
  url: string,
  policy: AddressPolicy,
  resolve?: (h: string) => Promise<string[]>,
) {
  const error = await fetchPage(url, { ...BASE, policy, ...(resolve ? { resolve } : {}) })
    .then(() => undefined, (e) => e);
  assert.ok(error instanceof PageError, `${url}: ${error}`);
  assert.equal(error.retryable, false, "a refusal is not tried again");
  return error.message;
}

Deno.test("fetchPage() sends no request to a refused address, in any spelling, after a redirect, or through DNS", async (t) => {
  await using admin = countingServer();
  const port = admin.port;
  await t.step("every spelling of loopback", async () => {
    const spellings = [
      `http://127.0.0.1:${port}/`,
      `http://127.1:${port}/`,
      `http://0x7f.1:${port}/`,
      `http://2130706433:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`,
      `http://localhost:${port}/`,
      `http://localhost.:${port}/`,
    ];
    for (const url of spellings) {
      assert.match(await refused(url, NONE), /this machine/, url);
    }
    assert.deepEqual(admin.seen, []);
  });
  await t.step("a redirect from an allowed page to a refused one", async () => {
    await using other = countingServer();
    const policy = { allow: [{ host: "127.0.0.1", port: other.port }], relay: [] };
    const url = `http://127.0.0.1:${other.port}/share?to=http://127.0.0.1:${port}/admin`;
    assert.match(
      await refused(url, policy),
      new RegExp(`^127\\.0\\.0\\.1 is a loopback .*--allow-private 127\\.0\\.0\\.1:${port}\\)$`),
    );
    assert.equal(other.seen.length, 1, "the allowed page was read");
    assert.deepEqual(admin.seen, [], "the redirect's target received nothing");
  });
  await t.step("a name that resolves to loopback (DNS rebinding)", async () => {
    const toLoopback = () => Promise.resolve(["127.0.0.1"]);
    assert.match(
      await refused(`http://rebind.test:${port}/`, NONE, toLoopback),
      new RegExp(`^rebind\\.test \\(127\\.0\\.0\\.1\\) is a loopback address`),
    );
    const toV6 = () => Promise.resolve(["::ffff:127.0.0.1"]);
    assert.match(
      await refused(`http://v6.test:${port}/`, NONE, toV6),
      /^v6\.test \(\[::ffff:7f00:1\]\) is a loopback/,
    );
    assert.deepEqual(admin.seen, []);
  });
  await t.step("an allowed name connects to the address it was checked at", async () => {
    // pinned.test exists in no DNS: the page is read only through the checked address.
    const policy = { allow: parseAllowList(`pinned.test:${port}`), relay: [] };
    const page = await fetchPage(`http://pinned.test:${port}/ok`, {
      ...BASE,
      policy,
      resolve: () => Promise.resolve(["127.0.0.1"]),
    });
    assert.match(page.html, /hunter2/);
    assert.deepEqual(admin.seen, [`pinned.test:${port} /ok`]);
  });
});

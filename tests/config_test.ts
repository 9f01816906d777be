import assert from "node:assert/strict";
import { ConfigError, loadConfig, parseDuration, parseSize } from "../src/config/config.ts";
import { DEFAULT_QA_HOSTS } from "../src/queue_names.ts";

const noEnv = () => undefined;

function envOf(vars: Record<string, string>) {
  return (name: string) => vars[name];
}

Deno.test("parseDuration() reads ms, s, m and h", () => {
  assert.equal(parseDuration("1500ms"), 1500);
  assert.equal(parseDuration("2s"), 2000);
  assert.equal(parseDuration("1.5s"), 1500);
  assert.equal(parseDuration("5m"), 300_000);
  assert.equal(parseDuration("1h"), 3_600_000);
  assert.equal(parseDuration("5"), undefined);
  assert.equal(parseDuration("5 minutes"), undefined);
  assert.equal(parseDuration("-2s"), undefined);
});

Deno.test("parseSize() reads bytes, KiB and MiB", () => {
  assert.equal(parseSize("524288"), 524288);
  assert.equal(parseSize("512KiB"), 524288);
  assert.equal(parseSize("0.5MiB"), 524288);
  assert.equal(parseSize("512KB"), undefined);
  assert.equal(parseSize("1.5"), undefined);
});

Deno.test("loadConfig() has the contract's defaults", () => {
  const config = loadConfig({}, noEnv);
  assert.equal(config.hostname, "0.0.0.0");
  assert.equal(config.port, 8787);
  assert.equal(config.db, "data/relay.kv");
  assert.equal(config.dedupeWindowMs, 300_000);
  assert.deepEqual(config.qaHosts, DEFAULT_QA_HOSTS);
  assert.equal(config.maxBodyBytes, 512 * 1024);
  assert.equal(config.publishUrl, undefined);
  assert.equal(config.notesUrl, undefined);
  assert.equal(config.blogUrl, undefined);
  assert.equal(config.podcastUrl, undefined);
  assert.equal(config.publishTimeoutMs, 15_000);
  assert.equal(config.apiKeyFile, undefined);
  assert.equal(config.logFormat, "text");
  assert.equal(config.logLevel, "info");
  assert.deepEqual(config.secrets, {
    apiKey: undefined,
    appId: undefined,
    blogAccessCookie: undefined,
  });
});

Deno.test("loadConfig() keeps the database in $STATE_DIRECTORY under systemd", () => {
  assert.equal(
    loadConfig({}, envOf({ STATE_DIRECTORY: "/var/lib/relay" })).db,
    "/var/lib/relay/relay.kv",
  );
  assert.equal(
    loadConfig({}, envOf({ STATE_DIRECTORY: "/var/lib/relay:/var/lib/other" })).db,
    "/var/lib/relay/relay.kv",
  );
});

Deno.test("loadConfig() takes each option from its environment variable, a flag winning", () => {
  const env = envOf({
    RELAY_HOSTNAME: "127.0.0.1",
    RELAY_PORT: "9000",
    RELAY_DB: "/tmp/x.kv",
    RELAY_DEDUPE_WINDOW: "2s",
    RELAY_QA_HOSTS: "Example.org, forum.example.net",
    RELAY_MAX_BODY: "1KiB",
    RELAY_PUBLISH_URL: "http://127.0.0.1:9999",
    RELAY_NOTES_URL: "http://notes.lan",
    RELAY_BLOG_URL: "https://blog.example",
    RELAY_PODCAST_URL: "http://nas.lan:8080",
    RELAY_PUBLISH_TIMEOUT: "500ms",
    RELAY_API_KEY_FILE: "/etc/relay/key",
    RELAY_LOG_FORMAT: "json",
    RELAY_LOG_LEVEL: "debug",
    RELAY_API_KEY: "secret",
    RELAY_APP_ID: "app",
    RELAY_BLOG_ACCESS_COOKIE: "CF_Authorization=x",
  });
  const config = loadConfig({ port: "9001", "log-level": "error" }, env);
  assert.equal(config.hostname, "127.0.0.1");
  assert.equal(config.port, 9001);
  assert.equal(config.db, "/tmp/x.kv");
  assert.equal(config.dedupeWindowMs, 2000);
  assert.deepEqual(config.qaHosts, ["example.org", "forum.example.net"]);
  assert.equal(config.maxBodyBytes, 1024);
  assert.equal(config.publishUrl, "http://127.0.0.1:9999");
  assert.equal(config.notesUrl, "http://notes.lan");
  assert.equal(config.blogUrl, "https://blog.example");
  assert.equal(config.podcastUrl, "http://nas.lan:8080");
  assert.equal(config.publishTimeoutMs, 500);
  assert.equal(config.apiKeyFile, "/etc/relay/key");
  assert.equal(config.logFormat, "json");
  assert.equal(config.logLevel, "error");
  assert.deepEqual(config.secrets, {
    apiKey: "secret",
    appId: "app",
    blogAccessCookie: "CF_Authorization=x",
  });
});

Deno.test("loadConfig() treats an empty environment variable as unset", () => {
  assert.equal(loadConfig({}, envOf({ RELAY_PORT: "", RELAY_API_KEY: "" })).port, 8787);
  assert.equal(loadConfig({}, envOf({ RELAY_API_KEY: "" })).secrets.apiKey, undefined);
});

Deno.test("loadConfig() names the bad option, its value and its source in one line", () => {
  const cases: Array<[Record<string, string>, Record<string, string>, RegExp]> = [
    [{ port: "http" }, {}, /^invalid --port "http": must be a whole number from 0 to 65535$/],
    [{}, { RELAY_PORT: "70000" }, /^invalid RELAY_PORT "70000": /],
    [{ "dedupe-window": "5" }, {}, /^invalid --dedupe-window "5": must be a duration/],
    [{ "dedupe-window": "0s" }, {}, /^invalid --dedupe-window "0s"/],
    [
      { "max-body": "1MiB" },
      {},
      /^invalid --max-body "1MiB": must be a size from 1 byte to 768KiB/,
    ],
    [{ "max-body": "0" }, {}, /^invalid --max-body "0"/],
    [{ "qa-hosts": "a b.com" }, {}, /^invalid --qa-hosts "a b.com"/],
    [{ "publish-url": "ftp://x" }, {}, /^invalid --publish-url "ftp:\/\/x": must be an http/],
    [{ hostname: "" }, {}, /^invalid --hostname "": must not be empty$/],
    [{ "publish-timeout": "soon" }, {}, /^invalid --publish-timeout "soon"/],
    [{ hostname: "not a host!" }, {}, /^invalid --hostname "not a host!": must be an IP address/],
    [
      { "dedupe-window": "99999999999h" },
      {},
      /^invalid --dedupe-window "99999999999h": must be a duration from 1ms to 720h/,
    ],
    [{ "publish-timeout": "721h" }, {}, /^invalid --publish-timeout "721h"/],
    [{}, { RELAY_NOTES_URL: "notes" }, /^invalid RELAY_NOTES_URL "notes": must be an http/],
    [{ "log-format": "xml" }, {}, /^invalid --log-format "xml": must be text or json$/],
    [
      {},
      { RELAY_LOG_LEVEL: "verbose" },
      /^invalid RELAY_LOG_LEVEL "verbose": must be one of debug, info, warn, error$/,
    ],
  ];
  for (const [flags, env, pattern] of cases) {
    assert.throws(() => loadConfig(flags, envOf(env)), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.match(error.message, pattern);
      assert.ok(!error.message.includes("\n"));
      return true;
    });
  }
});

Deno.test("loadConfig() accepts IPv4, IPv6 and host names to listen on", () => {
  for (const hostname of ["0.0.0.0", "127.0.0.1", "::", "::1", "localhost", "nas.lan"]) {
    assert.equal(loadConfig({ hostname }, noEnv).hostname, hostname);
  }
});

Deno.test("loadConfig() accepts the largest body limit, 768KiB", () => {
  assert.equal(loadConfig({ "max-body": "768KiB" }, noEnv).maxBodyBytes, 786_432);
});

Deno.test("loadConfig() reads the connection, stream and origin options, with their defaults", () => {
  const defaults = loadConfig({}, noEnv);
  assert.equal(defaults.maxConnections, 512);
  assert.equal(defaults.idleTimeoutMs, 30_000);
  assert.equal(defaults.maxStreams, 64);
  assert.equal(defaults.maxStreamsPerKey, 16);
  assert.deepEqual(defaults.allowedOrigins, []);
  const set = loadConfig(
    { "max-connections": "100", "idle-timeout": "1500ms", "max-streams-per-key": "2" },
    envOf({
      RELAY_MAX_STREAMS: "8",
      RELAY_ALLOW_ORIGIN: "https://Dash.Example, http://nas.lan:8787/ ,https://a.example:443",
    }),
  );
  assert.equal(set.maxConnections, 100);
  assert.equal(set.idleTimeoutMs, 1500);
  assert.equal(set.maxStreams, 8);
  assert.equal(set.maxStreamsPerKey, 2);
  // As a browser sends them: lower case, no default port, no path.
  assert.deepEqual(set.allowedOrigins, [
    "https://dash.example",
    "http://nas.lan:8787",
    "https://a.example",
  ]);
  const bad: Array<[Record<string, string>, RegExp]> = [
    [{ "max-connections": "0" }, /^invalid --max-connections "0": must be a whole number/],
    [{ "max-connections": "many" }, /^invalid --max-connections "many"/],
    [{ "idle-timeout": "10" }, /^invalid --idle-timeout "10": must be a duration/],
    [{ "idle-timeout": "50ms" }, /^invalid --idle-timeout "50ms": must be a duration from 100ms/],
    [{ "max-streams": "-1" }, /^invalid --max-streams "-1"/],
    [{ "max-streams-per-key": "1.5" }, /^invalid --max-streams-per-key "1.5"/],
    [{ "allow-origin": "evil.example" }, /^invalid --allow-origin "evil.example": must be/],
    [{ "allow-origin": "https://a.example/app/" }, /^invalid --allow-origin/],
    [{ "allow-origin": "ftp://a.example" }, /^invalid --allow-origin/],
  ];
  for (const [flags, pattern] of bad) {
    assert.throws(() => loadConfig(flags, noEnv), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.match(error.message, pattern);
      return true;
    });
  }
});

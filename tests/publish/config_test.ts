import assert from "node:assert/strict";
import { loadCheckedConfig, loadConfig, parseSize } from "../../src/config/config.ts";

const none = () => undefined;

Deno.test("the built-in services' options: defaults, flags and environment", () => {
  const defaults = loadConfig({}, none);
  assert.equal(defaults.publicUrl, undefined);
  assert.equal(defaults.privateBlog, false);
  assert.equal(defaults.privatePodcast, false);
  assert.equal(defaults.speechCommand, undefined);
  assert.equal(defaults.podcastKeep, 100);
  assert.equal(defaults.podcastMaxDiskBytes, 1024 ** 3);

  const env: Record<string, string> = {
    RELAY_PUBLIC_URL: "https://relay.example.org/",
    RELAY_PRIVATE_BLOG: "yes",
    RELAY_PRIVATE_PODCAST: "on",
    RELAY_SPEECH_COMMAND: "espeak-ng --stdin --stdout -v {lang}",
    RELAY_PODCAST_KEEP: "5",
    RELAY_PODCAST_MAX_DISK: "200MiB",
  };
  const fromEnv = loadConfig({}, (name) => env[name]);
  assert.equal(fromEnv.publicUrl, "https://relay.example.org");
  assert.equal(fromEnv.privateBlog, true);
  assert.equal(fromEnv.privatePodcast, true);
  assert.equal(fromEnv.speechCommand, "espeak-ng --stdin --stdout -v {lang}");
  assert.equal(fromEnv.podcastKeep, 5);
  assert.equal(fromEnv.podcastMaxDiskBytes, 200 * 1024 * 1024);

  const flags = loadConfig({ "private-blog": "no", "podcast-keep": "7" }, (name) => env[name]);
  assert.equal(flags.privateBlog, false);
  assert.equal(flags.podcastKeep, 7);
  assert.equal(parseSize("2GiB"), 2 * 1024 ** 3);
});

Deno.test("the built-in services' options refuse bad values, naming the option", async () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ "public-url": "relay.local" }, /invalid --public-url "relay.local": must be an http/],
    [{ "public-url": "ftp://x" }, /--public-url/],
    [{ "public-url": "http://x/?a=1" }, /query or fragment/],
    [{ "private-blog": "maybe" }, /invalid --private-blog "maybe": must be yes or no/],
    [{ "private-podcast": "" }, /--private-podcast/],
    [{ "speech-command": "  " }, /--speech-command/],
    [{ "podcast-keep": "0" }, /--podcast-keep "0"/],
    [{ "podcast-keep": "-3" }, /--podcast-keep/],
    [
      { "podcast-max-disk": "10KiB" },
      /--podcast-max-disk "10KiB": must be a size of at least 1MiB/,
    ],
    [{ "podcast-max-disk": "lots" }, /--podcast-max-disk/],
  ];
  for (const [flags, message] of cases) {
    assert.throws(() => loadConfig(flags, none), message);
  }
  assert.throws(
    () => loadConfig({}, (name) => (name === "RELAY_PODCAST_KEEP" ? "x" : undefined)),
    /invalid RELAY_PODCAST_KEEP "x"/,
  );
  // The speech command's words are read when the relay starts, with their parser.
  await assert.rejects(
    () => loadCheckedConfig({ "speech-command": "piper | aplay" }, none),
    /^ConfigError: invalid --speech-command "piper \| aplay": holds shell syntax \(\|\)/,
  );
  await assert.rejects(
    () => loadCheckedConfig({}, (name) => (name === "RELAY_SPEECH_COMMAND" ? "a && b" : undefined)),
    /^ConfigError: invalid RELAY_SPEECH_COMMAND "a && b": holds shell syntax/,
  );
  const spoken = await loadCheckedConfig(
    { "speech-command": "piper -m '/opt/en US' {lang}" },
    none,
  );
  assert.equal(spoken.speechCommand, "piper -m '/opt/en US' {lang}");
});

/** `relay serve` as a process: waiting readers (long polls, streams) and HTTPS. */
import assert from "node:assert/strict";
import { eventually, runRelay, SseReader, startRelayProcess, withTempDir } from "../_helpers.ts";
import { client, KEY } from "./_server.ts";

/** `relay_waiting_clients{kind=…}` from `GET /metrics`. */
async function waiting(call: ReturnType<typeof client>, kind: string): Promise<number> {
  const text = await (await call("/metrics")).text();
  const match = text.match(new RegExp(`^relay_waiting_clients\\{kind="${kind}"\\} (\\d+)$`, "m"));
  if (!match) throw new Error(`no relay_waiting_clients for ${kind} in:\n${text}`);
  return Number(match[1]);
}

Deno.test("relay serve: a push reaches a long-polling reader and a stream reader over HTTP; disconnects free them", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const call = client(relay.url);
    const leaving = new AbortController();
    const stream = await fetch(`${relay.url}/results/stream?key=${KEY}`, {
      signal: leaving.signal,
    });
    assert.equal(stream.status, 200);
    const reader = new SseReader(stream.body!);
    const poll = call("/results?since=0&wait=30");
    await eventually(async () => await waiting(call, "results") === 1, "the waiting reader");
    assert.equal(await waiting(call, "stream"), 1);
    assert.equal((await call("/push", { method: "POST", body: "hello" })).status, 200);
    const page = await (await poll).json();
    assert.deepEqual(page.items.map((i: { c: string }) => i.c), ["hello"]);
    await eventually(() => reader.events.length === 1, "the streamed result");
    assert.deepEqual(reader.events[0], {
      event: "message",
      data: "hello",
      id: String(page.cursor),
    });
    // A client that goes away frees its wait: the stream, and a long-poll cut off mid-wait.
    const cut = new AbortController();
    const abandoned = fetch(`${relay.url}/pull?queue=qa&wait=30`, {
      headers: { "x-auth-key": KEY },
      signal: cut.signal,
    }).catch(() => "aborted");
    await eventually(async () => await waiting(call, "pull") === 1, "the waiting pull");
    cut.abort();
    leaving.abort();
    assert.equal(await abandoned, "aborted");
    await reader.done;
    await eventually(async () => await waiting(call, "pull") === 0, "the pull freed");
    await eventually(async () => await waiting(call, "stream") === 0, "the stream freed");
    // The abandoned pull took nothing: a later submit waits in the queue.
    await call("/submit?queue=qa", { method: "POST", body: "later" });
    assert.deepEqual(await (await call("/pull?queue=qa")).json(), ["later"]);
  });
});

Deno.test("relay serve: SIGTERM answers waiting long-polls, ends streams, and exits 0", async () => {
  await withTempDir(async (dir) => {
    const relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const call = client(relay.url);
    const stream = await fetch(`${relay.url}/results/stream?key=${KEY}`);
    const reader = new SseReader(stream.body!);
    const poll = call("/pull?wait=60");
    await eventually(async () => await waiting(call, "pull") === 1, "the waiting pull");
    const started = performance.now();
    const status = await relay.stop("SIGTERM");
    assert.equal(status.code, 0, relay.stderr.join("\n"));
    assert.equal((await poll).status, 204);
    await reader.done;
    // Nothing waited for the 60 s long-poll; the last line says every request finished
    // within the 10 s grace.
    assert.ok(performance.now() - started < 60_000);
    assert.equal(relay.stdout.at(-1), "relay: stopped", "every request finished in time");
  });
});

/** A self-signed certificate for 127.0.0.1 made with openssl; returns the PEM files. */
async function selfSignedCertificate(dir: string): Promise<{ cert: string; key: string }> {
  const cert = `${dir}/cert.pem`;
  const key = `${dir}/key.pem`;
  const out = await new Deno.Command("openssl", {
    args: [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-days",
      "2",
      "-subj",
      "/CN=relay test",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      // rustls refuses a CA certificate as a server's own certificate.
      "-addext",
      "basicConstraints=critical,CA:FALSE",
      "-keyout",
      key,
      "-out",
      cert,
    ],
    stdout: "null",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return { cert, key };
}

Deno.test("--tls-cert and --tls-key serve HTTPS, and the start line says https", async () => {
  await withTempDir(async (dir) => {
    const { cert, key } = await selfSignedCertificate(dir);
    await using relay = await startRelayProcess(dir, {
      args: ["--tls-cert", cert, "--tls-key", key],
      env: { RELAY_API_KEY: KEY },
    });
    assert.match(relay.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    using trusting = Deno.createHttpClient({ caCerts: [await Deno.readTextFile(cert)] });
    const res = await fetch(`${relay.url}/submit`, {
      method: "POST",
      headers: { "x-auth-key": KEY },
      body: "over TLS",
      client: trusting,
    });
    assert.equal(await res.text(), "OK (general)");
    const page = await fetch(`${relay.url}/app/`, { client: trusting });
    assert.equal(page.status, 200);
    await page.body?.cancel();
    // Plain HTTP to the TLS port gets no answer a client could take for one.
    await assert.rejects(fetch(relay.url.replace("https:", "http:") + "/health"));
  });
});

Deno.test("TLS needs both files, readable and PEM; otherwise the relay does not start and exits 2, a configuration error", async () => {
  await withTempDir(async (dir) => {
    const { cert, key } = await selfSignedCertificate(dir);
    const db = `${dir}/relay.kv`;
    const env = { RELAY_API_KEY: KEY };
    const half = await runRelay(["serve", "--port", "0", "--db", db, "--tls-cert", cert], { env });
    assert.equal(half.code, 2);
    assert.match(half.stderr, /^relay: invalid --tls-cert: HTTPS needs --tls-key too$/m);
    const missing = await runRelay(
      ["serve", "--port", "0", "--db", db, "--tls-cert", `${dir}/nope.pem`, "--tls-key", key],
      { env },
    );
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /^relay: invalid --tls-cert ".*nope\.pem": cannot read it/m);
    await Deno.writeTextFile(`${dir}/plain.txt`, "not a certificate");
    const notPem = await runRelay(
      ["serve", "--port", "0", "--db", db, "--tls-cert", cert, "--tls-key", `${dir}/plain.txt`],
      { env },
    );
    assert.equal(notPem.code, 2);
    assert.match(notPem.stderr, /^relay: invalid --tls-key ".*plain\.txt": not a PEM file$/m);
    // PEM, but not a key: Deno's refusal is reported with the options it concerns.
    const wrong = await runRelay(
      ["serve", "--port", "0", "--db", db, "--tls-cert", cert, "--tls-key", cert],
      { env },
    );
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /^relay: invalid --tls-cert or --tls-key: /m);
  });
});

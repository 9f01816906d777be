/**
 * The browser extension in Firefox: Debian's Firefox ESR, headless, driven over WebDriver BiDi
 * (the W3C protocol Firefox speaks itself; playwright-core drives only its own Firefox build).
 * The Firefox build of the extension is installed as a temporary add-on, set up through its
 * options page with a pairing link (clicked as real input: Firefox asks for a permission only
 * during a user action), and its Q&A reader runs end to end against a real relay and loopback
 * pages. Like the Chromium tests, the build is granted `http://127.0.0.1/*` at install, and the
 * options list the page server's host and port (a loopback address is read only when listed).
 *
 * @module
 */

import assert from "node:assert/strict";
import { buildExtension } from "../../extension/build.ts";
import { eventually, KEY, relayCall, startRelayProcess, withTempDir } from "../_helpers.ts";
import { startPages } from "./pages.ts";
import { pathOf, PROGRAMS, testGroup } from "../_optional.ts";

const test = testGroup("the extension in Firefox", PROGRAMS.firefox);
/** Upper bound for anything the browser waits for; a fast machine never gets near it. */
const WAIT_MS = 30_000;
/** Preferences that keep a test profile quiet and off the network. */
const PREFS: Record<string, boolean | string> = {
  "browser.shell.checkDefaultBrowser": false,
  "browser.startup.homepage_override.mstone": "ignore",
  "datareporting.policy.dataSubmissionEnabled": false,
  "toolkit.telemetry.reportingpolicy.firstRun": false,
  "app.update.enabled": false,
  "network.captive-portal-service.enabled": false,
  "extensions.update.enabled": false,
};

/** A WebDriver BiDi connection: `send` runs one command and resolves with its result. */
interface Bidi {
  send(method: string, params: Record<string, unknown>): Promise<Record<string, unknown>>;
  close(): void;
}

async function connect(url: string): Promise<Bidi> {
  const socket = new WebSocket(`${url}/session`);
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = reject;
  });
  let lastId = 0;
  const pending = new Map<number, PromiseWithResolvers<Record<string, unknown>>>();
  socket.onmessage = (event) => {
    const message = JSON.parse(event.data);
    const waiting = pending.get(message.id);
    if (!waiting) return; // an event
    pending.delete(message.id);
    if (message.type === "success") waiting.resolve(message.result);
    else waiting.reject(new Error(`${message.error}: ${message.message}`));
  };
  return {
    send(method, params) {
      const id = ++lastId;
      const reply = Promise.withResolvers<Record<string, unknown>>();
      pending.set(id, reply);
      socket.send(JSON.stringify({ id, method, params }));
      return reply.promise;
    },
    close: () => socket.close(),
  };
}

/** Starts headless Firefox on a fresh profile; resolves with its BiDi address. */
async function startFirefox(profile: string): Promise<{ url: string; child: Deno.ChildProcess }> {
  await Deno.mkdir(profile, { recursive: true });
  const prefs = Object.entries(PREFS).map(([name, value]) =>
    `user_pref(${JSON.stringify(name)}, ${JSON.stringify(value)});`
  );
  await Deno.writeTextFile(`${profile}/user.js`, prefs.join("\n") + "\n");
  const child = new Deno.Command(pathOf(PROGRAMS.firefox), {
    args: ["--headless", "--no-remote", "--profile", profile, "--remote-debugging-port", "0"],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const listening = Promise.withResolvers<string>();
  (async () => {
    let seen = "";
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
      seen = (seen + chunk).slice(-4096);
      const match = /WebDriver BiDi listening on (ws:\/\/\S+)/.exec(seen);
      if (match) listening.resolve(match[1]!);
    }
    listening.reject(new Error(`Firefox exited before listening:\n${seen}`));
  })();
  return { url: await listening.promise, child };
}

test("the extension runs in Firefox: pairing, and the qa reader end to end", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    await using server = startPages();
    const pages = server.url;
    await buildExtension(`${dir}/extension`, "firefox", { grantHosts: ["http://127.0.0.1/*"] });
    const firefox = await startFirefox(`${dir}/profile`);
    const bidi = await connect(firefox.url);
    try {
      await bidi.send("session.new", { capabilities: {} });
      await bidi.send("webExtension.install", {
        extensionData: { type: "path", path: `${dir}/extension` },
      });
      // A new install opens its options page.
      let context = "";
      await eventually(
        async () => {
          const tree = await bidi.send("browsingContext.getTree", {});
          const tabs = tree.contexts as { context: string; url: string }[];
          context = tabs.find((tab) => tab.url.endsWith("/options.html"))?.context ?? "";
          return context !== "";
        },
        "the options page to open after the install",
        WAIT_MS,
      );
      // A script that throws fails the test: one that ran on the tab's first, empty document
      // would otherwise be lost without a word when the options page replaces it.
      const evaluate = async (expression: string) => {
        const answer = await bidi.send("script.evaluate", {
          expression,
          target: { context },
          awaitPromise: true,
        });
        if (answer.type === "exception") {
          throw new Error(`${expression} threw: ${JSON.stringify(answer.exceptionDetails)}`);
        }
        return answer.result as { type: string; value?: unknown; sharedId?: string };
      };
      // The tab may name the options page before its document has replaced the empty one.
      await eventually(
        async () => {
          const answer = await bidi.send("script.evaluate", {
            expression: `document.readyState === "complete" && ` +
              `document.getElementById("pairing") !== null`,
            target: { context },
            awaitPromise: true,
          });
          return (answer.result as { value?: unknown } | undefined)?.value === true;
        },
        "the options page to load",
        WAIT_MS,
      );
      await evaluate(
        `document.getElementById("pairing").value = ${
          JSON.stringify(`${relay.url}/app/#key=${KEY}`)
        }`,
      );
      // The pages are on loopback: read only because the options list their host and port.
      await evaluate(
        `document.getElementById("allow-hosts").value = ${JSON.stringify(new URL(pages).host)}`,
      );
      // The links are queued before the options are saved, which starts the reader at once on
      // them (after, it would wait up to 3 s for its next look at qa).
      const call = relayCall(relay.url);
      for (const content of [`${pages}/article`, `${pages}/gbk`, `${pages}/missing`]) {
        const res = await call("/submit?queue=qa", { method: "POST", body: content });
        assert.equal(await res.text(), "OK (qa)");
      }
      const button = await evaluate(`document.querySelector("#pair-form button")`);
      await bidi.send("input.performActions", {
        context,
        actions: [{
          type: "pointer",
          id: "mouse",
          parameters: { pointerType: "mouse" },
          actions: [
            { type: "pointerMove", x: 0, y: 0, origin: { type: "element", element: button } },
            { type: "pointerDown", button: 0 },
            { type: "pointerUp", button: 0 },
          ],
        }],
      });
      let notice = "";
      await eventually(
        async () => {
          notice = String((await evaluate(`document.getElementById("notice").textContent`)).value);
          return /^Saved\. Connected: /.test(notice);
        },
        "the options to connect",
        WAIT_MS,
      ).catch((error) => {
        throw new Error(`${error.message}; the options say ${JSON.stringify(notice)}`);
      });

      let items: string[] = [];
      await eventually(
        async () => {
          const feed = await (await call("/results")).json() as { items: { c: string }[] };
          items = feed.items.map((item) => item.c);
          return items.length === 3;
        },
        "three results",
        WAIT_MS,
      );
      const [article, gbk, missing] = items;
      assert.match(article!, /^# Why WAL needs fsync\n/);
      assert.match(article!, /\| SD card \| 12 \|/);
      assert.match(gbk!, /^# 为什么数据库需要同步写入\n[\s\S]*每次提交/);
      assert.equal(missing, `Could not read ${pages}/missing: HTTP 404`);
      await eventually(async () => {
        const peek = await call("/peek?queue=qa");
        await peek.body?.cancel();
        return peek.status === 204;
      }, "qa to be empty");
      for (const request of server.requests) {
        assert.ok(!JSON.stringify(request).includes(KEY), JSON.stringify(request));
      }
    } finally {
      await bidi.send("session.end", {}).catch(() => {});
      bidi.close();
      firefox.child.kill("SIGTERM");
      await firefox.child.status;
    }
  });
});

/**
 * Summaries of `relay work --extract --summarize`: the offline extractive summary in English and
 * Chinese, and a model's summary from a loopback OpenAI-compatible server that records the
 * request; a server that hangs, answers garbage or floods costs bounded time and memory and
 * leaves the offline summary with a note saying why.
 *
 * @module
 */

import assert from "node:assert/strict";
import { readArticleResult, writeArticleResult } from "../../src/article_result.ts";
import {
  extractiveSummary,
  MAX_ANSWER_BYTES,
  sentencesOf,
  SUMMARY_SENTENCES,
  withSummary,
} from "../../src/client/summary.ts";

const ENGLISH = [
  "Tomatoes need sun, water and patience to grow well in a small garden.",
  "Water tomatoes at the roots early in the morning, never on the leaves.",
  "The weather was grey on Tuesday and the bus was late again.",
  "Tomatoes grown in full sun give sweeter fruit than tomatoes grown in shade.",
  "Mulch keeps the water in the soil and the roots of the tomatoes cool.",
  "My neighbour painted his fence blue last summer.",
  "Pick tomatoes when they are fully red and slightly soft to the touch.",
  "A cat walked across the street and sat under a car.",
  "Feed tomatoes every two weeks once the first fruit sets on the plant.",
  "Some people prefer coffee to tea in the afternoon.",
  "Tomatoes that get too little water split when it finally rains.",
  "The library opens at nine on weekdays and at ten on Saturdays.",
  "Stake tall tomatoes so that the weight of the fruit does not break the stems.",
  "Old newspapers pile up quickly in a small flat.",
  "Rotate tomatoes to a new bed each year to keep soil diseases away from the roots.",
  "Trains to the coast run every hour in summer.",
].join(" ");

const CHINESE = "番茄需要阳光、水和耐心才能长好。早上在根部浇水，不要浇在叶子上。" +
  "今天公交车又晚点了。阳光充足的番茄比阴凉处的番茄更甜。覆盖物能让土壤保持水分，让番茄的根保持凉爽。" +
  "邻居去年夏天把篱笆漆成了蓝色。番茄完全变红、摸起来稍软时就可以采摘了。一只猫走过街道。" +
  "第一批果实结出后，每两周给番茄施一次肥。有些人下午更喜欢喝咖啡。番茄缺水后遇到下雨会裂开。" +
  "图书馆工作日九点开门。高的番茄要搭支架，免得果实的重量压断茎。每年把番茄轮换到新的苗床，让根远离土壤病害。";

Deno.test("the offline summary is at most five of the article's own sentences, in its order, in English and Chinese", () => {
  for (const text of [ENGLISH, CHINESE]) {
    const all = sentencesOf(text);
    const summary = extractiveSummary(text);
    const chosen = sentencesOf(summary);
    assert.ok(chosen.length >= 1 && chosen.length <= SUMMARY_SENTENCES, summary);
    const positions = chosen.map((sentence) => all.indexOf(sentence));
    assert.ok(positions.every((at) => at >= 0), `not the article's own sentences: ${summary}`);
    assert.deepEqual(positions, [...positions].sort((a, b) => a - b));
  }
  // The sentences about the subject rank above the ones that stray from it.
  assert.match(extractiveSummary(ENGLISH), /tomatoes/i);
  assert.doesNotMatch(extractiveSummary(ENGLISH), /cat walked|coffee|library/);
  assert.match(extractiveSummary(CHINESE), /番茄/);
  assert.equal(extractiveSummary(""), "");
  assert.equal(extractiveSummary("Short."), "");
});

const RESULT = writeArticleResult({
  title: "Growing tomatoes",
  url: "https://example.com/tomatoes",
  markdown: `${ENGLISH}\n\n_The page was longer than 5 MiB: only its beginning was read._`,
});

Deno.test("the offline summary takes sentences, never a heading, and never runs paragraphs together", () => {
  const text = [
    "Obama interview",
    "The president said the laws had persuaded precisely zero voters in the last ten years.",
    "Five things we learned from the Obama interview",
    "He spoke about race relations, his trip to Kenya and the laws on guns in America.",
    "The presidential body swerve",
    "Mr Obama was speaking to the BBC before his trip to Kenya, where his father was born.",
    "On race relations he said that progress had been made in his own lifetime.",
  ].join("\n\n");
  const summary = extractiveSummary(text);
  assert.ok(summary.length > 0);
  for (const heading of ["Obama interview", "Five things", "The presidential body swerve"]) {
    assert.ok(!summary.startsWith(heading) && !summary.includes(`. ${heading}`), summary);
  }
  assert.doesNotMatch(summary, /\.[A-Z]/, "a space after every full stop");
  // Scripts with other full stops, or none (Thai), are still summarised.
  for (
    const other of [
      "یہ پہلا جملہ ہے۔ یہ دوسرا جملہ ہے۔ یہ تیسرا جملہ ہے۔ یہ چوتھا جملہ ہے۔",
      "ဒါက ပထမ စာကြောင်း ဖြစ်ပါတယ်။ ဒါက ဒုတိယ စာကြောင်း ဖြစ်ပါတယ်။",
      "ภาษาไทยไม่มีจุดจบประโยค\n\nย่อหน้าที่สองก็เช่นกันนะครับ\n\nย่อหน้าที่สามก็เหมือนกัน",
    ]
  ) {
    assert.notEqual(extractiveSummary(other), "", other);
  }
});

Deno.test("withSummary puts the summary before the article and keeps what followed it", async () => {
  const result = await withSummary(RESULT, ENGLISH, { timeoutMs: 1000 });
  const article = readArticleResult(result)!;
  assert.equal(article.summary, extractiveSummary(ENGLISH));
  assert.equal(article.summaryNote, undefined);
  assert.match(article.markdown, /only its beginning was read/);
  assert.ok(result.indexOf("## Summary") < result.indexOf("Tomatoes need sun"));
  // A result that is not an article's is left as it is.
  assert.equal(
    await withSummary("Could not read x: y", undefined, { timeoutMs: 1000 }),
    "Could not read x: y",
  );
});

/** A loopback OpenAI-compatible server; `answer` decides what each request gets. */
function modelServer(answer: (request: Request) => Response | Promise<Response>) {
  const requests: { path: string; auth: string | null; body: Record<string, unknown> }[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      const body = await request.json();
      requests.push({
        path: new URL(request.url).pathname,
        auth: request.headers.get("authorization"),
        body,
      });
      return await answer(request);
    },
  );
  const url = `http://127.0.0.1:${server.addr.port}/v1`;
  return { url, requests, close: () => server.shutdown() };
}

Deno.test("a model's summary comes from POST {url}/chat/completions with the model and the key", async () => {
  const summary = "Tomatoes want sun and water at the roots. Stake them and feed them often.";
  const server = modelServer(() =>
    Response.json({
      id: "x",
      object: "chat.completion",
      created: 0,
      model: "tiny",
      choices: [{
        index: 0,
        finish_reason: "stop",
        message: { role: "assistant", content: summary },
      }],
    })
  );
  try {
    const result = await withSummary(RESULT, ENGLISH, {
      url: server.url,
      model: "tiny",
      key: "secret-key",
      timeoutMs: 10_000,
    });
    const article = readArticleResult(result)!;
    assert.equal(article.summary, summary);
    assert.equal(article.summaryNote, "Summary by tiny");
    assert.equal(server.requests.length, 1);
    const [request] = server.requests;
    assert.equal(request!.path, "/v1/chat/completions");
    assert.equal(request!.auth, "Bearer secret-key");
    assert.equal(request!.body.model, "tiny");
    const messages = request!.body.messages as { role: string; content: string }[];
    assert.match(messages.at(-1)!.content, /^Growing tomatoes\n\nTomatoes need sun/);
  } finally {
    await server.close();
  }
});

Deno.test("a model that hangs, answers garbage or floods leaves the offline summary and says why", async () => {
  const hang = Promise.withResolvers<Response>();
  const cases: [string, () => Response | Promise<Response>, RegExp][] = [
    ["hangs", () => hang.promise, /tiny failed \(no answer within 1\.5 s\)/],
    [
      "garbage",
      () => new Response("<html>not json", { headers: { "content-type": "application/json" } }),
      /tiny failed/,
    ],
    [
      "an error",
      () => Response.json({ error: { message: "no such model" } }, { status: 404 }),
      /tiny failed/,
    ],
    ["no content", () => Response.json({ choices: [] }), /no summary/],
    [
      "a flood",
      () => {
        let sent = 0;
        const chunk = new TextEncoder().encode(
          `{"choices":[{"message":{"content":"${"a".repeat(65_000)}`,
        );
        return new Response(
          new ReadableStream({
            pull(controller) {
              sent += chunk.length;
              // Far more than the cap, and it would go on: the reader must stop first.
              if (sent > 200 * MAX_ANSWER_BYTES) controller.close();
              else controller.enqueue(chunk);
            },
          }),
          { headers: { "content-type": "application/json" } },
        );
      },
      /over \d+ bytes/,
    ],
  ];
  for (const [name, answer, why] of cases) {
    const server = modelServer(answer);
    try {
      const result = await withSummary(RESULT, ENGLISH, {
        url: server.url,
        model: "tiny",
        timeoutMs: 1500,
      });
      const article = readArticleResult(result)!;
      assert.equal(article.summary, extractiveSummary(ENGLISH), name);
      assert.match(article.summaryNote ?? "", /^Offline summary: /, name);
      assert.match(article.summaryNote ?? "", why, `${name}: ${article.summaryNote}`);
      assert.equal(server.requests.length, 1, `${name}: one request, no retries`);
    } finally {
      hang.resolve(new Response("late"));
      await server.close();
    }
  }
});

Deno.test("a model server that is not there: the offline summary, and the note names the address", async () => {
  // A port that was just free: nothing listens on it.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const url = `http://127.0.0.1:${listener.addr.port}/v1`;
  listener.close();
  const result = await withSummary(RESULT, ENGLISH, { url, model: "tiny", timeoutMs: 5_000 });
  const article = readArticleResult(result)!;
  assert.equal(article.summary, extractiveSummary(ENGLISH));
  assert.match(article.summaryNote ?? "", /^Offline summary: tiny failed \(Connection error\./);
  assert.ok(article.summaryNote!.includes(`${url}: Connection refused`), article.summaryNote!);
});

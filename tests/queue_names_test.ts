import assert from "node:assert/strict";
import { DEFAULT_QA_HOSTS, findFirstUrl, isQaHost, routeContent } from "../src/queue_names.ts";

Deno.test("routeContent() sends links to Q&A hosts and their subdomains to qa", () => {
  for (
    const content of [
      "https://www.zhihu.com/question/123",
      "HTTP://StackOverflow.com/questions/1",
      "look at this https://math.stackexchange.com/q/9 please",
      "https://superuser.com/a/1.",
      "(see https://askubuntu.com/q/2)",
      "https://mathoverflow.net",
      "http://quora.com/What-is",
      "prefixhttps://serverfault.com/x",
    ]
  ) {
    assert.equal(routeContent(content, DEFAULT_QA_HOSTS), "qa", content);
  }
});

Deno.test("routeContent() sends other links and plain text to general", () => {
  for (
    const content of [
      "just some text",
      "https://notzhihu.com/question/1",
      "https://zhihu.com.evil.example/x",
      "https://evil.example/?next=https%3A%2F%2Fzhihu.com",
      "ftp://stackoverflow.com/x",
      "https://zhihu.com@evil.example/",
      "https://",
      "https://[bad",
    ]
  ) {
    assert.equal(routeContent(content, DEFAULT_QA_HOSTS), "general", content);
  }
});

Deno.test("routeContent() decides by the first URL only", () => {
  assert.equal(
    routeContent("https://example.com/a and https://stackoverflow.com/q", DEFAULT_QA_HOSTS),
    "general",
  );
  assert.equal(
    routeContent("https://stackoverflow.com/q and https://example.com/a", DEFAULT_QA_HOSTS),
    "qa",
  );
});

Deno.test("routeContent() uses the configured Q&A hosts", () => {
  assert.equal(routeContent("https://forum.example.org/t/1", ["example.org"]), "qa");
  assert.equal(routeContent("https://stackoverflow.com/q/1", ["example.org"]), "general");
  assert.equal(routeContent("https://stackoverflow.com/q/1", []), "general");
});

Deno.test("findFirstUrl() ends a URL at white space or <>\"' and drops trailing punctuation", () => {
  assert.equal(findFirstUrl("a https://x.example/p?q=1 b"), "https://x.example/p?q=1");
  assert.equal(findFirstUrl("<https://x.example/p>"), "https://x.example/p");
  assert.equal(findFirstUrl(`"https://x.example/p"`), "https://x.example/p");
  assert.equal(findFirstUrl("'https://x.example/p'"), "https://x.example/p");
  assert.equal(findFirstUrl("see https://x.example/p)."), "https://x.example/p");
  assert.equal(findFirstUrl("https://x.example/p!?;:,]}"), "https://x.example/p");
  assert.equal(findFirstUrl("no link here"), undefined);
});

Deno.test("isQaHost() matches whole labels only, in any case", () => {
  assert.equal(isQaHost("ZHIHU.COM", ["zhihu.com"]), true);
  assert.equal(isQaHost("www.zhihu.com", ["zhihu.com"]), true);
  assert.equal(isQaHost("xzhihu.com", ["zhihu.com"]), false);
});

Deno.test("findFirstUrl() takes linear time on long runs of punctuation", () => {
  // A trailing-punctuation regex took 23 s on 150,000 dots; a loop takes milliseconds.
  const content = `http://x/${".".repeat(500_000)}a`;
  assert.equal(findFirstUrl(content), content);
  assert.equal(findFirstUrl(`http://x/a${".".repeat(500_000)}`), "http://x/a");
});

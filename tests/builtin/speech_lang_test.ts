import assert from "node:assert/strict";
import { detectLanguage, phrasesFor, scriptLanguage } from "../../src/builtin/speech_lang.ts";

Deno.test("detectLanguage tells the language from the script: kana makes Han Japanese", () => {
  const cases: Array<[string, string]> = [
    ["今天天气很好，我们去公园。", "zh"],
    ["我在用 Deno 写代码", "zh"],
    ["トマトは日当たりの良い場所で育てます。", "ja"],
    ["カタカナだけ", "ja"],
    ["The weather is fine today.", "en"],
    ["The word 你 means you in English text here.", "en"],
    ["12345", "en"],
    ["", "en"],
    ["토마토는 햇빛이 필요합니다.", "ko"],
    ["Помидорам нужно солнце.", "ru"],
    ["Οι ντομάτες θέλουν ήλιο.", "el"],
    ["الطماطم تحتاج الشمس", "ar"],
    ["עגבניות צריכות שמש", "he"],
    ["टमाटर को धूप चाहिए", "hi"],
    ["มะเขือเทศต้องการแสงแดด", "th"],
  ];
  for (const [text, lang] of cases) assert.equal(detectLanguage(text), lang, text);
});

Deno.test("the relay's own sentences: Mandarin for Chinese and Japanese episodes, English otherwise", () => {
  assert.equal(phrasesFor("zh").source("园艺周刊", "王芳"), "来自园艺周刊，作者王芳。");
  assert.equal(phrasesFor("ja").lang, "zh");
  assert.equal(phrasesFor("ru").source(undefined, "Jane Doe"), "By Jane Doe.");
  assert.equal(phrasesFor("en").source(undefined, undefined), undefined);
  assert.equal(
    phrasesFor("en").skipped("ja"),
    "A passage in Japanese is left out: there is no voice for it.",
  );
});

Deno.test("an episode is labelled with the language most of it is heard in, not the first script found", () => {
  const tomatoes = [
    "Tending tomatoes",
    "Tomatoes want sun, water and patience. Water them at the root in the morning, and " +
    "stake them early so the stems do not break.",
    "番茄的中文说明",
    "番茄需要阳光和水。",
    "日本語",
    "トマトは日光と水が必要です。毎朝水をやりましょう。",
  ].join("\n\n");
  assert.equal(scriptLanguage(tomatoes), "en");
  assert.equal(scriptLanguage(tomatoes, ["ja"]), "en");
  // Japanese with no voice was left out: what is heard is the English title.
  const japanese = "ShiftJIS\n\nこれは日本語の文章です。ひらがなとカタカナと漢字があります。";
  assert.equal(scriptLanguage(japanese), "ja");
  assert.equal(scriptLanguage(japanese, ["ja"]), "en");
  assert.equal(scriptLanguage("一段中文，其中有 Deno 和 SQLite 两个名字。"), "zh-cn");
  // Code is not read aloud: a Chinese article with a long code block is still Chinese.
  const code = Array.from({ length: 30 }, (_, i) => `const value${i} = compute(input, ${i});`);
  const chinese = "这是一篇关于数据库的中文文章，讲的是预写日志为什么需要同步到磁盘。".repeat(3);
  assert.equal(scriptLanguage(`${chinese}\n\n\`\`\`js\n${code.join("\n")}\n\`\`\`\n`), "zh-cn");
  assert.equal(scriptLanguage(`${chinese}\n\n~~~\n${code.join("\n")}`), "zh-cn");
});

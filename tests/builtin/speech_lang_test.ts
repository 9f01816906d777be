import assert from "node:assert/strict";
import { detectLanguage, phrasesFor } from "../../src/builtin/speech_lang.ts";

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

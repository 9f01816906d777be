/**
 * The documentation (README.md and every Markdown file under docs/): each relative link
 * and image resolves to a file inside the repository, and each `#anchor` to a heading of
 * its target, as GitHub renders them; nothing points at the project's private inputs
 * (`../shared`) or cites their rule ids, spec sections or issue numbers, which a reader of
 * the repository cannot resolve; and the README stays short.
 */
import assert from "node:assert/strict";
import { dirname, isAbsolute, join, relative, resolve, sep as SEP } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** Largest README.md, bytes: it is an entry point, and details live in docs/. */
const README_MAX_BYTES = 20_000;

/**
 * Largest page under docs/, bytes: a reference read in a browser or an editor stays short
 * enough to skim; a longer one becomes an index page linking pages of its own folder.
 */
const DOCS_PAGE_MAX_BYTES = 30 * 1024;

/**
 * A citation a reader of the repository cannot resolve: a rule id of the private contract (a
 * capital C and one or two digits, standing alone), a numbered spec section, or an issue
 * number. State the rule in words, or link a heading in docs/, instead.
 */
const CITATION = /(?<![\w-])C\d{1,2}(?![\w-])|\u00a7\s*\d|\b[Ii]ssues? #?\d+\b/;

/** README.md and every `.md` file under docs/, as paths relative to the root. */
function markdownFiles(): string[] {
  const found = ["README.md"];
  const walk = (dir: string) => {
    for (const entry of Deno.readDirSync(join(ROOT, dir))) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) walk(path);
      else if (entry.isFile && entry.name.endsWith(".md")) found.push(path);
    }
  };
  walk("docs");
  return found.sort();
}

/** The text with fenced code blocks blanked out (line breaks kept). */
function withoutFences(text: string): string {
  const lines = text.split("\n");
  let fence: string | undefined;
  const kept = lines.map((line) => {
    const marker = /^\s{0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === undefined && marker !== undefined) {
      fence = marker;
      return "";
    }
    if (fence !== undefined) {
      if (line.trim().startsWith(fence[0]!.repeat(fence.length))) fence = undefined;
      return "";
    }
    return line;
  });
  return kept.join("\n");
}

/**
 * The text with fenced code blocks and inline code spans blanked out (line breaks kept, so
 * line numbers stay right): what they hold is shown, not linked.
 */
function withoutCode(text: string): string {
  // A code span opens with a run of backticks and closes with a run of the same length.
  return withoutFences(text).replace(
    /(?<!`)(`+)(?!`)[\s\S]*?(?<!`)\1(?!`)/g,
    (span) => span.replace(/[^\n]/g, " "),
  );
}

/** A link found in a Markdown file: its target as written and the line it is on. */
interface Link {
  readonly target: string;
  readonly line: number;
}

/** Inline links and images, reference definitions, and HTML `href`/`src` attributes. */
function linksOf(text: string): Link[] {
  const prose = withoutCode(text);
  const lineOf = (index: number) => prose.slice(0, index).split("\n").length;
  const links: Link[] = [];
  const patterns = [
    // [text](target "title") and ![alt](target), the text allowing one level of brackets.
    /!?\[(?:[^[\]]|\[[^[\]]*\])*\]\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g,
    /^ {0,3}\[[^\]\n]+\]:\s*(<[^>\n]*>|\S+)/gm,
    /\b(?:href|src)\s*=\s*"([^"]*)"/g,
  ];
  for (const pattern of patterns) {
    for (const match of prose.matchAll(pattern)) {
      const target = match[1]!.replace(/^<(.*)>$/, "$1");
      links.push({ target, line: lineOf(match.index) });
    }
  }
  return links;
}

/**
 * The anchor GitHub gives a heading (github-slugger's rule): the heading's rendered text in
 * lower case, every character that is not a letter, mark, digit, connector, space or
 * hyphen removed, and each space made a hyphen. Repeated hyphens stay.
 */
function githubSlug(heading: string): string {
  const rendered = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1") // links and images: their text
    .replace(/<[^>]+>/g, "") // HTML tags
    .replace(/[`*]/g, "") // code and emphasis markers
    .replace(/(^|\s)_+|_+(\s|$)/g, "$1$2"); // _emphasis_
  return rendered.trim().toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "").replace(
    / /g,
    "-",
  );
}

/** Every anchor a Markdown file has: its headings' slugs (repeats numbered) and HTML ids. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutFences(text).split("\n")) {
    const heading = /^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/.exec(line)?.[1];
    if (heading !== undefined) {
      const slug = githubSlug(heading);
      const count = seen.get(slug) ?? 0;
      seen.set(slug, count + 1);
      anchors.add(count === 0 ? slug : `${slug}-${count}`);
    }
    for (const match of line.matchAll(/<a\s[^>]*\b(?:id|name)\s*=\s*"([^"]+)"/g)) {
      anchors.add(match[1]!);
    }
  }
  return anchors;
}

/** Whether a link target leaves the repository's files: a URL with a scheme, or `//host`. */
function isExternal(target: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//");
}

/**
 * Why a relative link from `file` does not resolve inside the repository, or `undefined`
 * when it does: its path must name an existing file or folder within the root (a leading
 * `/` is the root, as on GitHub), and its `#anchor`, if any, a heading of a Markdown target.
 */
function brokenLink(file: string, target: string): string | undefined {
  const hash = target.indexOf("#");
  const rawPath = hash < 0 ? target : target.slice(0, hash);
  const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
  let path: string;
  try {
    path = decodeURIComponent(rawPath.replace(/\?.*$/, ""));
  } catch {
    return "its path is not valid percent-encoding";
  }
  const absolute = path === ""
    ? join(ROOT, file)
    : path.startsWith("/")
    ? join(ROOT, path)
    : resolve(ROOT, dirname(file), path);
  const inside = relative(ROOT, absolute);
  if (inside === ".." || inside.startsWith(`..${SEP}`) || isAbsolute(inside)) {
    return "it points outside the repository";
  }
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(absolute);
  } catch {
    return `"${inside}" does not exist`;
  }
  if (anchor === undefined || anchor === "") return undefined;
  if (!info.isFile || !absolute.endsWith(".md")) {
    return `"${inside}" is not a Markdown file, so "#${anchor}" cannot be checked`;
  }
  const anchors = anchorsOf(Deno.readTextFileSync(absolute));
  if (!anchors.has(anchor)) {
    return `"${inside}" has no heading "#${anchor}" (it has: ${[...anchors].join(", ")})`;
  }
  return undefined;
}

Deno.test("githubSlug() makes the anchors GitHub gives headings", () => {
  const cases: Array<[string, string]> = [
    ["Walkthrough", "walkthrough"],
    ["Requests, answers and errors", "requests-answers-and-errors"],
    ["`GET /results/stream`", "get-resultsstream"],
    ["`GET /openapi.json`", "get-openapijson"],
    ["`GET /` and the web app", "get--and-the-web-app"],
    ["Leased pull and `POST /ack`", "leased-pull-and-post-ack"],
    ["The [phone app](phone-app.md)", "the-phone-app"],
    ["**Bold** and _emphasis_", "bold-and-emphasis"],
    ["snake_case stays", "snake_case-stays"],
    ["Größe: ü", "größe-ü"],
  ];
  for (const [heading, slug] of cases) assert.equal(githubSlug(heading), slug, heading);
});

Deno.test("anchorsOf() numbers repeated headings and ignores headings inside code", () => {
  const text = '# Usage\n\n## Usage\n\n```sh\n# not a heading\n```\n\n<a id="here"></a>\n';
  assert.deepEqual([...anchorsOf(text)].sort(), ["here", "usage", "usage-1"]);
});

Deno.test("linksOf() finds links and images outside code, with their lines", () => {
  const text = [
    "See [the API](docs/api.md#authentication) and ![a screen](docs/screenshots/submit.png).",
    "`[not a link](nowhere.md)` and",
    "```md",
    "[nor this](nowhere.md)",
    "```",
    "[ref]: docs/keys.md",
    '<img src="docs/x.png"> [with a title](docs/cli.md "Command line") <https://example.com>',
  ].join("\n");
  assert.deepEqual(linksOf(text), [
    { target: "docs/api.md#authentication", line: 1 },
    { target: "docs/screenshots/submit.png", line: 1 },
    { target: "docs/cli.md", line: 7 },
    { target: "docs/keys.md", line: 6 },
    { target: "docs/x.png", line: 7 },
  ]);
});

Deno.test("brokenLink() refuses missing files, missing headings and paths outside the repository", () => {
  assert.equal(brokenLink("README.md", "docs/api/basics.md#authentication"), undefined);
  assert.equal(brokenLink("docs/api/rules.md", "#limits"), undefined);
  assert.equal(brokenLink("docs/api.md", "../README.md"), undefined);
  assert.match(brokenLink("README.md", "docs/nothing.md") ?? "", /does not exist/);
  assert.match(brokenLink("README.md", "docs/api.md#no-such-heading") ?? "", /has no heading/);
  assert.match(brokenLink("README.md", "../shared/spec/relay-spec.md") ?? "", /outside/);
  assert.match(brokenLink("docs/api.md", "../../etc/passwd") ?? "", /outside/);
});

Deno.test("README.md and docs/ link only to files and headings inside the repository", () => {
  const broken: string[] = [];
  let checked = 0;
  for (const file of markdownFiles()) {
    for (const link of linksOf(Deno.readTextFileSync(join(ROOT, file)))) {
      if (isExternal(link.target)) continue;
      checked++;
      const why = brokenLink(file, link.target);
      if (why !== undefined) broken.push(`${file}:${link.line}: (${link.target}): ${why}`);
    }
  }
  assert.deepEqual(broken, [], `broken links:\n${broken.join("\n")}`);
  assert.ok(checked > 0, "no relative links found: the link finder is broken");
});

Deno.test("README.md and docs/ never point at ../shared, nor cite its rule ids, spec sections or issue numbers", () => {
  const found: string[] = [];
  for (const file of markdownFiles()) {
    const text = Deno.readTextFileSync(join(ROOT, file));
    const prose = withoutCode(text).split("\n");
    text.split("\n").forEach((line, i) => {
      const where = `${file}:${i + 1}`;
      if (/(^|[^\w])(\.\.\/)+shared\b|\/work\/shared\b|\bshared\/spec\b/.test(line)) {
        found.push(`${where}: points at the shared inputs: ${line.trim()}`);
      }
      // Outside code only: a key or a hash in a code block may hold the same letters.
      const words = prose[i] ?? "";
      const citation = CITATION.exec(words);
      if (citation !== null) found.push(`${where}: cites "${citation[0]}": ${line.trim()}`);
    });
  }
  assert.deepEqual(found, [], found.join("\n"));
});

/** The folders whose code's comments and test names are held to the same rule as docs/. */
const CODE_FOLDERS = ["src", "tests", "bench", "webapp", "extension"];

/** Every `.ts`, `.js`, `.css` and `.html` file under {@linkcode CODE_FOLDERS}, root-relative. */
function codeFiles(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of Deno.readDirSync(join(ROOT, dir))) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) walk(path);
      else if (entry.isFile && /\.(ts|js|mjs|css|html)$/.test(entry.name)) found.push(path);
    }
  };
  for (const folder of CODE_FOLDERS) walk(folder);
  return found.sort();
}

/** A piece of a source file a reader reads as prose: its text and the line it starts on. */
interface Prose {
  readonly text: string;
  readonly line: number;
}

/** Where the string, template or regular expression literal opening at `start` ends. */
function literalEnd(source: string, start: number): number {
  const close = source[start]!;
  let inClass = false;
  for (let i = start + 1; i < source.length; i++) {
    const char = source[i];
    if (char === "\\") i++;
    else if (close === "/" && char === "[") inClass = true;
    else if (close === "/" && char === "]") inClass = false;
    else if (char === close && !inClass) return i + 1;
    else if (char === "\n" && close !== "`") return i; // an unclosed one ends with its line
  }
  return source.length;
}

/**
 * The comments of JavaScript, TypeScript or CSS source, skipping string, template and
 * regular expression literals (a `/` after an operator, a bracket or a keyword starts a
 * regular expression, after a name or a closing bracket it divides: the usual heuristic).
 */
function commentsOf(source: string): Prose[] {
  const found: Prose[] = [];
  const lineOf = (index: number) => source.slice(0, index).split("\n").length;
  let i = 0;
  while (i < source.length) {
    const char = source[i]!;
    const next = source[i + 1];
    if (char === "/" && (next === "/" || next === "*")) {
      const end = next === "/" ? source.indexOf("\n", i) : source.indexOf("*/", i + 2);
      const stop = end < 0 ? source.length : next === "/" ? end : end + 2;
      found.push({ text: source.slice(i, stop), line: lineOf(i) });
      i = stop;
    } else if (char === '"' || char === "'" || char === "`") {
      i = literalEnd(source, i);
    } else if (
      char === "/" &&
      /(^|[-(,=:[!&|?{};+*%<>~^]|\breturn|\btypeof)\s*$/.test(source.slice(Math.max(0, i - 12), i))
    ) {
      i = literalEnd(source, i);
    } else i++;
  }
  return found;
}

/** The names of `Deno.test` and `t.step` cases, as written (first argument or `name:`). */
function testNamesOf(source: string): Prose[] {
  const pattern = /\b(?:Deno\.test|\.step)\(\s*(?:\{\s*name:\s*)?(["'`])((?:\\.|(?!\1)[^\\])*)\1/dg;
  return [...source.matchAll(pattern)].map((match) => ({
    text: match[2]!,
    line: source.slice(0, match.indices![2]![0]).split("\n").length,
  }));
}

/** What a reader reads as prose in a code file: its comments and its tests' names. */
function proseOf(file: string, source: string): Prose[] {
  if (file.endsWith(".html")) {
    return [...source.matchAll(/<!--[\s\S]*?-->/g)].map((match) => ({
      text: match[0],
      line: source.slice(0, match.index).split("\n").length,
    }));
  }
  return [...commentsOf(source), ...testNamesOf(source)];
}

Deno.test("proseOf() finds comments and test names, not strings or regular expressions", () => {
  const source = [
    "// one",
    'const url = "http://example.com/* not a comment */";',
    "const re = /\\/\\/ not a comment/; /** two",
    " * lines */",
    "const half = 1 / 2; // three",
    'Deno.test("four", () => {});',
    "await t.step({ name: `five`, fn: () => {} });",
    "await t.step(",
    '  "six",',
  ].join("\n");
  assert.deepEqual(proseOf("x.ts", source), [
    { text: "// one", line: 1 },
    { text: "/** two\n * lines */", line: 3 },
    { text: "// three", line: 5 },
    { text: "four", line: 6 },
    { text: "five", line: 7 },
    { text: "six", line: 9 },
  ]);
  assert.deepEqual(proseOf("x.html", "<p>C" + "12</p>\n<!-- seven -->"), [
    { text: "<!-- seven -->", line: 2 },
  ]);
});

Deno.test({
  name:
    "comments and test names in src/, tests/, bench/, webapp/ and extension/ cite no rule ids, spec sections or issue numbers",
  fn() {
    const found: string[] = [];
    for (const file of codeFiles()) {
      for (const prose of proseOf(file, Deno.readTextFileSync(join(ROOT, file)))) {
        prose.text.split("\n").forEach((line, i) => {
          const citation = CITATION.exec(line);
          if (citation === null) return;
          found.push(`${file}:${prose.line + i}: cites "${citation[0]}": ${line.trim()}`);
        });
      }
    }
    assert.deepEqual(found, [], `${found.length} citations:\n${found.join("\n")}`);
  },
});

Deno.test("README.md is under 20 KB", () => {
  const size = Deno.statSync(join(ROOT, "README.md")).size;
  assert.ok(size < README_MAX_BYTES, `README.md is ${size} bytes; move details into docs/`);
});

Deno.test("every page under docs/ is at most 30 KB: longer references are split into pages with an index", () => {
  const over = markdownFiles().filter((file) => file.startsWith("docs/")).map((file) => ({
    file,
    size: Deno.statSync(join(ROOT, file)).size,
  })).filter(({ size }) => size > DOCS_PAGE_MAX_BYTES);
  assert.deepEqual(over, [], "split these pages into an index and pages of at most 30 KB");
});

Deno.test("docs/benchmarks.md is a reference under 20 KB: the history of runs stays in git", () => {
  const size = Deno.statSync(join(ROOT, "docs", "benchmarks.md")).size;
  assert.ok(
    size < 20_000,
    `docs/benchmarks.md is ${size} bytes; keep the latest run and decisions`,
  );
});

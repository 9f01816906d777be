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
  assert.equal(brokenLink("README.md", "docs/api.md#authentication"), undefined);
  assert.equal(brokenLink("docs/api.md", "#limits"), undefined);
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
      // Outside code only: a key or a hash in a code block may contain "C12".
      const words = prose[i] ?? "";
      const citation = /(?<![\w-])C\d{1,2}(?![\w-])|§\s*\d|\b[Ii]ssues? #?\d+\b/.exec(words);
      if (citation !== null) found.push(`${where}: cites "${citation[0]}": ${line.trim()}`);
    });
  }
  assert.deepEqual(found, [], found.join("\n"));
});

Deno.test("README.md is under 20 KB", () => {
  const size = Deno.statSync(join(ROOT, "README.md")).size;
  assert.ok(size < README_MAX_BYTES, `README.md is ${size} bytes; move details into docs/`);
});

/**
 * A downstream test server that: the notes store, the blog (publish and
 * delete) and the podcast (read-aloud) queue, on one real loopback port. It checks what
 * the spec asks of callers (`X-App-ID`, the access cookie, the request bodies), records
 * every request, and can be told per service to fail, hang or answer garbage.
 *
 * Run it by hand for the README's publish walkthrough:
 * `deno task downstream` (prints its URL, app id and cookie).
 *
 * @module
 */

/** How a service answers: as the spec says, or one of the failure modes. */
export type Mode = "ok" | "fail" | "hang" | "garbage" | "html" | "reject";

/** The three services a test can steer. */
export type Service = "notes" | "blog" | "podcast";

/** One request as the server saw it. */
export interface Recorded {
  service: Service | "delete";
  path: string;
  headers: Record<string, string>;
  body: unknown;
}

/** A running downstream server. */
export interface Downstream extends AsyncDisposable {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  url: string;
  /** The `X-App-ID` the podcast service accepts. */
  appId: string;
  /** The `Cookie` header the blog's delete accepts. */
  cookie: string;
  /** How each service answers; change it at any time. */
  modes: Record<Service, Mode>;
  /** Every request received, oldest first. */
  requests: Recorded[];
  /** Blog posts that exist, by id (publish adds, delete removes). */
  posts: Set<string>;
  close(): Promise<void>;
}

const JSON_HEADERS = { "content-type": "application/json" };

function json(value: unknown, status = 200): Response {
  return new Response(JSON.stringify(value), { status, headers: JSON_HEADERS });
}

function isString(value: unknown): value is string {
  return typeof value === "string";
}

/** Checks a body against.9; returns what is wrong, or undefined. */
function checkBody(service: Service, body: Record<string, unknown>): string | undefined {
  if (!isString(body.title) || !isString(body.content)) return "title and content are required";
  if (body.tags !== undefined && !isString(body.tags)) return "tags must be a string";
  if (service === "notes") {
    if (body.content_format !== 1) return "content_format must be 1 (Markdown)";
    return undefined;
  }
  if (body.content_md !== undefined && !isString(body.content_md)) {
    return "content_md must be a string";
  }
  const targets = body.targets;
  const want = service === "blog" ? "blog" : "nas";
  if (!Array.isArray(targets) || targets.length !== 1 || targets[0] !== want) {
    return `targets must be ["${want}"]`;
  }
  if (service === "podcast" && body.transform !== "read") return 'transform must be "read"';
  if (service === "blog" && body.transform !== undefined) return "the blog takes no transform";
  return undefined;
}

/**
 * Starts the downstream server on 127.0.0.1 (port 0 picks a free port).
 *
 * @param options.appId The accepted `X-App-ID`; default `test-app-id`.
 * @param options.cookie The accepted access cookie; default `CF_Authorization=test-cookie`.
 */
export function startDownstream(
  options: { port?: number; appId?: string; cookie?: string } = {},
): Downstream {
  const appId = options.appId ?? "test-app-id";
  const cookie = options.cookie ?? "CF_Authorization=test-cookie";
  const modes: Record<Service, Mode> = { notes: "ok", blog: "ok", podcast: "ok" };
  const requests: Recorded[] = [];
  const posts = new Set<string>();
  const hanging = new Set<() => void>();
  let next = 1;

  async function answer(service: Service, req: Request, body: unknown): Promise<Response> {
    switch (modes[service]) {
      case "fail":
        return json({ status: "error", code: 500, message: "internal failure" }, 500);
      case "hang":
        await new Promise<void>((resolve) => hanging.add(resolve));
        return json({ status: "error", message: "released" }, 500);
      case "garbage":
        return new Response("\u0000\u0001 not json {", { headers: JSON_HEADERS });
      case "html":
        return new Response("<html><body>Sign in</body></html>", {
          headers: { "content-type": "text/html" },
        });
      case "reject":
        // Valid JSON, but the service says no in its own terms.
        return service === "notes"
          ? json({ code: 40001, message: "quota exceeded" })
          : service === "blog"
          ? json({ blog: { status: "failed", message: "duplicate slug" } })
          : json({ status: "failed", message: "queue full" });
      case "ok":
        break;
    }
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return json({ status: "error", code: 400, message: "body must be a JSON object" }, 400);
    }
    const problem = checkBody(service, body as Record<string, unknown>);
    if (problem !== undefined) return json({ status: "error", code: 400, message: problem }, 400);
    const id = String(next++);
    if (service === "notes") return json({ code: 0, doc_id: `doc-${id}` });
    if (service === "blog") {
      posts.add(id);
      return json({
        blog: { status: "success", redirect_url: `${new URL(req.url).origin}/posts/${id}` },
      });
    }
    return json({ status: "success", message: `queued for reading as episode ${id}` });
  }

  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: options.port ?? 0,
    onListen: () => {},
  }, async (req) => {
    const url = new URL(req.url);
    const headers = Object.fromEntries(req.headers);
    const text = await req.text();
    let body: unknown;
    try {
      body = text === "" ? undefined : JSON.parse(text);
    } catch {
      body = text;
    }
    const deleteMatch = /^\/delete\/([^/]+)$/.exec(url.pathname);
    if (req.method === "POST" && deleteMatch) {
      requests.push({ service: "delete", path: url.pathname, headers, body });
      if (req.headers.get("cookie") !== cookie) {
        return new Response("Forbidden: no valid access cookie", { status: 403 });
      }
      const id = decodeURIComponent(deleteMatch[1]!);
      if (!posts.delete(id)) return new Response("No such post", { status: 404 });
      return new Response(null, { status: 303, headers: { location: "/" } });
    }
    if (req.method !== "POST") return json({ message: "not found" }, 404);
    if (url.pathname === "/api/notes/import") {
      requests.push({ service: "notes", path: url.pathname, headers, body });
      return await answer("notes", req, body);
    }
    if (url.pathname === "/api/publish") {
      const targets = (body as { targets?: unknown })?.targets;
      const podcast = Array.isArray(targets) && targets.includes("nas");
      const service: Service = podcast ? "podcast" : "blog";
      requests.push({ service, path: url.pathname, headers, body });
      if (podcast && req.headers.get("x-app-id") !== appId) {
        return json({ status: "error", message: "unknown X-App-ID" }, 401);
      }
      return await answer(service, req, body);
    }
    return json({ message: "not found" }, 404);
  });

  const close = async () => {
    for (const release of hanging) release();
    hanging.clear();
    await server.shutdown();
  };
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    appId,
    cookie,
    modes,
    requests,
    posts,
    close,
    [Symbol.asyncDispose]: close,
  };
}

if (import.meta.main) {
  const port = Number(Deno.args[0] ?? "8788");
  const downstream = startDownstream({ port });
  console.log(`downstream test services on ${downstream.url}`);
  console.log(`  RELAY_PUBLISH_URL=${downstream.url}`);
  console.log(`  RELAY_APP_ID=${downstream.appId}`);
  console.log(`  RELAY_BLOG_ACCESS_COOKIE='${downstream.cookie}'`);
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(signal, () => downstream.close().then(() => Deno.exit(0)));
  }
}

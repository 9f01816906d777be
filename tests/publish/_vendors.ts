/**
 * Loopback stand-ins for the services a household runs, answering in their documented
 * shapes: Tencent IMA's notes API (`import_doc`, `append_doc`, codes 20002 and 100009), a
 * Memos server (`POST /api/v1/memos`, Bearer token) and an endpoint behind Cloudflare Access
 * (service-token headers, else a 302 to the Access login page). Nothing leaves 127.0.0.1.
 */

/** The credentials the stand-ins accept. */
export const VENDOR_SECRETS = {
  imaClientId: "ima-client-0123",
  imaApiKey: "ima-key-4567",
  memosToken: "memos-token-89ab",
  cfId: "cf-id.access",
  cfSecret: "cf-secret-cdef",
} as const;

/** One request a stand-in received. */
export interface VendorRequest {
  readonly path: string;
  readonly headers: Headers;
  readonly body: Record<string, unknown>;
}

/** The running stand-ins and the knobs of their failures. */
export interface Vendors extends AsyncDisposable {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** Every request, in order. */
  readonly requests: VendorRequest[];
  /** IMA notes by id: their content, appended parts joined. */
  readonly notes: Map<string, string>;
  /** Memos by name. */
  readonly memos: Map<string, Record<string, unknown>>;
  /** Episodes the protected endpoint accepted. */
  readonly episodes: Record<string, unknown>[];
  /** The next this many IMA calls answer code 20002 (rate-limited). */
  imaRateLimited: number;
  /** IMA refuses content over this many UTF-8 bytes with code 100009. */
  imaMaxBytes: number;
  /** The next this many Memos calls answer HTTP 429. */
  memosRateLimited: number;
}

/** Starts the stand-ins on 127.0.0.1, port 0. */
export function startVendors(): Vendors {
  const requests: VendorRequest[] = [];
  const notes = new Map<string, string>();
  const memos = new Map<string, Record<string, unknown>>();
  const episodes: Record<string, unknown>[] = [];
  // One count per vendor: the relay calls them at once, in no fixed order.
  const counters = { notes: 0, memos: 0, episodes: 0 };
  const json = (body: unknown, status = 200) => Response.json(body, { status });
  const state = {
    imaRateLimited: 0,
    imaMaxBytes: 1_000_000,
    memosRateLimited: 0,
  };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const path = new URL(req.url).pathname;
    let body: Record<string, unknown> = {};
    try {
      body = await req.json();
    } catch {
      // not JSON
    }
    requests.push({ path, headers: req.headers, body });
    if (path.startsWith("/openapi/note/v1/")) {
      if (
        req.headers.get("ima-openapi-clientid") !== VENDOR_SECRETS.imaClientId ||
        req.headers.get("ima-openapi-apikey") !== VENDOR_SECRETS.imaApiKey
      ) {
        return json({ code: 10002, msg: "invalid client id or api key" }, 401);
      }
      if (state.imaRateLimited > 0) {
        state.imaRateLimited--;
        return json({ code: 20002, msg: "rate limited, try later" });
      }
      const content = String(body.content ?? "");
      if (body.content_format !== 1) return json({ code: 10001, msg: "bad content_format" });
      if (new TextEncoder().encode(content).length > state.imaMaxBytes) {
        return json({ code: 100009, msg: "content too large" });
      }
      if (path.endsWith("/import_doc")) {
        const id = `note-${++counters.notes}`;
        notes.set(id, content);
        return json({ code: 0, msg: "", data: { note_id: id } });
      }
      if (path.endsWith("/append_doc")) {
        const id = String(body.note_id);
        if (!notes.has(id)) return json({ code: 10004, msg: "no such note" });
        notes.set(id, notes.get(id)! + content);
        return json({ code: 0, msg: "", data: { note_id: id } });
      }
    }
    if (path === "/api/v1/memos" && req.method === "POST") {
      if (req.headers.get("authorization") !== `Bearer ${VENDOR_SECRETS.memosToken}`) {
        return json({ code: 16, message: "the access token is invalid" }, 401);
      }
      if (state.memosRateLimited > 0) {
        state.memosRateLimited--;
        return json({ code: 8, message: "too many requests" }, 429);
      }
      const uid = `m${++counters.memos}`;
      const memo = { name: `memos/${uid}`, uid, ...body };
      memos.set(memo.name, memo);
      return json(memo);
    }
    if (path === "/nas/api/episodes") {
      if (
        req.headers.get("cf-access-client-id") !== VENDOR_SECRETS.cfId ||
        req.headers.get("cf-access-client-secret") !== VENDOR_SECRETS.cfSecret
      ) {
        return new Response(null, {
          status: 302,
          headers: {
            location: "https://household.cloudflareaccess.com/cdn-cgi/access/login/nas.example" +
              "?kid=abc&redirect_url=%2Fnas%2Fapi%2Fepisodes",
          },
        });
      }
      const id = `ep-${++counters.episodes}`;
      episodes.push({ id, ...body });
      return json({ ok: true, episode: { id } }, 201);
    }
    return json({ message: "not found" }, 404);
  });
  const url = `http://127.0.0.1:${server.addr.port}`;
  return Object.assign(state, {
    url,
    requests,
    notes,
    memos,
    episodes,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
    },
  });
}

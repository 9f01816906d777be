/**
 * The physical limit the relay is measured against: a bare `Deno.serve` that answers
 * "OK", or, for a path whose body was set, that body as `application/json` (the
 * same-payload reference of `GET /peek` and `GET /results`). `PUT /<path>` sets the body of
 * `<path>` (the bench copies the relay's answer there before each read load). Prints
 * `listening <port>` once it listens on 127.0.0.1.
 *
 * @module
 */

const bodies = new Map<string, string>();
const JSON_HEADERS = { "content-type": "application/json" };

Deno.serve({
  hostname: "127.0.0.1",
  port: 0,
  onListen: ({ port }) => console.log(`listening ${port}`),
}, async (req) => {
  const url = req.url;
  const start = url.indexOf("/", url.indexOf("//") + 2);
  const end = url.indexOf("?", start);
  const path = end < 0 ? url.slice(start) : url.slice(start, end);
  if (req.method === "PUT") {
    bodies.set(path, await req.text());
    return new Response(null, { status: 204 });
  }
  const body = bodies.get(path);
  return body === undefined ? new Response("OK") : new Response(body, { headers: JSON_HEADERS });
});

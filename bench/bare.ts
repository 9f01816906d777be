/**
 * The physical limit the relay is measured against: a bare `Deno.serve` that answers
 * "OK" to everything. Prints `listening <port>` once it listens on 127.0.0.1.
 *
 * @module
 */

Deno.serve({
  hostname: "127.0.0.1",
  port: 0,
  onListen: ({ port }) => console.log(`listening ${port}`),
}, () => new Response("OK"));

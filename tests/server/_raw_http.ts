/**
 * A raw HTTP exchange over TCP, for tests where the request's exact bytes matter (a missing
 * `Host`, an HTTP/1.0 request line), which `fetch` cannot send.
 *
 * @module
 */

/**
 * Sends `request` as raw bytes on a new connection and reads until the server closes it.
 *
 * @param url The server's address, e.g. `http://127.0.0.1:8787`.
 * @param request The request's bytes as text, e.g. `GET /health HTTP/1.0\r\n\r\n`.
 * @returns The answer's status line and body.
 */
export async function rawRequest(
  url: string,
  request: string,
): Promise<{ status: string; body: string }> {
  const { hostname, port } = new URL(url);
  const conn = await Deno.connect({ hostname, port: Number(port) });
  await conn.write(new TextEncoder().encode(request));
  const answer = await new Response(conn.readable).text();
  const [head = "", body = ""] = answer.split("\r\n\r\n");
  return { status: head.split("\r\n")[0] ?? "", body };
}

/**
 * Where the built-in services say they are: the origin of every absolute URL in their
 * feeds, pages and answers. It is the configured public URL (`--public-url`), else the
 * address the relay listens on, and never a request's `Host` header: a feed is kept and
 * handed to every reader, and a cache or proxy in front of the relay keeps it too, so a
 * `Host: evil.example` that made its way into one would send every subscriber's player to
 * that host. And what the site tells crawlers: `/robots.txt`.
 *
 * @module
 */

/** Until the relay has told where it listens (a test serving the app alone). */
const UNKNOWN_ORIGIN = "http://localhost";

/** The origin of the services' absolute URLs. */
export class SiteOrigin {
  readonly #configured: string | undefined;
  #listening: string | undefined;

  /** @param publicUrl `--public-url`, e.g. `https://relay.example.org/relay`, if set. */
  constructor(publicUrl: string | undefined) {
    this.#configured = publicUrl?.replace(/\/+$/, "");
  }

  /**
   * Records where the relay listens, e.g. `http://192.168.1.20:8787`: the origin when no
   * public URL is configured.
   */
  listening(url: string): void {
    this.#listening = url.replace(/\/+$/, "");
  }

  /** The origin, without a trailing slash: public URL, else listening address. */
  get origin(): string {
    return this.#configured ?? this.#listening ?? UNKNOWN_ORIGIN;
  }
}

/**
 * `/robots.txt` (RFC 9309): crawlers may read the public blog and podcast, and nothing
 * else; a private blog or podcast is closed to them too. Without the file, every crawler's
 * visit left a 404 in the log.
 */
export function robotsResponse(
  options: { privateBlog?: boolean | undefined; privatePodcast?: boolean | undefined },
): Response {
  const lines = [
    "# Content Relay: only its blog and podcast are pages for the public.",
    "User-agent: *",
    ...(options.privateBlog ? [] : ["Allow: /blog/"]),
    ...(options.privatePodcast ? [] : ["Allow: /podcast/"]),
    "Disallow: /",
  ];
  return new Response(`${lines.join("\n")}\n`, {
    headers: {
      "content-type": "text/plain; charset=utf-8",
      "cache-control": "public, max-age=3600",
    },
  });
}

/**
 * The blog's renders, each on a thread of its own (`render_worker.ts`, which runs
 * render.ts): rendering a large post costs real time and memory (a 380 KB Markdown table
 * took 0.4 s on the main thread here, over a second on a small machine, and tens of MiB),
 * so the relay keeps answering while it runs, and the memory goes with the thread. This
 * module loads no renderer itself, so that the main thread never holds markdown-it for the
 * blog.
 *
 * @module
 */

/**
 * The version of the HTML render.ts makes. Raise it whenever a change there changes the
 * HTML of some Markdown: every stored rendering is then made again, once, when next read.
 */
export const RENDERER_VERSION = 1;

/**
 * Renders Markdown as HTML on a thread of its own, ended after. Where the thread cannot
 * start or load (a binary compiled without the worker's module), renders on this thread.
 */
export function renderOffThread(text: string): Promise<string> {
  const here = async () => (await import("./render.ts")).renderMarkdown(text);
  let worker: Worker;
  try {
    worker = new Worker(new URL("./render_worker.ts", import.meta.url).href, { type: "module" });
  } catch {
    return here();
  }
  return new Promise((resolve, reject) => {
    worker.onmessage = (event: MessageEvent<string>) => {
      worker.terminate();
      resolve(event.data);
    };
    worker.onerror = (event) => {
      event.preventDefault();
      worker.terminate();
      here().then(resolve, reject);
    };
    worker.postMessage(text);
  });
}

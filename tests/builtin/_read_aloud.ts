/**
 * Publishing an article for reading aloud through the services' API, and waiting until its
 * episode is ready or has failed, for the podcast's tests.
 *
 * @module
 */

import assert from "node:assert/strict";
import { APP_ID, eventually, postJson, type Running } from "./_services.ts";

/** An episode as `/podcast/episodes` lists it, as far as the tests read it. */
export interface ListedEpisode {
  id: string;
  state: string;
  duration_s: number;
  error?: string;
  skipped?: string[];
}

/**
 * Publishes `content` to the podcast with the app id (a string as `content`, or both fields),
 * then waits for the episode to settle.
 *
 * @param state The state it must end in: `ready` (a failure then fails the test) or `failed`.
 * @returns The episode as listed.
 */
export async function readAloud(
  relay: Running,
  title: string,
  content: string | { content: string; content_md: string },
  state: "ready" | "failed" = "ready",
): Promise<ListedEpisode> {
  const res = await postJson(`${relay.url}/downstream/api/publish`, {
    title,
    ...(typeof content === "string" ? { content } : content),
    targets: ["nas"],
    transform: "read",
  }, { "x-app-id": APP_ID });
  assert.equal(res.status, 200);
  await res.body?.cancel();
  return await eventually(async () => {
    const found: ListedEpisode =
      (await (await fetch(`${relay.url}/podcast/episodes`)).json()).episodes[0];
    if (state === "ready") assert.notEqual(found.state, "failed", found.error ?? "");
    return found.state === state ? found : undefined;
  });
}

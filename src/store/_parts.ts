/**
 * Content chunking. Content is stored as UTF-8 bytes in parts of at most
 * {@linkcode CHUNK_BYTES}, each a raw `Uint8Array` value, under keys ending in `[…, id, part]`
 * so that one `list()` reads whole items in order; how many parts an item has, and when
 * it was submitted, are in its queue's metadata. (Files written before that hold a head
 * record as part 0: a few fields plus the first bytes. They are still read.) Bytes are not
 * V8-serialised as an object would be, which costs the main thread about 5 µs a value.
 *
 * This module splits content and reads it back; writing and deleting parts are mutations of
 * a commit (`setParts`, `deleteParts` in `_state.ts`).
 *
 * @module
 */

import type { ItemHead, ResultHead } from "./kv_keys.ts";

/**
 * Bytes of content per KV value. A KV value holds at most 65,536 bytes; an older file's
 * head part also carries a few fields and V8 serialisation framing, so stay well below.
 */
export const CHUNK_BYTES = 60_000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Splits content into UTF-8 byte parts of at most CHUNK_BYTES; always at least one. Content
 * that fits one part is returned as its encoding, not a copy: every new byte buffer costs
 * about 1.5 µs (docs/benchmarks.md, "Writes").
 */
export function splitParts(content: string): Uint8Array[] {
  const bytes = encoder.encode(content);
  // A view of a larger buffer would be stored whole (see below): use it only when it is not.
  if (bytes.length <= CHUNK_BYTES && bytes.byteLength === bytes.buffer.byteLength) return [bytes];
  const parts: Uint8Array[] = [];
  for (let i = 0; i < bytes.length || parts.length === 0; i += CHUNK_BYTES) {
    // slice, not subarray: KV would serialise the whole underlying buffer of a view.
    parts.push(bytes.slice(i, i + CHUNK_BYTES));
  }
  return parts;
}

/**
 * Parts of one item or result as listed: every part's bytes, and part 0's head record when
 * an older file stored one.
 */
export interface PartSlot {
  head: ItemHead | ResultHead | undefined;
  data: Uint8Array[];
}

/** Groups listed part entries, whose keys end in `[…, id, part]`, by id. */
export async function collectParts(
  iter: Deno.KvListIterator<ItemHead | ResultHead | Uint8Array>,
): Promise<Map<number, PartSlot>> {
  const found = new Map<number, PartSlot>();
  for await (const entry of iter) {
    const id = entry.key.at(-2) as number;
    const part = entry.key.at(-1) as number;
    const slot = found.get(id) ?? { head: undefined, data: [] };
    if (part === 0 && !(entry.value instanceof Uint8Array)) {
      const head = entry.value as ItemHead | ResultHead;
      slot.head = head;
      slot.data[0] = head.data;
    } else {
      slot.data[part] = entry.value as Uint8Array;
    }
    found.set(id, slot);
  }
  return found;
}

/** The content of `slot` when it holds all `parts` parts, else `undefined`. */
export function decodeSlot(slot: PartSlot, parts: number): string | undefined {
  const bytes = joinParts(slot, parts);
  return bytes === undefined ? undefined : decoder.decode(bytes);
}

/**
 * Reads and joins the `parts` parts stored under `prefix` (`[…, id]`).
 *
 * @returns The content, or `undefined` when parts are missing.
 * @throws KV errors.
 */
export async function readParts(
  kv: Deno.Kv,
  prefix: Deno.KvKey,
  parts: number,
): Promise<string | undefined> {
  const found = await collectParts(kv.list<ItemHead | Uint8Array>({ prefix }));
  const slot = found.values().next().value;
  if (slot === undefined) return undefined;
  return decodeSlot(slot, parts);
}

/** Concatenates parts 0 … parts-1; `undefined` when any is missing (a torn read). */
function joinParts(slot: PartSlot, parts: number): Uint8Array | undefined {
  if (slot.data.length !== parts) return undefined;
  let size = 0;
  for (let i = 0; i < parts; i++) {
    const data = slot.data[i];
    if (data === undefined) return undefined;
    size += data.length;
  }
  const out = new Uint8Array(size);
  let offset = 0;
  for (const data of slot.data) {
    out.set(data, offset);
    offset += data.length;
  }
  return out;
}

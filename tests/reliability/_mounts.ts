/**
 * Real file systems for the reliability tests: a small tmpfs to fill up, an ext4 image on a
 * loop device that the kernel turns read-only (and whose journal it aborts) on an error, as
 * after real disk errors. Mounting needs root: {@linkcode NO_MOUNT} says why it is not
 * possible here, and the tests that need it are skipped.
 *
 * @module
 */

import assert from "node:assert/strict";
import { statfsSync } from "node:fs";
import type { relayCall } from "../_helpers.ts";

/** Runs a command; returns its exit code and output. */
export async function sh(program: string, ...args: string[]) {
  const out = await new Deno.Command(program, { args, stdout: "piped", stderr: "piped" })
    .output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
}

/** Why file systems cannot be mounted here, or `undefined` when they can. */
export async function cannotMount(): Promise<string | undefined> {
  if (Deno.build.os !== "linux") return "not Linux";
  if (Deno.uid() !== 0) return "not root";
  const dir = await Deno.makeTempDir({ prefix: "relay-mount-probe-" });
  try {
    const mounted = await sh("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir);
    if (mounted.code !== 0) return `mount failed: ${mounted.stderr.trim()}`;
    await sh("umount", dir);
    return undefined;
  } catch (error) {
    return `cannot run mount: ${String(error)}`;
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Why file systems cannot be mounted here (the tests that mount are skipped), or `undefined`. */
export const NO_MOUNT: string | undefined = await cannotMount();
if (NO_MOUNT !== undefined) {
  console.warn(
    `reliability tests: skipping the tests that mount a tmpfs or an ext4 image: ${NO_MOUNT}`,
  );
}

/** A mounted file system in a temp folder, unmounted and removed on dispose. */
export interface Mounted extends AsyncDisposable {
  /** Where it is mounted. */
  dir: string;
}

/** Mounts a tmpfs of `size` (e.g. `"8m"`). */
export async function mountTmpfs(size: string): Promise<Mounted> {
  const dir = await Deno.makeTempDir({ prefix: "relay-tmpfs-" });
  const mounted = await sh("mount", "-t", "tmpfs", "-o", `size=${size},mode=0700`, "tmpfs", dir);
  assert.equal(mounted.code, 0, mounted.stderr);
  return {
    dir,
    async [Symbol.asyncDispose]() {
      await sh("umount", "-l", dir);
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/**
 * Mounts a new ext4 image of 32 MiB through a loop device, with `errors=remount-ro`: an error
 * the kernel finds (or one triggered through sysfs) turns it read-only, as on a failing disk.
 */
export async function mountExt4(): Promise<Mounted & { device: string; image: string }> {
  const work = await Deno.makeTempDir({ prefix: "relay-ext4-" });
  const image = `${work}/disk.img`;
  const dir = `${work}/mnt`;
  await Deno.mkdir(dir);
  await sh("truncate", "-s", "32M", image);
  const made = await sh("mkfs.ext4", "-q", "-F", image);
  assert.equal(made.code, 0, made.stderr);
  const mounted = await sh("mount", "-o", "loop,errors=remount-ro", image, dir);
  assert.equal(mounted.code, 0, mounted.stderr);
  const source = (await sh("findmnt", "-n", "-o", "SOURCE", dir)).stdout.trim();
  return {
    dir,
    device: source.replace(/^\/dev\//, ""),
    image,
    async [Symbol.asyncDispose]() {
      await sh("umount", "-l", dir);
      await Deno.remove(work, { recursive: true });
    },
  };
}

/** Bytes the file system of `path` has free. */
export function freeBytes(path: string): number {
  const s = statfsSync(path);
  return s.bavail * s.bsize;
}

/** Content of about `bytes` that no compression or duplicate check shrinks. */
export function randomContent(bytes: number): string {
  const raw = new Uint8Array(Math.ceil(bytes * 3 / 4));
  for (let at = 0; at < raw.length; at += 65536) {
    crypto.getRandomValues(raw.subarray(at, at + 65536));
  }
  let text = "";
  for (const b of raw) text += String.fromCharCode(b);
  return btoa(text);
}

/**
 * The sysfs file that makes the kernel treat an ext4 file system as failed (remounted
 * read-only, its journal aborted: what was not yet on the disk is lost); `undefined`, with a
 * line saying that `what` is not run, when the kernel has none.
 */
export async function errorTrigger(
  disk: { device: string },
  what: string,
): Promise<string | undefined> {
  const trigger = `/sys/fs/ext4/${disk.device}/trigger_fs_error`;
  try {
    await Deno.stat(trigger);
    return trigger;
  } catch {
    console.warn(`no ${trigger}: ${what} is not run`);
    return undefined;
  }
}

/**
 * Takes every byte left on the file system of `dir`, as another program filling the disk
 * would: writes `<dir>/filler` until not even one more byte fits.
 *
 * @returns The filler's path: remove it to give the space back.
 */
export async function fillDisk(dir: string): Promise<string> {
  const path = `${dir}/filler`;
  const filler = await Deno.open(path, { write: true, create: true });
  const block = new Uint8Array(65536);
  for (let size = block.length; size >= 1;) {
    try {
      await filler.write(block.subarray(0, size));
    } catch {
      size = Math.floor(size / 2);
    }
  }
  filler.close();
  return path;
}

/**
 * Fills the disk of `dir` until the relay refuses a submit (507): the store has then given up
 * its room for pulls and acks. Filled again after each accepted submit, since a write cut off
 * by the full disk (a backup, the search index) gives back the room it had taken.
 *
 * @param call The relay's API (`relayCall`).
 * @returns The filler's path: remove it to give the space back.
 */
export async function fillUntilRefused(
  dir: string,
  call: ReturnType<typeof relayCall>,
): Promise<string> {
  for (;;) {
    const filler = await fillDisk(dir);
    const submit = await call("/submit?queue=general", { method: "POST", body: "one more" });
    await submit.body?.cancel();
    if (submit.status !== 200) {
      assert.equal(submit.status, 507);
      return filler;
    }
  }
}

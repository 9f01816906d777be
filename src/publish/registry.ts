/**
 * The publish targets, registered once: every part that names, validates, documents or
 * publishes to a target reads this list (the request schema, the targets file, the fan-out,
 * the OpenAPI document, the start-up line). Adding a target kind is one module beside this one
 * and one line below (docs/design.md, "Adding a publish target").
 *
 * @module
 */

import { blogTarget } from "./blog_target.ts";
import { notesTarget } from "./notes_target.ts";
import { podcastTarget } from "./podcast_target.ts";
import type { TargetKind } from "./target_kind.ts";

/** Every target kind, by name, in the order lists show them. */
export const TARGET_KINDS = {
  notes: notesTarget,
  blog: blogTarget,
  podcast: podcastTarget,
} as const satisfies Record<string, TargetKind>;

/** One publish target's name. */
export type Target = keyof typeof TARGET_KINDS;

/** The target names, in order: `notes`, `blog`, `podcast`. */
export const TARGETS: readonly Target[] = Object.keys(TARGET_KINDS) as Target[];

/** Every name a target is accepted under: its own, then the aliases (`nas`). */
export const TARGET_NAMES: readonly string[] = [
  ...TARGETS,
  ...TARGETS.flatMap((name) => TARGET_KINDS[name].aliases),
];

/**
 * The target a name stands for: its own name or one of its aliases.
 *
 * @param name As a request, an option or the targets file spells it (exact case).
 * @returns The target, or `undefined` when no target has that name.
 */
export function targetNamed(name: string): Target | undefined {
  if (Object.hasOwn(TARGET_KINDS, name)) return name as Target;
  return TARGETS.find((target) => TARGET_KINDS[target].aliases.includes(name));
}

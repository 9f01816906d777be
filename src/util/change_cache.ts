/**
 * A value made from a collection and kept until the collection changes: the built-in blog's
 * and podcast's feeds are built once per change of their posts or episodes, not once per
 * read, however many podcast apps and feed readers poll them.
 *
 * @module
 */

/**
 * Keeps one value built from a collection. The collection's owner calls {@linkcode changed}
 * after each change; {@linkcode get} builds anew only after a change or for another key.
 */
export class ChangeCache {
  #generation = 0;
  #entry: { generation: number; key: string; value: Promise<unknown> } | undefined;

  /** Marks a change: the value kept now is built again when next asked for. */
  changed(): void {
    this.#generation++;
  }

  /**
   * The value for `key` (what it depends on besides the collection, e.g. the site's origin),
   * built by `build` when there is none since the last change. Readers who come while it is
   * built share that build; a build that fails is not kept, so the next reader tries again.
   *
   * @returns What `build` resolves to.
   * @throws whatever `build` rejects with.
   */
  get<T>(key: string, build: () => Promise<T>): Promise<T> {
    const entry = this.#entry;
    if (entry?.generation === this.#generation && entry.key === key) {
      return entry.value as Promise<T>;
    }
    const value = build();
    const kept = { generation: this.#generation, key, value };
    this.#entry = kept;
    value.catch(() => {
      if (this.#entry === kept) this.#entry = undefined;
    });
    return value;
  }
}

/**
 * The search index's SQLite file, through `node:sqlite` (SQLite with FTS5, built into Deno):
 * a table of documents (kind, key, title, URL, time, plain text), an FTS5 table over it with
 * the `trigram` tokenizer (any run of three or more characters, in any script), and a
 * contentless FTS5 table of the same text split into words (`text.ts`) for shorter terms.
 * A `meta` table holds the layout's version and the generation marker the index was last
 * closed with. Synchronous: only the index's thread (`index_worker.ts`) uses it.
 *
 * The file is derived data. Nothing in it is needed to rebuild it, so it is written without
 * syncing to the disk: a file left behind by a crash is never trusted, since its marker was
 * cleared when the relay started writing to it.
 *
 * @module
 */

import { DatabaseSync, type StatementSync } from "node:sqlite";
import {
  type ParsedQuery,
  type SearchDocument,
  type SearchHit,
  type SearchKind,
  segmented,
  snippet,
} from "./text.ts";

/**
 * The version of the file's layout and of how text is prepared for it. Raise it when either
 * changes: an index of another version is rebuilt.
 */
export const INDEX_VERSION = "1";

/** One change to the index. */
export type IndexOp =
  | { readonly op: "put"; readonly doc: SearchDocument }
  | { readonly op: "remove"; readonly kind: SearchKind; readonly key: string }
  | {
    /** Removes the documents of `kind` made before `from` (epoch ms); all of them with `null`. */
    readonly op: "keepFrom";
    readonly kind: SearchKind;
    readonly from: number | null;
  };

/** What a search asks. */
export interface SearchRequest {
  /** The query, made safe by `parseQuery`. */
  readonly query: ParsedQuery;
  /** Only documents of this kind, when given. */
  readonly kind?: SearchKind | undefined;
  /** Hits at most. */
  readonly limit: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs(
  id INTEGER PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL, title TEXT NOT NULL,
  url TEXT NOT NULL, t INTEGER NOT NULL, body TEXT NOT NULL, UNIQUE(kind, key));
CREATE VIRTUAL TABLE IF NOT EXISTS tri USING fts5(
  title, body, content='docs', content_rowid='id', tokenize='trigram');
CREATE VIRTUAL TABLE IF NOT EXISTS words USING fts5(
  title, body, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2');
`;

/** The index file, open. */
export class IndexDb {
  readonly #db: DatabaseSync;
  readonly #statements = new Map<string, StatementSync>();

  /**
   * Opens (creating when missing) the index at `path` and checks it: SQLite's quick check of
   * every page, then the layout's version.
   *
   * @throws when the file is not a SQLite database, is damaged, or is of another version: the
   *   caller removes it and calls {@linkcode IndexDb.create}.
   */
  constructor(path: string, options: { check: boolean }) {
    this.#db = new DatabaseSync(path);
    try {
      this.#db.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;");
      if (options.check) {
        const check = this.#db.prepare("PRAGMA quick_check").get() as { quick_check?: string };
        if (check?.quick_check !== "ok") throw new Error(`damaged: ${check?.quick_check}`);
      }
      this.#db.exec(SCHEMA);
      const version = this.meta("version");
      if (version === undefined) this.setMeta("version", INDEX_VERSION);
      else if (version !== INDEX_VERSION) throw new Error(`index version ${version}`);
    } catch (error) {
      this.#db.close();
      throw error;
    }
  }

  /** A value of the `meta` table. */
  meta(key: string): string | undefined {
    const row = this.#prepare("SELECT value FROM meta WHERE key = ?").get(key) as
      | { value: string }
      | undefined;
    return row?.value;
  }

  /** Sets a value of the `meta` table. */
  setMeta(key: string, value: string): void {
    this.#prepare("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)").run(key, value);
  }

  /** Applies changes in one transaction. */
  apply(ops: readonly IndexOp[]): void {
    this.#db.exec("BEGIN");
    try {
      for (const op of ops) {
        if (op.op === "put") this.#put(op.doc);
        else if (op.op === "remove") this.#remove(op.kind, op.key);
        else this.#keepFrom(op.kind, op.from);
      }
      this.#db.exec("COMMIT");
    } catch (error) {
      this.#db.exec("ROLLBACK");
      throw error;
    }
  }

  /** Documents in the index, by kind. */
  counts(): Record<string, number> {
    const rows = this.#prepare("SELECT kind, count(*) AS n FROM docs GROUP BY kind").all() as {
      kind: string;
      n: number;
    }[];
    return Object.fromEntries(rows.map((row) => [row.kind, row.n]));
  }

  /**
   * The best hits for a query: documents matching every term, ranked by FTS5's BM25 (the
   * trigram table's when the query has a long term, else the words table's), newest first
   * among equals.
   */
  search(request: SearchRequest): SearchHit[] {
    const { query, kind, limit } = request;
    const parts: string[] = [];
    const args: (string | number)[] = [];
    if (query.trigram !== undefined) {
      parts.push(`SELECT rowid AS id, bm25(tri) AS rank FROM tri WHERE tri MATCH ?`);
      args.push(query.trigram);
    }
    if (query.words !== undefined) {
      parts.push(`SELECT rowid AS id, bm25(words) AS rank FROM words WHERE words MATCH ?`);
      args.push(query.words);
    }
    // With both, a document must be among both tables' matches; it is ranked by the first.
    const matches = parts.length === 1
      ? `(${parts[0]})`
      : `(SELECT a.id, a.rank FROM (${parts[0]}) a JOIN (${parts[1]}) b ON a.id = b.id)`;
    // Two steps: the ranking sorts ids only, so that a common word matching thousands of
    // documents does not carry each one's text through the sort; the text is read for the
    // few kept.
    // Equal ranks go newest first: by time when a kind is asked for (its table is read for
    // the kind anyway), else by the row id, which grows with each document written.
    const sql = kind === undefined
      ? `SELECT m.id AS id FROM ${matches} m ORDER BY m.rank, m.id DESC LIMIT ?`
      : `SELECT m.id AS id FROM ${matches} m JOIN docs d ON d.id = m.id WHERE d.kind = ?
      ORDER BY m.rank, d.t DESC LIMIT ?`;
    if (kind !== undefined) args.push(kind);
    args.push(limit);
    const ids = this.#prepare(sql).all(...args) as { id: number }[];
    const read = this.#prepare("SELECT kind, title, url, t, body FROM docs WHERE id = ?");
    return ids.map(({ id }) => {
      const row = read.get(id) as {
        kind: SearchKind;
        title: string;
        url: string;
        t: number;
        body: string;
      };
      return {
        kind: row.kind,
        title: row.title,
        url: row.url,
        snippet: snippet(row.body, query.terms),
        t: row.t,
      };
    });
  }

  /** Closes the file. */
  close(): void {
    this.#db.close();
  }

  #prepare(sql: string): StatementSync {
    let statement = this.#statements.get(sql);
    if (statement === undefined) {
      statement = this.#db.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  #put(doc: SearchDocument): void {
    this.#remove(doc.kind, doc.key);
    const { id } = this.#prepare(
      "INSERT INTO docs(kind, key, title, url, t, body) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
    ).get(doc.kind, doc.key, doc.title, doc.url, doc.t, doc.text) as { id: number };
    this.#prepare("INSERT INTO tri(rowid, title, body) VALUES (?, ?, ?)")
      .run(id, doc.title, doc.text);
    this.#prepare("INSERT INTO words(rowid, title, body) VALUES (?, ?, ?)")
      .run(id, segmented(doc.title), segmented(doc.text));
  }

  #remove(kind: string, key: string): void {
    const row = this.#prepare("SELECT id, title, body FROM docs WHERE kind = ? AND key = ?")
      .get(kind, key) as { id: number; title: string; body: string } | undefined;
    if (row !== undefined) this.#removeRow(row);
  }

  #removeRow(row: { id: number; title: string; body: string }): void {
    // An external-content FTS5 table is told the old values to take out of its index.
    this.#prepare("INSERT INTO tri(tri, rowid, title, body) VALUES ('delete', ?, ?, ?)")
      .run(row.id, row.title, row.body);
    this.#prepare("DELETE FROM words WHERE rowid = ?").run(row.id);
    this.#prepare("DELETE FROM docs WHERE id = ?").run(row.id);
  }

  #keepFrom(kind: string, from: number | null): void {
    const rows = this.#prepare("SELECT id, title, body FROM docs WHERE kind = ? AND t < ?")
      .all(kind, from ?? Number.MAX_SAFE_INTEGER) as {
        id: number;
        title: string;
        body: string;
      }[];
    for (const row of rows) this.#removeRow(row);
  }
}

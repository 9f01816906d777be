/**
 * Reading the API document in tests: its shape, and a check of values against its schemas
 * with a JSON Schema validator (ajv), `$ref`s to its components resolved.
 *
 * @module
 */
import { Ajv2020 } from "ajv/dist/2020.js";

/** The API document, as far as these tests read it. */
export type Document = {
  paths: Record<string, Record<string, unknown>>;
  components: { schemas: Record<string, unknown> };
};

/** `schema` with every `$ref` to the document's components replaced by what it names. */
export function inlined(schema: unknown, doc: Document): unknown {
  if (Array.isArray(schema)) return schema.map((item) => inlined(item, doc));
  if (typeof schema !== "object" || schema === null) return schema;
  const ref = (schema as { $ref?: string }).$ref;
  if (ref !== undefined) {
    return inlined(doc.components.schemas[ref.replace("#/components/schemas/", "")], doc);
  }
  return Object.fromEntries(
    Object.entries(schema).map(([key, value]) => [key, inlined(value, doc)]),
  );
}

/**
 * A check of values against the document's schemas: `undefined` when `value` fits
 * `schema`, else what ajv says is wrong.
 */
export function schemaChecker(
  doc: Document,
): (schema: unknown, value: unknown) => string | undefined {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const compiled = new Map<string, ReturnType<typeof ajv.compile>>();
  return (schema, value) => {
    const text = JSON.stringify(schema);
    let validate = compiled.get(text);
    if (validate === undefined) {
      validate = ajv.compile(inlined(schema, doc) as object);
      compiled.set(text, validate);
    }
    return validate(value) ? undefined : ajv.errorsText(validate.errors);
  };
}

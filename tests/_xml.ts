/**
 * The feeds' XML as the tests read it: fast-xml-parser with attributes under `@` and numeric
 * character references (`&#x3C;`) decoded, as every XML parser does (the library leaves them
 * as written unless asked).
 *
 * @module
 */

import { XMLParser } from "fast-xml-parser";

/** Parses a feed or page of XML; attributes are `@name` properties. */
export const feedXml: XMLParser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: "@",
  htmlEntities: true,
});

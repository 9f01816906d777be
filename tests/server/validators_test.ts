/**
 * HTTP dates as conditional headers hold them (RFC 9110, "Date/Time Formats"): the three
 * forms a recipient must read, and what is not one of them.
 */

import assert from "node:assert/strict";
import { httpDate } from "../../src/server/validators.ts";

const NOV_6_1994 = Date.UTC(1994, 10, 6, 8, 49, 37);

Deno.test("httpDate reads the IMF-fixdate and both obsolete forms", () => {
  assert.equal(httpDate("Sun, 06 Nov 1994 08:49:37 GMT"), NOV_6_1994);
  assert.equal(httpDate("Sunday, 06-Nov-94 08:49:37 GMT"), NOV_6_1994);
  assert.equal(httpDate("Sun Nov  6 08:49:37 1994"), NOV_6_1994);
  assert.equal(httpDate(" Sun, 06 Nov 1994 08:49:37 GMT "), NOV_6_1994);
  // A two-digit year more than 50 years ahead is the last such year past.
  const thisYear = new Date().getUTCFullYear();
  const ahead = (thisYear + 60) % 100;
  assert.equal(
    new Date(httpDate(`Friday, 01-Jan-${String(ahead).padStart(2, "0")} 00:00:00 GMT`)!)
      .getUTCFullYear(),
    thisYear + 60 - 100,
  );
});

Deno.test("httpDate refuses what is not an HTTP date, though Date.parse reads it", () => {
  for (
    const value of [
      "2026",
      "Nov 1",
      "Sun, 06 Nov 1994 08:49:37",
      "Sun, 06 Nov 1994 08:49:37 +0000",
      "Sun, 6 Nov 1994 08:49:37 GMT",
      "Sun, 31 Feb 1994 08:49:37 GMT",
      "Sun, 06 Nov 1994 25:00:00 GMT",
      "1994-11-06T08:49:37Z",
      "",
    ]
  ) {
    assert.equal(httpDate(value), undefined, value);
  }
});

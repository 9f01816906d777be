import assert from "node:assert/strict";
import { redactedTarget } from "../../src/server/auth.ts";

const SECRETS = { mainKey: "main-key-0123456789" };

Deno.test("redactedTarget() redacts every parameter whose decoded name holds `key`, in any case", () => {
  const cases: [string, string][] = [
    ["http://relay/peek?key=abc&queue=qa", "/peek?key=REDACTED&queue=qa"],
    ["http://relay/peek?queue=qa&KEY=abc", "/peek?queue=qa&KEY=REDACTED"],
    ["http://relay/peek?k%65y=abc", "/peek?k%65y=REDACTED"],
    ["http://relay/peek?K%45Y=abc;queue=qa", "/peek?K%45Y=REDACTED;queue=qa"],
    ["http://relay/peek?api_key=abc", "/peek?api_key=REDACTED"],
    ["http://relay/peek?my+Key=abc", "/peek?my+Key=REDACTED"],
  ];
  for (const [url, target] of cases) assert.equal(redactedTarget(url, SECRETS), target, url);
});

Deno.test("redactedTarget() leaves a query without a key as it is, and finds the main key anywhere", () => {
  assert.equal(redactedTarget("http://relay/peek?queue=qa", SECRETS), "/peek?queue=qa");
  assert.equal(
    redactedTarget("http://relay/results?since=12&wait=30", SECRETS),
    "/results?since=12&wait=30",
  );
  assert.equal(
    redactedTarget(`http://relay/peek?queue=${SECRETS.mainKey}`, SECRETS),
    "/peek?queue=REDACTED",
  );
  assert.equal(
    redactedTarget(`http://relay/${SECRETS.mainKey}/x?queue=qa`, SECRETS),
    "/REDACTED/x?queue=qa",
  );
});

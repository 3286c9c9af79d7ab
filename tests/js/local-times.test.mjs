// A due date written in its cohort's time zone is also given in the reader's own (static/js/local-times.js).
import assert from "node:assert/strict";
import { test } from "node:test";

import { inReadersZone } from "../../static/js/local-times.js";

test("17:00 in New York on 1 March 2027 is 07:00 the next day in Tokyo and 23:00 in Paris", () => {
  const due = "2027-03-01T17:00:00-05:00";
  assert.equal(inReadersZone(due, "Asia/Tokyo"), "Tue 2 Mar 2027, 07:00");
  assert.equal(inReadersZone(due, "Europe/Paris"), "Mon 1 Mar 2027, 23:00");
  assert.equal(inReadersZone(due, "America/New_York"), "Mon 1 Mar 2027, 17:00");
});

test("a date that cannot be read gives nothing to show", () => {
  assert.equal(inReadersZone("not a date", "Asia/Tokyo"), "");
});

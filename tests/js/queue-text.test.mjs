// The status line of a queued run (static/js/ws-client.js queueText), without a page. Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { queueText } from "../../static/js/ws-client.js";

test("a worker warming up is named with its phase; a place in line with its estimate", () => {
  assert.match(queueText({ position: 1, eta_s: 0, warming: { phase: "loading", warming_s: 12.4 } }),
    /warming up: loading the model, ~12 s so far/);
  assert.equal(queueText({ position: 3, eta_s: 40 }), "Waiting for a worker: number 3 in line, about 40 s…");
});

test("a demo worker the supervisor gave up on is said to be down, never to be warming up", () => {
  const text = queueText({ position: 1, eta_s: 0, warming: { phase: "given_up", warming_s: null, restarts: 5 } });
  assert.match(text, /demo worker is down/);
  assert.match(text, /stopped restarting it/);
  assert.doesNotMatch(text, /warming/);
});

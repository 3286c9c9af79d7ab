// One formatter for sizes and log-axis ticks (static/js/units.js), shared by cards and charts. Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { formatBytes as calculatorBytes } from "../../static/js/calculators/formulas.js";
import { bytesLogTicks, bytesTicks, bytesUnit, formatBytes, logTicks } from "../../static/js/units.js";

test("sizes read in binary units, the same from the calculators' module and the demos'", () => {
  assert.equal(formatBytes(131_072), "128 KiB");
  assert.equal(formatBytes(2_040_109), "1.95 MiB");
  assert.equal(formatBytes(500), "500 B");
  assert.equal(formatBytes(1023 * 1024), "1,023 KiB");
  assert.equal(formatBytes(NaN), "–");
  assert.equal(calculatorBytes, formatBytes);
});

test("a linear axis of bytes is drawn in the unit its largest value reads in", () => {
  assert.deepEqual(bytesUnit(3e6), { scale: 1024 ** 2, name: "MiB" });
  assert.deepEqual(bytesUnit(900), { scale: 1, name: "B" });
  assert.deepEqual(bytesUnit(5 * 1024 ** 3), { scale: 1024 ** 3, name: "GiB" });
});

test("a log axis under a decade or two gets 1-2-5 ticks with their magnitude, never bare minor digits", () => {
  // The quantization scatter's MiB axis read "6 7 8 9 100 2 3 4 5".
  assert.deepEqual(logTicks(60, 580).ticktext, ["100", "200", "500"]);
  assert.deepEqual(logTicks(60, 130).ticktext, ["60", "70", "80", "90", "100"]);
  const t = logTicks(60, 580);
  assert.equal(t.tickmode, "array");
  assert.deepEqual(t.tickvals, [100, 200, 500]);
});

test("a log axis over many decades gets decades only, at most seven", () => {
  assert.deepEqual(logTicks(0.01, 1e4).ticktext, ["0.01", "0.1", "1", "10", "100", "1k", "10k"]);
  assert.ok(logTicks(1, 1e20).tickvals.length <= 7);
  assert.deepEqual(logTicks(0, 10), {});
});

test("a log axis of bytes ticks at powers of two named in binary units", () => {
  assert.deepEqual(bytesLogTicks(3e3, 5e6).ticktext, ["4 KiB", "16 KiB", "64 KiB", "256 KiB", "1 MiB", "4 MiB"]);
  assert.ok(bytesLogTicks(1024, 1e12).tickvals.length <= 7);
});

test("a linear axis of bytes ticks in the unit its top reads in, at round steps", () => {
  assert.deepEqual(bytesTicks(460_000).ticktext, ["0 KiB", "100 KiB", "200 KiB", "300 KiB", "400 KiB"]);
  assert.deepEqual(bytesTicks(3 * 1024 ** 2).ticktext, ["0 MiB", "0.5 MiB", "1 MiB", "1.5 MiB", "2 MiB", "2.5 MiB", "3 MiB"]);
  assert.deepEqual(bytesTicks(0), {});
});

// Chart titles on a narrow screen (static/js/calculators/ui.js). Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { wrapTitle } from "../../static/js/calculators/ui.js";

const tenPxPerChar = (text, px) => text.length * px * 10 / 12; // 10 px per character at 12 px

test("a title wider than the room breaks at spaces into lines that fit", () => {
  // 20 characters to a line
  assert.equal(wrapTitle("sequence length N (dashed: your prompt)", 12, 200, tenPxPerChar),
    "sequence length N<br>(dashed: your<br>prompt)");
  assert.equal(wrapTitle("Time per forward pass", 12, 400, tenPxPerChar), "Time per forward pass");
});

test("existing lines are kept and a <sub> line wraps at its smaller size, staying a <sub> line", () => {
  // 12 characters to a line at 12 px, 17 at the <sub> line's 70 %
  assert.equal(wrapTitle("Time per forward pass<br><sub>red: prefill · blue: decode</sub>", 12, 120, tenPxPerChar),
    "Time per<br>forward pass<br><sub>red: prefill ·</sub><br><sub>blue: decode</sub>");
});

test("a single word longer than the room stays whole rather than vanish", () => {
  assert.equal(wrapTitle("Supercalifragilistic", 12, 50, tenPxPerChar), "Supercalifragilistic");
});

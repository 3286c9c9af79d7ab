// A resumed (or shared) run's settings go back into its demo's form. Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { fillForm } from "../../static/js/demos/restore-form.js";

test("a run's params fill the form; checkboxes by checked, missing or null params leave their field alone", () => {
  const fields = { prompt: { type: "textarea", value: "default" }, k: { type: "number", value: "4" },
    chat: { type: "checkbox", checked: true }, seed: { type: "number", value: "" }, draft: { type: "select-one", value: "ngram" } };
  fillForm(fields, { prompt: "from the run", k: 8, chat: false, seed: null });
  assert.equal(fields.prompt.value, "from the run");
  assert.equal(fields.k.value, "8");
  assert.equal(fields.chat.checked, false);
  assert.equal(fields.seed.value, "");
  assert.equal(fields.draft.value, "ngram");
  fillForm(fields, undefined); // an old stored run without params: nothing changes
  assert.equal(fields.prompt.value, "from the run");
});

// Which words a glossary term matches (no browser needed). Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { termPattern } from "../../static/js/glossary.js";

const matches = (names, text) => {
  const p = termPattern(names);
  return [p.exact, p.loose].filter(Boolean).some((re) => re.test(text));
};

test("abbreviations match only as written; other names in any case", () => {
  assert.ok(matches(["Grouped-query attention", "GQA"], "models with GQA share heads"));
  assert.ok(!matches(["Grouped-query attention", "GQA"], "a gqa-like trick"));
  assert.ok(matches(["Grouped-query attention", "GQA"], "grouped-query attention shrinks the cache"));
  assert.ok(matches(["KV cache"], "the kv cache grows"));
});

test("whole words only: a term inside a longer word or hyphenated name is not a mention", () => {
  assert.ok(!matches(["Decode"], "the decoder"));
  assert.ok(!matches(["Prefill"], "prefill-decode"));
  assert.ok(matches(["Prefill"], "Prefill, then decode."));
  assert.ok(!matches(["FP8", "BF16"], "FP8x"));
});

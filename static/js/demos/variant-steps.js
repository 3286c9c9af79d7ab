// An attention-variants run (demos/catalog/attention_variants.py; docs/trace-schema/course-demos.md) as timeline
// steps, without the page (tested under node): one step for the layer's heads (`kv_groups`: which key/value head
// each query head reads), one per variant as it is measured (`kv_variant`: the variants so far, the one measured now
// marked), and one for real models' cache per token (`kv_budget`). Each step carries what its picture and cards
// show, and its caption is written from those same numbers.
//
//   const steps = variantSteps();  for (const ev of events) { const step = steps.fromEvent(ev); … }

const KIB = 1024;
export const fmtBytes = (b) => (b >= KIB ** 3 ? `${(b / KIB ** 3).toFixed(1)} GiB` : b >= KIB * KIB ? `${(b / KIB / KIB).toFixed(1)} MiB`
  : b >= KIB ? `${(b / KIB).toFixed(b >= 100 * KIB ? 0 : 1)} KiB` : `${b} B`);
const pct = (x) => `${Math.round(100 * x)}%`;

/** A token as a caption quotes it: 'lamp' (its leading space dropped), '␣' for a blank one. */
export function quoted(text) {
  const t = String(text).trim();
  return `'${t || "␣"}'`;
}

/** The query heads reading each key/value head: [[0, 1, 2], [3, 4, 5], …]. */
export function groupsOf(kvHeadOf) {
  const groups = [];
  kvHeadOf.forEach((kv, h) => { (groups[kv] = groups[kv] || []).push(h); });
  return groups;
}

/** The step of a `kv_groups` event: the heads, and where the last token looks in each. */
export function groupsStep(ev) {
  const groups = groupsOf(ev.kv_head_of);
  const last = ev.tokens.length - 1;
  const top = ev.last_rows.map((row) => row.indexOf(Math.max(...row)));
  const off = ev.key_similarity.flatMap((row, a) => row.filter((_, b) => b !== a));
  const alike = off.length ? Math.max(...off.map(Math.abs)) : 0;
  const sharing = groups.map((hs, kv) => `${hs[0]}–${hs[hs.length - 1]} read key/value head ${kv}`).join(", ");
  const first = groups[0] || [];
  const looks = first.map((h) => quoted(ev.tokens[top[h]])).join(", ");
  return {
    kind: "groups", ev, groups, top,
    caption: `Layer ${ev.layer}: ${ev.n_heads} query heads share ${ev.n_kv_heads} key/value heads (query heads ${sharing}). ` +
      `Reading the same keys, query heads ${first.join(", ")} still look at different tokens from ${quoted(ev.tokens[last])}: ` +
      `most at ${looks}. The ${ev.n_kv_heads} key/value heads' keys are nearly unrelated (cosine similarity at most ${alike.toFixed(2)}).`,
  };
}

/** A fresh converter for one run: fromEvent(ev) → a step or null. */
export function variantSteps() {
  const variants = [];
  let trained = null;

  function variantStep(ev) {
    variants.push(ev);
    if (ev.variant === "gqa") trained = ev;
    const base = trained || ev;
    const share = base.kv_bytes_for_prompt ? ev.kv_bytes_for_prompt / base.kv_bytes_for_prompt : 1;
    const moved = ev.variant === "gqa"
      ? `This is the model as trained: every other variant is measured against its next-token distributions.`
      : `The next-token distribution moved by ${ev.mean_kl.toFixed(3)} nats on average (KL from the model as trained), ` +
        `and the most likely next token stayed the same at ${pct(ev.top1_agreement)} of the ${ev.n_tokens} positions.`;
    return {
      kind: "variant", ev, variants: variants.slice(), current: variants.length - 1,
      caption: `${ev.label}: the cache holds ${fmtBytes(ev.kv_bytes_for_prompt)} for this ${ev.n_tokens}-token prompt ` +
        `(${pct(share)} of the model as trained; ${fmtBytes(ev.kv_bytes_per_token)} a token). ${moved}`,
    };
  }

  function budgetStep(ev) {
    const rows = ev.configs.slice().sort((a, b) => a.bytes_per_token - b.bytes_per_token);
    const llama = ev.configs.find((c) => c.model.startsWith("Llama 3 8B (GQA"));
    const mha = ev.configs.find((c) => c.model.includes("as MHA"));
    const caption = llama && mha
      ? `In bf16, Llama 3 8B caches ${fmtBytes(llama.bytes_per_token)} a token with its 8 key/value heads; with one per ` +
        `query head (MHA) it would be ${fmtBytes(mha.bytes_per_token)}, ${mha.bytes_per_token / llama.bytes_per_token}× as much. ` +
        `At 4,096 tokens that is ${fmtBytes(4096 * llama.bytes_per_token)} against ${fmtBytes(4096 * mha.bytes_per_token)} per request.`
      : "Cache bytes per token for real model configurations.";
    return { kind: "budget", ev, rows, caption };
  }

  return {
    fromEvent(ev) {
      if (!ev) return null;
      if (ev.type === "kv_groups") return groupsStep(ev);
      if (ev.type === "kv_variant") return variantStep(ev);
      if (ev.type === "kv_budget") return budgetStep(ev);
      return null;
    },
  };
}

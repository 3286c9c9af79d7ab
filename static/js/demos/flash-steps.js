// FlashAttention's tile walk as a step timeline: one step per computed (query tile, key tile) of the runner's
// `flash_tile_walk` event, carrying that query tile's running max m, running sum l and output accumulator after
// the tile, the rescale factor exp(m_old − m_new) applied first, and the axis ranges of its whole walk (so the
// bars keep their scale while the student scrubs). Pure (no page): tested in tests/js/flash-steps.test.mjs.

const fmt = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : x.toPrecision(2));

/** The caption of one tile: which tile, whether any row's max rose (and how far that scaled l and acc down),
 * and when the query tile is done. */
export function tileCaption(walk, tile, last) {
  const qs = tile.q_block * walk.block_q;
  const qe = Math.min(qs + walk.block_q, walk.n_tokens) - 1;
  const ks = tile.k_block * walk.block_k;
  const ke = Math.min(ks + walk.block_k, walk.n_tokens) - 1;
  const rows = tile.rescale.length;
  const head = `Query tile ${tile.q_block} × key tile ${tile.k_block} (queries ${qs}–${qe}, keys ${ks}–${ke}${ke > qs ? ", masked above the diagonal" : ""})`;
  let what;
  if (tile.k_block === 0) {
    what = "the first tile: m, l and the accumulator start from its scores, nothing to rescale";
  } else {
    const rose = tile.rescale.filter((r) => r < 1);
    what = rose.length
      ? `the running max rose in ${rose.length} of ${rows} rows, so their l and accumulator were multiplied by ` +
        `exp(m_old − m_new), down to ${fmt(Math.min(...rose))}, before adding this tile`
      : `no row's max rose: l and the accumulator just add this tile (rescale 1)`;
  }
  return `${head}: ${what}.${last ? ` Query tile ${tile.q_block} is done: its output is acc / l.` : ""}`;
}

function range(values) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) { if (v < lo) lo = v; if (v > hi) hi = v; }
  return [lo, hi];
}

/** Every computed tile of a `flash_tile_walk` event as a step:
 * {caption, qBlock, kBlock, rowStart, m, l, acc, rescale, scale, walk}. */
export function flashSteps(walk) {
  const scales = new Map(); // per query tile: the ranges of m, l and |acc| over its walk
  for (const t of walk.tiles) {
    const s = scales.get(t.q_block) || { m: [Infinity, -Infinity], l: [0, -Infinity], acc: 0 };
    const [mlo, mhi] = range(t.m);
    s.m = [Math.min(s.m[0], mlo), Math.max(s.m[1], mhi)];
    s.l[1] = Math.max(s.l[1], range(t.l)[1]);
    for (const row of t.acc) for (const x of row) s.acc = Math.max(s.acc, Math.abs(x));
    scales.set(t.q_block, s);
  }
  const info = { head: walk.head, n_tokens: walk.n_tokens, block_q: walk.block_q, block_k: walk.block_k,
    n_q_blocks: walk.n_q_blocks, n_k_blocks: walk.n_k_blocks, acc_dims: walk.acc_dims, q_blocks: walk.q_blocks };
  return walk.tiles.map((t, i) => {
    const last = i === walk.tiles.length - 1 || walk.tiles[i + 1].q_block !== t.q_block;
    return { caption: tileCaption(walk, t, last), qBlock: t.q_block, kBlock: t.k_block,
      rowStart: t.q_block * walk.block_q, m: t.m, l: t.l, acc: t.acc, rescale: t.rescale,
      scale: scales.get(t.q_block), walk: info };
  });
}

/** The demo's `fromEvent`: the walk's steps, nothing for other events. */
export const flashFromEvent = (ev) => (ev.type === "flash_tile_walk" ? flashSteps(ev) : null);

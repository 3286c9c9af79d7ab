// FlashAttention's tile walk as a step timeline: one step per computed (query tile, key tile) of the runner's
// `flash_tile_walk` event, carrying that query tile's running max m, running sum l and output accumulator after
// the tile, the rescale factor exp(m_old − m_new) applied first, and the axis ranges of its whole walk (so the
// bars keep their scale while the student scrubs). The event carries the walk of the run's head (`head`, `tiles`)
// and, for a run small enough, every head's (`heads`): the steps are those of one chosen head, all heads walking
// the same tiles in the same order. Each step also carries its picture, precomputed here so that drawing a step is
// one cheap Plotly layout update (shapes: SVG paths in data coordinates, and an image), not a redraw of traces.
// Pure (no page): tested in tests/js/flash-steps.test.mjs.

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

/** The query heads whose walks the event carries, in order: every head of the layer for a small run, else the
 * run's own (older traces carry only `head`). */
export function walkHeads(walk) {
  return Array.isArray(walk.heads) && walk.heads.length ? walk.heads.map((h) => h.head) : [walk.head];
}

/** The tiles of head `head` (the run's own head when that one is not carried); the run's head's entry in
 * `heads` has no tiles of its own: they are the event's `tiles`. */
function headTiles(walk, head) {
  const found = Array.isArray(walk.heads) ? walk.heads.find((h) => h.head === head && h.tiles) : null;
  return found ? [found.head, found.tiles] : [walk.head, walk.tiles];
}

// The accumulator's diverging colours: blue negative, white zero, red positive (the hover heatmap's colorscale too).
const ACC_STOPS = [[0, [33, 102, 172]], [0.25, [146, 197, 222]], [0.5, [247, 247, 247]], [0.75, [244, 165, 130]],
  [1, [178, 24, 43]]];
export const ACC_COLORSCALE = ACC_STOPS.map(([t, c]) => [t, `rgb(${c.join(",")})`]);

/** The colour [r, g, b] of accumulator value `x` on a scale of ±`amax` (ACC_COLORSCALE, clamped). */
export function accColor(x, amax) {
  const t = amax > 0 ? (Math.max(-amax, Math.min(amax, x)) + amax) / (2 * amax) : 0.5;
  const i = Math.max(1, ACC_STOPS.findIndex(([at]) => at >= t));
  const [t0, c0] = ACC_STOPS[i - 1];
  const [t1, c1] = ACC_STOPS[i];
  const f = (t - t0) / (t1 - t0);
  return c0.map((c, k) => Math.round(c + f * (c1[k] - c)));
}

/** The accumulator as RGBA pixels, one per (query row, dimension), row-major: an image `dims` wide. */
export function accPixels(acc, amax) {
  const dims = acc.length ? acc[0].length : 0;
  const px = new Uint8ClampedArray(acc.length * dims * 4);
  acc.forEach((row, i) => row.forEach((x, j) => {
    px.set([...accColor(x, amax), 255], (i * dims + j) * 4);
  }));
  return px;
}

const num = (x) => String(Math.round(x * 1e4) / 1e4);

/** A step profile as an SVG path in data coordinates (x = value, y = query row): one band per row from 0 to its
 * value, rows `keep(i)` only; adjacent rows join into one outline. */
export function profilePath(values, rowStart, keep = () => true) {
  let d = "";
  let open = false;
  values.forEach((x, i) => {
    if (!keep(i)) {
      if (open) { d += `H0Z`; open = false; }
      return;
    }
    const top = rowStart + i - 0.5;
    if (!open) { d += `M0,${num(top)}`; open = true; }
    d += `H${num(x)}V${num(top + 1)}`;
  });
  return open ? `${d}H0Z` : d;
}

/** Every computed tile of head `head` (default: the run's) of a `flash_tile_walk` event as a step:
 * {caption, head, qBlock, kBlock, rowStart, rows, m, l, acc, rescale, rose, scale, picture, walk}; `rose` are the
 * rows whose max rose at this tile (rescaled by a factor below 1), `picture` the profiles' paths (profilePath; the
 * accumulator's image is made on the page, accPixels). */
export function flashSteps(walk, head = walk.head) {
  const [shown, tiles] = headTiles(walk, head);
  const scales = new Map(); // per query tile: the ranges of m, l and |acc| over its walk
  for (const t of tiles) {
    const s = scales.get(t.q_block) || { m: [Infinity, -Infinity], l: [0, -Infinity], acc: 0 };
    const [mlo, mhi] = range(t.m);
    s.m = [Math.min(s.m[0], mlo), Math.max(s.m[1], mhi)];
    s.l[1] = Math.max(s.l[1], range(t.l)[1]);
    for (const row of t.acc) for (const x of row) s.acc = Math.max(s.acc, Math.abs(x));
    scales.set(t.q_block, s);
  }
  const info = { head: shown, heads: walkHeads(walk), n_tokens: walk.n_tokens, block_q: walk.block_q,
    block_k: walk.block_k, n_q_blocks: walk.n_q_blocks, n_k_blocks: walk.n_k_blocks, acc_dims: walk.acc_dims,
    q_blocks: walk.q_blocks };
  return tiles.map((t, i) => {
    const last = i === tiles.length - 1 || tiles[i + 1].q_block !== t.q_block;
    const rowStart = t.q_block * walk.block_q;
    const rose = (j) => t.rescale[j] > 0 && t.rescale[j] < 1;
    const scale = scales.get(t.q_block);
    return { caption: tileCaption(walk, t, last), head: shown, qBlock: t.q_block, kBlock: t.k_block, rowStart,
      rows: t.m.map((_, j) => rowStart + j), m: t.m, l: t.l, acc: t.acc, rescale: t.rescale,
      rose: t.rescale.map((_, j) => rowStart + j).filter((_, j) => rose(j)), scale,
      picture: { m: profilePath(t.m, rowStart), l: profilePath(t.l, rowStart),
        mRose: profilePath(t.m, rowStart, rose), lRose: profilePath(t.l, rowStart, rose) },
      walk: info };
  });
}

/** The demo's `fromEvent`: the walk's steps (of head `head` when the event carries it), nothing for other events. */
export const flashFromEvent = (ev, head) => (ev.type === "flash_tile_walk" ? flashSteps(ev, head ?? ev.head) : null);

// Row kernels shared by the standalone GEMV ops (gemv.cpp) and the fused decode step (step.cpp).
//
// `linear_rows(W, x, M, y, n0, n1)` computes y[m, n] = x[m] · dequant(W)[n] for n in [n0, n1) and every
// m < M, without threading: callers split n across their own threads. Each weight chunk is decoded into fp32
// registers once and multiplied with up to four activation rows, so a multi-position step (a prefill chunk, a
// speculative verify) reads and decodes every weight once per four positions instead of once per position.
//
// Weight formats (packed by inference_core/quant/linears.py; all row-major [N, K], K a multiple of 32):
//   F32  : w fp32 [N, K]
//   Int8 : q int8 [N, K], scale fp32 [N]                      w = q * scale[n]
//   Fp8  : q uint8 (e4m3fn bits) [N, K], scale fp32 [N]       w = fp8(q) * scale[n]
//   Lut4 : p uint8 [N, K/2], scale fp32 [N, ⌈K/G⌉], lut fp16[16]   w = lut[nibble] * scale[n, k/G]
//          (NF4: lut = the codebook).
//   Int4 : p uint8 [N, K/2], scale fp32 [N, ⌈K/G⌉]            w = (nibble - 8) * scale[n, k/G]
//          Computed as scale · (Σ x·nibble − 8 Σ x) per group: the nibbles convert to fp32 with two instructions
//          per eight (no table), and the group sums of x are taken once per call.
// In every 32-value chunk of a 4-bit row, byte j holds value j in its low nibble and value j + 16 in its high
// nibble (llama.cpp's order).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "aligned.h"

namespace ilab {

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
  return _mm_cvtss_f32(lo);
}

enum class Kind : int { F32 = 0, Int8 = 1, Fp8 = 2, Lut4 = 3, Int4 = 4 };
// How the fused step multiplies Int8/Int4 weights: float kernels (below), or integer dot products on AVX-512 VNNI
// (int_dot.h) or AVX2 (int_dot_avx2.h)
enum class IntDot : int { Off = 0, Vnni = 1, Avx2 = 2 };

// How far ahead of the multiply-adds the weight stream is prefetched, into L2 (T1: more misses in flight than
// L1 allows). With several rows of x per weight the loop issues loads too slowly for the hardware prefetcher
// alone to keep DRAM busy; measured single-threaded on the 2-core EPYC, the fp32 head at 5 rows went from
// ~10 GB/s (no prefetch, or 2 KB ahead into L1) to ~14 GB/s (int8 and int4 still do). fp32 is the exception
// (dot_row): its loads come fast enough for the hardware prefetcher, which only needs each 4 KB page touched
// kPageAhead early.
#ifndef ILAB_PREFETCH_BYTES
#define ILAB_PREFETCH_BYTES 8192
#endif
constexpr int64_t kPrefetchBytes = ILAB_PREFETCH_BYTES;
constexpr int64_t kPageAhead = 16384;
#ifndef ILAB_PREFETCH_HINT
#define ILAB_PREFETCH_HINT _MM_HINT_T1
#endif

// A 16-entry fp16 table split into low and high bytes: two byte shuffles look up 16 codes at once, and
// interleaving the results gives 16 fp16 numbers that F16C converts to fp32.
struct Fp16Lut {
  __m128i lo = _mm_setzero_si128(), hi = _mm_setzero_si128();
  Fp16Lut() = default;
  explicit Fp16Lut(const uint16_t* table) {
    alignas(16) uint8_t l[16], h[16];
    for (int i = 0; i < 16; ++i) {
      l[i] = table[i] & 0xFF;
      h[i] = table[i] >> 8;
    }
    lo = _mm_load_si128(reinterpret_cast<const __m128i*>(l));
    hi = _mm_load_si128(reinterpret_cast<const __m128i*>(h));
  }
  inline void decode(__m128i codes, __m256& a, __m256& b) const {
    __m128i l = _mm_shuffle_epi8(lo, codes), h = _mm_shuffle_epi8(hi, codes);
    a = _mm256_cvtph_ps(_mm_unpacklo_epi8(l, h));
    b = _mm256_cvtph_ps(_mm_unpackhi_epi8(l, h));
  }
};

// One weight matrix as raw pointers (the tensors are owned by the caller and outlive every call).
struct WeightView {
  Kind kind = Kind::F32;
  int64_t N = 0, K = 0;
  int64_t group = 0;        // Lut4, Int4: values per scale along K (a multiple of 32); 0 elsewhere
  const void* w = nullptr;  // F32: float; others: bytes
  const float* scale = nullptr;
  const float* bias = nullptr;  // added after the product when set
  Fp16Lut lut;
  IntDot int_dot = IntDot::Off;  // Int8, Int4: the fused step computes it on integer dot products
};

// 32 weights of row `row` starting at k → four registers of 8 fp32 values (before the row/group scale).
template <Kind kKind>
inline void decode32(const WeightView& W, const uint8_t* row, int64_t k, __m256& w0, __m256& w1, __m256& w2,
                     __m256& w3) {
  if constexpr (kKind == Kind::F32) {
    const float* r = reinterpret_cast<const float*>(row) + k;
    w0 = _mm256_loadu_ps(r);
    w1 = _mm256_loadu_ps(r + 8);
    w2 = _mm256_loadu_ps(r + 16);
    w3 = _mm256_loadu_ps(r + 24);
  } else if constexpr (kKind == Kind::Int8) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k + 16));
    w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(a));
    w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(a, 8)));
    w2 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
    w3 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)));
  } else if constexpr (kKind == Kind::Fp8) {
    // e4m3 → fp16 by moving bits: sign to bit 15, exponent+mantissa to bits 7..13. Read as fp16 this is the
    // fp8 value times 2^-8 (bias 15 vs 7), normals and subnormals alike; the caller folds 2^8 into the scale.
    const __m256i sign = _mm256_set1_epi16(0x80), body = _mm256_set1_epi16(0x7F);
    auto widen = [&](__m128i bytes, __m256& lo8, __m256& hi8) {
      __m256i h = _mm256_cvtepu8_epi16(bytes);
      h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(h, sign), 8),
                          _mm256_slli_epi16(_mm256_and_si256(h, body), 7));
      lo8 = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
      hi8 = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
    };
    widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k)), w0, w1);
    widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k + 16)), w2, w3);
  } else if constexpr (kKind == Kind::Int4) {
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k / 2));
    const __m128i lo = _mm_and_si128(bytes, mask), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
    w0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
    w1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
    w2 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
    w3 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
  } else {
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k / 2));
    W.lut.decode(_mm_and_si128(bytes, mask), w0, w1);
    W.lut.decode(_mm_and_si128(_mm_srli_epi16(bytes, 4), mask), w2, w3);
  }
}

template <Kind kKind>
inline int64_t row_bytes(const WeightView& W) {
  if constexpr (kKind == Kind::F32) return W.K * 4;
  if constexpr (kKind == Kind::Lut4 || kKind == Kind::Int4) return W.K / 2;
  return W.K;
}

// y[m * ldy + n] for MB rows of x (row stride ldx) and one output row n. Two accumulators per row; grouped
// formats (4-bit) also keep a running total per row, scaled once per group (cheaper than scaling every decoded
// chunk: batch-1 int4 decode is bound by instructions, not bytes), which is why they take at most two rows per
// call. Every row is summed in the same order whatever MB is: a row's result does not depend on how many rows
// share the call (a speculative verify scores a position exactly as a plain decode step would).
template <Kind kKind, int MB>
inline void dot_row(const WeightView& W, int64_t n, const float* x, int64_t ldx, float* y, int64_t ldy,
                    const float* xsum = nullptr, int64_t ldxsum = 0) {
  const int64_t K = W.K;
  const uint8_t* row = static_cast<const uint8_t*>(W.w) + n * row_bytes<kKind>(W);
  constexpr bool kGrouped = kKind == Kind::Lut4 || kKind == Kind::Int4;
  const int64_t group = kGrouped ? W.group : K;
  const float* group_scale = kGrouped ? W.scale + n * ((K + group - 1) / group) : nullptr;
  constexpr int64_t kChunkBytes = kKind == Kind::F32 ? 128 : kGrouped ? 16 : 32;
  const char* ahead = reinterpret_cast<const char*>(row) + kPrefetchBytes;
  // fp32 streams fastest left to the hardware prefetcher, which stops at 4 KB pages: touching each page once,
  // 16 KB ahead, starts its translation and its fetch early. Measured on the 2-core EPYC, 2 threads over 453 MB,
  // one row: 22-25 GB/s prefetching every line 8 KB ahead, 21-25 with no prefetch, 27-30 so (the model's fp32
  // decode 41.3 → 49.0 tok/s, medians of 7 interleaved rounds); 2, 3, 5 rows (a speculative verify): 19-23 → 22-30
  // GB/s. Packed formats decode more per byte and prefetch every chunk, below.
  constexpr bool kPageTouch = kKind == Kind::F32;
  if constexpr (kPageTouch)
    for (int64_t at = 0; at < K * 4; at += 4096) _mm_prefetch(reinterpret_cast<const char*>(row) + kPageAhead + at,
                                                              _MM_HINT_T0);
  __m256 acc0[MB], acc1[MB], total[kGrouped ? MB : 1];
  for (int m = 0; m < (kGrouped ? MB : 1); ++m) total[m] = _mm256_setzero_ps();
  for (int64_t k0 = 0; k0 < K; k0 += group) {
    for (int m = 0; m < MB; ++m) acc0[m] = acc1[m] = _mm256_setzero_ps();
    for (int64_t k = k0; k < std::min(K, k0 + group); k += 32) {
      // Rows are consecutive in memory, so prefetching past this row's end fetches the next rows.
      const int64_t offset = k / 32 * kChunkBytes;
      if constexpr (!kPageTouch) {  // packed chunks are under 64 bytes: one line every few chunks
        if (offset % 64 == 0) _mm_prefetch(ahead + offset, ILAB_PREFETCH_HINT);
      }
      __m256 w0, w1, w2, w3;
      decode32<kKind>(W, row, k, w0, w1, w2, w3);
      for (int m = 0; m < MB; ++m) {
        const float* xr = x + m * ldx + k;
        acc0[m] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr), acc0[m]);
        acc1[m] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr + 8), acc1[m]);
        acc0[m] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xr + 16), acc0[m]);
        acc1[m] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xr + 24), acc1[m]);
      }
    }
    if constexpr (kKind == Kind::Int4) {  // scale · (Σ x·nibble − 8 Σ x): Σ x off each of the 8 lanes
      const __m256 s = _mm256_set1_ps(group_scale[k0 / group]);
      for (int m = 0; m < MB; ++m) {
        const __m256 shift = _mm256_set1_ps(xsum[m * ldxsum + k0 / group]);
        total[m] = _mm256_fmadd_ps(s, _mm256_sub_ps(_mm256_add_ps(acc0[m], acc1[m]), shift), total[m]);
      }
    } else if constexpr (kGrouped) {
      const __m256 s = _mm256_set1_ps(group_scale[k0 / group]);
      for (int m = 0; m < MB; ++m) total[m] = _mm256_fmadd_ps(s, _mm256_add_ps(acc0[m], acc1[m]), total[m]);
    }
  }
  float s = 1.0f;
  if constexpr (kKind == Kind::Int8) s = W.scale[n];
  if constexpr (kKind == Kind::Fp8) s = W.scale[n] * 256.0f;
  const float b = W.bias ? W.bias[n] : 0.0f;
  for (int m = 0; m < MB; ++m) {
    if constexpr (kGrouped) y[m * ldy + n] = s * hsum(total[m]) + b;
    else y[m * ldy + n] = s * hsum(_mm256_add_ps(acc0[m], acc1[m])) + b;
  }
}

// fp32 batch tile: NB weight rows × MB rows of x at once (NB·MB·2 accumulators). Two shapes, one per register
// file: 2 × 3 on AVX2's 16 registers (12 accumulators, two weight chunks and one x chunk in registers: five loads
// per six multiply-adds, where dot_row's 1 × 4 makes five per four), and 3 × 4 compiled for AVX-512VL's 32 (still
// 256-bit instructions). Measured single-threaded on the 2-core EPYC (AVX2) over the model's shapes at 121 rows:
// 42-64 → 63-71 GFLOP/s; AVX-512VL's 3 × 4 at 32 rows: 40-46 → 76-85. Every (weight row, x row) pair is summed
// exactly as dot_row sums it (two accumulators taking alternate 8-value chunks, then one horizontal sum), so
// results are bit-identical to one row alone: batch invariance holds.
#if defined(__GNUC__) && !defined(__AVX512VL__)
#define ILAB_AVX512VL __attribute__((target("avx512f,avx512vl")))
#else
#define ILAB_AVX512VL
#endif

inline bool cpu_has_avx512vl() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  return has;
}

template <int NB, int MB>
__attribute__((always_inline)) inline void f32_tile(const WeightView& W, int64_t n, const float* x, int64_t ldx,
                                                    float* y, int64_t ldy, const char* stream, int64_t stream_lines) {
  const int64_t K = W.K;
  const float* w = static_cast<const float*>(W.w) + n * K;
  __m256 acc0[NB][MB], acc1[NB][MB];
  for (int i = 0; i < NB; ++i)
    for (int m = 0; m < MB; ++m) acc0[i][m] = acc1[i][m] = _mm256_setzero_ps();
  const int64_t steps = K / 32, per_step = (stream_lines + steps - 1) / std::max<int64_t>(steps, 1);
  for (int64_t k = 0; k < K; k += 32) {
    if (stream) {  // the rows are in L2 already: fetch the caller's next panel instead
      for (int64_t i = 0; i < per_step && stream_lines > 0; ++i, --stream_lines, stream += 64)
        _mm_prefetch(stream, ILAB_PREFETCH_HINT);
    } else {
      for (int i = 0; i < NB; ++i) {
        const char* ahead = reinterpret_cast<const char*>(w + i * K + k) + kPrefetchBytes;
        _mm_prefetch(ahead, ILAB_PREFETCH_HINT);
        _mm_prefetch(ahead + 64, ILAB_PREFETCH_HINT);
      }
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      __m256 wv[NB];
      for (int i = 0; i < NB; ++i) wv[i] = _mm256_loadu_ps(w + i * K + k + 8 * c);
      for (int m = 0; m < MB; ++m) {
        __m256 xv = _mm256_loadu_ps(x + m * ldx + k + 8 * c);
        // GCC folds this load into each of the NB multiply-adds (NB loads of one chunk), more than the load ports
        // feed: the 2 × 3 tile then ran 33-57 GFLOP/s, no better than dot_row; the empty asm keeps one load (63-71).
        __asm__("" : "+x"(xv));
        for (int i = 0; i < NB; ++i) {
          if (c % 2 == 0) acc0[i][m] = _mm256_fmadd_ps(wv[i], xv, acc0[i][m]);
          else acc1[i][m] = _mm256_fmadd_ps(wv[i], xv, acc1[i][m]);
        }
      }
    }
  }
  for (int i = 0; i < NB; ++i) {
    const float b = W.bias ? W.bias[n + i] : 0.0f;
    for (int m = 0; m < MB; ++m) y[m * ldy + n + i] = 1.0f * hsum(_mm256_add_ps(acc0[i][m], acc1[i][m])) + b;
  }
}

template <int NB, int MB>
ILAB_AVX512VL void f32_tile_wide(const WeightView& W, int64_t n, const float* x, int64_t ldx, float* y, int64_t ldy,
                                 const char* stream, int64_t stream_lines) {
  f32_tile<NB, MB>(W, n, x, ldx, y, ldy, stream, stream_lines);
}

// Prefetches [base, base + bytes) into L2, spread evenly over `rows` weight rows of work: rows_done() issues a
// row's share at once; f32_tile takes its share (take) and issues it a few lines per k-step.
struct PanelPrefetch {
  const char* next;
  const char* end;
  int64_t lines_per_row;
  PanelPrefetch(const char* base, int64_t bytes, int64_t rows)
      : next(base), end(base + std::max<int64_t>(bytes, 0)),
        lines_per_row(rows > 0 ? ((bytes + 63) / 64 + rows - 1) / rows : 0) {}
  // Lines the caller prefetches itself for `rows` rows of work (it advances `next` by them).
  int64_t take(int64_t rows) const {
    return std::max<int64_t>(0, std::min<int64_t>(lines_per_row * rows, (end - next + 63) / 64));
  }
  void rows_done(int64_t rows) {
    for (int64_t i = take(rows); i > 0; --i, next += 64) _mm_prefetch(next, ILAB_PREFETCH_HINT);
  }
};

// dot_row over `rows` (1-6) rows of x: all of a short step's rows, a panel's block, or the rows after its last block.
template <Kind kKind>
inline void block_row(int64_t rows, const WeightView& W, int64_t n, const float* x, int64_t ldx, float* y,
                      int64_t ldy, const float* xsum, int64_t ldxsum) {
  switch (rows) {
    case 1: dot_row<kKind, 1>(W, n, x, ldx, y, ldy, xsum, ldxsum); break;
    case 2: dot_row<kKind, 2>(W, n, x, ldx, y, ldy, xsum, ldxsum); break;
    case 3: dot_row<kKind, 3>(W, n, x, ldx, y, ldy, xsum, ldxsum); break;
    case 4: dot_row<kKind, 4>(W, n, x, ldx, y, ldy, xsum, ldxsum); break;
    case 5: dot_row<kKind, 5>(W, n, x, ldx, y, ldy, xsum, ldxsum); break;
    case 6: dot_row<kKind, 6>(W, n, x, ldx, y, ldy, xsum, ldxsum); break;
    default: break;
  }
}

// A weight row is fetched from memory once for every position. Up to six rows go in one block (a speculative
// verify is k + 1 = 5 rows), so each weight chunk is decoded once for all of them; larger M runs in blocks of
// three or four (fp32: f32_tile's rows; grouped 4-bit formats: two) over panels of weight rows held in L2.
template <Kind kKind>
inline void rows_of_kind(const WeightView& W, const float* x, int64_t M, int64_t ldx, float* y, int64_t ldy,
                         int64_t n0, int64_t n1) {
  constexpr bool kGrouped = kKind == Kind::Lut4 || kKind == Kind::Int4;
  AlignedVector<float> xsum;  // Int4: Σ x over each group of each row (the same for every weight row)
  const int64_t n_groups = kGrouped ? (W.K + W.group - 1) / W.group : 0;
  if constexpr (kKind == Kind::Int4) {
    xsum.assign(M * n_groups, 0.0f);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < W.K; ++k) xsum[m * n_groups + k / W.group] += x[m * ldx + k];
  }
  const float* xs = xsum.data();
  const bool wide_tile = kKind == Kind::F32 && cpu_has_avx512vl();
  const int kBlock = kGrouped ? 2 : kKind == Kind::F32 && !wide_tile ? 3 : 4;  // a panel's rows per pass
  // One block: each weight chunk decoded once for every row. Four rows run as a panel's block where blocks are of
  // four (on AVX2, f32_tile's blocks of three and then one row measured slower than four at once).
  if (!kGrouped && M <= 6 && (M != 4 || kBlock != 4)) {
    for (int64_t n = n0; n < n1; ++n) block_row<kKind>(M, W, n, x, ldx, y, ldy, xs, n_groups);
    return;
  }
  // Many rows (a batch): weight rows in panels that stay in L2 while every block of x rows (in L1) passes over
  // them, so the weights come from DRAM once and x is not re-read from L2 for every weight row. A panel is a
  // quarter of a 512 KB L2, so it, the next one streaming in and x fit together: measured on the 2-core EPYC,
  // 2 threads over the model's 30 layers of fp32 weights (cold), medians of 5 interleaved runs, 256 → 128 KB:
  // 17 rows 32.5 → 30.1 ms, 33 rows 52.1 → 48.9, 121 rows 177 → 173 (64-160 KB within noise of 128).
  constexpr int64_t kPanelBytes = 128 * 1024;
  const int64_t panel = std::max<int64_t>(1, kPanelBytes / row_bytes<kKind>(W));
  const int64_t passes = M / kBlock + (M % kBlock != 0);
  const char* weights = static_cast<const char*>(W.w);
  bool in_l2 = false;  // the current panel was streamed in while the previous one was worked on
  for (int64_t p0 = n0; p0 < n1; p0 += panel) {
    const int64_t p1 = std::min(n1, p0 + panel);
    // Every pass over a panel that is in L2 (all but the thread's first one, unless M fits in one pass) streams
    // the next panel in meanwhile, a few lines per k-step, so DRAM works under the multiply-adds instead of
    // before them. A pass over a panel from DRAM prefetches its own rows a little ahead instead.
    const int64_t work_rows = (passes - (in_l2 ? 0 : 1)) * (p1 - p0);
    PanelPrefetch next(weights + p1 * row_bytes<kKind>(W), (std::min(n1, p1 + panel) - p1) * row_bytes<kKind>(W),
                       work_rows);
    int64_t m = 0;
    for (; m + kBlock <= M; m += kBlock) {
      const bool stream = in_l2 || m > 0;
      int64_t n = p0;
      if constexpr (kKind == Kind::F32) {
        const int nb = wide_tile ? 3 : 2;
        for (; n + nb <= p1; n += nb) {
          const int64_t lines = stream ? next.take(nb) : 0;
          const char* ahead = stream ? next.next : nullptr;
          if (wide_tile) f32_tile_wide<3, 4>(W, n, x + m * ldx, ldx, y + m * ldy, ldy, ahead, lines);
          else f32_tile<2, 3>(W, n, x + m * ldx, ldx, y + m * ldy, ldy, ahead, lines);
          next.next += 64 * lines;
        }
      }
      for (; n < p1; ++n) {
        block_row<kKind>(kBlock, W, n, x + m * ldx, ldx, y + m * ldy, ldy, xs + m * n_groups, n_groups);
        if (stream) next.rows_done(1);
      }
    }
    for (int64_t n = p0; n < p1 && m < M; ++n) {
      next.rows_done(1);
      block_row<kKind>(M - m, W, n, x + m * ldx, ldx, y + m * ldy, ldy, xs + m * n_groups, n_groups);
    }
    in_l2 = work_rows > 0;
  }
}

// y[m, n] = x[m] · W[n] (+ bias[n]) for n in [n0, n1), m < M. Single-threaded.
inline void linear_rows(const WeightView& W, const float* x, int64_t M, int64_t ldx, float* y, int64_t ldy,
                        int64_t n0, int64_t n1) {
  switch (W.kind) {
    case Kind::F32: rows_of_kind<Kind::F32>(W, x, M, ldx, y, ldy, n0, n1); break;
    case Kind::Int8: rows_of_kind<Kind::Int8>(W, x, M, ldx, y, ldy, n0, n1); break;
    case Kind::Fp8: rows_of_kind<Kind::Fp8>(W, x, M, ldx, y, ldy, n0, n1); break;
    case Kind::Lut4: rows_of_kind<Kind::Lut4>(W, x, M, ldx, y, ldy, n0, n1); break;
    case Kind::Int4: rows_of_kind<Kind::Int4>(W, x, M, ldx, y, ldy, n0, n1); break;
  }
}

}  // namespace ilab

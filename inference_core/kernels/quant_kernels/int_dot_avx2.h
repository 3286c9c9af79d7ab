// Integer-dot-product rows for int8 and int4 weights on AVX2 (vpmaddubsw), for CPUs without VNNI: the same
// arithmetic as int_dot.h (read its header: activations quantized per block of 32 to int8, exact integer block sums,
// the block and weight scales applied in fp32), with 256-bit registers and AVX2's multiply-adds.
//
// vpmaddubsw multiplies unsigned bytes by signed bytes and adds adjacent pairs into int16 with saturation, so the
// unsigned side must keep every pair sum within ±32767:
//   Int4: the stored nibble w + 8 (0..15) is the unsigned side: pairs reach 2·15·127 = 3810, and the low-nibble and
//         high-nibble products of a chunk are added in int16 (7620) before vpmaddwd widens them to int32. As in
//         int_dot.h, each lane's accumulator starts at −8·(its q summed).
//   Int8: the offset trick would overflow (255·127·2), so the sign goes to the activations instead, as llama.cpp does:
//         |w| · (q · sign(w)), pairs at most 2·127·127 = 32258. No correction term.
// vpmaddwd with ones then sums four products a lane: every int32 sum is exact, as on VNNI.
//
// Register order: Int8: a chunk is one 32-value block (its scale broadcast). Int4: a chunk is 32 packed bytes = two
// blocks, byte j of a block holding value j (low nibble) and j + 16 (high nibble): a mask gives [blk0 0..15 | blk1
// 0..15], a shift and a mask [blk0 16..31 | blk1 16..31]; lanes 0-3 of the sums are blk0, 4-7 blk1. The activations
// are stored in that order once per call. A row whose K is not a multiple of 64 ends in a half chunk (16 bytes, the
// upper lanes zero, its activations zero-padded).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "linear.h"

namespace ilab {

constexpr int64_t kAvx2Block = 32;

// 32 values of a block with scale s > 0 → int8 codes in natural order: a true division, round half to even, clamp
inline __m256i avx2_block_codes(const float* x, float s) {
  const __m256 d = _mm256_set1_ps(s), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  __m256i c[4];
  for (int i = 0; i < 4; ++i) {
    const __m256 r = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + 8 * i), d),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    c[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
  }
  // packs work per 128-bit lane: [c0 0-3, c1 0-3, c0 4-7, c1 4-7] etc.; the permute restores the natural order
  const __m256i ab = _mm256_packs_epi32(c[0], c[1]), cd = _mm256_packs_epi32(c[2], c[3]);
  return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline float avx2_absmax32(const float* x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_andnot_ps(sign, _mm256_loadu_ps(x));
  for (int i = 1; i < 4; ++i) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)));
  __m128 v = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  v = _mm_max_ps(v, _mm_movehl_ps(v, v));
  v = _mm_max_ss(v, _mm_shuffle_ps(v, v, 1));
  return _mm_cvtss_f32(v);
}

// M rows of activations quantized for one weight kind, in its register order, one chunk after another:
// q [M][chunks·V] (V = 32 values a chunk for Int8, 64 for Int4), scale [M][chunks·8] (each int32 lane's block scale),
// corr [M][chunks·8] (Int4: each lane's −8·Σq).
struct Avx2BlockActs {
  int64_t chunks = 0;
  AlignedVector<int8_t> q;
  AlignedVector<float> scale;
  AlignedVector<int32_t> corr;

  void quantize(const float* x, int64_t M, int64_t ldx, int64_t K, bool int4) {
    const int64_t V = int4 ? 64 : 32;
    chunks = (K + V - 1) / V;
    q.assign(M * chunks * V, 0);
    scale.assign(M * chunks * 8, 0.0f);
    corr.assign(int4 ? M * chunks * 8 : 0, 0);
    for (int64_t m = 0; m < M; ++m) {
      int8_t* qm = q.data() + m * chunks * V;
      float* sm = scale.data() + m * chunks * 8;
      for (int64_t k0 = 0; k0 < K; k0 += kAvx2Block) {
        const float s = avx2_absmax32(x + m * ldx + k0) / 127.0f;
        if (s == 0.0f) continue;  // an all-zero block: scale 0, codes 0 (as assigned)
        const __m256i codes = avx2_block_codes(x + m * ldx + k0, s);
        if (int4) {  // block b of chunk c: its halves at [16b] of the low and of the high register, lanes 4b..4b+3
          const int64_t c = k0 / 64, blk = (k0 % 64) / kAvx2Block;
          int8_t* first = qm + c * 64 + 16 * blk;
          _mm_storeu_si128(reinterpret_cast<__m128i*>(first), _mm256_castsi256_si128(codes));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(first + 32), _mm256_extracti128_si256(codes, 1));
          std::fill(sm + c * 8 + 4 * blk, sm + c * 8 + 4 * blk + 4, s);
        } else {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(qm + k0), codes);
          std::fill(sm + k0 / 4, sm + k0 / 4 + 8, s);
        }
      }
      if (!int4) continue;
      const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
      for (int64_t c = 0; c < chunks; ++c) {  // corr = −8 · Σq per lane, both halves
        const int8_t* qc = qm + c * 64;
        const __m256i pairs = _mm256_add_epi16(
            _mm256_maddubs_epi16(ones8, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qc))),
            _mm256_maddubs_epi16(ones8, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qc + 32))));
        const __m256i sum = _mm256_madd_epi16(pairs, ones16);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr.data() + (m * chunks + c) * 8),
                            _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sum, 3)));
      }
    }
  }
};

// Chunk c of one weight row in registers, loaded and unpacked once for every activation row: Int4 the low and high
// nibbles (unsigned 0..15); Int8 |w| and w (whose sign goes to the activations).
template <bool kInt4>
inline void avx2_load_codes(const uint8_t* row, int64_t c, int64_t K, __m256i& a, __m256i& b) {
  const uint8_t* at = row + c * 32;
  if constexpr (kInt4) {
    const __m256i raw = (K - c * 64) >= 64
                            ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at))
                            : _mm256_inserti128_si256(_mm256_setzero_si256(),
                                                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(at)), 0);
    const __m256i mask = _mm256_set1_epi8(0x0F);
    a = _mm256_and_si256(raw, mask);
    b = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
  } else {
    b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
    a = _mm256_abs_epi8(b);
  }
}

// The exact int32 block sums of one chunk of codes against one activation row's chunk (lanes as in the header).
template <bool kInt4>
inline __m256i avx2_chunk_sums(__m256i a, __m256i b, const int8_t* qc, const int32_t* corr) {
  const __m256i ones16 = _mm256_set1_epi16(1);
  const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qc));
  if constexpr (kInt4) {
    const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qc + 32));
    const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(a, q0), _mm256_maddubs_epi16(b, q1));
    return _mm256_add_epi32(_mm256_madd_epi16(pairs, ones16),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr)));
  } else {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(q0, b)), ones16);
  }
}

// y[(m0 + m)·ldy + n + i] for NB weight rows from n and MB activation rows from m0. Each (weight row, activation
// row) pair has its own accumulators, summed chunk after chunk in the same order whatever NB and MB are (batch
// invariance, as in int_dot.h). A row runs as segments, each ending with one fp32 scale: the whole row for Int8 (its
// row scale, applied last), a group for Int4 with groups of whole chunks (G a multiple of 64). Int4 with G = 32
// changes group halfway through a chunk: each lane then takes its block's activation scale times its group's scale.
template <bool kInt4, int NB, int MB>
void avx2_int_dot_tile(const WeightView& W, int64_t n, const Avx2BlockActs& A, int64_t m0, float* y, int64_t ldy) {
  const int64_t K = W.K, chunks = A.chunks;
  constexpr int64_t V = kInt4 ? 64 : 32;
  const int64_t row_bytes = kInt4 ? K / 2 : K;
  const uint8_t* rows = static_cast<const uint8_t*>(W.w) + n * row_bytes;
  const int64_t n_groups = kInt4 ? (K + W.group - 1) / W.group : 1;
  const float* gscale = kInt4 ? W.scale + n * n_groups : nullptr;
  const bool per_group = !kInt4 || W.group % 64 == 0;
  const int64_t seg_chunks = kInt4 && per_group ? W.group / 64 : chunks;
  __m256 total[NB][MB], part[NB][MB];
  for (int i = 0; i < NB; ++i)
    for (int m = 0; m < MB; ++m) total[i][m] = _mm256_setzero_ps();
  for (int64_t c0 = 0, seg = 0; c0 < chunks; c0 += seg_chunks, ++seg) {
    for (int i = 0; i < NB; ++i)
      for (int m = 0; m < MB; ++m) part[i][m] = _mm256_setzero_ps();
    const int64_t c1 = std::min(chunks, c0 + seg_chunks);
    for (int64_t c = c0; c < c1; ++c) {
      if (c % 2 == 0)  // one 64-byte line every two chunks
        for (int i = 0; i < NB; ++i)
          _mm_prefetch(reinterpret_cast<const char*>(rows + i * row_bytes) + kPrefetchBytes + c * 32,
                       ILAB_PREFETCH_HINT);
      for (int i = 0; i < NB; ++i) {
        __m256i a, b;
        avx2_load_codes<kInt4>(rows + i * row_bytes, c, K, a, b);
        __m256 wscale = _mm256_set1_ps(1.0f);
        if (kInt4 && !per_group) {  // G = 32: blocks 2c and 2c + 1 (a padding block takes the last group)
          const float* g = gscale + i * n_groups;
          wscale = _mm256_setr_m128(_mm_set1_ps(g[2 * c]), _mm_set1_ps(g[std::min(2 * c + 1, n_groups - 1)]));
        }
        for (int m = 0; m < MB; ++m) {
          const int64_t at = (m0 + m) * chunks + c;
          const __m256i sums =
              avx2_chunk_sums<kInt4>(a, b, A.q.data() + at * V, kInt4 ? A.corr.data() + at * 8 : nullptr);
          const __m256 s = _mm256_loadu_ps(A.scale.data() + at * 8);
          part[i][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), kInt4 && !per_group ? _mm256_mul_ps(s, wscale) : s,
                                       part[i][m]);
        }
      }
    }
    for (int i = 0; i < NB; ++i) {
      const __m256 g = _mm256_set1_ps(kInt4 && per_group ? gscale[i * n_groups + seg] : 1.0f);
      for (int m = 0; m < MB; ++m) total[i][m] = _mm256_fmadd_ps(part[i][m], g, total[i][m]);
    }
  }
  for (int i = 0; i < NB; ++i) {
    const float rs = kInt4 ? 1.0f : W.scale[n + i];
    const float b = W.bias ? W.bias[n + i] : 0.0f;
    for (int m = 0; m < MB; ++m) y[(m0 + m) * ldy + n + i] = rs * hsum(total[i][m]) + b;
  }
}

// Tiles over [n0, n1) × M: for one activation row (decode) int4 takes four weight rows at a time and int8 one; two
// rows take two; else one weight row against blocks of four activation rows (it stays in L1 across the blocks).
// Int8 decode streams its weights from DRAM faster one row after another than as four interleaved rows, whose
// loads and prefetches are four streams 576 bytes apart: measured on the 2-core EPYC over the model's 30 layers and
// head (134.5 MB, cold), medians of 4 interleaved runs: 1 thread 14.1 → 10.5 ms, 2 threads 7.9 → 6.4 ms, and the
// four rows with their multiply-adds taken out still took 12.3 ms at 1 thread: the stream, not the arithmetic, sets
// the time. Int4 does more work a byte and keeps its four rows (one at a time, 2 threads: 4.7 → 8.5 ms).
template <bool kInt4>
void avx2_int_dot_rows_of(const WeightView& W, const Avx2BlockActs& A, int64_t M, float* y, int64_t ldy, int64_t n0,
                          int64_t n1) {
  int64_t n = n0;
  if (M == 1 && kInt4)
    for (; n + 4 <= n1; n += 4) avx2_int_dot_tile<kInt4, 4, 1>(W, n, A, 0, y, ldy);
  if (M == 2)
    for (; n + 2 <= n1; n += 2) avx2_int_dot_tile<kInt4, 2, 2>(W, n, A, 0, y, ldy);
  for (; n < n1; ++n) {
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) avx2_int_dot_tile<kInt4, 1, 4>(W, n, A, m, y, ldy);
    switch (M - m) {
      case 1: avx2_int_dot_tile<kInt4, 1, 1>(W, n, A, m, y, ldy); break;
      case 2: avx2_int_dot_tile<kInt4, 1, 2>(W, n, A, m, y, ldy); break;
      case 3: avx2_int_dot_tile<kInt4, 1, 3>(W, n, A, m, y, ldy); break;
      default: break;
    }
  }
}

// As int_dot_rows (int_dot.h), on AVX2.
inline void avx2_int_dot_rows(const WeightView& W, const float* x, int64_t M, int64_t ldx, float* y, int64_t ldy,
                              int64_t n0, int64_t n1, int64_t n2 = 0, int64_t n3 = 0) {
  if (M == 0) return;
  thread_local Avx2BlockActs acts;
  const bool int4 = W.kind == Kind::Int4;
  acts.quantize(x, M, ldx, W.K, int4);
  for (auto [a, b] : {std::pair{n0, n1}, std::pair{n2, n3}}) {
    if (a >= b) continue;
    if (int4) avx2_int_dot_rows_of<true>(W, acts, M, y, ldy, a, b);
    else avx2_int_dot_rows_of<false>(W, acts, M, y, ldy, a, b);
  }
}

}  // namespace ilab

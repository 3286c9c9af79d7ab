// Integer-dot-product rows for int8 and int4 weights on AVX-512 VNNI (the fused step's int-dot path).
//
// The activations are quantized per block of 32 values to int8, as llama.cpp's Q8 activations are:
//   s_b = absmax(x_b) / 127 (fp32),  q = round-half-to-even(x / s_b) (a true division), clamped to ±127;
//   an all-zero block has s_b = 0 and q = 0.
// Then y[n] = wscale · Σ_b s_b · Σ_{k∈b} q_k · w_k, the inner sums exact in int32 (vpdpbusd), the outer ones in fp32:
//   Int8 : w = int8 code, one scale per row, applied last.
//   Int4 : w = nibble − 8, one scale per group of G values (G a multiple of 32, so a block never straddles groups).
// inference_core/quant/activation_blocks.py is the reference of this arithmetic (tests compare the two per linear and
// token for token over a model); it differs from the float path's x·dequant(W) by the activations' rounding.
//
// vpdpbusd multiplies unsigned bytes by signed bytes, four per int32 lane. The weights are made the unsigned side by an
// offset that the activations pay for: an int8 code w is read as w + 128 (its top bit flipped), a nibble is w + 8 as
// stored. Σ (w + o)·q = Σ w·q + o·Σ q, so each lane's accumulator starts at −o·(its four q summed), taken once per
// activation: no weight byte beyond the codes and scales is read.
//
// Register order. An int8 chunk is 64 consecutive values. An int4 chunk is 32 packed bytes = two 32-value runs, byte j
// of a run holding value j (low nibble) and j + 16 (high nibble): masking and shifting gives
//   [run0 0..15 | run1 0..15 | run0 16..31 | run1 16..31]
// in the register, so the quantized activations are stored permuted the same way once per call instead of shuffling
// every weight chunk. A K that is 32 mod 64 ends in a half chunk, in natural order, upper half zero.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "linear.h"

namespace ilab {

#if defined(__GNUC__)
#define ILAB_VNNI __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))
#else
#define ILAB_VNNI
#endif

inline bool cpu_has_avx512_vnni() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512vnni");
  return has;
}

constexpr int64_t kActBlock = 32;

// M rows of activations quantized for one weight kind, in its register order, one 64-value chunk after another:
// q [M][chunks·64] (a trailing half chunk zero-padded), scale [M][chunks·16] (each int32 lane's block scale, 0 in
// padding), corr [M][chunks·16] (each lane's −offset·Σq).
struct BlockActs {
  int64_t chunks = 0;
  std::vector<int8_t> q;
  std::vector<float> scale;
  std::vector<int32_t> corr;
  std::vector<int64_t> group_a, group_b;  // Int4: the weight group of each chunk's first and second block

  void quantize(const float* x, int64_t M, int64_t ldx, int64_t K, bool int4, int64_t group) {
    chunks = (K + 63) / 64;
    group_a.resize(chunks);
    group_b.resize(chunks);
    for (int64_t c = 0; c < chunks; ++c) {
      group_a[c] = int4 ? c * 64 / group : 0;
      group_b[c] = int4 && c * 64 + 32 < K ? (c * 64 + 32) / group : group_a[c];
    }
    q.assign(M * chunks * 64, 0);
    scale.assign(M * chunks * 16, 0.0f);
    corr.assign(M * chunks * 16, 0);
    const int32_t offset = int4 ? 8 : 128;
    for (int64_t m = 0; m < M; ++m) {
      int8_t* qm = q.data() + m * chunks * 64;
      float* sm = scale.data() + m * chunks * 16;
      for (int64_t k0 = 0; k0 < K; k0 += kActBlock) {
        const float* xb = x + m * ldx + k0;
        float amax = 0.0f;
        for (int i = 0; i < kActBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
        const float s = amax / 127.0f;
        const int64_t c = k0 / 64, half = (k0 / 32) % 2;
        const bool full = c * 64 + 64 <= K;
        for (int i = 0; i < kActBlock; ++i) {
          const float v = s == 0.0f ? 0.0f : std::nearbyint(xb[i] / s);  // default rounding: half to even
          const int pos = int4 && full ? (i < 16 ? half * 16 + i : 32 + half * 16 + (i - 16)) : half * 32 + i;
          qm[c * 64 + pos] = static_cast<int8_t>(std::min(127.0f, std::max(-127.0f, v)));
          sm[c * 16 + pos / 4] = s;
        }
      }
      int32_t* cm = corr.data() + m * chunks * 16;
      for (int64_t lane = 0; lane < chunks * 16; ++lane)
        cm[lane] = -offset * (qm[4 * lane] + qm[4 * lane + 1] + qm[4 * lane + 2] + qm[4 * lane + 3]);
    }
  }
};

// The 64 (or, at a K that is 32 mod 64, the last 32) unsigned codes of chunk c of a weight row, in register order.
template <bool kInt4>
ILAB_VNNI inline __m512i load_codes(const uint8_t* row, int64_t c, bool full) {
  if constexpr (kInt4) {
    const __m256i mask = _mm256_set1_epi8(0x0F);
    if (full) {
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + c * 32));
      return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(b, mask)),
                                _mm256_and_si256(_mm256_srli_epi16(b, 4), mask), 1);
    }
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c * 32));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m256i both = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m4), _mm_and_si128(b, m4));
    return _mm512_zextsi256_si512(both);
  } else {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));  // w → w + 128 as an unsigned byte
    // a half chunk's upper lanes meet zero activations (q = 0, corr = 0): whatever they hold adds nothing
    const __m512i b = full ? _mm512_loadu_si512(row + c * 64) : _mm512_maskz_loadu_epi8(0xFFFFFFFFull, row + c * 64);
    return _mm512_xor_si512(b, flip);
  }
}

// y[m·ldy + n + i] for MB activation rows starting at m0 and NB weight rows starting at n: each chunk of activations
// is loaded once for NB rows, and the NB·MB accumulators are independent chains (one row alone is bound by the
// latency of its multiply-add chain, nine chunks long at K = 576). Every (weight row, activation row) pair is summed
// in the same order whatever NB and MB are, so a row's result does not depend on how many rows share the call
// (batch invariance: a speculative verify scores a position exactly as a plain decode step does).
// A row runs as segments, each ending with one fp32 scale: the whole row for Int8 (its row scale, applied last), a
// group for Int4 with groups of whole chunks (G a multiple of 64). Int4 with G = 32 mod 64 has a chunk's two blocks
// in different groups: each lane's scale is then its block's activation scale times its group's weight scale
// (A.group_a / A.group_b). No division in the loop: two per chunk cost as much as everything else.
template <bool kInt4, int NB, int MB>
ILAB_VNNI void int_dot_tile(const WeightView& W, int64_t n, const BlockActs& A, int64_t m0, float* y, int64_t ldy) {
  const int64_t K = W.K, chunks = A.chunks;
  const int64_t row_bytes = kInt4 ? K / 2 : K;
  const uint8_t* rows = static_cast<const uint8_t*>(W.w) + n * row_bytes;
  constexpr int64_t kChunkBytes = kInt4 ? 32 : 64;
  const int64_t n_groups = kInt4 ? (K + W.group - 1) / W.group : 1;
  const float* gscale = kInt4 ? W.scale + n * n_groups : nullptr;
  const bool per_group = !kInt4 || W.group % 64 == 0;
  const int64_t seg_chunks = kInt4 && per_group ? W.group / 64 : chunks;
  __m512 total[NB][MB], part[NB][MB];
  for (int i = 0; i < NB; ++i)
    for (int m = 0; m < MB; ++m) total[i][m] = _mm512_setzero_ps();
  for (int64_t c0 = 0, seg = 0; c0 < chunks; c0 += seg_chunks, ++seg) {
    for (int i = 0; i < NB; ++i)
      for (int m = 0; m < MB; ++m) part[i][m] = _mm512_setzero_ps();
    const int64_t c1 = std::min(chunks, c0 + seg_chunks);
    for (int64_t c = c0; c < c1; ++c) {
      const bool full = c * 64 + 64 <= K;
      __m512i w[NB];
      __m512 wscale[NB];
      for (int i = 0; i < NB; ++i) {
        const uint8_t* row = rows + i * row_bytes;
        // rows are consecutive in memory, so prefetching past this row's end fetches the next rows
        if ((c * kChunkBytes) % 64 == 0)
          _mm_prefetch(reinterpret_cast<const char*>(row) + kPrefetchBytes + c * kChunkBytes, ILAB_PREFETCH_HINT);
        w[i] = load_codes<kInt4>(row, c, full);
        if (kInt4 && !per_group)
          wscale[i] = _mm512_mask_blend_ps(0xF0F0, _mm512_set1_ps(gscale[i * n_groups + A.group_a[c]]),
                                           _mm512_set1_ps(gscale[i * n_groups + A.group_b[c]]));
      }
      for (int m = 0; m < MB; ++m) {
        const int64_t at = (m0 + m) * chunks + c;
        const __m512i corr = _mm512_loadu_si512(A.corr.data() + at * 16), q = _mm512_loadu_si512(A.q.data() + at * 64);
        const __m512 s = _mm512_loadu_ps(A.scale.data() + at * 16);
        for (int i = 0; i < NB; ++i) {
          const __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(corr, w[i], q));
          part[i][m] = _mm512_fmadd_ps(f, kInt4 && !per_group ? _mm512_mul_ps(s, wscale[i]) : s, part[i][m]);
        }
      }
    }
    for (int i = 0; i < NB; ++i) {
      const __m512 g = _mm512_set1_ps(kInt4 && per_group ? gscale[i * n_groups + seg] : 1.0f);
      for (int m = 0; m < MB; ++m) total[i][m] = _mm512_fmadd_ps(part[i][m], g, total[i][m]);
    }
  }
  for (int i = 0; i < NB; ++i) {
    const float rs = kInt4 ? 1.0f : W.scale[n + i];
    const float b = W.bias ? W.bias[n + i] : 0.0f;
    for (int m = 0; m < MB; ++m) y[(m0 + m) * ldy + n + i] = rs * _mm512_reduce_add_ps(total[i][m]) + b;
  }
}

// Tiles over [n0, n1) × M: four weight rows at a time for one or two activation rows (decode, a two-row step), else
// one weight row against blocks of four activation rows (the weight row stays in L1 across the blocks).
template <bool kInt4>
ILAB_VNNI void int_dot_rows_of(const WeightView& W, const BlockActs& A, int64_t M, float* y, int64_t ldy, int64_t n0,
                               int64_t n1) {
  int64_t n = n0;
  if (M <= 2) {
    for (; n + 4 <= n1; n += 4) {
      if (M == 1) int_dot_tile<kInt4, 4, 1>(W, n, A, 0, y, ldy);
      else int_dot_tile<kInt4, 4, 2>(W, n, A, 0, y, ldy);
    }
  }
  for (; n < n1; ++n) {
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) int_dot_tile<kInt4, 1, 4>(W, n, A, m, y, ldy);
    switch (M - m) {
      case 1: int_dot_tile<kInt4, 1, 1>(W, n, A, m, y, ldy); break;
      case 2: int_dot_tile<kInt4, 1, 2>(W, n, A, m, y, ldy); break;
      case 3: int_dot_tile<kInt4, 1, 3>(W, n, A, m, y, ldy); break;
      default: break;
    }
  }
}

// y[m, n] = x[m] · W[n] (+ bias[n]) on integer dot products, for n in [n0, n1), m < M; W Int8 or Int4. Each caller
// (thread) quantizes x itself: K values against the (n1 − n0)·K weights it reads.
inline void int_dot_rows(const WeightView& W, const float* x, int64_t M, int64_t ldx, float* y, int64_t ldy, int64_t n0,
                         int64_t n1) {
  thread_local BlockActs acts;
  const bool int4 = W.kind == Kind::Int4;
  acts.quantize(x, M, ldx, W.K, int4, W.group);
  if (int4) int_dot_rows_of<true>(W, acts, M, y, ldy, n0, n1);
  else int_dot_rows_of<false>(W, acts, M, y, ldy, n0, n1);
}

// The fused step's projection: on integer dot products when the view was switched to them (FusedModel.use_int_dot,
// only for Int8/Int4 views on a CPU with AVX-512 VNNI), else the float kernels of linear.h.
inline void project_rows(const WeightView& W, const float* x, int64_t M, int64_t ldx, float* y, int64_t ldy, int64_t n0,
                         int64_t n1) {
  if (W.int_dot) int_dot_rows(W, x, M, ldx, y, ldy, n0, n1);
  else linear_rows(W, x, M, ldx, y, ldy, n0, n1);
}

}  // namespace ilab

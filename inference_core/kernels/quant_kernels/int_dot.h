// Integer-dot-product rows for int8 and int4 weights on AVX-512 VNNI (the fused step's int-dot path).
//
// The activations are quantized per block of 32 values to int8, as llama.cpp's Q8 activations are:
//   s_b = absmax(x_b) / 127 (fp32),  q = round-half-to-even(x / s_b) (a true division), clamped to ±127;
//   an all-zero block has s_b = 0 and q = 0.
// Then y[n] = wscale · Σ_b s_b · Σ_{k∈b} q_k · w_k, the inner sums exact in int32 (vpdpbusd), the outer ones in fp32:
//   Int8 : w = int8 code, one scale per row, applied last.
//   Int4 : w = nibble − 8, one scale per group of G values (G a multiple of 32, so a block never straddles groups).
// tests/engine/activation_blocks.py is the reference of this arithmetic (tests compare the two per linear and
// token for token over a model); it differs from the float path's x·dequant(W) by the activations' rounding.
//
// vpdpbusd multiplies unsigned bytes by signed bytes, four per int32 lane. The weights are made the unsigned side by an
// offset that the activations pay for: an int8 code w is read as w + 128 (its top bit flipped), a nibble is w + 8 as
// stored. Σ (w + o)·q = Σ w·q + o·Σ q, so each lane's accumulator starts at −o·(its q summed), taken once per
// activation: no weight byte beyond the codes and scales is read.
//
// Register order: every int32 lane sums products of one activation block only, so the per-block fp32 work (a
// conversion and a multiply-add per register of sums) is paid once per accumulator, however many vpdpbusd fed it.
//   Int8: a chunk is 64 consecutive values (lanes 0-7 one block, 8-15 the next).
//   Int4: a chunk is 64 packed bytes = 128 values = four 32-value runs, byte j of a run holding value j (low nibble)
//   and j + 16 (high nibble), as stored. One mask gives the low nibbles [run0 0..15 | run1 0..15 | run2 0..15 |
//   run3 0..15], a shift and a mask the high ones [run0 16..31 | ...]: lane j of both holds block j / 4, so the two
//   multiply-adds go into one int32 accumulator and one conversion serves 128 values. The quantized activations are
//   stored in that order once per call ([low halves | high halves] per chunk) instead of shuffling the weights.
//   A row whose K is not a multiple of 128 ends in a partial chunk: its bytes are loaded under a mask (the rest
//   zero) and its activations are zero-padded.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "int_dot_avx2.h"
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

// 16 values of a block with scale s > 0 → int8: a true division (the reference's x / s), rounded half to even,
// clamped to ±127
ILAB_VNNI inline __m128i block_codes(__m512 v, float s) {
  const __m512 r = _mm512_roundscale_ps(_mm512_div_ps(v, _mm512_set1_ps(s)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 clamped = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
  return _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(clamped));
}

// M rows of activations quantized for one weight kind, in its register order, one chunk after another:
// q [M][chunks·V] (V = 64 values a chunk for Int8, 128 for Int4; padding zero), scale [M][chunks·16] (each int32
// lane's block scale, 0 in padding), corr [M][chunks·16] (each lane's −offset·Σq).
// Int4 with a group G that is not a multiple of 128 has up to four groups in a chunk: each lane then takes its
// block's group scale, gathered from the row's scales at group_first[c] + lane_group[c][lane] (group_mask[c]: the
// groups the chunk touches, so the load stays inside the row's scales).
struct BlockActs {
  int64_t chunks = 0;
  AlignedVector<int8_t> q;
  AlignedVector<float> scale;
  AlignedVector<int32_t> corr;
  std::vector<int64_t> group_first;
  std::vector<int32_t> lane_group;
  std::vector<uint16_t> group_mask;

  ILAB_VNNI void quantize(const float* x, int64_t M, int64_t ldx, int64_t K, bool int4, int64_t group) {
    const int64_t V = int4 ? 128 : 64;
    chunks = (K + V - 1) / V;
    q.assign(M * chunks * V, 0);
    scale.assign(M * chunks * 16, 0.0f);
    corr.resize(M * chunks * 16);
    if (int4 && group % 128 != 0) {
      group_first.resize(chunks);
      lane_group.resize(chunks * 16);
      group_mask.resize(chunks);
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t blocks = std::min<int64_t>(4, (K - c * 128) / kActBlock);
        group_first[c] = c * 128 / group;
        const int64_t last = (c * 128 + (blocks - 1) * kActBlock) / group;
        group_mask[c] = static_cast<uint16_t>((1u << (last - group_first[c] + 1)) - 1);
        for (int lane = 0; lane < 16; ++lane)  // lanes of padding blocks take the last group (their q are 0)
          lane_group[c * 16 + lane] = static_cast<int32_t>(
              (c * 128 + std::min<int64_t>(lane / 4, blocks - 1) * kActBlock) / group - group_first[c]);
      }
    }
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int64_t m = 0; m < M; ++m) {
      int8_t* qm = q.data() + m * chunks * V;
      float* sm = scale.data() + m * chunks * 16;
      for (int64_t k0 = 0; k0 < K; k0 += kActBlock) {
        const float* xb = x + m * ldx + k0;
        const __m512 a = _mm512_loadu_ps(xb), b = _mm512_loadu_ps(xb + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, a), _mm512_andnot_ps(sign, b)));
        const float s = amax / 127.0f;
        if (s == 0.0f) continue;  // an all-zero block: scale 0, codes 0 (as assigned)
        int8_t *first, *second;  // where values 0..15 and 16..31 of the block go
        float* lanes;
        int lane_count;
        if (int4) {  // block b of chunk c: its halves at low[16b] and high[16b], lanes 4b..4b+3
          const int64_t c = k0 / 128, blk = (k0 % 128) / kActBlock;
          first = qm + c * 128 + 16 * blk;
          second = first + 64;
          lanes = sm + c * 16 + 4 * blk;
          lane_count = 4;
        } else {  // natural order: lanes 8·half .. 8·half + 7
          first = qm + k0;
          second = first + 16;
          lanes = sm + k0 / 4;
          lane_count = 8;
        }
        _mm_storeu_si128(reinterpret_cast<__m128i*>(first), block_codes(a, s));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(second), block_codes(b, s));
        std::fill(lanes, lanes + lane_count, s);
      }
      // corr = −offset · Σq per lane (both halves for Int4): offset 8 = 2^3, 128 = 2^7
      const __m512i ones = _mm512_set1_epi8(1);
      for (int64_t c = 0; c < chunks; ++c) {
        const int8_t* qc = qm + c * V;
        __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(qc));
        if (int4) sum = _mm512_dpbusd_epi32(sum, ones, _mm512_loadu_si512(qc + 64));
        const __m512i scaled = int4 ? _mm512_slli_epi32(sum, 3) : _mm512_slli_epi32(sum, 7);
        _mm512_storeu_si512(corr.data() + (m * chunks + c) * 16, _mm512_sub_epi32(_mm512_setzero_si512(), scaled));
      }
    }
  }
};

// The codes of chunk c of a weight row as unsigned bytes in register order: Int8 one register (64 values), Int4 two
// (low and high nibbles, 64 values each). A partial last chunk is loaded under a mask.
template <bool kInt4>
ILAB_VNNI inline void load_codes(const uint8_t* row, int64_t c, int64_t K, __m512i& a, __m512i& b) {
  constexpr int64_t kBytes = 64;
  const int64_t left = (kInt4 ? (K - c * 128) / 2 : K - c * 64);
  const uint8_t* at = row + c * kBytes;
  const __m512i raw = left >= kBytes ? _mm512_loadu_si512(at) : _mm512_maskz_loadu_epi8((1ull << left) - 1, at);
  if constexpr (kInt4) {
    const __m512i mask = _mm512_set1_epi8(0x0F);
    a = _mm512_and_si512(raw, mask);
    b = _mm512_and_si512(_mm512_srli_epi16(raw, 4), mask);
  } else {
    // w → w + 128 as an unsigned byte; a partial chunk's zeroed bytes meet zero activations (q = 0, corr = 0)
    a = _mm512_xor_si512(raw, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
}

// y[m·ldy + n + i] for MB activation rows starting at m0 and NB weight rows starting at n: each chunk of activations
// is loaded once for NB rows, and the NB·MB accumulators are independent chains (one row alone is bound by the
// latency of its multiply-add chain). Every (weight row, activation row) pair is summed in the same order whatever NB
// and MB are, so a row's result does not depend on how many rows share the call (batch invariance: a speculative
// verify scores a position exactly as a plain decode step does).
// A row runs as segments, each ending with one fp32 scale: the whole row for Int8 (its row scale, applied last), a
// group for Int4 with groups of whole chunks (G a multiple of 128). Int4 with other G has several groups in a chunk:
// each lane's scale is then its block's activation scale times its group's weight scale. No division in the loop.
template <bool kInt4, int NB, int MB>
ILAB_VNNI void int_dot_tile(const WeightView& W, int64_t n, const BlockActs& A, int64_t m0, float* y, int64_t ldy) {
  const int64_t K = W.K, chunks = A.chunks;
  constexpr int64_t V = kInt4 ? 128 : 64;
  const int64_t row_bytes = kInt4 ? K / 2 : K;
  const uint8_t* rows = static_cast<const uint8_t*>(W.w) + n * row_bytes;
  const int64_t n_groups = kInt4 ? (K + W.group - 1) / W.group : 1;
  const float* gscale = kInt4 ? W.scale + n * n_groups : nullptr;
  const bool per_group = !kInt4 || W.group % 128 == 0;
  const int64_t seg_chunks = kInt4 && per_group ? W.group / 128 : chunks;
  __m512 total[NB][MB], part[NB][MB];
  for (int i = 0; i < NB; ++i)
    for (int m = 0; m < MB; ++m) total[i][m] = _mm512_setzero_ps();
  for (int64_t c0 = 0, seg = 0; c0 < chunks; c0 += seg_chunks, ++seg) {
    for (int i = 0; i < NB; ++i)
      for (int m = 0; m < MB; ++m) part[i][m] = _mm512_setzero_ps();
    const int64_t c1 = std::min(chunks, c0 + seg_chunks);
    for (int64_t c = c0; c < c1; ++c) {
      __m512i lo[NB], hi[NB];
      __m512 wscale[NB];
      for (int i = 0; i < NB; ++i) {
        const uint8_t* row = rows + i * row_bytes;
        // rows are consecutive in memory, so prefetching past this row's end fetches the next rows
        _mm_prefetch(reinterpret_cast<const char*>(row) + kPrefetchBytes + c * 64, ILAB_PREFETCH_HINT);
        load_codes<kInt4>(row, c, K, lo[i], hi[i]);
        if (kInt4 && !per_group)
          wscale[i] = _mm512_permutexvar_ps(_mm512_loadu_si512(A.lane_group.data() + c * 16),
                                            _mm512_maskz_loadu_ps(A.group_mask[c], gscale + i * n_groups + A.group_first[c]));
      }
      for (int m = 0; m < MB; ++m) {
        const int64_t at = (m0 + m) * chunks + c;
        const __m512i corr = _mm512_loadu_si512(A.corr.data() + at * 16);
        const __m512i qa = _mm512_loadu_si512(A.q.data() + at * V);
        const __m512i qb = kInt4 ? _mm512_loadu_si512(A.q.data() + at * V + 64) : qa;
        const __m512 s = _mm512_loadu_ps(A.scale.data() + at * 16);
        for (int i = 0; i < NB; ++i) {
          __m512i acc = _mm512_dpbusd_epi32(corr, lo[i], qa);
          if constexpr (kInt4) acc = _mm512_dpbusd_epi32(acc, hi[i], qb);
          part[i][m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), kInt4 && !per_group ? _mm512_mul_ps(s, wscale[i]) : s,
                                       part[i][m]);
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

// y[m, n] = x[m] · W[n] (+ bias[n]) on integer dot products, for n in [n0, n1) and, when n2 < n3, [n2, n3) too (the
// fused gate/up rows of one thread), m < M; W Int8 or Int4. Each caller (thread) quantizes x itself, once for both
// ranges: K values against the rows·K weights it reads.
inline void int_dot_rows(const WeightView& W, const float* x, int64_t M, int64_t ldx, float* y, int64_t ldy, int64_t n0,
                         int64_t n1, int64_t n2 = 0, int64_t n3 = 0) {
  if (M == 0) return;  // a chunk that only writes K/V hands the head no rows: the tiles would read empty buffers
  thread_local BlockActs acts;
  const bool int4 = W.kind == Kind::Int4;
  acts.quantize(x, M, ldx, W.K, int4, W.group);
  for (auto [a, b] : {std::pair{n0, n1}, std::pair{n2, n3}}) {
    if (a >= b) continue;
    if (int4) int_dot_rows_of<true>(W, acts, M, y, ldy, a, b);
    else int_dot_rows_of<false>(W, acts, M, y, ldy, a, b);
  }
}

// The fused step's projection: on integer dot products when the view was switched to them (FusedModel.use_int_dot,
// only for Int8/Int4 views: AVX-512 VNNI where the CPU has it, else AVX2), else the float kernels of linear.h.
// Rows [n0, n1) and, when n2 < n3, [n2, n3) (the activations quantized once for both).
inline void project_rows(const WeightView& W, const float* x, int64_t M, int64_t ldx, float* y, int64_t ldy, int64_t n0,
                         int64_t n1, int64_t n2 = 0, int64_t n3 = 0) {
  if (W.int_dot == IntDot::Vnni) return int_dot_rows(W, x, M, ldx, y, ldy, n0, n1, n2, n3);
  if (W.int_dot == IntDot::Avx2) return avx2_int_dot_rows(W, x, M, ldx, y, ldy, n0, n1, n2, n3);
  linear_rows(W, x, M, ldx, y, ldy, n0, n1);
  if (n2 < n3) linear_rows(W, x, M, ldx, y, ldy, n2, n3);
}

}  // namespace ilab

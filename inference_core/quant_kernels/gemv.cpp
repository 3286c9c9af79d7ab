// Low-bit weight × fp32 activation matrix-vector kernels for CPUs with AVX2 + FMA + F16C.
//
// y[m, n] = sum_k x[m, k] * dequant(W)[n, k]. Weights stay packed in memory; each output row is decoded
// 8 values at a time into fp32 registers and fused-multiply-added with x, so the only bytes streamed from
// DRAM are the packed ones (decode at batch 1 is memory-bandwidth bound). Work is split over output rows
// with at::parallel_for. Activations are NOT quantized: these are weight-only (W{8,4}A32) kernels, and the
// result equals dequantize-then-matmul up to fp32 summation order.
//
// Layouts (shared with inference_core/quant.py, which packs them):
//   int8 : q int8 [N, K], scale fp32 [N]                     w = q * scale[n]
//   int4 : p uint8 [N, K/2], scale fp32 [N, ⌈K/G⌉]           w = (nib - 8) * scale[n, k/G]
//   nf4  : p uint8 [N, K/2], absmax fp32 [N, ⌈K/G⌉], lut[16] w = lut[nib] * absmax[n, k/G] (lut fp16)
// (K a multiple of 32; when G does not divide K the last group is shorter.)
//   fp8  : q uint8 (e4m3fn bits) [N, K], scale fp32 [N]      w = fp8(q) * scale[n]
// Nibbles: in every 32-value chunk of a row, byte j (0..15) holds value j in its low nibble and value
// j + 16 in its high nibble (llama.cpp's order), so one 16-byte load unpacks into two runs of 16.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

namespace {

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
  return _mm_cvtss_f32(lo);
}

// A 16-entry table of fp16 values, split into its low and high bytes so that two byte shuffles (pshufb)
// look up 16 codes at once; interleaving the two results gives 16 fp16 numbers, which F16C converts to fp32.
// int4 uses the table (code - 8), NF4 its codebook (rounded to fp16 by quant.py, so the lookup is exact).
struct Fp16Lut {
  __m128i lo, hi;
  explicit Fp16Lut(const at::Half* table) {
    alignas(16) uint8_t l[16], h[16];
    for (int i = 0; i < 16; ++i) {
      const uint16_t bits = table[i].x;
      l[i] = bits & 0xFF;
      h[i] = bits >> 8;
    }
    lo = _mm_load_si128(reinterpret_cast<const __m128i*>(l));
    hi = _mm_load_si128(reinterpret_cast<const __m128i*>(h));
  }
  // 16 codes (bytes 0..15) -> fp32 values of codes 0..7 in a, 8..15 in b
  inline void decode(__m128i codes, __m256& a, __m256& b) const {
    __m128i l = _mm_shuffle_epi8(lo, codes), h = _mm_shuffle_epi8(hi, codes);
    a = _mm256_cvtph_ps(_mm_unpacklo_epi8(l, h));
    b = _mm256_cvtph_ps(_mm_unpackhi_epi8(l, h));
  }
};

torch::Tensor nibble_gemv(const torch::Tensor& x, const torch::Tensor& packed, const torch::Tensor& scales,
                          int64_t group, const torch::Tensor& lut16) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "x: contiguous fp32 [M, K]");
  TORCH_CHECK(packed.scalar_type() == torch::kUInt8 && packed.is_contiguous(), "packed: contiguous uint8");
  TORCH_CHECK(scales.scalar_type() == torch::kFloat32 && scales.is_contiguous(), "scales: contiguous fp32");
  TORCH_CHECK(lut16.numel() == 16 && lut16.scalar_type() == torch::kHalf && lut16.is_contiguous(), "lut: 16 fp16");
  const int64_t M = x.size(0), K = x.size(1), N = packed.size(0);
  TORCH_CHECK(packed.size(1) * 2 == K && K % 32 == 0 && group % 32 == 0, "bad shapes");
  const int64_t G = (K + group - 1) / group;  // the last group may be shorter (K = 576 with group 128)
  TORCH_CHECK(scales.size(0) == N && scales.size(1) == G, "bad scale shape");
  auto y = torch::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const uint8_t* wp = packed.data_ptr<uint8_t>();
  const float* sp = scales.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const Fp16Lut lut(lut16.data_ptr<at::Half>());
  const __m128i mask = _mm_set1_epi8(0x0F);
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const uint8_t* row = wp + n * (K / 2);
      const float* srow = sp + n * G;
      for (int64_t m = 0; m < M; ++m) {
        const float* xr = xp + m * K;
        __m256 total = _mm256_setzero_ps();
        for (int64_t g = 0; g < G; ++g) {
          __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
          const int64_t chunks = std::min(group, K - g * group) / 32;
          for (int64_t c = 0; c < chunks; ++c) {
            const int64_t k = g * group + c * 32;
            __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k / 2));
            __m256 w0, w1, w2, w3;
            lut.decode(_mm_and_si128(bytes, mask), w0, w1);
            lut.decode(_mm_and_si128(_mm_srli_epi16(bytes, 4), mask), w2, w3);
            acc0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr + k), acc0);
            acc1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr + k + 8), acc1);
            acc0 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xr + k + 16), acc0);
            acc1 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xr + k + 24), acc1);
          }
          total = _mm256_fmadd_ps(_mm256_set1_ps(srow[g]), _mm256_add_ps(acc0, acc1), total);
        }
        yp[m * N + n] = hsum(total);
      }
    }
  });
  return y;
}

// int4: lut = (code - 8) as fp16; nf4: lut = the codebook as fp16. Both: y = x @ (lut[code] * scale).T
torch::Tensor lut4_gemv(torch::Tensor x, torch::Tensor packed, torch::Tensor scales, int64_t group, torch::Tensor lut) {
  return nibble_gemv(x, packed, scales, group, lut);
}

// Per-output-channel formats with one byte per weight: int8 and fp8 e4m3.
template <bool kFp8>
torch::Tensor byte_gemv(const torch::Tensor& x, const torch::Tensor& q, const torch::Tensor& scale) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "x: contiguous fp32 [M, K]");
  TORCH_CHECK(q.element_size() == 1 && q.is_contiguous() && q.dim() == 2, "q: contiguous one-byte [N, K]");
  TORCH_CHECK(scale.scalar_type() == torch::kFloat32 && scale.numel() == q.size(0), "scale: fp32 [N]");
  const int64_t M = x.size(0), K = x.size(1), N = q.size(0);
  TORCH_CHECK(q.size(1) == K && K % 16 == 0, "K must match and be a multiple of 16");
  auto y = torch::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const uint8_t* wp = static_cast<const uint8_t*>(q.data_ptr());
  const float* sp = scale.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  // e4m3 -> fp16 by moving bits: sign to bit 15, exponent+mantissa to bits 7..13. The fp16 read this way
  // is the fp8 value times 2^-8 (bias 15 vs 7) for normals and subnormals alike; the 2^8 goes into scale.
  const __m256i sign = _mm256_set1_epi16(0x80), body = _mm256_set1_epi16(0x7F);
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const uint8_t* row = wp + n * K;
      const float s = kFp8 ? sp[n] * 256.0f : sp[n];
      for (int64_t m = 0; m < M; ++m) {
        const float* xr = xp + m * K;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        for (int64_t k = 0; k < K; k += 16) {
          __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k));
          __m256 w0, w1;
          if constexpr (kFp8) {
            __m256i h = _mm256_cvtepu8_epi16(bytes);
            h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(h, sign), 8),
                                _mm256_slli_epi16(_mm256_and_si256(h, body), 7));
            w0 = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
            w1 = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
          } else {
            w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
            w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(bytes, 8)));
          }
          acc0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr + k), acc0);
          acc1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr + k + 8), acc1);
        }
        yp[m * N + n] = s * hsum(_mm256_add_ps(acc0, acc1));
      }
    }
  });
  return y;
}

torch::Tensor int8_gemv(torch::Tensor x, torch::Tensor q, torch::Tensor scale) { return byte_gemv<false>(x, q, scale); }
torch::Tensor fp8_gemv(torch::Tensor x, torch::Tensor q, torch::Tensor scale) { return byte_gemv<true>(x, q, scale); }

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("lut4_gemv", &lut4_gemv, "y = x @ (lut[nibble] * group_scale).T: int4 (lut = code - 8) and NF4 (codebook)");
  m.def("int8_gemv", &int8_gemv, "y = x @ (q * scale).T (per-channel int8, weight-only)");
  m.def("fp8_gemv", &fp8_gemv, "y = x @ (fp8(q) * scale).T (per-channel fp8 e4m3, weight-only)");
}

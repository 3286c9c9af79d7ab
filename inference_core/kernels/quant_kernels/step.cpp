// The fused CPU forward: one native call runs every layer of a Llama-family decoder for the new positions of one
// or more sequences over a paged KV pool (a contiguous cache being a pool of one block), and the output head. It computes what model.Transformer.forward computes
// (the readable reference), only without per-op dispatch: RMSNorm, the fused QKV projection (+ bias), RoPE,
// causal GQA attention over the cached keys and values, the output projection, the SwiGLU MLP and the residual
// adds all run inside one OpenMP region, the threads meeting at a spin barrier between phases (a step is ~150
// phases, too many for the runtime's sleeping barrier). Each projection splits its output rows across the
// threads, so every weight byte is read once per step whatever T is (see linear.h).
//
// The pool's pages are fp32, or int8 with an fp16 scale per token and head (engine/paged.py's int8 pool): the
// step is compiled once for each (Pages<E>), the int8 one widening keys and values in registers as attention
// reads them and quantizing new K/V as the pool's own write does.
//
// Invariants: on return every row's K/V sits in its sequence's slot for its position in every layer that ran;
// rows of one sequence are its consecutive new positions. Results equal the reference up to fp32 summation order;
// int8 pages hold bit for bit what the reference's PagedKVPool.write stores for the same K/V.
#include <linux/futex.h>
#include <omp.h>
#include <sys/syscall.h>
#include <torch/extension.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <climits>
#include <optional>
#include <type_traits>
#include <vector>

#include "int_dot.h"

namespace ilab {
namespace {
// "float", "vnni" or "avx2" → the path; a path this CPU cannot run is refused (the module loads only with AVX2)
inline IntDot int_dot_path(const std::string& name) {
  if (name == "float") return IntDot::Off;
  if (name == "avx2") return IntDot::Avx2;
  TORCH_CHECK(name == "vnni", "int_dot path: expected float, vnni or avx2, got ", name);
  TORCH_CHECK(cpu_has_avx512_vnni(), "integer dot products on VNNI need AVX-512 VNNI, which this CPU lacks");
  return IntDot::Vnni;
}


// Threads spin while a step runs (a phase ends within microseconds of its siblings), and sleep on a futex when
// a sibling is late, e.g. because another process took its core: spinning on then would burn the very time
// slice the late thread waits for. Between steps they sleep in the OpenMP runtime as usual.
struct SpinBarrier {
  std::atomic<int> arrived{0};
  std::atomic<int> generation{0};
  std::atomic<int> sleepers{0};
  int n = 1;
  void wait() {
    if (n == 1) return;
    const int gen = generation.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
      arrived.store(0, std::memory_order_relaxed);
      generation.fetch_add(1);  // seq_cst here and on `sleepers` below: a waiter either sees the new
      if (sleepers.load() > 0)    // generation or is counted in `sleepers` before this load (no lost wake-up)
        syscall(SYS_futex, reinterpret_cast<int*>(&generation), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
      return;
    }
    for (int spins = 0; spins < 4000; ++spins) {
      if (generation.load(std::memory_order_acquire) != gen) return;
      _mm_pause();
    }
    sleepers.fetch_add(1);
    while (generation.load() == gen)  // FUTEX_WAIT returns at once if it moved on
      syscall(SYS_futex, reinterpret_cast<int*>(&generation), FUTEX_WAIT_PRIVATE, gen, nullptr, nullptr, 0);
    sleepers.fetch_sub(1, std::memory_order_acq_rel);
  }
};

inline std::pair<int64_t, int64_t> share(int64_t n, int t, int nt) { return {n * t / nt, n * (t + 1) / nt}; }

// Eight consecutive page values as fp32. fp32 pages are read as they are; int8 pages (paged.py's int8 pool) are
// widened here, in registers, and their per-token scale is applied by the caller once per key or value vector.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

template <typename E>
inline float dot(const float* a, const E* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), acc);
  return hsum(acc);
}

// out[j] = (q · keys[j]) · scale for n consecutive keys (row stride d): as dot() sums each, four keys at a time
// so four independent chains hide the multiply-add latency. int8 keys: the dot of their int8 values, times
// scale · key_scale[j] (a dequantized key is its int8 values times its fp16 scale, exactly, in fp32).
template <typename E>
inline void dots(const float* q, const E* keys, const uint16_t* key_scale, int64_t n, int64_t d, float scale,
                 float* out) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const E* k = keys + j * d;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < d; i += 8) {
      const __m256 qv = _mm256_loadu_ps(q + i);
      a0 = _mm256_fmadd_ps(qv, load8(k + i), a0);
      a1 = _mm256_fmadd_ps(qv, load8(k + d + i), a1);
      a2 = _mm256_fmadd_ps(qv, load8(k + 2 * d + i), a2);
      a3 = _mm256_fmadd_ps(qv, load8(k + 3 * d + i), a3);
    }
    out[j] = hsum(a0) * scale;
    out[j + 1] = hsum(a1) * scale;
    out[j + 2] = hsum(a2) * scale;
    out[j + 3] = hsum(a3) * scale;
  }
  for (; j < n; ++j) out[j] = dot(q, keys + j * d, d) * scale;
  if constexpr (std::is_same_v<E, int8_t>)
    for (j = 0; j < n; ++j) out[j] *= _cvtsh_ss(key_scale[j]);
}

// One K or V vector of d values (d a multiple of 8) → int8 values and their fp16 scale, bit for bit as
// paged.quantize_rows computes them: scale = fp16(clamp(absmax / 127, 2^-24, 65504)), rounded to fp16 before
// dividing, then q = round-half-to-even(x / scale) clamped to ±127 (a true division, as torch's, not a multiply
// by the reciprocal, which rounds differently).
inline uint16_t quantize_row(const float* x, int64_t d, int8_t* q) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 amax = _mm256_setzero_ps();
  for (int64_t i = 0; i < d; i += 8) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, amax);
  const float absmax = *std::max_element(lanes, lanes + 8);
  const uint16_t half = _cvtss_sh(std::min(std::max(absmax / 127.0f, 0x1p-24f), 65504.0f), _MM_FROUND_TO_NEAREST_INT);
  const __m256 s = _mm256_set1_ps(_cvtsh_ss(half)), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  for (int64_t i = 0; i < d; i += 8) {
    __m256 v = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i n = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
    const __m128i n16 = _mm_packs_epi32(_mm256_castsi256_si128(n), _mm256_extracti128_si256(n, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packs_epi16(n16, n16));
  }
  return half;
}

// e^x for eight floats (Cephes' expf: x = n·ln2 + r, |r| ≤ ln2/2, a degree-6 polynomial for e^r, then 2^n);
// within 2 ulp of std::exp over [-87, 88], inputs clamped there. std::exp was most of SiLU's and softmax's time.
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// f(x) for n floats, eight at a time; the tail goes through the same vector code (a padded copy), so every value
// is computed alike wherever it falls.
template <typename F>
inline void map8(const float* in, float* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, f(_mm256_loadu_ps(in + i)));
  if (i < n) {
    alignas(32) float buf[8] = {0};
    std::copy(in + i, in + n, buf);
    _mm256_store_ps(buf, f(_mm256_load_ps(buf)));
    std::copy(buf, buf + (n - i), out + i);
  }
}

// out = SiLU(g)·u = g / (1 + e^-g) · u, as map8 computes it (the tail through the same vector code)
inline void silu_mul(const float* g, const float* u, float* out, int64_t n) {
  auto f = [](__m256 gv, __m256 uv) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), gv));
    return _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), uv);
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, f(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
  if (i < n) {
    alignas(32) float gb[8] = {0}, ub[8] = {0};
    std::copy(g + i, g + n, gb);
    std::copy(u + i, u + n, ub);
    _mm256_store_ps(gb, f(_mm256_load_ps(gb), _mm256_load_ps(ub)));
    std::copy(gb, gb + (n - i), out + i);
  }
}

// The sum of squares is taken in double, in four lanes × two accumulators: one scalar chain was a quarter of the
// step's own (non-GEMM) time in a 121-token prefill, each thread normalizing every row.
inline void rms_norm(const float* x, const float* weight, float eps, int64_t d, float* out) {
  __m256d lo = _mm256_setzero_pd(), hi = lo;
  int64_t i = 0;
  for (; i + 8 <= d; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    lo = _mm256_fmadd_pd(a, a, lo);
    hi = _mm256_fmadd_pd(b, b, hi);
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(lo, hi));
  double ss = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < d; ++i) ss += double(x[i]) * x[i];
  const float inv = 1.0f / std::sqrt(float(ss / d) + eps);
  for (i = 0; i < d; ++i) out[i] = x[i] * inv * weight[i];
}

// x·cos + rotate_half(x)·sin, rotate_half(x) = (−x[half:], x[:half])
inline void rope(float* x, const float* cos, const float* sin, int64_t hd) {
  const int64_t half = hd / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * cos[i] - b * sin[i];
    x[i + half] = b * cos[i + half] + a * sin[i + half];
  }
}

}  // namespace

struct Linear {
  torch::Tensor w, scale, bias, lut;
  WeightView view;
};

Linear make_linear(int64_t kind, torch::Tensor w, std::optional<torch::Tensor> scale, std::optional<torch::Tensor> bias,
                   int64_t group, std::optional<torch::Tensor> lut) {
  Linear L;
  L.w = w;
  TORCH_CHECK(w.device().is_cpu() && w.dim() == 2 && w.is_contiguous(), "weight: contiguous 2-D CPU tensor");
  WeightView& v = L.view;
  v.kind = static_cast<Kind>(kind);
  v.N = w.size(0);
  v.w = w.data_ptr();
  switch (v.kind) {
    case Kind::F32:
      TORCH_CHECK(w.scalar_type() == torch::kFloat32, "fp32 weight expected");
      v.K = w.size(1);
      break;
    case Kind::Int8:
    case Kind::Fp8:
      TORCH_CHECK(w.element_size() == 1, "one-byte weight expected");
      v.K = w.size(1);
      break;
    case Kind::Lut4:
    case Kind::Int4:
      TORCH_CHECK(w.scalar_type() == torch::kUInt8, "packed uint8 weight expected");
      v.K = w.size(1) * 2;
      v.group = group;
      TORCH_CHECK(group > 0 && group % 32 == 0, "group must be a positive multiple of 32");
      if (v.kind == Kind::Lut4) {
        TORCH_CHECK(lut && lut->numel() == 16 && lut->scalar_type() == torch::kHalf, "lut: 16 fp16 values");
        L.lut = lut->contiguous();
        v.lut = Fp16Lut(reinterpret_cast<const uint16_t*>(L.lut.data_ptr<at::Half>()));
      }
      break;
    default:
      TORCH_CHECK(false, "unknown weight kind ", kind);
  }
  TORCH_CHECK(v.K % 32 == 0, "K must be a multiple of 32, got ", v.K);
  if (v.kind != Kind::F32) {
    TORCH_CHECK(scale && scale->scalar_type() == torch::kFloat32 && scale->is_contiguous(), "scale: contiguous fp32");
    const int64_t per_row = v.group ? (v.K + group - 1) / group : 1;
    TORCH_CHECK(scale->numel() == v.N * per_row, "scale has ", scale->numel(), " values, expected ", v.N * per_row);
    L.scale = *scale;
    v.scale = L.scale.data_ptr<float>();
  }
  if (bias) {
    TORCH_CHECK(bias->scalar_type() == torch::kFloat32 && bias->numel() == v.N && bias->is_contiguous(), "bias: fp32 [N]");
    L.bias = *bias;
    v.bias = L.bias.data_ptr<float>();
  }
  return L;
}

struct Layer {
  torch::Tensor attn_norm, ffn_norm;
  Linear qkv, o, gate_up, down;
};

// The K and V pages of a paged pool, [layers, blocks, kv_heads, block_size, head_dim] each: fp32 values (E = float),
// or int8 values (E = int8_t) with one fp16 scale per token and head, [layers, blocks, kv_heads, block_size],
// whose element i scales values i·head_dim .. (i+1)·head_dim − 1.
template <typename E>
struct Pages {
  E* k;
  E* v;
  uint16_t* k_scale = nullptr;
  uint16_t* v_scale = nullptr;
};

class FusedModel {
 public:
  FusedModel(int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t ffn_dim, double eps, std::vector<Layer> layers,
             torch::Tensor final_norm, Linear head, torch::Tensor rope_cos, torch::Tensor rope_sin)
      : hq_(n_heads), hkv_(n_kv_heads), hd_(head_dim), ffn_(ffn_dim), eps_(float(eps)), layers_(std::move(layers)),
        final_norm_(final_norm.contiguous()), head_(std::move(head)), cos_(rope_cos.contiguous()),
        sin_(rope_sin.contiguous()) {
    dim_ = hq_ * hd_;
    TORCH_CHECK(hd_ % 8 == 0 && hq_ % hkv_ == 0, "head_dim must be a multiple of 8 and heads divisible by kv heads");
    TORCH_CHECK(cos_.scalar_type() == torch::kFloat32 && cos_.size(1) == hd_, "rope tables: fp32 [positions, head_dim]");
    for (const Layer& l : layers_) {
      TORCH_CHECK(l.qkv.view.K == dim_ && l.qkv.view.N == (hq_ + 2 * hkv_) * hd_, "qkv shape");
      TORCH_CHECK(l.o.view.K == dim_ && l.o.view.N == dim_, "o shape");
      TORCH_CHECK(l.gate_up.view.K == dim_ && l.gate_up.view.N == 2 * ffn_, "gate/up shape");
      TORCH_CHECK(l.down.view.K == ffn_ && l.down.view.N == dim_, "down shape");
    }
    TORCH_CHECK(head_.view.K == dim_, "head shape");
  }

  // Int8 and Int4 projections (the head included) on integer dot products ("vnni", "avx2") or on the float kernels
  // ("float"); returns how many projections the choice applies to. Python's quant_kernels/int_dot.py decides, from
  // the CPU's features and INFERENCE_INT_DOT.
  int64_t use_int_dot(const std::string& path) {
    const IntDot on = int_dot_path(path);
    int64_t count = 0;
    auto set = [&](Linear& l) {
      if (l.view.kind == Kind::Int8 || l.view.kind == Kind::Int4) {
        l.view.int_dot = on;
        ++count;
      }
    };
    for (Layer& l : layers_)
      for (Linear* p : {&l.qkv, &l.o, &l.gate_up, &l.down}) set(*p);
    set(head_);
    return count;
  }

  // One flattened step over a paged KV pool. x: [N, D] embedded tokens; positions [N] and seq [N] (int64) give
  // each row's position and its sequence, whose block table is tables[seq] (int64 [S, W]); k_pool, v_pool:
  // [layers, blocks, kv_heads, block_size, head_dim], fp32, or int8 with fp16 scales k_scale, v_scale
  // [layers, blocks, kv_heads, block_size] (paged.py's int8 pool; a contiguous cache is the one-block case). A row
  // attends to its sequence's positions 0 .. its own, new rows included. Returns logits [R, vocab] of `rows`.
  torch::Tensor forward(torch::Tensor x, torch::Tensor positions, torch::Tensor seq, torch::Tensor tables,
                        torch::Tensor k_pool, torch::Tensor v_pool, torch::Tensor rows, int64_t n_layers,
                        std::optional<torch::Tensor> k_scale, std::optional<torch::Tensor> v_scale) {
    TORCH_CHECK(k_pool.is_contiguous() && v_pool.is_contiguous() && k_pool.scalar_type() == v_pool.scalar_type() &&
                    k_pool.sizes() == v_pool.sizes() && k_pool.dim() == 5 && k_pool.size(2) == hkv_ &&
                    k_pool.size(4) == hd_, "pools: contiguous [layers, blocks, kv_heads, block_size, head_dim]");
    if (k_pool.scalar_type() == torch::kInt8) {
      const auto scale_shape = k_pool.sizes().slice(0, 4);
      for (const auto& sc : {k_scale, v_scale})
        TORCH_CHECK(sc && sc->scalar_type() == torch::kHalf && sc->is_contiguous() && sc->sizes() == scale_shape,
                    "int8 pages need contiguous fp16 scales [layers, blocks, kv_heads, block_size]");
      return step(x, positions, seq, tables, k_pool,
                  Pages<int8_t>{k_pool.data_ptr<int8_t>(), v_pool.data_ptr<int8_t>(),
                                reinterpret_cast<uint16_t*>(k_scale->data_ptr<at::Half>()),
                                reinterpret_cast<uint16_t*>(v_scale->data_ptr<at::Half>())},
                  rows, n_layers);
    }
    TORCH_CHECK(k_pool.scalar_type() == torch::kFloat32, "pools: fp32, or int8 with scales");
    TORCH_CHECK(!k_scale && !v_scale, "scales belong to int8 pages");
    return step(x, positions, seq, tables, k_pool, Pages<float>{k_pool.data_ptr<float>(), v_pool.data_ptr<float>()},
                rows, n_layers);
  }

 private:
  // forward() for pages of one kind (k_pool only gives the pool's shape)
  template <typename E>
  torch::Tensor step(torch::Tensor x, torch::Tensor positions, torch::Tensor seq, torch::Tensor tables,
                     const torch::Tensor& k_pool, Pages<E> pages, torch::Tensor rows, int64_t n_layers) {
    TORCH_CHECK(x.dim() == 2 && x.size(1) == dim_ && x.scalar_type() == torch::kFloat32, "x: fp32 [N, dim]");
    const int64_t T = x.size(0), n_blocks = k_pool.size(1), bs = k_pool.size(3);
    TORCH_CHECK(positions.scalar_type() == torch::kLong && seq.scalar_type() == torch::kLong &&
                    tables.scalar_type() == torch::kLong && rows.scalar_type() == torch::kLong &&
                    positions.numel() == T && seq.numel() == T && tables.dim() == 2 && positions.is_contiguous() &&
                    seq.is_contiguous() && tables.is_contiguous() && rows.is_contiguous(), "index tensors: contiguous int64");
    const int64_t L = n_layers < 0 ? int64_t(layers_.size()) : std::min<int64_t>(n_layers, layers_.size());
    TORCH_CHECK(k_pool.size(0) >= L, "the pool has fewer layers than the model");
    const int64_t* pos = positions.data_ptr<int64_t>();
    const int64_t* seq_of = seq.data_ptr<int64_t>();
    const int64_t* table = tables.data_ptr<int64_t>();
    const int64_t width = tables.size(1);
    int64_t max_pos = 0;
    for (int64_t r = 0; r < T; ++r) {
      TORCH_CHECK(pos[r] >= 0 && pos[r] < cos_.size(0) && seq_of[r] >= 0 && seq_of[r] < tables.size(0) &&
                      pos[r] / bs < width, "row ", r, ": position ", pos[r], " outside its block table or the RoPE table");
      for (int64_t b = 0; b <= pos[r] / bs; ++b) {
        const int64_t id = table[seq_of[r] * width + b];
        TORCH_CHECK(id >= 0 && id < n_blocks, "block id ", id, " outside the pool");
      }
      max_pos = std::max(max_pos, pos[r]);
    }
    const int64_t R = rows.numel();
    const int64_t* out_rows = rows.data_ptr<int64_t>();
    for (int64_t r = 0; r < R; ++r) TORCH_CHECK(out_rows[r] >= 0 && out_rows[r] < T, "logit row out of range");
    torch::Tensor residual = x.contiguous().clone();
    torch::Tensor logits = torch::empty({R, head_.view.N}, x.options());
    const int64_t nqkv = (hq_ + 2 * hkv_) * hd_;
    AlignedVector<float> qkv(T * nqkv), attn(T * dim_), proj(T * dim_), gu(T * 2 * ffn_), act(T * ffn_);
    float* xs = residual.data_ptr<float>();
    const float* cos = cos_.data_ptr<float>();
    const float* sin = sin_.data_ptr<float>();
    const float scale = 1.0f / std::sqrt(float(hd_));
    const int64_t group = hq_ / hkv_;
    const int64_t block_stride = hkv_ * bs * hd_, layer_stride = n_blocks * block_stride;
    // where position p of row r's sequence keeps kv head h of layer l: the index of its first value in the pages
    // (an int8 page's scale for it is at slot / head_dim)
    auto slot = [&](int64_t l, int64_t r, int64_t p, int64_t h) {
      return l * layer_stride + table[seq_of[r] * width + p / bs] * block_stride + (h * bs + p % bs) * hd_;
    };
    constexpr bool kInt8 = std::is_same_v<E, int8_t>;
    SpinBarrier barrier;
    const int requested = std::max(1, at::get_num_threads());

#pragma omp parallel num_threads(requested)
    {
      const int nt = omp_get_num_threads(), t = omp_get_thread_num();
#pragma omp single
      barrier.n = nt;  // the single's implicit barrier publishes n
      AlignedVector<float> xn(std::max(T, R) * dim_), scores(max_pos + 1);
      for (int64_t li = 0; li < L; ++li) {
        const Layer& layer = layers_[li];
        // 1. attention norm (every thread keeps its own copy) and the QKV projection, rows split across threads
        for (int64_t r = 0; r < T; ++r) rms_norm(xs + r * dim_, layer.attn_norm.data_ptr<float>(), eps_, dim_, xn.data() + r * dim_);
        auto [q0, q1] = share(nqkv, t, nt);
        project_rows(layer.qkv.view, xn.data(), T, dim_, qkv.data(), nqkv, q0, q1);
        barrier.wait();
        // 2. RoPE on q and k heads; k and v into the cache at their positions
        for (int64_t item = t; item < T * (hq_ + hkv_); item += nt) {
          const int64_t r = item / (hq_ + hkv_), h = item % (hq_ + hkv_), p = pos[r];
          float* head = qkv.data() + r * nqkv + h * hd_;
          rope(head, cos + p * hd_, sin + p * hd_, hd_);
          if (h >= hq_) {
            const int64_t kv = h - hq_, at = slot(li, r, p, kv);
            const float* v = qkv.data() + r * nqkv + (hq_ + hkv_ + kv) * hd_;
            if constexpr (kInt8) {  // quantized as the torch path's PagedKVPool.write quantizes
              pages.k_scale[at / hd_] = quantize_row(head, hd_, pages.k + at);
              pages.v_scale[at / hd_] = quantize_row(v, hd_, pages.v + at);
            } else {
              std::copy(head, head + hd_, pages.k + at);
              std::copy(v, v + hd_, pages.v + at);
            }
          }
        }
        barrier.wait();
        // 3. causal attention: the row at position p sees its sequence's keys 0 .. p, block by block
        for (int64_t item = t; item < T * hq_; item += nt) {
          const int64_t r = item / hq_, h = item % hq_, kv = h / group, n_keys = pos[r] + 1;
          const float* q = qkv.data() + r * nqkv + h * hd_;
          for (int64_t j0 = 0; j0 < n_keys; j0 += bs) {
            const int64_t at = slot(li, r, j0, kv);
            dots(q, pages.k + at, kInt8 ? pages.k_scale + at / hd_ : nullptr, std::min(n_keys, j0 + bs) - j0, hd_, scale,
                 scores.data() + j0);
          }
          float best = -INFINITY;
          for (int64_t j = 0; j < n_keys; ++j) best = std::max(best, scores[j]);
          const __m256 shift = _mm256_set1_ps(best);
          map8(scores.data(), scores.data(), n_keys, [&](__m256 v) { return exp8(_mm256_sub_ps(v, shift)); });
          float total = 0.0f;
          for (int64_t j = 0; j < n_keys; ++j) total += scores[j];
          float* out = attn.data() + r * dim_ + h * hd_;
          // Σ_j p_j·v_j, eight 8-value chunks of the head at a time: eight independent accumulators per key
          // rather than one chain per chunk (each chunk still sums over j in order). An int8 value vector's scale
          // goes into its weight: p_j·scale_j·q_j.
          for (int64_t d0 = 0; d0 < hd_; d0 += 64) {
            const int64_t chunks = std::min<int64_t>(8, (hd_ - d0) / 8);
            __m256 acc[8];
            for (int c = 0; c < 8; ++c) acc[c] = _mm256_setzero_ps();
            for (int64_t j0 = 0; j0 < n_keys; j0 += bs) {
              const int64_t at = slot(li, r, j0, kv);
              const E* values = pages.v + at + d0;
              for (int64_t j = j0; j < std::min(n_keys, j0 + bs); ++j) {
                float weight = scores[j];
                if constexpr (kInt8) weight *= _cvtsh_ss(pages.v_scale[at / hd_ + (j - j0)]);
                const __m256 p = _mm256_set1_ps(weight);
                const E* v = values + (j - j0) * hd_;
                for (int c = 0; c < chunks; ++c) acc[c] = _mm256_fmadd_ps(p, load8(v + 8 * c), acc[c]);
              }
            }
            for (int c = 0; c < chunks; ++c)
              _mm256_storeu_ps(out + d0 + 8 * c, _mm256_mul_ps(acc[c], _mm256_set1_ps(1.0f / total)));
          }
        }
        barrier.wait();
        // 4. output projection and the residual add, each thread on its own columns
        auto [o0, o1] = share(dim_, t, nt);
        project_rows(layer.o.view, attn.data(), T, dim_, proj.data(), dim_, o0, o1);
        for (int64_t r = 0; r < T; ++r)
          for (int64_t n = o0; n < o1; ++n) xs[r * dim_ + n] += proj[r * dim_ + n];
        barrier.wait();
        // 5. MLP norm, gate and up rows j and ffn+j on the same thread, so SiLU(gate)·up needs no barrier
        for (int64_t r = 0; r < T; ++r) rms_norm(xs + r * dim_, layer.ffn_norm.data_ptr<float>(), eps_, dim_, xn.data() + r * dim_);
        auto [j0, j1] = share(ffn_, t, nt);
        project_rows(layer.gate_up.view, xn.data(), T, dim_, gu.data(), 2 * ffn_, j0, j1, ffn_ + j0, ffn_ + j1);
        for (int64_t r = 0; r < T; ++r)
          silu_mul(gu.data() + r * 2 * ffn_ + j0, gu.data() + r * 2 * ffn_ + ffn_ + j0, act.data() + r * ffn_ + j0, j1 - j0);
        barrier.wait();
        // 6. down projection and the residual add
        project_rows(layer.down.view, act.data(), T, ffn_, proj.data(), dim_, o0, o1);
        for (int64_t r = 0; r < T; ++r)
          for (int64_t n = o0; n < o1; ++n) xs[r * dim_ + n] += proj[r * dim_ + n];
        barrier.wait();
      }
      // final norm of the rows wanted, then the vocabulary head split across threads
      for (int64_t r = 0; r < R; ++r)
        rms_norm(xs + out_rows[r] * dim_, final_norm_.data_ptr<float>(), eps_, dim_, xn.data() + r * dim_);
      auto [v0, v1] = share(head_.view.N, t, nt);
      project_rows(head_.view, xn.data(), R, dim_, logits.data_ptr<float>(), head_.view.N, v0, v1);
    }
    return logits;
  }

  int64_t hq_, hkv_, hd_, ffn_, dim_ = 0;
  float eps_;
  std::vector<Layer> layers_;
  torch::Tensor final_norm_;
  Linear head_;
  torch::Tensor cos_, sin_;
};

}  // namespace ilab

void register_step(pybind11::module& m) {
  namespace py = pybind11;
  using namespace ilab;
  py::class_<Linear>(m, "Linear");
  m.def("make_linear", &make_linear, "A weight view: kind 0 fp32, 1 int8, 2 fp8 (e4m3 bits), 3 4-bit lookup (NF4), 4 int4",
        py::arg("kind"), py::arg("w"), py::arg("scale") = py::none(), py::arg("bias") = py::none(),
        py::arg("group") = 0, py::arg("lut") = py::none());
  py::class_<Layer>(m, "Layer")
      .def(py::init([](torch::Tensor attn_norm, Linear qkv, Linear o, torch::Tensor ffn_norm, Linear gate_up,
                       Linear down) {
        TORCH_CHECK(attn_norm.scalar_type() == torch::kFloat32 && ffn_norm.scalar_type() == torch::kFloat32, "fp32 norms");
        return Layer{attn_norm.contiguous(), ffn_norm.contiguous(), std::move(qkv), std::move(o), std::move(gate_up),
                     std::move(down)};
      }));
  py::class_<FusedModel>(m, "FusedModel")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, double, std::vector<Layer>, torch::Tensor, Linear, torch::Tensor,
                    torch::Tensor>())
      .def("forward", &FusedModel::forward, py::arg("x"), py::arg("positions"), py::arg("seq"), py::arg("tables"),
           py::arg("k_pool"), py::arg("v_pool"), py::arg("rows"), py::arg("n_layers") = -1,
           py::arg("k_scale") = py::none(), py::arg("v_scale") = py::none(), py::call_guard<py::gil_scoped_release>())
      .def("use_int_dot", &FusedModel::use_int_dot, py::arg("path"));
  m.def("cpu_has_avx512_vnni", &cpu_has_avx512_vnni, "whether this CPU runs the integer-dot-product path");
  m.def("linear_forward", [](const Linear& linear, torch::Tensor x, const std::string& int_dot) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && x.is_contiguous() && x.size(1) == linear.view.K,
                "x: contiguous fp32 [M, K]");
    WeightView v = linear.view;
    v.int_dot = v.kind == Kind::Int8 || v.kind == Kind::Int4 ? int_dot_path(int_dot) : IntDot::Off;
    auto y = torch::empty({x.size(0), v.N}, x.options());
    project_rows(v, x.data_ptr<float>(), x.size(0), v.K, y.data_ptr<float>(), v.N, 0, v.N);
    return y;
  }, "y = x · W[n] (+ bias) as the fused step computes one projection, single-threaded; int_dot: float, or "
     "integer dot products on vnni or avx2 (Int8/Int4 views)", py::arg("linear"), py::arg("x"), py::arg("int_dot"));
  m.def("quantize_kv_rows", [](torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous() && x.dim() >= 1 && x.size(-1) % 8 == 0,
                "x: contiguous fp32 [..., d], d a multiple of 8");
    const int64_t d = x.size(-1), n = x.numel() / std::max<int64_t>(d, 1);
    auto q = torch::empty(x.sizes(), x.options().dtype(torch::kInt8));
    auto scale = torch::empty(x.sizes().slice(0, x.dim() - 1), x.options().dtype(torch::kHalf));
    auto* s = reinterpret_cast<uint16_t*>(scale.data_ptr<at::Half>());
    for (int64_t i = 0; i < n; ++i) s[i] = quantize_row(x.data_ptr<float>() + i * d, d, q.data_ptr<int8_t>() + i * d);
    return std::make_tuple(q, scale);
  }, "x [..., d] → (int8 [..., d], fp16 scale [...]): the fused step's K/V quantizer (tests compare it with "
     "paged.quantize_rows bit for bit)", py::arg("x"));
}

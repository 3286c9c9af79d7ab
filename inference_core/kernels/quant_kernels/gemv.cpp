// Low-bit weight × fp32 activation matrix-vector ops for CPUs with AVX2 + FMA + F16C, and the module's bindings.
//
// y[m, n] = sum_k x[m, k] * dequant(W)[n, k]. Weights stay packed in memory and are decoded into fp32
// registers chunk by chunk (linear.h), so the only bytes streamed from DRAM are the packed ones (decode at
// batch 1 is memory-bandwidth bound). Activations are NOT quantized: these are weight-only (W{8,4}A32)
// kernels, and the result equals dequantize-then-matmul up to fp32 summation order. Rows of W are split
// across threads with at::parallel_for. The fused whole-step forward lives in step.cpp.
#include <ATen/Parallel.h>
#include <torch/extension.h>

#include "linear.h"

void register_step(pybind11::module& m);

namespace {

using ilab::Kind;
using ilab::WeightView;

torch::Tensor run(const WeightView& W, const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "x: contiguous fp32 [M, K]");
  TORCH_CHECK(x.size(1) == W.K && W.K % 32 == 0, "x has ", x.size(1), " columns, the weight ", W.K, " (a multiple of 32)");
  const int64_t M = x.size(0), N = W.N;
  auto y = torch::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) { ilab::linear_rows(W, xp, M, W.K, yp, N, n0, n1); });
  return y;
}

WeightView bytes_view(Kind kind, const torch::Tensor& q, const torch::Tensor& scale) {
  TORCH_CHECK(q.element_size() == 1 && q.is_contiguous() && q.dim() == 2, "q: contiguous one-byte [N, K]");
  TORCH_CHECK(scale.scalar_type() == torch::kFloat32 && scale.is_contiguous() && scale.numel() == q.size(0), "scale: fp32 [N]");
  WeightView W;
  W.kind = kind;
  W.N = q.size(0);
  W.K = q.size(1);
  W.w = q.data_ptr();
  W.scale = scale.data_ptr<float>();
  return W;
}

// int4: lut = (code - 8) as fp16; nf4: lut = the codebook as fp16. Both: y = x @ (lut[code] * scale).T
torch::Tensor lut4_gemv(torch::Tensor x, torch::Tensor packed, torch::Tensor scales, int64_t group, torch::Tensor lut) {
  TORCH_CHECK(packed.scalar_type() == torch::kUInt8 && packed.is_contiguous() && packed.dim() == 2, "packed: contiguous uint8");
  TORCH_CHECK(lut.numel() == 16 && lut.scalar_type() == torch::kHalf && lut.is_contiguous(), "lut: 16 fp16");
  TORCH_CHECK(group > 0 && group % 32 == 0, "group must be a positive multiple of 32");
  WeightView W;
  W.kind = Kind::Lut4;
  W.N = packed.size(0);
  W.K = packed.size(1) * 2;
  W.group = group;
  const int64_t G = (W.K + group - 1) / group;  // the last group may be shorter (K = 576 with group 128)
  TORCH_CHECK(scales.scalar_type() == torch::kFloat32 && scales.is_contiguous() && scales.numel() == W.N * G, "bad scale shape");
  W.w = packed.data_ptr();
  W.scale = scales.data_ptr<float>();
  W.lut = ilab::Fp16Lut(reinterpret_cast<const uint16_t*>(lut.data_ptr<at::Half>()));
  return run(W, x);
}

torch::Tensor int8_gemv(torch::Tensor x, torch::Tensor q, torch::Tensor scale) { return run(bytes_view(Kind::Int8, q, scale), x); }
torch::Tensor fp8_gemv(torch::Tensor x, torch::Tensor q, torch::Tensor scale) { return run(bytes_view(Kind::Fp8, q, scale), x); }

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("lut4_gemv", &lut4_gemv, "y = x @ (lut[nibble] * group_scale).T: int4 (lut = code - 8) and NF4 (codebook)");
  m.def("int8_gemv", &int8_gemv, "y = x @ (q * scale).T (per-channel int8, weight-only)");
  m.def("fp8_gemv", &fp8_gemv, "y = x @ (fp8(q) * scale).T (per-channel fp8 e4m3, weight-only)");
  register_step(m);
}

"""Fast paths for the same arithmetic: fused CPU steps, oneDNN linears, CUDA graphs, and the compiled C++
(`quant_kernels`) and Triton (`triton_kernels`) kernels. Each is checked against the reference forward in `model/`."""

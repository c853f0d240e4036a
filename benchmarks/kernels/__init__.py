"""The Triton kernels the jobs launch (rshmem and NVSHMEM twins), their PTX helpers, the compile check and the CUDA micro-benchmarks."""

// NVSHMEM's typed, sized and strided RMA on a stream and strided RMA in kernels, through nvshmem.h /
// nvshmemx.h (CI compiles it with nvcc, no GPU; capi/tests/gpu_c.sh runs it as 2 PEs under
// torchrun): nvshmemx_hostlib_init_attr, nvshmemx_<T>_put / get / put_signal (_nbi) _on_stream,
// nvshmemx_put<N> / get<N> / iput<N> / iget<N> _on_stream, nvshmemx_<T>_iput / iget_on_stream,
// <T>_p / g_on_stream, nvshmem_<T>_iput / iget and nvshmem_iput<N> in a kernel,
// nvshmemx_putmem_nbi_on_stream / putmem_signal_nbi_on_stream, nvshmemx_buffer_register. Each PE
// checks what its neighbour sent and prints "correct", or the first wrong value and exits 1.
#include <nvshmem.h>
#include <nvshmemx.h>

#include <cstdio>

#define N 64

__global__ void strided_in_kernel(int *sym, const int *src, long long *wide, int next) {
  if (threadIdx.x != 0) return;
  nvshmem_int_iput(sym + N, src, 2, 1, N / 2, next);  // sym[N + 2i] on next = src[i]
  nvshmem_iput64(wide, src, 1, 1, N / 4, next);        // pairs of ints as 64-bit words
  nvshmem_quiet();
}

__global__ void strided_get_kernel(int *out, const int *sym, int me) {
  if (threadIdx.x == 0) nvshmem_int_iget(out, sym + N, 1, 2, N / 2, me);
}

static int fail(int me, const char *what, int i, long long got, long long want) {
  std::fprintf(stderr, "PE %d: %s[%d] = %lld, expected %lld: WRONG\n", me, what, i, got, want);
  return 1;
}

int main() {
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  nvshmemx_hostlib_init_attr(0, &attr);
  const int me = nvshmem_my_pe(), npes = nvshmem_n_pes(), next = (me + 1) % npes, prev = (me + npes - 1) % npes;
  cudaStream_t s;
  cudaStreamCreate(&s);
  int *sym = (int *)nvshmem_calloc(3 * N, sizeof(int));
  long long *wide = (long long *)nvshmem_calloc(N, sizeof(long long));
  uint64_t *sig = (uint64_t *)nvshmem_calloc(1, sizeof(uint64_t));
  int *src, *out;
  cudaMalloc(&src, N * sizeof(int));
  cudaMalloc(&out, 3 * N * sizeof(int));
  int host[3 * N];
  for (int i = 0; i < N; i++) host[i] = 100 * me + i;
  cudaMemcpy(src, host, N * sizeof(int), cudaMemcpyHostToDevice);
  int errors = nvshmemx_buffer_register(src, N * sizeof(int)) != NVSHMEMX_SUCCESS;
  nvshmem_barrier_all();

  // On the stream: a typed put, a sized put with a signal, a strided put of every other element.
  nvshmemx_int_put_on_stream(sym, src, 8, next, s);
  nvshmemx_put32_signal_on_stream(sym + 8, src + 8, 8, sig, 1, NVSHMEM_SIGNAL_ADD, next, s);
  nvshmemx_int_iput_on_stream(sym + 2 * N, src, 1, 2, N / 2, next, s);  // sym[2N + i] = src[2i]
  nvshmemx_putmem_nbi_on_stream(sym + 16, src + 16, 8 * sizeof(int), next, s);
  nvshmemx_putmem_signal_nbi_on_stream(sym + 24, src + 24, 8 * sizeof(int), sig, 1, NVSHMEM_SIGNAL_ADD, next, s);
  nvshmemx_barrier_all_on_stream(s);
  nvshmemx_int_p_on_stream(sym + 40, 7 * me, next, s);
  cudaStreamSynchronize(s);
  nvshmem_barrier_all();
  // Back through the stream: a typed get, a strided get, a g.
  nvshmemx_int_get_on_stream(out, sym, 32, me, s);
  nvshmemx_iget32_on_stream(out + N, sym + 2 * N, 1, 1, N / 2, me, s);
  const int p40 = nvshmemx_int_g_on_stream(sym + 40, me, s);
  cudaStreamSynchronize(s);
  cudaMemcpy(host, out, 3 * N * sizeof(int), cudaMemcpyDeviceToHost);
  for (int i = 0; i < 32; i++)
    if (host[i] != 100 * prev + i) errors += fail(me, "stream put", i, host[i], 100 * prev + i);
  for (int i = 0; i < N / 2; i++)
    if (host[N + i] != 100 * prev + 2 * i) errors += fail(me, "stream iput", i, host[N + i], 100 * prev + 2 * i);
  if (p40 != 7 * prev) errors += fail(me, "p_on_stream", 40, p40, 7 * prev);
  uint64_t signals = nvshmem_signal_fetch(sig);
  if (signals != 2) errors += fail(me, "signal", 0, (long long)signals, 2);

  // In kernels: strided puts to the next PE, then this PE reads back what the previous one sent.
  nvshmem_barrier_all();
  strided_in_kernel<<<1, 32, 0, s>>>(sym, src, wide, next);
  nvshmemx_barrier_all_on_stream(s);
  strided_get_kernel<<<1, 32, 0, s>>>(out, sym, me);
  cudaStreamSynchronize(s);
  cudaMemcpy(host, out, N / 2 * sizeof(int), cudaMemcpyDeviceToHost);
  for (int i = 0; i < N / 2; i++)
    if (host[i] != 100 * prev + i) errors += fail(me, "kernel iput/iget", i, host[i], 100 * prev + i);
  long long words[N / 4];
  cudaMemcpy(words, wide, sizeof words, cudaMemcpyDeviceToHost);
  for (int i = 0; i < N / 4; i++) {
    const long long want = ((long long)(100 * prev + 2 * i + 1) << 32) | (unsigned)(100 * prev + 2 * i);
    if (words[i] != want) errors += fail(me, "kernel iput64", i, words[i], want);
  }
  // Sized gets on the stream of those words.
  long long back[N / 4];
  long long *dback;
  cudaMalloc(&dback, sizeof back);
  nvshmemx_get64_on_stream(dback, wide, N / 4, me, s);
  cudaStreamSynchronize(s);
  cudaMemcpy(back, dback, sizeof back, cudaMemcpyDeviceToHost);
  for (int i = 0; i < N / 4; i++)
    if (back[i] != words[i]) errors += fail(me, "get64_on_stream", i, back[i], words[i]);

  nvshmem_barrier_all();
  std::printf("PE %d: NVSHMEM's stream and strided RMA %s\n", me, errors ? "WRONG" : "correct");
  nvshmemx_buffer_unregister(src);
  cudaFree(src);
  cudaFree(out);
  cudaFree(dback);
  nvshmem_free(sym);
  nvshmem_free(wide);
  nvshmem_free(sig);
  cudaStreamDestroy(s);
  nvshmemx_hostlib_finalize();
  return errors ? 1 : 0;
}

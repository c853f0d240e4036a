// 2D Jacobi solver for Laplace's equation on an ny x nx grid (left and right edges held at
// sin(pi * y), top and bottom at 0), split into horizontal slabs, one per PE. Each iteration a
// kernel updates the slab's interior, then one block per neighbour puts the slab's edge row into
// that neighbour's halo row with a signal (rshmemx_putmem_signal_block), and the next iteration's
// kernel waits on the stream until both halos of this iteration arrived
// (rshmem_host_signal_wait_until_on_stream). Every PE first runs the whole grid alone (the 1-GPU
// reference, PE by PE so the timings do not overlap), then the distributed solve, checks that its
// slab equals the reference's rows, and PE 0 prints the times as the guide's scaling table does.
// Usage: jacobi [-nx N] [-ny N] [-niter N] [-ngpus N]   (-ngpus: GPUs the PEs run on, default one
// per PE up to the GPUs each node has, so 2 PEs sharing one GPU count 1; the efficiency, in
// percent as in the guide's table, is the speedup over the 1-GPU run divided by it)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common.cuh"

__global__ void jacobi_step(const float *a, float *a_new, int rows, int nx) {
  int ix = blockIdx.x * blockDim.x + threadIdx.x + 1;
  int iy = blockIdx.y * blockDim.y + threadIdx.y + 1;
  if (ix < nx - 1 && iy <= rows)
    a_new[iy * nx + ix] = 0.25f * (a[iy * nx + ix - 1] + a[iy * nx + ix + 1] + a[(iy - 1) * nx + ix] + a[(iy + 1) * nx + ix]);
}

// Block 0 sends the first interior row up (into row `top_halo` of the PE above), block 1 the last
// one down (into row 0 of the PE below); each sets that PE's signal word to `iter`.
__global__ void send_halos(float *a_new, int rows, int nx, int top_pe, int top_halo, int bottom_pe,
                           uint64_t *from_below, uint64_t *from_above, uint64_t iter) {
  size_t bytes = sizeof(float) * nx;
  if (blockIdx.x == 0 && top_pe >= 0)
    rshmemx_putmem_signal_block(a_new + (size_t)top_halo * nx, a_new + nx, bytes, from_below, iter, RSHMEM_SIGNAL_SET, top_pe);
  if (blockIdx.x == 1 && bottom_pe >= 0)
    rshmemx_putmem_signal_block(a_new, a_new + (size_t)rows * nx, bytes, from_above, iter, RSHMEM_SIGNAL_SET, bottom_pe);
}

static int arg(int argc, char **argv, const char *name, int fallback) {
  for (int i = 1; i + 1 < argc; i++)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

// Interior rows of PE `pe`'s slab, and the global row its local row 1 is.
static int slab_rows(int interior, int n, int pe) { return interior / n + (pe < interior % n); }
static int slab_first(int interior, int n, int pe) {
  int first = 1;
  for (int q = 0; q < pe; q++) first += slab_rows(interior, n, q);
  return first;
}

// The initial value of global row `gy`, column `x`.
static float initial(int gy, int x, int nx, int ny) {
  if (x == 0 || x == nx - 1) return (float)std::sin(M_PI * gy / (ny - 1));
  return 0.0f;
}

struct Slab {
  float *a, *a_new;  // (rows + 2) x nx, halo rows 0 and rows + 1
  int rows, first;
};

static void fill(Slab s, int nx, int ny) {
  std::vector<float> host((size_t)(s.rows + 2) * nx);
  for (int r = 0; r < s.rows + 2; r++)
    for (int x = 0; x < nx; x++) host[(size_t)r * nx + x] = initial(s.first - 1 + r, x, nx, ny);
  CUDA_OK(cudaMemcpy(s.a, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(s.a_new, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
}

// Runs `niter` iterations on `s`; neighbours are -1 where there is none. Returns seconds.
static double solve(Slab &s, int nx, int niter, int top_pe, int top_halo, int bottom_pe, uint64_t *from_below,
                    uint64_t *from_above, cudaStream_t stream) {
  dim3 block(32, 8), grid((nx - 2 + 31) / 32, (s.rows + 7) / 8);
  auto start = std::chrono::steady_clock::now();
  for (int it = 1; it <= niter; it++) {
    if (it > 1 && top_pe >= 0) RSHMEM_OK(rshmem_host_signal_wait_until_on_stream(from_above, RSHMEM_CMP_GE, it - 1, stream));
    if (it > 1 && bottom_pe >= 0) RSHMEM_OK(rshmem_host_signal_wait_until_on_stream(from_below, RSHMEM_CMP_GE, it - 1, stream));
    jacobi_step<<<grid, block, 0, stream>>>(s.a, s.a_new, s.rows, nx);
    if (top_pe >= 0 || bottom_pe >= 0)
      send_halos<<<2, 256, 0, stream>>>(s.a_new, s.rows, nx, top_pe, top_halo, bottom_pe, from_below, from_above, it);
    std::swap(s.a, s.a_new);
  }
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaStreamSynchronize(stream));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int main(int argc, char **argv) {
  int nx = arg(argc, argv, "-nx", 1024), ny = arg(argc, argv, "-ny", 1024), niter = arg(argc, argv, "-niter", 1000);
  RSHMEM_OK(rshmemx_cuda_init_attr(nullptr));
  Pes p = pes();
  int node_pes = 0, devices = 0;
  RSHMEM_OK(rshmem_host_team_n_pes(RSHMEM_TEAM_NODE, &node_pes));
  CUDA_OK(cudaGetDeviceCount(&devices));
  int ngpus = arg(argc, argv, "-ngpus", p.n / node_pes * std::min(node_pes, devices));
  int interior = ny - 2;
  if (nx < 3 || ny < 3 || niter < 1 || ngpus < 1 || interior < p.n) {
    std::fprintf(stderr, "jacobi: need -nx >= 3, -ny - 2 >= PEs (%d), -niter >= 1, -ngpus >= 1\n", p.n);
    return 2;
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));

  // The reference: the whole grid on one GPU, PE by PE.
  Slab ref{nullptr, nullptr, interior, 1};
  CUDA_OK(cudaMalloc(&ref.a, sizeof(float) * nx * ny));
  CUDA_OK(cudaMalloc(&ref.a_new, sizeof(float) * nx * ny));
  fill(ref, nx, ny);
  double t1 = 0;
  for (int pe = 0; pe < p.n; pe++) {
    RSHMEM_OK(rshmem_host_barrier_all());
    if (pe == p.me) t1 = solve(ref, nx, niter, -1, 0, -1, nullptr, nullptr, stream);
  }

  // The distributed solve: symmetric slabs of the largest slab's size.
  int max_rows = slab_rows(interior, p.n, 0);
  Slab s{symmetric<float>((size_t)(max_rows + 2) * nx), symmetric<float>((size_t)(max_rows + 2) * nx),
         slab_rows(interior, p.n, p.me), slab_first(interior, p.n, p.me)};
  uint64_t *from_above = symmetric<uint64_t>(1), *from_below = symmetric<uint64_t>(1);
  fill(s, nx, ny);
  int top_pe = p.me > 0 ? p.me - 1 : -1, bottom_pe = p.me < p.n - 1 ? p.me + 1 : -1;
  int top_halo = top_pe >= 0 ? slab_rows(interior, p.n, top_pe) + 1 : 0;
  RSHMEM_OK(rshmem_host_barrier_all());
  double tn = solve(s, nx, niter, top_pe, top_halo, bottom_pe, from_below, from_above, stream);
  RSHMEM_OK(rshmem_host_barrier_all());

  // This slab against the reference's rows.
  std::vector<float> mine((size_t)s.rows * nx), want((size_t)s.rows * nx);
  CUDA_OK(cudaMemcpy(mine.data(), s.a + nx, mine.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(want.data(), ref.a + (size_t)s.first * nx, want.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double diff = 0;
  for (size_t i = 0; i < mine.size(); i++) diff = std::fmax(diff, std::fabs((double)mine[i] - want[i]));
  bool ok = diff <= 1e-6;
  std::printf("PE %d: rows %d..%d, max difference to the 1-GPU run %.3g (%s)\n", p.me, s.first, s.first + s.rows - 1,
              diff, ok ? "correct" : "WRONG");

  double worst = 0;  // the slowest PE's time is the solve's
  {
    double *t = symmetric<double>(1), *tmax = symmetric<double>(1);
    CUDA_OK(cudaMemcpy(t, &tn, sizeof tn, cudaMemcpyHostToDevice));
    RSHMEM_OK(rshmem_host_reduce(RSHMEM_TEAM_WORLD, RSHMEM_REDUCE_MAX, tmax, t, 1, RSHMEM_DTYPE_FLOAT64));
    CUDA_OK(cudaMemcpy(&worst, tmax, sizeof worst, cudaMemcpyDeviceToHost));
    RSHMEM_OK(rshmem_host_free(t));
    RSHMEM_OK(rshmem_host_free(tmax));
  }
  if (p.me == 0) {
    std::printf("Num PEs: %d (GPUs: %d).\n", p.n, ngpus);
    std::printf("%dx%d, %d iterations: 1 GPU: %8.4f s (%.1f us/iter), %d PEs: %8.4f s (%.1f us/iter), speedup: %8.2f, "
                "efficiency: %8.2f\n",
                ny, nx, niter, t1, 1e6 * t1 / niter, p.n, worst, 1e6 * worst / niter, t1 / worst,
                100.0 * t1 / worst / ngpus);
  }
  for (float *a : {s.a, s.a_new}) RSHMEM_OK(rshmem_host_free(a));
  RSHMEM_OK(rshmem_host_free(from_above));
  RSHMEM_OK(rshmem_host_free(from_below));
  CUDA_OK(cudaFree(ref.a));
  CUDA_OK(cudaFree(ref.a_new));
  CUDA_OK(cudaStreamDestroy(stream));
  RSHMEM_OK(rshmem_host_finalize());
  return ok ? 0 : 1;
}

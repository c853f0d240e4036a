// torch's SymmetricMemory backend "RSHMEM": c10d::symmetric_memory's allocator and symmetric
// memory objects over rshmem's C ABI. Built by rshmem/torch_symm_mem.py (torch.utils.cpp_extension
// on first import) against the torch at hand; needs no CUDA headers.
//
// The C functions are rshmem.h's, resolved at load time from the library that holds the process's
// runtime (rshmem._native, which links and exports the C ABI), so they act on the runtime that
// Python started. Allocation is rshmem's symmetric calloc (a collective over every PE, as with
// torch's NVSHMEM backend); each allocation carries torch's signal pad right after the buffer,
// zero-filled by calloc. barrier / put_signal / wait_signal count on 64-bit rshmem signal words
// of the pad (word `channel * world_size + peer`): put adds 1 on the peer, wait waits for >= 1
// and subtracts 1 (timeout_ms 0: no timeout, torch's default), so the pad is zero again after every completed synchronization and a signal
// that arrives early is never lost. On GPUs they are queued on torch's current stream; on the
// host backend they run on the host, and wait_signal honours its timeout.

#include <dlfcn.h>

#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>
#include <torch/extension.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

extern "C" {
#include "rshmem.h"
}

namespace {

using namespace c10d::symmetric_memory;

// ------------------------------------------------------------------------------ the C ABI

struct Api {
#define RSHMEM_FN(name) decltype(&::name) name = nullptr;
#define RSHMEM_FNS(X)                                                                      \
  X(rshmem_host_last_error) X(rshmem_host_is_initialized) X(rshmem_host_my_pe)             \
  X(rshmem_host_n_pes) X(rshmem_host_device_ordinal) X(rshmem_host_calloc)                 \
  X(rshmem_host_free) X(rshmem_host_ptr) X(rshmem_host_signal_op)                          \
  X(rshmem_host_signal_fetch) X(rshmem_host_signal_op_on_stream)                           \
  X(rshmem_host_signal_wait_until_on_stream) X(rshmem_host_quiet)
  RSHMEM_FNS(RSHMEM_FN)
#undef RSHMEM_FN
};

Api& api() {
  static Api a;
  return a;
}

// Resolves every function from `library` (a path of a library already loaded in the process).
void load_api(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  TORCH_CHECK(handle != nullptr, "rshmem SymmetricMemory: ", library,
              " is not loaded in this process (import rshmem first): ", dlerror());
  Api& a = api();
#define RSHMEM_LOAD(name)                                                                  \
  a.name = reinterpret_cast<decltype(a.name)>(dlsym(handle, #name));                      \
  TORCH_CHECK(a.name != nullptr, "rshmem SymmetricMemory: ", library, " lacks ", #name,   \
              "; rebuild the rshmem wheel (its extension exports the C ABI)");
  RSHMEM_FNS(RSHMEM_LOAD)
#undef RSHMEM_LOAD
}

// Calls a C function and turns a failure into a c10::Error carrying rshmem's message.
#define RSHMEM_CHECK(call)                                                                 \
  do {                                                                                     \
    TORCH_CHECK(api().rshmem_host_my_pe != nullptr, "rshmem SymmetricMemory: not loaded");  \
    rshmem_status_t status_ = (api().call);                                                \
    TORCH_CHECK(status_ == RSHMEM_SUCCESS, "rshmem: ", api().rshmem_host_last_error());    \
  } while (0)

int my_pe() {
  int pe = -1;
  RSHMEM_CHECK(rshmem_host_my_pe(&pe));
  return pe;
}

int n_pes() {
  int n = 0;
  RSHMEM_CHECK(rshmem_host_n_pes(&n));
  return n;
}

int device_ordinal() {
  int d = -1;
  RSHMEM_CHECK(rshmem_host_device_ordinal(&d));
  return d;
}

void* current_stream(int device) {
  auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  return impl->getStream(c10::Device(c10::DeviceType::CUDA, device)).native_handle();
}

// ------------------------------------------------------------------------------ objects

struct Allocation {
  void* ptr;
  size_t size;
  size_t pad_size;
  int device;  // -1: host backend
};

class RshmemSymmetricMemory : public SymmetricMemory {
 public:
  RshmemSymmetricMemory(std::shared_ptr<Allocation> alloc, int rank, int world_size,
                        std::vector<int> pes)
      : alloc_(std::move(alloc)), rank_(rank), world_size_(world_size), pes_(std::move(pes)) {
    for (int pe : pes_) {
      void* remote = nullptr;
      RSHMEM_CHECK(rshmem_host_ptr(alloc_->ptr, pe, &remote));
      TORCH_CHECK(remote != nullptr, "rshmem SymmetricMemory: PE ", pe,
                  " is not reachable by load/store from PE ", my_pe(),
                  "; torch's symmetric memory needs peers on this host");
      buffers_.push_back(remote);
      pads_.push_back(static_cast<char*>(remote) + alloc_->size);
    }
    if (alloc_->device >= 0) {
      buffers_dev_ = to_device(buffers_);
      pads_dev_ = to_device(pads_);
      rank_to_global_dev_ = at::tensor(std::vector<int>(pes_.begin(), pes_.end()), at::kInt)
                                .to(c10::Device(c10::DeviceType::CUDA, alloc_->device));
    }
  }

  std::vector<void*> get_buffer_ptrs() override { return buffers_; }
  std::vector<void*> get_signal_pad_ptrs() override { return pads_; }
  void** get_buffer_ptrs_dev() override { return dev_or_fail(buffers_dev_, "buffer_ptrs_dev"); }
  void** get_signal_pad_ptrs_dev() override { return dev_or_fail(pads_dev_, "signal_pad_ptrs_dev"); }
  size_t get_buffer_size() override { return alloc_->size; }
  size_t get_offset() override { return 0; }
  bool has_multicast_support() override { return false; }
  void* get_multicast_ptr() override { return nullptr; }
  int get_rank() override { return rank_; }
  int get_world_size() override { return world_size_; }
  c10::Device get_device() override {
    return alloc_->device < 0 ? c10::Device(c10::DeviceType::CPU)
                              : c10::Device(c10::DeviceType::CUDA, alloc_->device);
  }
  const std::vector<int>& get_rank_to_global_rank() override { return pes_; }
  int* get_rank_to_global_rank_dev() override {
    TORCH_CHECK(rank_to_global_dev_.defined(), "rshmem SymmetricMemory: no device table on the host backend");
    return rank_to_global_dev_.data_ptr<int>();
  }
  bool world_within_direct_access() override { return true; }  // checked by rshmem_host_ptr above

  void barrier(int channel, size_t timeout_ms) override {
    check_channel(channel);
    for (int peer = 0; peer < world_size_; ++peer) {
      if (peer != rank_) put_signal(peer, channel, timeout_ms);
    }
    for (int peer = 0; peer < world_size_; ++peer) {
      if (peer != rank_) wait_signal(peer, channel, timeout_ms);
    }
  }

  void put_signal(int dst_rank, int channel, size_t timeout_ms) override {
    check_rank(dst_rank, "put_signal: dst_rank");
    check_channel(channel);
    void* word = local_word(channel, rank_);  // the sender's word on the receiver
    if (alloc_->device < 0) {
      RSHMEM_CHECK(rshmem_host_signal_op(word, 1, RSHMEM_SIGNAL_ADD, pes_[dst_rank]));
    } else {
      RSHMEM_CHECK(rshmem_host_signal_op_on_stream(word, 1, RSHMEM_SIGNAL_ADD, pes_[dst_rank],
                                                   current_stream(alloc_->device)));
    }
  }

  void wait_signal(int src_rank, int channel, size_t timeout_ms) override {
    check_rank(src_rank, "wait_signal: src_rank");
    check_channel(channel);
    void* word = local_word(channel, src_rank);
    const uint64_t minus_one = ~uint64_t{0};
    if (alloc_->device >= 0) {
      // Queued on the stream: cuStreamWaitValue64 has no timeout (RSHMEM_DEBUG_WAIT_TIMEOUT_MS
      // bounds rshmem's kernels, not this wait).
      void* stream = current_stream(alloc_->device);
      RSHMEM_CHECK(rshmem_host_signal_wait_until_on_stream(word, RSHMEM_CMP_GE, 1, stream));
      RSHMEM_CHECK(rshmem_host_signal_op_on_stream(word, minus_one, RSHMEM_SIGNAL_ADD, my_pe(), stream));
      return;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (uint64_t seen = 0;;) {
      RSHMEM_CHECK(rshmem_host_signal_fetch(word, &seen));
      if (seen >= 1) break;
      TORCH_CHECK(timeout_ms == 0 || std::chrono::steady_clock::now() < deadline, "rshmem SymmetricMemory: wait_signal from rank ",
                  src_rank, " on channel ", channel, " timed out after ", timeout_ms, " ms (rank ", rank_, ")");
      std::this_thread::yield();
    }
    RSHMEM_CHECK(rshmem_host_signal_op(word, minus_one, RSHMEM_SIGNAL_ADD, my_pe()));
  }

 private:
  static void** dev_or_fail(const at::Tensor& t, const char* what) {
    TORCH_CHECK(t.defined(), "rshmem SymmetricMemory: ", what, " is a device array; the host backend has none");
    return reinterpret_cast<void**>(t.data_ptr());
  }

  at::Tensor to_device(const std::vector<void*>& ptrs) {
    std::vector<int64_t> words;
    for (void* p : ptrs) words.push_back(reinterpret_cast<int64_t>(p));
    return at::tensor(words, at::kLong).to(c10::Device(c10::DeviceType::CUDA, alloc_->device));
  }

  void check_rank(int r, const char* what) const {
    TORCH_CHECK(r >= 0 && r < world_size_ && r != rank_, "rshmem SymmetricMemory: ", what, " ", r,
                " must be another rank of this group of ", world_size_, " (this is rank ", rank_, ")");
  }

  void check_channel(int channel) const {
    size_t need = (static_cast<size_t>(channel) + 1) * world_size_ * sizeof(uint64_t);
    TORCH_CHECK(channel >= 0 && need <= alloc_->pad_size, "rshmem SymmetricMemory: channel ", channel,
                " needs ", need, " bytes of signal pad, which has ", alloc_->pad_size,
                " (symm_mem.set_signal_pad_size before allocating)");
  }

  void* local_word(int channel, int peer) const {
    return static_cast<char*>(alloc_->ptr) + alloc_->size +
           (static_cast<size_t>(channel) * world_size_ + peer) * sizeof(uint64_t);
  }

  std::shared_ptr<Allocation> alloc_;
  int rank_;
  int world_size_;
  std::vector<int> pes_;
  std::vector<void*> buffers_;
  std::vector<void*> pads_;
  at::Tensor buffers_dev_;
  at::Tensor pads_dev_;
  at::Tensor rank_to_global_dev_;
};

class RshmemAllocator : public SymmetricMemoryAllocator {
 public:
  explicit RshmemAllocator(c10::DeviceType type) : type_(type) {}

  void* alloc(size_t size, int device_idx, const std::optional<std::string>& /*group_name*/) override {
    int ordinal = device_ordinal();
    if (type_ == c10::DeviceType::CUDA) {
      TORCH_CHECK(ordinal >= 0, "rshmem SymmetricMemory: a CUDA tensor needs rshmem's cuda backend; "
                                "this PE runs the host backend (use device='cpu')");
      TORCH_CHECK(device_idx == ordinal, "rshmem SymmetricMemory: this PE's symmetric heap is on cuda:",
                  ordinal, ", not cuda:", device_idx);
    } else {
      TORCH_CHECK(ordinal < 0, "rshmem SymmetricMemory: CPU tensors need rshmem's host backend; this PE's "
                               "heap is on cuda:", ordinal);
    }
    size_t pad = get_signal_pad_size();
    void* ptr = nullptr;
    // calloc zeroes the buffer and its signal pad inside the collective, before any peer may
    // signal into it.
    RSHMEM_CHECK(rshmem_host_calloc(1, size + pad, &ptr));
    std::lock_guard<std::mutex> lock(mu_);
    allocs_[ptr] = std::make_shared<Allocation>(Allocation{ptr, size, pad, ordinal});
    return ptr;
  }

  void free(void* ptr) override {
    std::shared_ptr<Allocation> a;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = allocs_.find(ptr);
      if (it == allocs_.end()) return;
      a = it->second;
      allocs_.erase(it);
      for (auto r = rendezvous_.begin(); r != rendezvous_.end();) {
        r = r->first.first == ptr ? rendezvous_.erase(r) : std::next(r);
      }
    }
    // rshmem's free is a collective, but torch calls this from a tensor's deleter, whenever the
    // tensor dies on this PE (garbage collection, a failed test's frame): the memory is handed
    // back by release(), which every PE calls at one point.
    pending_.push_back(ptr);
  }

  // Collective: frees every allocation whose tensor died, in address order (the same on every
  // PE, the heap being symmetric); a PE whose tensor still lives makes rshmem's free fail on
  // every PE with a mismatch, not hang. Returns how many were freed.
  size_t release() {
    std::vector<void*> ptrs;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ptrs.swap(pending_);
    }
    std::sort(ptrs.begin(), ptrs.end());
    int up = 0;
    if (is_finalizing() || api().rshmem_host_is_initialized(&up) != RSHMEM_SUCCESS || !up) return 0;
    for (void* p : ptrs) RSHMEM_CHECK(rshmem_host_free(p));
    return ptrs.size();
  }

  size_t get_alloc_size(void* ptr) override { return find(ptr)->size; }

  c10::intrusive_ptr<SymmetricMemory> rendezvous(void* ptr, const std::optional<std::string>& group_name) override {
    auto a = find(ptr);
    std::string group = group_name.value_or("0");
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = rendezvous_.find({ptr, group});
      if (it != rendezvous_.end()) return it->second;
    }
    int me = my_pe();
    auto [rank, pes] = group_pes(group, a->device);
    TORCH_CHECK(pes[rank] == me, "rshmem SymmetricMemory: rank ", rank, " of group ", group, " is PE ", me,
                " but its members say PE ", pes[rank]);
    auto sm = c10::make_intrusive<RshmemSymmetricMemory>(a, rank, static_cast<int>(pes.size()), pes);
    std::lock_guard<std::mutex> lock(mu_);
    rendezvous_[{ptr, group}] = sm;
    return sm;
  }

  bool has_multicast_support(int /*device_idx*/) override { return false; }
  c10::DeviceType supported_device_type() override { return type_; }
  std::string name() override { return "RSHMEM"; }

 private:
  // This PE's rank in `group` and every member's rshmem PE: exchanged through the group's store
  // where torch registered one (set_group_info), else by an all-gather over the process group.
  std::pair<int, std::vector<int>> group_pes(const std::string& group, int device) {
    int me = my_pe();
    std::vector<int> pes;
    try {
      auto& info = get_group_info(group);
      std::string prefix;
      {
        std::lock_guard<std::mutex> lock(mu_);
        prefix = "rshmem_symm_mem/" + group + "/" + std::to_string(++rounds_[group]) + "/";
      }
      std::vector<uint8_t> mine(reinterpret_cast<uint8_t*>(&me), reinterpret_cast<uint8_t*>(&me) + sizeof me);
      info.store->set(prefix + std::to_string(info.rank), mine);
      for (int r = 0; r < info.world_size; ++r) {
        auto bytes = info.store->get(prefix + std::to_string(r));
        TORCH_CHECK(bytes.size() == sizeof(int), "rshmem SymmetricMemory: bad rendezvous record");
        int pe;
        std::memcpy(&pe, bytes.data(), sizeof pe);
        pes.push_back(pe);
      }
      return {info.rank, pes};
    } catch (const c10::Error&) {
      // torch registers group info only through its deprecated enable_symm_mem_for_group
    }
    // By `allgather`, which a process group written in Python (rshmem.torch_backend's) overrides;
    // the C++ groups dispatch it to their backend for the tensors' device. CPU tensors first: a
    // gloo group of PEs sharing a GPU has no CUDA backend, an NCCL group no CPU one.
    auto pg = c10d::resolve_process_group(group);
    std::vector<c10::Device> places{c10::Device(c10::DeviceType::CPU)};
    if (device >= 0) places.emplace_back(c10::DeviceType::CUDA, device);
    std::string failed;
    for (const auto& where : places) {
      auto opts = at::TensorOptions().dtype(at::kInt).device(where);
      std::vector<at::Tensor> in{at::full({1}, me, opts)};
      std::vector<std::vector<at::Tensor>> out(1);
      for (int r = 0; r < pg->getSize(); ++r) out[0].push_back(at::empty({1}, opts));
      try {
        pg->allgather(out, in)->wait();
      } catch (const c10::Error& e) {
        failed += std::string(failed.empty() ? "" : "; ") + where.str() + ": " + e.what_without_backtrace();
        continue;
      }
      for (const auto& t : out[0]) pes.push_back(t.cpu().item<int>());
      return {pg->getRank(), pes};
    }
    TORCH_CHECK(false, "rshmem SymmetricMemory: rendezvous over group ", group,
                " could not exchange the members' PE numbers through the group: ", failed);
  }

  std::shared_ptr<Allocation> find(void* ptr) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocs_.find(ptr);
    TORCH_CHECK(it != allocs_.end(), "rshmem SymmetricMemory: ", ptr,
                " is not an allocation of the RSHMEM backend (make it with symm_mem.empty after "
                "symm_mem.set_backend(\"RSHMEM\"))");
    return it->second;
  }

  c10::DeviceType type_;
  std::mutex mu_;
  std::map<void*, std::shared_ptr<Allocation>> allocs_;
  std::map<std::pair<void*, std::string>, c10::intrusive_ptr<SymmetricMemory>> rendezvous_;
  std::map<std::string, int> rounds_;
  std::vector<void*> pending_;
};

c10::intrusive_ptr<RshmemAllocator>& the_allocator() {
  static c10::intrusive_ptr<RshmemAllocator> a;
  return a;
}

// Registers the allocator of `device` ("cpu" or "cuda") under the name "RSHMEM" (selected by
// symm_mem.set_backend("RSHMEM")), after resolving the C ABI from `library`.
void register_backend(const std::string& library, const std::string& device) {
  load_api(library);
  c10::DeviceType type = device == "cuda" ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
  TORCH_CHECK(device == "cuda" || device == "cpu", "rshmem SymmetricMemory: device must be cpu or cuda");
  the_allocator() = c10::make_intrusive<RshmemAllocator>(type);
  register_availability("RSHMEM", the_allocator());
}

// The C functions this layer calls, for the test that they resolve.
std::vector<std::string> functions() {
  std::vector<std::string> names;
#define RSHMEM_NAME(name) names.push_back(#name);
  RSHMEM_FNS(RSHMEM_NAME)
#undef RSHMEM_NAME
  return names;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("register_backend", &register_backend, "registers the RSHMEM SymmetricMemory allocator");
  m.def("release", [] { return the_allocator() ? the_allocator()->release() : size_t{0}; },
        "collective: frees the allocations of dead symmetric tensors");
  m.def("functions", &functions, "the rshmem C functions this layer calls");
}

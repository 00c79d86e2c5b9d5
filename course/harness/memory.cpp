// CPU mode's stand-in for the GPU's memory, installed only in a check's child process.
// Every CPU tensor gets a mapping of its own, between two 1 GiB reservations that cannot be touched:
// an access far outside any tensor (out[i + 100000000]) faults, as on a GPU, wherever the process's other
// memory happens to lie. "padded": 2 MiB of memory the kernel may touch on each side, and 512 bytes
// past the end filled with the sentinel, as the GPU's caching allocator rounds up and packs blocks
// together, so a missing guard behaves as on the GPU and an unwritten pixel is seen. "guarded_end": every
// tensor ends right at the reservation after it, so a read or write past its end faults; "guarded_start":
// every tensor starts right after the reservation before it, so one before its start (index -1) faults.
// The memory check runs a call under each, as compute-sanitizer on a GPU sees both.
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/csrc/utils/pybind.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

namespace {

constexpr size_t kSlack = 512;
constexpr size_t kNear = size_t(2) << 20;
constexpr size_t kFar = size_t(1) << 30;
unsigned char fill_byte = 0xAB;

std::mutex mappings_lock;
std::map<char*, size_t> mappings;  // each tensor's mapping: where it starts -> its length

// The deleter of every tensor's memory: unmaps the mapping the data pointer lies in (raw_allocate needs the
// data pointer itself as the context).
void free_data(void* data) {
  char* p = static_cast<char*>(data);
  char* base;
  size_t length;
  {
    std::lock_guard<std::mutex> hold(mappings_lock);
    auto it = mappings.upper_bound(p);
    if (it == mappings.begin()) return;
    --it;
    if (p >= it->first + it->second) return;
    base = it->first;
    length = it->second;
    mappings.erase(it);
  }
  munmap(base, length);
}

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// [kFar untouchable][before][body][after][kFar untouchable]: the start of body (the mapping is freed with it).
char* map_between_reservations(size_t before, size_t body, size_t after) {
  size_t open = before + body + after;
  if (open > SIZE_MAX - 2 * kFar) throw std::bad_alloc();
  size_t length = kFar + open + kFar;
  void* base = mmap(nullptr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) throw std::bad_alloc();
  char* start = static_cast<char*>(base) + kFar;
  // mapped again without MAP_NORESERVE: the kernel refuses more memory than there is, as malloc would
  if (open > 0 && mmap(start, open, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
    munmap(base, length);
    throw std::bad_alloc();
  }
  std::lock_guard<std::mutex> hold(mappings_lock);
  mappings[static_cast<char*>(base)] = length;
  return start + before;
}

c10::DataPtr owned(char* p) { return {p, p, &free_data, c10::Device(c10::DeviceType::CPU)}; }

struct PaddedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    size_t filled = round_up(n + kSlack, 64);
    char* p = map_between_reservations(kNear, round_up(filled, page_size()), kNear);
    std::memset(p, fill_byte, filled);
    return owned(p);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_data; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

struct GuardedAllocator final : c10::Allocator {
  bool at_start = false;  // the untouchable memory right before the data instead of right after it

  c10::DataPtr allocate(size_t n) override {
    size_t data = round_up(n, page_size());
    char* region = map_between_reservations(0, data, 0);
    std::memset(region, fill_byte, data);
    // n is a multiple of the element size and the region is page-aligned: so is the data pointer.
    return owned(at_start ? region : region + data - n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_data; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

PaddedAllocator padded;
GuardedAllocator guarded;

void install(const std::string& mode, int sentinel) {
  fill_byte = static_cast<unsigned char>(sentinel);
  if (mode == "padded") {
    c10::SetCPUAllocator(&padded, /*priority=*/100);
  } else if (mode == "guarded_end" || mode == "guarded_start") {
    guarded.at_start = mode == "guarded_start";
    c10::SetCPUAllocator(&guarded, /*priority=*/100);
  } else {
    throw std::invalid_argument("mode must be padded, guarded_end or guarded_start");
  }
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("install", &install, "Makes every new CPU tensor padded or guarded at its end or start, filled with sentinel.");
}

// CPU mode's stand-in for the GPU's memory, installed only in a check's child process.
// "padded": every CPU tensor gets 512 bytes of slack past its end, as the GPU's caching allocator
// rounds up, and starts filled with the sentinel, so a missing guard behaves as on the GPU and an
// unwritten pixel is seen. "guarded_end": every tensor ends right before a page that cannot be touched,
// so a read or write past its end faults; "guarded_start": every tensor starts right after such a page,
// so one before its start (index -1) faults. The memory check runs a call under each, as
// compute-sanitizer on a GPU sees both.
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/csrc/utils/pybind.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace {

constexpr size_t kSlack = 512;
unsigned char fill_byte = 0xAB;

struct Mapping {
  void* base;
  size_t length;
};

void free_mapping(void* ctx) {
  auto* m = static_cast<Mapping*>(ctx);
  munmap(m->base, m->length);
  delete m;
}

struct PaddedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    size_t size = (n + kSlack + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, size);
    if (!p) throw std::bad_alloc();
    std::memset(p, fill_byte, size);
    return {p, p, &std::free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &std::free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

struct GuardedAllocator final : c10::Allocator {
  bool at_start = false;  // the guard page before the data instead of after it

  c10::DataPtr allocate(size_t n) override {
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t data = (n + page - 1) / page * page;
    size_t length = data + page;
    void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    char* guard = static_cast<char*>(base) + (at_start ? 0 : data);
    if (mprotect(guard, page, PROT_NONE) != 0) {
      munmap(base, length);
      throw std::runtime_error("mprotect failed");
    }
    // n is a multiple of the element size and the guard page is aligned: so is the data pointer.
    char* p = at_start ? guard + page : guard - n;
    std::memset(at_start ? guard + page : static_cast<char*>(base), fill_byte, data);
    return {p, new Mapping{base, length}, &free_mapping, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
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

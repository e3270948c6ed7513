// PageBuffer: a large zero-filled buffer of anonymous memory whose tail can be given back to the
// system while the head stays in use. Construction of a compressed file uses it for the suffix
// array, which it turns into the one-byte-per-row BWT in place: the 3 (or 7) bytes per row that
// are no longer needed are returned at once instead of living until the buffer is freed.
//
// Thread-safety: a plain owner of memory; not synchronized.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <new>

namespace zipg {

class PageBuffer {
 public:
  PageBuffer() = default;
  // Maps `bytes` of zeroed memory; throws std::bad_alloc if the system refuses.
  explicit PageBuffer(size_t bytes) : size_(bytes), mapped_(bytes) {
    if (bytes == 0) return;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<char*>(p);
  }
  ~PageBuffer() { Reset(); }
  PageBuffer(PageBuffer&& other) noexcept { Take(&other); }
  PageBuffer& operator=(PageBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      Take(&other);
    }
    return *this;
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  char* data() { return data_; }
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(data_);
  }

  // Gives the pages wholly after the first `keep` bytes back to the system; they must not be
  // touched afterwards (size() becomes `keep`).
  void ShrinkTo(size_t keep) {
    if (data_ == nullptr || keep >= size_) return;
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t from = (keep + page - 1) / page * page;
    if (from < mapped_) {
      ::munmap(data_ + from, mapped_ - from);
      mapped_ = from;
    }
    size_ = keep;
  }

 private:
  void Reset() {
    if (data_ != nullptr && mapped_ > 0) ::munmap(data_, mapped_);
    data_ = nullptr;
    size_ = mapped_ = 0;
  }
  void Take(PageBuffer* other) {
    data_ = other->data_;
    size_ = other->size_;
    mapped_ = other->mapped_;
    other->data_ = nullptr;
    other->size_ = other->mapped_ = 0;
  }
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes still mapped from data_ on (a whole number of pages after ShrinkTo)
};

}  // namespace zipg

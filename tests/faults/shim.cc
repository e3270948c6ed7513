// The fault-injection shim: see shim.h. Built as a shared library without sanitizers (it is
// preloaded into sanitized and plain processes alike). Each wrapped function looks the real one
// up with dlsym(RTLD_NEXT) once; when armed, it resolves the file descriptor's path through
// /proc/self/fd and counts matching calls.

#include "tests/faults/shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

enum class Op { kNone, kWrite, kPwrite, kFsync, kFdatasync, kRename, kMmap, kFtruncate };

struct Config {
  std::string op;  // as configured: may name a group (any-sync, any-write)
  std::string path;
  uint64_t nth = 1;
  uint64_t count = 1;
  int error = EIO;  // -1: short write
  std::string log;
};

std::mutex mu;
// Built on first use: a namespace-scope Config would be constructed after ReadEnvironment (the
// initializers of one file run in an order the compiler picks) and wipe what it set. Guarded by mu.
Config& TheConfig() {
  static Config* config = new Config;  // never destroyed: a write may come during exit
  return *config;
}
std::atomic<bool> armed{false};  // TheConfig().op non-empty
std::atomic<uint64_t> calls{0};  // matching calls since arming
std::atomic<uint64_t> injected{0};

bool OpMatches(const std::string& configured, Op op) {
  switch (op) {
    case Op::kWrite:
      return configured == "write" || configured == "any-write";
    case Op::kPwrite:
      return configured == "pwrite" || configured == "any-write";
    case Op::kFsync:
      return configured == "fsync" || configured == "any-sync";
    case Op::kFdatasync:
      return configured == "fdatasync" || configured == "any-sync";
    case Op::kRename:
      return configured == "rename";
    case Op::kMmap:
      return configured == "mmap";
    case Op::kFtruncate:
      return configured == "ftruncate";
    case Op::kNone:
      return false;
  }
  return false;
}

std::string FdPath(int fd) {
  char link[64], target[4096];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof(target) - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

const char* OpName(Op op) {
  static const char* const kNames[] = {"none",      "write",  "pwrite", "fsync",
                                       "fdatasync", "rename", "mmap",   "ftruncate"};
  return kNames[static_cast<int>(op)];
}

thread_local bool deciding = false;  // the log's own writes pass through

// 0: let the call through; else the errno to fail it with (-1: make it a short write, only
// asked for when `can_short`: a write of more than one byte). Never throws: the wrapped functions
// are noexcept in glibc.
int Decide(Op op, const std::string& path, bool can_short = false) noexcept {
  if (!armed.load(std::memory_order_acquire) || deciding) return 0;
  deciding = true;
  struct Reset {
    ~Reset() { deciding = false; }
  } reset;
  try {
    std::lock_guard<std::mutex> lock(mu);
    const Config& c = TheConfig();
    if (!OpMatches(c.op, op) || path.find(c.path) == std::string::npos) return 0;
    const uint64_t call = ++calls;
    if (call < c.nth || (c.count != 0 && call >= c.nth + c.count)) return 0;
    if (c.error == -1 && !can_short) return 0;
    ++injected;
    if (!c.log.empty()) {
      if (FILE* f = std::fopen(c.log.c_str(), "a")) {
        std::fprintf(f, "%s %s call %llu\n", OpName(op), path.c_str(),
                     static_cast<unsigned long long>(call));
        std::fclose(f);
      }
    }
    return c.error;
  } catch (...) {
    return 0;
  }
}

int ParseErrno(const char* text) {
  if (text == nullptr || std::strcmp(text, "EIO") == 0) return EIO;
  if (std::strcmp(text, "ENOSPC") == 0) return ENOSPC;
  if (std::strcmp(text, "EDQUOT") == 0) return EDQUOT;
  if (std::strcmp(text, "ENOMEM") == 0) return ENOMEM;
  if (std::strcmp(text, "short") == 0) return -1;
  std::fprintf(stderr, "fault shim: unknown ZIPG_FAULT_ERRNO '%s'\n", text);
  std::abort();
}

__attribute__((constructor)) void ReadEnvironment() {
  const char* op = std::getenv("ZIPG_FAULT_OP");
  if (op == nullptr || *op == '\0') return;
  const char* nth = std::getenv("ZIPG_FAULT_NTH");
  const char* count = std::getenv("ZIPG_FAULT_COUNT");
  const char* log = std::getenv("ZIPG_FAULT_LOG");
  zipg_fault_arm(op, std::getenv("ZIPG_FAULT_PATH"), nth ? std::strtoull(nth, nullptr, 10) : 1,
                 count ? std::strtoull(count, nullptr, 10) : 1,
                 ParseErrno(std::getenv("ZIPG_FAULT_ERRNO")));
  if (log != nullptr) {
    std::lock_guard<std::mutex> lock(mu);
    TheConfig().log = log;
  }
}

template <typename F>
F Real(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == nullptr) {
    std::fprintf(stderr, "fault shim: no next '%s'\n", name);
    std::abort();
  }
  return reinterpret_cast<F>(f);
}

}  // namespace

extern "C" {

void zipg_fault_arm(const char* op, const char* path, uint64_t nth, uint64_t count, int error) {
  std::lock_guard<std::mutex> lock(mu);
  TheConfig().op = op ? op : "";
  TheConfig().path = path ? path : "";
  TheConfig().nth = nth == 0 ? 1 : nth;
  TheConfig().count = count;
  TheConfig().error = error;
  calls = 0;
  injected = 0;
  armed.store(!TheConfig().op.empty(), std::memory_order_release);
}

uint64_t zipg_fault_calls() { return calls.load(); }
uint64_t zipg_fault_injected() { return injected.load(); }

ssize_t write(int fd, const void* buf, size_t n) {
  static const auto real = Real<ssize_t (*)(int, const void*, size_t)>("write");
  if (armed.load(std::memory_order_relaxed)) {
    const int e = Decide(Op::kWrite, FdPath(fd), n > 1);
    if (e == -1) return real(fd, buf, n / 2);
    if (e > 0) return errno = e, -1;
  }
  return real(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t offset) {
  static const auto real = Real<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite");
  if (armed.load(std::memory_order_relaxed)) {
    const int e = Decide(Op::kPwrite, FdPath(fd), n > 1);
    if (e == -1) return real(fd, buf, n / 2, offset);
    if (e > 0) return errno = e, -1;
  }
  return real(fd, buf, n, offset);
}
ssize_t pwrite64(int fd, const void* buf, size_t n, off_t offset) {
  return pwrite(fd, buf, n, offset);
}

int fsync(int fd) {
  static const auto real = Real<int (*)(int)>("fsync");
  if (armed.load(std::memory_order_relaxed)) {
    if (const int e = Decide(Op::kFsync, FdPath(fd)); e > 0) return errno = e, -1;
  }
  return real(fd);
}

int fdatasync(int fd) {
  static const auto real = Real<int (*)(int)>("fdatasync");
  if (armed.load(std::memory_order_relaxed)) {
    if (const int e = Decide(Op::kFdatasync, FdPath(fd)); e > 0) return errno = e, -1;
  }
  return real(fd);
}

int rename(const char* from, const char* to) {
  static const auto real = Real<int (*)(const char*, const char*)>("rename");
  if (armed.load(std::memory_order_relaxed)) {
    if (const int e = Decide(Op::kRename, from); e > 0) return errno = e, -1;
  }
  return real(from, to);
}

int ftruncate(int fd, off_t length) {
  static const auto real = Real<int (*)(int, off_t)>("ftruncate");
  if (armed.load(std::memory_order_relaxed)) {
    if (const int e = Decide(Op::kFtruncate, FdPath(fd)); e > 0) return errno = e, -1;
  }
  return real(fd, length);
}
int ftruncate64(int fd, off_t length) { return ftruncate(fd, length); }

void* mmap(void* addr, size_t n, int prot, int flags, int fd, off_t offset) {
  static const auto real = Real<void* (*)(void*, size_t, int, int, int, off_t)>("mmap");
  if (fd >= 0 && armed.load(std::memory_order_relaxed)) {
    if (const int e = Decide(Op::kMmap, FdPath(fd)); e > 0) return errno = e, MAP_FAILED;
  }
  return real(addr, n, prot, flags, fd, offset);
}
void* mmap64(void* addr, size_t n, int prot, int flags, int fd, off_t offset) {
  return mmap(addr, n, prot, flags, fd, offset);
}

}  // extern "C"

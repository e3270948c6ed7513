#include "util/wal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <functional>
#include <utility>

#include "util/checksum.h"
#include "util/coding.h"
#include "util/file.h"

namespace zipg {
namespace {

// Replay reads the file in chunks of this size (a record larger than a chunk is read whole).
constexpr size_t kReadChunk = size_t{1} << 20;
// The leader keeps its framing buffer between batches unless it grew beyond this.
constexpr size_t kKeepBatchCapacity = size_t{4} << 20;
// Preallocation writes zeros from a buffer of this size, and rounds the file's size up to it.
constexpr size_t kZeroChunk = size_t{64} << 10;

Status ErrnoStatus(const std::string& what, const std::string& path) {
  return Status::IOError(what + " '" + path + "': " + std::strerror(errno));
}

// Closes a file descriptor on scope exit unless released.
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// Sequential, buffered reads of a file whose size is known.
class Reader {
 public:
  Reader(int fd, const std::string& path, uint64_t file_size)
      : fd_(fd), path_(path), file_size_(file_size) {}

  // Points *out at the `n` bytes at file offset `offset` (offset + n <= the file size). The bytes
  // stay valid, and may be modified, until the next call. Offsets must not decrease.
  Status Read(uint64_t offset, size_t n, char** out) {
    assert(offset + n <= file_size_);
    if (offset < buffer_offset_ || offset + n > buffer_offset_ + buffer_.size()) {
      const size_t want =
          std::max<uint64_t>(n, std::min<uint64_t>(kReadChunk, file_size_ - offset));
      buffer_.resize(want);
      buffer_offset_ = offset;
      size_t got = 0;
      while (got < want) {
        ssize_t r =
            ::pread(fd_, buffer_.data() + got, want - got, static_cast<off_t>(offset + got));
        if (r < 0) {
          if (errno == EINTR) continue;
          buffer_.clear();
          return ErrnoStatus("cannot read", path_);
        }
        if (r == 0) {
          buffer_.clear();
          return Status::IOError("'" + path_ + "' shrank while its log was replayed");
        }
        got += static_cast<size_t>(r);
      }
    }
    *out = buffer_.data() + (offset - buffer_offset_);
    return Status::OK();
  }

 private:
  const int fd_;
  const std::string& path_;
  const uint64_t file_size_;
  std::string buffer_;
  uint64_t buffer_offset_ = 0;  // file offset of buffer_[0]
};

// Calls `each` with every intact record from the start of the file, up to the first one that is
// short or fails its checksum, or until `each` sets *stop; returns the end of the last record
// passed to `each`.
StatusOr<uint64_t> ReplayIntact(int fd, const std::string& path, uint64_t file_size,
                                const std::function<Status(std::string_view, bool*)>& each) {
  Reader reader(fd, path, file_size);
  uint64_t end = 0;  // end of the last intact record
  bool stop = false;
  while (!stop && file_size - end >= kWalHeaderSize) {
    char* record;
    ZIPG_RETURN_IF_ERROR(reader.Read(end, kWalHeaderSize, &record));
    const uint32_t length = DecodeFixed32(record);
    if (length > kMaxWalPayload || length > file_size - end - kWalHeaderSize) break;
    ZIPG_RETURN_IF_ERROR(reader.Read(end, kWalHeaderSize + length, &record));
    const uint64_t stored = DecodeFixed64(record + 4);
    // The checksum covers the length followed by the payload: copy the length over the second
    // half of the (already decoded) checksum so that the two are contiguous.
    std::memcpy(record + 8, record, 4);
    if (Checksum64(record + 8, 4 + size_t{length}) != stored) break;
    ZIPG_RETURN_IF_ERROR(each(std::string_view(record + kWalHeaderSize, length), &stop));
    end += kWalHeaderSize + length;
  }
  return end;
}

// Whether the bytes [begin, end) of the file are all zeros (preallocated space, not a torn tail).
StatusOr<bool> AllZeros(int fd, const std::string& path, uint64_t begin, uint64_t end) {
  Reader reader(fd, path, end);
  for (uint64_t at = begin; at < end;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kReadChunk, end - at));
    char* bytes;
    ZIPG_RETURN_IF_ERROR(reader.Read(at, n, &bytes));
    if (std::any_of(bytes, bytes + n, [](char c) { return c != 0; })) return false;
    at += n;
  }
  return true;
}

}  // namespace

Status Wal::ReadRecords(const std::string& path, uint64_t first, size_t max,
                        std::vector<std::string>* out) {
  FdGuard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus("cannot open", path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("cannot stat", path);
  uint64_t index = 0;
  return ReplayIntact(fd.get(), path, static_cast<uint64_t>(st.st_size),
                      [&](std::string_view payload, bool* stop) {
                        if (index++ >= first) out->emplace_back(payload);
                        *stop = out->size() >= max;
                        return Status::OK();
                      })
      .status();
}

Status Wal::Truncate(const std::string& path, uint64_t keep) {
  FdGuard fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus("cannot open", path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("cannot stat", path);
  uint64_t index = 0;
  ZIPG_ASSIGN_OR_RETURN(const uint64_t end,
                        ReplayIntact(fd.get(), path, static_cast<uint64_t>(st.st_size),
                                     [&](std::string_view, bool* stop) {
                                       *stop = ++index >= keep;
                                       return Status::OK();
                                     }));
  const uint64_t cut = keep == 0 ? 0 : end;
  if (cut >= static_cast<uint64_t>(st.st_size)) return Status::OK();
  if (::ftruncate(fd.get(), static_cast<off_t>(cut)) != 0)
    return ErrnoStatus("cannot truncate", path);
  if (::fdatasync(fd.get()) != 0) return ErrnoStatus("cannot sync", path);
  return Status::OK();
}

struct Wal::Writer {
  explicit Writer(const std::string_view* p, size_t n) : payloads(p), count(n) {}
  const std::string_view* payloads;  // the caller's records, written back to back
  size_t count;
  Status status;      // set by the leader that wrote this record, with done
  bool done = false;  // guarded by Wal::mu_
  std::condition_variable cv;
};

StatusOr<std::unique_ptr<Wal>> Wal::Open(const std::string& path, const Replay& replay,
                                         const WalOptions& options, uint64_t* dropped_bytes) {
  if (dropped_bytes != nullptr) *dropped_bytes = 0;
  // O_EXCL first, to learn whether the file is new and its directory entry needs a sync.
  bool created = true;
  FdGuard fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0 && errno == EEXIST) {
    created = false;
    fd.reset(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  }
  if (fd.get() < 0) return ErrnoStatus("cannot open", path);
  if (created) ZIPG_RETURN_IF_ERROR(SyncDirectoryOf(path));

  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("cannot stat", path);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("'" + path + "' is not a regular file");
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);

  // Replay up to the first record that is short or fails its checksum.
  ZIPG_ASSIGN_OR_RETURN(
      const uint64_t end,
      ReplayIntact(fd.get(), path, file_size, [&](std::string_view payload, bool*) {
        return replay ? replay(payload) : Status::OK();
      }));

  if (end < file_size) {
    ZIPG_ASSIGN_OR_RETURN(const bool zeros, AllZeros(fd.get(), path, end, file_size));
    if (::ftruncate(fd.get(), static_cast<off_t>(end)) != 0) {
      return ErrnoStatus("cannot truncate the torn tail of", path);
    }
    if (::fsync(fd.get()) != 0) return ErrnoStatus("cannot fsync", path);
    if (dropped_bytes != nullptr && !zeros) *dropped_bytes = file_size - end;
  }
  return std::unique_ptr<Wal>(new Wal(path, fd.release(), end, options));
}

Wal::~Wal() {
  assert(writers_.empty());
  if (allocated_ > size_) (void)!::ftruncate(fd_, static_cast<off_t>(size_));
  ::close(fd_);
}

Status Wal::Append(std::string_view payload) { return AppendAll(&payload, 1); }

Status Wal::AppendAll(const std::string_view* payloads, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (payloads[i].size() > kMaxWalPayload) {
      return Status::InvalidArgument("a write-ahead log record holds at most " +
                                     std::to_string(kMaxWalPayload) + " bytes, not " +
                                     std::to_string(payloads[i].size()));
    }
  }
  if (n == 0) return Status::OK();
  Writer self(payloads, n);
  std::unique_lock lock(mu_);
  writers_.push_back(&self);
  while (!self.done && writers_.front() != &self) self.cv.wait(lock);
  if (self.done) return self.status;  // a leader wrote this record

  // This writer leads: it writes every queued record (its own first) in one batch. Writers that
  // arrive meanwhile queue behind the batch, and the first of them leads the next one.
  Status status = poisoned_;
  const size_t count = writers_.size();
  if (status.ok()) {
    leader_payloads_.clear();
    for (size_t i = 0; i < count; ++i) {
      const Writer* w = writers_[i];
      leader_payloads_.insert(leader_payloads_.end(), w->payloads, w->payloads + w->count);
    }
    const uint64_t offset = size_;
    lock.unlock();
    status = WriteBatch(offset);
    lock.lock();
    if (status.ok()) {
      size_ += batch_.size();
      stats_.records += leader_payloads_.size();
      stats_.bytes += batch_.size();
      if (options_.sync) ++stats_.syncs;
    } else {
      poisoned_ = Status::IOError("write-ahead log '" + path_ +
                                  "' refuses appends after an I/O error: " + status.message());
    }
    if (batch_.capacity() > kKeepBatchCapacity) std::string().swap(batch_);
  }

  // Wake the batch (under mu_: a woken writer returns and destroys its Writer), then the next
  // leader.
  for (size_t i = 0; i < count; ++i) {
    Writer* w = writers_.front();
    writers_.pop_front();
    if (w == &self) continue;
    w->status = status;
    w->done = true;
    w->cv.notify_one();
  }
  if (!writers_.empty()) writers_.front()->cv.notify_one();
  return status;
}

Status Wal::WriteBatch(uint64_t offset) {
  size_t total = 0;
  for (std::string_view p : leader_payloads_) total += kWalHeaderSize + p.size();
  batch_.resize(total);
  char* out = batch_.data();
  for (std::string_view p : leader_payloads_) {
    const uint32_t length = static_cast<uint32_t>(p.size());
    // Lay the length out next to the payload, checksum both, then write the header in front (its
    // checksum overwrites the length's temporary copy).
    EncodeFixed32(out + 8, length);
    if (length > 0) std::memcpy(out + kWalHeaderSize, p.data(), length);
    const uint64_t checksum = Checksum64(out + 8, 4 + size_t{length});
    EncodeFixed32(out, length);
    EncodeFixed64(out + 4, checksum);
    out += kWalHeaderSize + length;
  }

  if (options_.preallocate > 0 && offset + total > allocated_) {
    const uint64_t want = offset + total + options_.preallocate;
    ZIPG_RETURN_IF_ERROR(Preallocate((want + kZeroChunk - 1) / kZeroChunk * kZeroChunk));
  }
  size_t written = 0;
  while (written < total) {
    ssize_t n = ::pwrite(fd_, batch_.data() + written, total - written,
                         static_cast<off_t>(offset + written));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot write", path_);
    }
    if (n == 0) return Status::IOError("cannot write '" + path_ + "': the write made no progress");
    written += static_cast<size_t>(n);
  }
  allocated_ = std::max(allocated_, offset + total);
  if (options_.sync) {
    int rc;
    do {
      rc = ::fdatasync(fd_);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) return ErrnoStatus("cannot fdatasync", path_);
  }
  return Status::OK();
}

Status Wal::Preallocate(uint64_t end) {
  static const std::string* const zeros = new std::string(kZeroChunk, '\0');
  uint64_t at = allocated_;
  while (at < end) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kZeroChunk, end - at));
    ssize_t w = ::pwrite(fd_, zeros->data(), n, static_cast<off_t>(at));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot preallocate", path_);
    }
    if (w == 0) return Status::IOError("cannot preallocate '" + path_ + "': no progress");
    at += static_cast<uint64_t>(w);
  }
  allocated_ = end;
  return Status::OK();
}

Status Wal::Sync() {
  uint64_t records;
  {
    std::lock_guard lock(mu_);
    if (!poisoned_.ok()) return poisoned_;
    records = stats_.records;
    if (records == synced_records_) return Status::OK();
  }
  // Every record counted above was written before this fdatasync starts.
  int rc;
  do {
    rc = ::fdatasync(fd_);
  } while (rc != 0 && errno == EINTR);
  std::lock_guard lock(mu_);
  if (rc != 0) {
    Status error = ErrnoStatus("cannot fdatasync", path_);
    poisoned_ = Status::IOError("write-ahead log '" + path_ +
                                "' refuses appends after an I/O error: " + error.message());
    return poisoned_;
  }
  ++stats_.syncs;
  synced_records_ = std::max(synced_records_, records);
  return Status::OK();
}

uint64_t Wal::unsynced_records() const {
  std::lock_guard lock(mu_);
  return options_.sync ? 0 : stats_.records - synced_records_;
}

WalStats Wal::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

uint64_t Wal::size() const {
  std::lock_guard lock(mu_);
  return size_;
}

}  // namespace zipg

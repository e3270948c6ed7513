#include "logstore/feed.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/checksum.h"
#include "util/coding.h"

namespace zipg::logstore {

namespace {

constexpr size_t kHeader = 4 + 8;

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError(what + " " + path + ": " + std::strerror(errno));
}

Status PreadAll(int fd, char* out, size_t n, uint64_t offset, const std::string& path) {
  while (n > 0) {
    const ssize_t got = pread(fd, out, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Errno("cannot read", path);
    if (got == 0) return Status::Corruption("unexpected end of " + path);
    out += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return Status::OK();
}

}  // namespace

StatusOr<std::unique_ptr<UpdateFeed>> UpdateFeed::Open(const std::string& path,
                                                       uint64_t drop_from) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot open", path);
  std::unique_ptr<UpdateFeed> feed(new UpdateFeed(path, fd));
  const off_t end = lseek(fd, 0, SEEK_END);
  if (end < 0) return Errno("cannot seek", path);
  // Scan the records; the first bad or dropped one ends the feed.
  uint64_t at = 0;
  std::string payload;
  std::vector<engine::Update> batch;
  while (at + kHeader <= static_cast<uint64_t>(end)) {
    char header[kHeader];
    ZIPG_RETURN_IF_ERROR(PreadAll(fd, header, kHeader, at, path));
    const uint32_t length = DecodeFixed32(header);
    if (at + kHeader + length > static_cast<uint64_t>(end)) break;
    payload.resize(length);
    ZIPG_RETURN_IF_ERROR(PreadAll(fd, payload.data(), length, at + kHeader, path));
    if (Checksum64(payload.data(), length) != DecodeFixed64(header + 4)) break;
    if (!engine::DecodeUpdates(payload, &batch, nullptr).ok() || batch.empty()) break;
    if (batch.back().id >= drop_from) break;  // its generation is replayed again
    feed->index_.push_back({batch.front().id, batch.back().id, at});
    at += kHeader + length;
  }
  if (at != static_cast<uint64_t>(end)) {
    if (ftruncate(fd, static_cast<off_t>(at)) != 0) return Errno("cannot truncate", path);
    if (fdatasync(fd) != 0) return Errno("cannot sync", path);
  }
  feed->size_ = at;
  return feed;
}

UpdateFeed::~UpdateFeed() { close(fd_); }

Status UpdateFeed::Append(const std::vector<engine::Update>& updates) {
  if (updates.empty()) return Status::OK();
  const uint64_t last = last_id();
  for (size_t i = 0; i < updates.size(); ++i) {
    if (updates[i].id == 0 || updates[i].id <= (i == 0 ? last : updates[i - 1].id)) {
      return Status::Internal("update feed " + path_ + ": ids must ascend");
    }
  }
  const std::string payload = engine::EncodeUpdates(updates, nullptr, /*with_ids=*/true);
  std::string record;
  PutFixed32(&record, static_cast<uint32_t>(payload.size()));
  PutFixed64(&record, Checksum64(payload.data(), payload.size()));
  record += payload;
  uint64_t offset;
  {
    std::lock_guard lock(mu_);
    offset = size_;
  }
  const char* p = record.data();
  size_t n = record.size();
  uint64_t at = offset;
  while (n > 0) {
    const ssize_t wrote = pwrite(fd_, p, n, static_cast<off_t>(at));
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) return Errno("cannot write", path_);
    p += wrote;
    n -= static_cast<size_t>(wrote);
    at += static_cast<uint64_t>(wrote);
  }
  std::lock_guard lock(mu_);
  index_.push_back({updates.front().id, updates.back().id, offset});
  size_ = at;
  return Status::OK();
}

Status UpdateFeed::Sync() {
  if (fdatasync(fd_) != 0) return Errno("cannot sync", path_);
  return Status::OK();
}

uint64_t UpdateFeed::last_id() const {
  std::lock_guard lock(mu_);
  return index_.empty() ? 0 : index_.back().last;
}

uint64_t UpdateFeed::size() const {
  std::lock_guard lock(mu_);
  return size_;
}

StatusOr<std::vector<engine::Update>> UpdateFeed::Since(uint64_t after, size_t max_updates) const {
  std::vector<Entry> entries;
  uint64_t end;
  {
    std::lock_guard lock(mu_);
    // The first record holding an id above `after`.
    auto it = std::upper_bound(index_.begin(), index_.end(), after,
                               [](uint64_t a, const Entry& e) { return a < e.last; });
    entries.assign(it, index_.end());
    end = size_;
  }
  std::vector<engine::Update> out;
  std::vector<engine::Update> batch;
  std::string record;
  for (size_t i = 0; i < entries.size(); ++i) {
    const uint64_t next = i + 1 < entries.size() ? entries[i + 1].offset : end;
    record.resize(next - entries[i].offset);
    ZIPG_RETURN_IF_ERROR(PreadAll(fd_, record.data(), record.size(), entries[i].offset, path_));
    const std::string_view payload(record.data() + kHeader, record.size() - kHeader);
    ZIPG_RETURN_IF_ERROR(engine::DecodeUpdates(payload, &batch, nullptr));
    if (!out.empty() && out.size() + batch.size() > max_updates) break;
    for (const auto& u : batch) {
      if (u.id > after) out.push_back(u);
    }
  }
  return out;
}

}  // namespace zipg::logstore

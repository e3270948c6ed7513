// Write-ahead log: an append-only file of checksummed records, durable once Append returns.
//
// Format (docs/writes.md, "Write-ahead log"), little endian, records back to back from offset 0:
//
//   u32 length | u64 Checksum64(the 4 length bytes followed by the payload) | payload
//
// A payload is at most kMaxWalPayload bytes. The file has no header: an empty file is an empty log.
//
// Recovery: Open replays the records in order. The first record that is short (the file ends inside
// its header or payload), whose length exceeds kMaxWalPayload or the bytes left, or whose checksum
// does not match ends the log; the file is truncated to the end of the last intact record. A crash
// can only tear the tail, so this drops exactly the records whose Append never returned. Corruption
// in the middle of the file also ends the log there: the records after it are dropped too, since
// nothing after a bad length can be trusted to lie on a record boundary.
//
// Preallocation (WalOptions::preallocate): the file may extend past the last record with zeros
// written ahead of the appends, so that an append overwrites blocks the file already has and its
// fdatasync flushes data only, not the file's size (on ext4 that is a journal commit saved per
// sync). A zero header fails its checksum, so the zeros end the log like a torn tail; Open cuts
// them, and the destructor trims them back. A tail that is zeros only is not counted as dropped.
//
// Durability: Append returns after the record is written and (with WalOptions::sync) fdatasync'ed.
// After a failed write or sync the log is poisoned and refuses every later Append: the kernel may
// have dropped the dirty pages, so nothing written after that point could be trusted. A record
// whose Append failed may or may not be replayed by a later Open (its bytes may have reached the
// disk before the failure was seen); callers must not assume either.
//
// Thread-safety: Append, stats, size and path may be called from any number of threads at once.
// Concurrent Appends share one write() and one fdatasync (group commit). The Wal must outlive every
// Append call. Two Wal objects (in one process or several) must not have the same file open.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace zipg {

// The largest payload Append accepts (1 GiB). On replay, a length above it marks a torn tail.
inline constexpr uint32_t kMaxWalPayload = uint32_t{1} << 30;
// Bytes of framing before each payload: u32 length + u64 checksum.
inline constexpr size_t kWalHeaderSize = 12;

struct WalOptions {
  // fdatasync before Append returns (default true). false leaves durability to the kernel's
  // writeback: only for benchmarks and tests of the framing, never for a store that acknowledges
  // writes.
  bool sync = true;
  // Bytes of zeros written ahead of the log's end (0: none, the file ends at its last record).
  // When an append would pass the zeros, its leader writes this many more past it, and that
  // append's fdatasync makes the new size durable; the appends up to the next such extension
  // overwrite allocated blocks. Measured on this VM's ext4 (docs/write-pipeline.md, "The log's
  // fdatasync"): 122 us per append and fdatasync into zeros against 197 us appending.
  uint64_t preallocate = 0;
};

// Counters since Open (replayed records are not counted).
struct WalStats {
  uint64_t records = 0;  // records appended successfully
  uint64_t syncs = 0;    // fdatasync calls made by Append (< records when group commit batched)
                         // and by Sync
  uint64_t bytes = 0;    // bytes appended, framing included
};

class Wal {
 public:
  using Replay = std::function<Status(std::string_view payload)>;

  // Opens (creating if absent, mode 0644) the log at `path`, calling `replay` for each intact
  // record in order; a non-OK status from `replay` aborts Open with that status, leaving the file
  // untouched. The first short or mismatching record ends the log: the file is truncated to the end
  // of the last intact record and synced, and *dropped_bytes (if not null) says how many bytes were
  // cut (0 if none, or if they were all zeros: see Preallocation above). Appends continue after the last intact record. A newly created file has its
  // directory fsync'ed so that the file itself survives a crash.
  static StatusOr<std::unique_ptr<Wal>> Open(const std::string& path, const Replay& replay,
                                             const WalOptions& options = {},
                                             uint64_t* dropped_bytes = nullptr);
  // Closes the file (no sync needed: every successful Append already synced), first cutting any
  // preallocated zeros after the last record (best effort: zeros left by a crash end the log).
  ~Wal();

  // Reads, without changing the file, up to `max` intact records from record `first` (0-based)
  // into *out; fewer where the intact records end. The file may be a log another Wal appends to:
  // what is read is a prefix of what it has written.
  static Status ReadRecords(const std::string& path, uint64_t first, size_t max,
                            std::vector<std::string>* out);
  // Cuts the log at `path` (not open in any Wal) after its first `keep` intact records, and
  // syncs it: a standby drops a tail that its new leader never had (docs/logstore-ha.md). OK and
  // unchanged if it holds no more than `keep` records.
  static Status Truncate(const std::string& path, uint64_t keep);
  Wal(const Wal&) = delete;
  Wal& operator=(const Wal&) = delete;

  // Appends one record and returns once it is durable. Concurrent callers share one write() and one
  // fdatasync: the first queued writer becomes the leader, takes every queued record, writes them
  // with a single write, syncs, and wakes the others with the shared status. A payload longer than
  // kMaxWalPayload is InvalidArgument (the log stays usable). After any I/O error the log is
  // poisoned: that and every later Append fail with IOError naming the file.
  Status Append(std::string_view payload);
  // Appends n records as one unit of group commit: they are written back to back, in order, with
  // no other caller's records between them, and share the outcome. n == 0 is a no-op.
  Status AppendAll(const std::string_view* payloads, size_t n);

  // With WalOptions::sync false: makes every record appended before the call durable (one
  // fdatasync, none if nothing was appended since the last). A failure poisons the log.
  Status Sync();
  // Records appended but not yet made durable (0 with WalOptions::sync).
  uint64_t unsynced_records() const;

  WalStats stats() const;
  uint64_t size() const;  // bytes in the file: the intact records, replayed and appended
  const std::string& path() const { return path_; }

 private:
  struct Writer;  // one Append call waiting in the queue

  Wal(std::string path, int fd, uint64_t size, const WalOptions& options)
      : path_(std::move(path)), fd_(fd), options_(options), allocated_(size), size_(size) {}

  // Frames leader_payloads_ into batch_, writes the batch at file offset `offset` (first writing
  // zeros ahead of it if it passes allocated_) and syncs. Called by the leader without mu_ held;
  // only the leader touches these buffers, allocated_ and the file.
  Status WriteBatch(uint64_t offset);
  // Writes zeros from allocated_ to `end` (> allocated_); allocated_ = end once written.
  Status Preallocate(uint64_t end);

  const std::string path_;
  const int fd_;
  const WalOptions options_;
  std::vector<std::string_view> leader_payloads_;  // the leader's batch, taken from writers_
  std::string batch_;                              // the leader's batch, framed
  uint64_t allocated_;  // the file's size: size_ plus any zeros written ahead (the leader's)

  mutable std::mutex mu_;
  std::deque<Writer*> writers_;  // guarded by mu_; the front is the leader
  Status poisoned_;              // guarded by mu_; non-OK after the first I/O error
  uint64_t size_;                // guarded by mu_
  WalStats stats_;               // guarded by mu_
  uint64_t synced_records_ = 0;  // guarded by mu_; records made durable by Sync()
};

}  // namespace zipg

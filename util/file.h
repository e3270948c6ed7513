// Files: read-only memory maps and atomic whole-file writes.
//
// MappedFile maps a file read-only (MAP_SHARED), so opening costs a system call and pages come in
// on demand. WriteFileAtomically writes to a temporary file in the same directory, fsyncs it,
// renames it over the target and fsyncs the directory: a reader sees the old file or the whole new
// one, never a part.
//
// Thread-safety: a MappedFile is immutable after Open and may be read from any number of threads.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "util/status.h"

namespace zipg {

class MappedFile {
 public:
  static StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Hints that the mapping will be read front to back (more read-ahead).
  void AdviseSequential() const;
  // Gives back the resident pages wholly before byte `offset` (they stay in the page cache and
  // come back on the next read): a front-to-back reader keeps its resident set small.
  void DropPagesBefore(size_t offset) const;

 private:
  MappedFile(std::string path, const char* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const char* data_;
  size_t size_;
};

// Receives the bytes of a file being written; returns non-OK to abandon the write.
using FileSink = std::function<Status(std::string_view chunk)>;

// Calls `produce` with a sink that appends to a temporary file, then publishes it atomically at
// `path`. On any failure the temporary file is removed and `path` is untouched.
Status WriteFileAtomically(const std::string& path,
                           const std::function<Status(const FileSink&)>& produce);

// Reads a whole file into memory.
StatusOr<std::string> ReadFileToString(const std::string& path);
// Up to `length` bytes of the file at `path` from `offset` (fewer at its end). NOT_FOUND if it
// cannot be opened.
StatusOr<std::string> ReadFileRange(const std::string& path, uint64_t offset, uint64_t length);

// fsync of the file at `path`, and of the directory holding `path` (which makes a create or
// rename there durable).
Status SyncFile(const std::string& path);
Status SyncDirectoryOf(const std::string& path);

}  // namespace zipg

#include "shard/fetch.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "graph/manifest.h"
#include "util/file.h"

namespace zipg::shard {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string ShardPrefix(uint32_t shard) { return graph::ShardDirName(shard) + "/"; }

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

uint64_t SizeOr0(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

// One fetch: the byte budget of the rate, the sources, and where bytes came from.
class Fetcher {
 public:
  Fetcher(const FetchOptions& options, FetchReport* report)
      : options_(options), report_(report), start_(Clock::now()) {}

  // Appends bytes [have, size) of store file `path` to `into` (which holds `have` bytes).
  Status Append(const std::string& path, const std::string& into, uint64_t have, uint64_t size) {
    std::ofstream out(into, std::ios::binary | std::ios::app);
    if (!out) return Status::IOError("cannot write " + into);
    while (have < size) {
      const uint32_t length = static_cast<uint32_t>(std::min<uint64_t>(size - have, ChunkBytes()));
      ZIPG_RETURN_IF_ERROR(Pace());
      ZIPG_ASSIGN_OR_RETURN(std::string chunk, Read(path, have, length, /*may_end=*/false));
      out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      out.flush();  // what a restart finds on disk is what it resumes from
      if (!out) return Status::IOError("cannot write " + into);
      have += chunk.size();
      report_->bytes += chunk.size();
    }
    out.close();
    if (!out) return Status::IOError("cannot write " + into);
    return SyncFile(into);
  }

  // The whole of a store file whose size is not known (the MANIFEST) into `into`: until a read
  // comes back short.
  Status FetchWhole(const std::string& path, const std::string& into) {
    std::ofstream out(into, std::ios::binary | std::ios::trunc);
    if (!out) return Status::IOError("cannot write " + into);
    for (uint64_t at = 0;;) {
      const uint32_t length = ChunkBytes();
      ZIPG_RETURN_IF_ERROR(Pace());
      ZIPG_ASSIGN_OR_RETURN(std::string chunk, Read(path, at, length, /*may_end=*/true));
      out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      at += chunk.size();
      report_->bytes += chunk.size();
      if (chunk.size() < length) break;
    }
    out.close();
    if (!out) return Status::IOError("cannot write " + into);
    return SyncFile(into);
  }

  const std::string& source() const { return source_; }

 private:
  uint32_t ChunkBytes() const {
    if (options_.rate_bytes_per_s == 0) return options_.chunk_bytes;
    // A quarter of a second of the rate, so that the pace is even.
    return static_cast<uint32_t>(std::min<uint64_t>(
        options_.chunk_bytes, std::max<uint64_t>(options_.rate_bytes_per_s / 4, 4096)));
  }

  bool Cancelled() const { return options_.cancelled && options_.cancelled(); }

  // Sleeps until the bytes fetched so far are within the rate.
  Status Pace() {
    if (options_.rate_bytes_per_s == 0) return Cancelled() ? Cancel() : Status::OK();
    const auto due =
        start_ + std::chrono::microseconds(report_->bytes * 1'000'000 / options_.rate_bytes_per_s);
    while (Clock::now() < due) {
      if (Cancelled()) return Cancel();
      std::this_thread::sleep_for(
          std::min<Clock::duration>(due - Clock::now(), std::chrono::milliseconds(100)));
    }
    return Status::OK();
  }

  static Status Cancel() { return Status::Unavailable("the fetch was stopped"); }

  // A chunk from the current source, or the next one that answers; waits while there is none. An
  // empty chunk is the end of the file if `may_end`, else the source's failure.
  StatusOr<std::string> Read(const std::string& path, uint64_t offset, uint32_t length,
                             bool may_end) {
    auto last_said = Clock::now();
    std::string last_error;
    for (;;) {
      if (!reader_) {
        for (const FetchSource& s :
             options_.sources ? options_.sources() : std::vector<FetchSource>{}) {
          if (tried_.count(s.name) == 0) {
            reader_ = s.read;
            source_ = s.name;
            break;
          }
        }
      }
      if (reader_) {
        StatusOr<std::string> chunk = reader_(path, offset, length);
        if (chunk.ok() && (!chunk->empty() || may_end)) {
          if (std::find(report_->sources.begin(), report_->sources.end(), source_) ==
              report_->sources.end()) {
            report_->sources.push_back(source_);
          }
          return chunk;
        }
        last_error = source_ + ": " +
                     (chunk.ok() ? path + " ends at " + std::to_string(offset) + " bytes"
                                 : chunk.status().ToString());
        tried_.insert(source_);
        reader_ = nullptr;
        continue;
      }
      // Every source failed once (or there is none): start over after a pause.
      tried_.clear();
      if (Cancelled()) return Cancel();
      if (Clock::now() - last_said >= std::chrono::seconds(10) && options_.waiting) {
        options_.waiting(last_error.empty() ? "no serving replica has the shard" : last_error);
        last_said = Clock::now();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }

  const FetchOptions& options_;
  FetchReport* report_;
  const Clock::time_point start_;
  ChunkReader reader_;
  std::string source_;
  std::set<std::string> tried_;
};

// The whole of store file `path` (of `size` bytes, checksum `xxh3`) at `into`: kept if it is
// there already and checks, resumed if shorter, fetched again (once) if it fails the check.
Status FetchFile(Fetcher* fetcher, const std::string& path, const std::string& into, uint64_t size,
                 uint64_t xxh3, FetchReport* report) {
  std::error_code ec;
  fs::create_directories(fs::path(into).parent_path(), ec);
  if (ec) return Status::IOError("cannot create the directory of " + into + ": " + ec.message());
  for (int attempt = 0;; ++attempt) {
    uint64_t have = SizeOr0(into);
    if (have > size) {  // not a prefix of this file
      fs::remove(into, ec);
      have = 0;
    }
    if (attempt == 0) report->resumed_bytes += have;
    ZIPG_RETURN_IF_ERROR(fetcher->Append(path, into, have, size));
    ZIPG_ASSIGN_OR_RETURN(const uint64_t sum, graph::FileChecksum(into));
    if (sum == xxh3) return Status::OK();
    fs::remove(into, ec);
    if (attempt == 1) {
      return Status::Corruption(path + " fetched from " + fetcher->source() +
                                " does not match the MANIFEST's checksum, twice");
    }
    report->refetched.push_back(path);
  }
}

}  // namespace

StatusOr<bool> ShardMissing(const std::string& store_dir, uint32_t shard) {
  std::error_code ec;
  if (!fs::exists(fs::path(store_dir) / graph::kManifestName, ec)) {
    // What zipg itself puts there (a node's run/, a shard server's updates/, a fetch stopped
    // part-way) does not make it something else.
    for (const auto& e : fs::directory_iterator(store_dir, ec)) {
      const std::string name = e.path().filename().string();
      const bool ours = name == "run" || name == "updates" ||
                        (name.size() > 6 && name.compare(name.size() - 6, 6, ".fetch") == 0);
      if (!ours) {
        return Status::InvalidArgument(store_dir + " has no MANIFEST and holds " + name +
                                       ": it is not a store");
      }
    }
    return true;
  }
  ZIPG_ASSIGN_OR_RETURN(const graph::Manifest manifest, graph::ReadManifest(store_dir));
  if (shard >= manifest.shards) {
    return Status::InvalidArgument("shard " + std::to_string(shard) + " is not in " + store_dir +
                                   " (" + std::to_string(manifest.shards) + " shards)");
  }
  return !fs::exists(fs::path(store_dir) / graph::ShardDirName(shard), ec);
}

namespace {

// The MANIFEST, when store_dir has none: fetched whole into a directory of its own, parsed there,
// then renamed into place.
Status FetchManifestWith(Fetcher* fetcher, const std::string& store_dir, FetchReport* report) {
  std::error_code ec;
  fs::create_directories(store_dir, ec);
  if (ec) return Status::IOError("cannot create " + store_dir + ": " + ec.message());
  const fs::path store(store_dir);
  if (fs::exists(store / graph::kManifestName, ec)) return Status::OK();
  const fs::path staging = store / ".manifest.fetch";
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  const std::string into = (staging / graph::kManifestName).string();
  ZIPG_RETURN_IF_ERROR(fetcher->FetchWhole(graph::kManifestName, into));
  ZIPG_RETURN_IF_ERROR(graph::ReadManifest(staging.string()).status());
  fs::rename(into, store / graph::kManifestName, ec);
  if (ec) return Status::IOError("cannot move the fetched MANIFEST into " + store_dir);
  ZIPG_RETURN_IF_ERROR(SyncDirectoryOf((store / graph::kManifestName).string()));
  fs::remove_all(staging, ec);
  report->manifest = true;
  return Status::OK();
}

}  // namespace

StatusOr<FetchReport> FetchManifest(const std::string& store_dir, const FetchOptions& options) {
  FetchReport report;
  const auto start = Clock::now();
  Fetcher fetcher(options, &report);
  ZIPG_RETURN_IF_ERROR(FetchManifestWith(&fetcher, store_dir, &report));
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

StatusOr<FetchReport> FetchShardFiles(const std::string& store_dir, uint32_t shard,
                                      const FetchOptions& options) {
  FetchReport report;
  const auto start = Clock::now();
  Fetcher fetcher(options, &report);
  ZIPG_RETURN_IF_ERROR(FetchManifestWith(&fetcher, store_dir, &report));
  std::error_code ec;
  const fs::path store(store_dir);
  ZIPG_ASSIGN_OR_RETURN(const graph::Manifest manifest, graph::ReadManifest(store_dir));
  if (shard >= manifest.shards) {
    return Status::InvalidArgument("shard " + std::to_string(shard) + " is not in " + store_dir);
  }
  const std::string dir = graph::ShardDirName(shard);
  const fs::path staging = store / (dir + ".fetch");
  const std::string prefix = ShardPrefix(shard);
  bool any = false;
  for (const graph::ManifestFile& f : manifest.files) {
    if (!StartsWith(f.path, prefix)) continue;
    any = true;
    const std::string into = (staging / f.path.substr(prefix.size())).string();
    ZIPG_RETURN_IF_ERROR(FetchFile(&fetcher, f.path, into, f.bytes, f.xxh3, &report));
  }
  if (!any) return Status::InvalidArgument("the MANIFEST lists no files of " + dir);
  fs::rename(staging, store / dir, ec);
  if (ec)
    return Status::IOError("cannot move " + staging.string() + " into place: " + ec.message());
  ZIPG_RETURN_IF_ERROR(SyncDirectoryOf((store / dir).string()));
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

bool Fetchable(const std::vector<graph::ManifestFile>& manifest_files,
               const std::vector<uint32_t>& hosted, const std::string& path) {
  if (path == graph::kManifestName) return true;
  if (std::none_of(manifest_files.begin(), manifest_files.end(),
                   [&](const graph::ManifestFile& f) { return f.path == path; })) {
    return false;
  }
  return std::any_of(hosted.begin(), hosted.end(),
                     [&](uint32_t s) { return StartsWith(path, ShardPrefix(s)); });
}

}  // namespace zipg::shard

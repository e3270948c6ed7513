// Fetching a base shard's files from a serving replica, for a shard server started without them
// (docs/cluster-changes.md, step 1): the store's MANIFEST when the directory has none, then every
// file the MANIFEST lists under the shard's directory, each checked against the MANIFEST's size
// and XXH3-64, written under <store>/shard-000S.fetch/ (resumed where a previous fetch stopped)
// and renamed into place as a whole.
//
// Thread-safety: FetchShardFiles is called by one thread per store directory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/manifest.h"
#include "util/status.h"

namespace zipg::shard {

// A piece of one store file from one replica: `length` bytes of `path` (relative to the store
// directory) from `offset`; fewer at the end of the file.
using ChunkReader =
    std::function<StatusOr<std::string>(const std::string& path, uint64_t offset, uint32_t length)>;

struct FetchSource {
  std::string name;  // the member, for reports and errors
  ChunkReader read;
};

struct FetchOptions {
  // Bytes per second over the whole fetch; 0: unlimited.
  uint64_t rate_bytes_per_s = 0;
  uint32_t chunk_bytes = 4 << 20;
  // The replicas serving the shard now (asked again after every failure). Empty: none yet; the
  // fetch waits and asks again, calling `waiting` every 10 s while it does.
  std::function<std::vector<FetchSource>()> sources;
  std::function<void(const std::string& why)> waiting;
  // Stops a fetch that waits or sleeps (checked between chunks): UNAVAILABLE.
  std::function<bool()> cancelled;
};

struct FetchReport {
  uint64_t bytes = 0;          // fetched now
  uint64_t resumed_bytes = 0;  // kept from an earlier, interrupted fetch
  double seconds = 0;
  std::vector<std::string> sources;    // the members bytes came from
  std::vector<std::string> refetched;  // files that failed their check and were fetched again
  bool manifest = false;               // the MANIFEST was fetched too
};

// Whether `store_dir` lacks shard `shard`: no MANIFEST (and the directory is absent, or holds only
// what zipg puts there: run/, updates/, *.fetch), or a MANIFEST without the shard's directory. A
// directory with anything else and no MANIFEST is not a store: INVALID_ARGUMENT, as is a MANIFEST
// of fewer shards.
StatusOr<bool> ShardMissing(const std::string& store_dir, uint32_t shard);

// Fetches what ShardMissing found missing (see the top of this file). A file that fails its check
// is fetched again from its start, once; failing again is CORRUPTION naming the file and source.
StatusOr<FetchReport> FetchShardFiles(const std::string& store_dir, uint32_t shard,
                                      const FetchOptions& options);

// The store's MANIFEST alone, when store_dir has none (a shard server started with no shards
// on an empty store, `zipg deploy add-host`): from any source; report.manifest says whether it
// was fetched.
StatusOr<FetchReport> FetchManifest(const std::string& store_dir, const FetchOptions& options);

// For the serving side: whether `path` is a file a replica may hand out for a fetch: "MANIFEST",
// or a file the manifest lists under the directory of one of `hosted`.
bool Fetchable(const std::vector<graph::ManifestFile>& manifest_files,
               const std::vector<uint32_t>& hosted, const std::string& path);

}  // namespace zipg::shard

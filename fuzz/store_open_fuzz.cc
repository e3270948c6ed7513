// Fuzzes opening a store directory whose files were altered (graph/graph.h, Graph::Open, and the
// layout files under it). The store is the small fixed graph in 2 shards, built at start-up. An
// input names a file of the store, an alteration and its bytes:
//   u8 file (index into the sorted file list) | u8 mode | u32 offset (little endian) | bytes
// mode % 3: 0 overwrite the bytes at offset, 1 cut the file at offset, 2 insert the bytes there;
// mode & 4: open with verify_checksums off (structure checks only).
// Properties: Open fails with CORRUPTION, INVALID_ARGUMENT, NOT_FOUND or IO_ERROR, or opens; an
// opened store answers every read of a fixed list (never crashes, never INTERNAL); with checksums
// verified, its answers are those of the unaltered store.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_common.h"
#include "graph/graph.h"
#include "util/coding.h"

namespace {

namespace fs = std::filesystem;
using zipg::SearchMatch;
using zipg::StatusCode;
using zipg::fuzz::Check;

std::string base, work;
std::vector<std::string> files;  // relative paths, sorted
std::string pristine;            // the unaltered store's answers

void Add(std::string* out, const zipg::Properties& props) {
  for (const auto& [k, v] : props) *out += k + "=" + v + ";";
}

template <typename T>
bool Failed(const zipg::StatusOr<T>& r, std::string* out) {
  if (r.ok()) return false;
  Check(r.status().code() != StatusCode::kInternal, "a read of an opened store is never INTERNAL");
  *out += "error " + std::string(zipg::StatusCodeName(r.status().code())) + "\n";
  return true;
}

// The answers to a fixed list of reads, as text.
std::string Answers(zipg::Graph& g) {
  std::string out;
  for (int64_t id = -1; id < 48; ++id) {
    auto node = g.ObjGet(id);
    if (!Failed(node, &out) && node->has_value()) {
      out += "node " + std::to_string(id) + " ";
      Add(&out, (*node)->properties);
      out += "\n";
    }
    for (int64_t type : {0, 1, 2, 5}) {
      auto edges = g.AssocRange(id, type, 0, 1000);
      if (!Failed(edges, &out)) {
        for (const auto& e : *edges) {
          out += std::to_string(e.src) + "," + std::to_string(e.type) + "," +
                 std::to_string(e.dst) + "," + std::to_string(e.timestamp) + " ";
          Add(&out, e.properties);
        }
        out += "\n";
      }
      auto count = g.AssocCount(id, type);
      if (!Failed(count, &out)) out += "count " + std::to_string(*count) + "\n";
    }
  }
  for (const char* city : {"red", "blue"}) {
    auto ids = g.GetNodeIds({{"city", city}});
    if (!Failed(ids, &out)) {
      for (int64_t id : *ids) out += std::to_string(id) + " ";
      out += "\n";
    }
  }
  // The search index (nodes.sfx): every match, any property and one.
  for (SearchMatch m :
       {SearchMatch::kContains, SearchMatch::kPrefix, SearchMatch::kSuffix, SearchMatch::kExact}) {
    for (const auto& property :
         {std::optional<std::string>(), std::optional<std::string>("city")}) {
      auto found = g.SearchNodeIds({"re", property, m, 100});
      if (!Failed(found, &out)) {
        for (int64_t id : found->ids) out += std::to_string(id) + " ";
        out += found->truncated ? "+\n" : "\n";
      }
    }
  }
  return out;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = zipg::fuzz::TempDir("store-open");
  base = dir + "/base";
  work = dir + "/work";
  zipg::fuzz::CompressSmallGraph(base, 2);
  for (const auto& entry : fs::recursive_directory_iterator(base)) {
    if (entry.is_regular_file()) files.push_back(fs::relative(entry.path(), base).string());
  }
  std::sort(files.begin(), files.end());
  zipg::fuzz::MaybeWriteSeeds([] {
    // One seed per file and mode: a byte flipped in the middle, a cut, an insertion.
    std::vector<std::string> seeds;
    for (size_t f = 0; f < files.size(); ++f) {
      const uint32_t middle = static_cast<uint32_t>(fs::file_size(fs::path(base) / files[f]) / 2);
      for (uint8_t mode : {0, 1, 2, 4, 5}) {
        std::string s = {static_cast<char>(f), static_cast<char>(mode)};
        zipg::PutFixed32(&s, middle);
        s += mode % 3 == 1 ? "" : "\x5a";
        seeds.push_back(s);
      }
    }
    return seeds;
  });
  auto g = zipg::Graph::Open(base);
  Check(g.ok(), "the small store opens");
  pristine = Answers(**g);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 6 || files.empty()) return 0;
  const std::string& name = files[data[0] % files.size()];
  const uint8_t mode = data[1];
  const uint32_t offset = zipg::DecodeFixed32(reinterpret_cast<const char*>(data) + 2);
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 6, size - 6);

  fs::remove_all(work);
  fs::copy(base, work, fs::copy_options::recursive);
  std::string content = Read(fs::path(base) / name);
  const size_t at = offset % (content.size() + 1);
  switch (mode % 3) {
    case 0:
      content.replace(at, std::min(bytes.size(), content.size() - at), bytes);
      break;
    case 1:
      content.resize(at);
      break;
    default:
      content.insert(at, bytes);
      break;
  }
  zipg::fuzz::WriteFile((fs::path(work) / name).string(), content);

  zipg::GraphOpenOptions options;
  options.verify_checksums = (mode & 4) == 0;
  auto g = zipg::Graph::Open(work, options);
  if (!g.ok()) {
    const StatusCode c = g.status().code();
    Check(
        c == StatusCode::kCorruption || c == StatusCode::kInvalidArgument ||
            c == StatusCode::kNotFound || c == StatusCode::kIOError,
        "an altered store fails to open with CORRUPTION, INVALID_ARGUMENT, NOT_FOUND or IO_ERROR");
    return 0;
  }
  const std::string answers = Answers(**g);
  if (options.verify_checksums) {
    Check(answers == pristine, "a store that opens with its checksums verified answers as before");
  }
  return 0;
}

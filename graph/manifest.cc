// Store manifest as JSON (nlohmann::json).

#include "graph/manifest.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "util/checksum.h"
#include "util/file.h"

namespace zipg::graph {

namespace {
using nlohmann::json;

json OptionsToJson(const layout::CompressedFileOptions& o) {
  return {{"sa_sampling_rate", o.sa_sampling_rate},
          {"isa_sampling_rate", o.isa_sampling_rate},
          {"psi_block_size", o.psi_block_size}};
}
layout::CompressedFileOptions OptionsFromJson(const json& j) {
  layout::CompressedFileOptions o;
  o.sa_sampling_rate = j.at("sa_sampling_rate").get<uint32_t>();
  o.isa_sampling_rate = j.at("isa_sampling_rate").get<uint32_t>();
  o.psi_block_size = j.at("psi_block_size").get<uint32_t>();
  return o;
}
// A NodeFile's or EdgeFile's options: the format, the block options of the block formats and the
// suffix options of the older ones. A manifest written before the block formats has only the
// suffix options: its files have `old_format`.
template <typename Options>
json FileOptionsToJson(const Options& o) {
  json j = OptionsToJson(o.suffix);
  j["format"] = o.format;
  j["block_bytes"] = o.blocks.block_bytes;
  j["level"] = o.blocks.level;
  j["dictionary_bytes"] = o.blocks.dictionary_bytes;
  return j;
}
template <typename Options>
Options FileOptionsFromJson(const json& j, uint32_t old_format) {
  Options o;
  o.suffix = OptionsFromJson(j);
  o.format = j.value("format", old_format);
  o.blocks.block_bytes = j.value("block_bytes", o.blocks.block_bytes);
  o.blocks.level = j.value("level", o.blocks.level);
  o.blocks.dictionary_bytes = j.value("dictionary_bytes", o.blocks.dictionary_bytes);
  return o;
}
// A NodeFile's options add the search index's (format 3): which properties have one ("all",
// "none" or a list of names) and its sample rate.
json NodeOptionsToJson(const layout::NodeFileOptions& o) {
  json j = FileOptionsToJson(o);
  if (o.search.all || o.search.names.empty()) {
    j["search_index"] = o.search.ToString();
  } else {
    j["search_index"] = o.search.names;
  }
  j["search_sample_rate"] = o.search_options.sample_rate;
  return j;
}
layout::NodeFileOptions NodeOptionsFromJson(const json& j) {
  auto o = FileOptionsFromJson<layout::NodeFileOptions>(j, 1);
  if (j.contains("search_index")) {
    const json& s = j.at("search_index");
    if (s.is_array()) {
      o.search.all = false;
      o.search.names = s.get<std::vector<std::string>>();
      std::sort(o.search.names.begin(), o.search.names.end());
    } else {
      const std::string text = s.get<std::string>();
      if (text != "all" && text != "none") {
        throw std::invalid_argument("search_index must be \"all\", \"none\" or a list");
      }
      o.search.all = text == "all";
    }
  }
  o.search_options.sample_rate = j.value("search_sample_rate", o.search_options.sample_rate);
  return o;
}
std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

std::string ShardDirName(uint32_t shard) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard-%04u", shard);
  return buf;
}

Status WriteManifest(const std::string& store_dir, const Manifest& m) {
  json files = json::array();
  for (const auto& f : m.files) {
    files.push_back({{"path", f.path}, {"bytes", f.bytes}, {"xxh3", Hex(f.xxh3)}});
  }
  json j = {{"format", "zipg-store"},
            {"version", m.version},
            {"shards", m.shards},
            {"partition", m.partition},
            {"node_file", NodeOptionsToJson(m.node_file)},
            {"edge_file", FileOptionsToJson(m.edge_file)},
            {"node_properties", m.node_properties},
            {"edge_properties", m.edge_properties},
            {"nodes", m.nodes},
            {"edges", m.edges},
            {"raw_bytes", m.raw_bytes},
            {"files", files}};
  if (!m.built_shards.empty()) j["built_shards"] = m.built_shards;
  const std::string text = j.dump(2) + "\n";
  return WriteFileAtomically(store_dir + "/" + kManifestName,
                             [&](const FileSink& sink) { return sink(text); });
}

StatusOr<Manifest> ReadManifest(const std::string& store_dir) {
  const std::string path = store_dir + "/" + kManifestName;
  if (!std::filesystem::exists(path)) {
    return Status::NotFound(store_dir + " is not a zipg store (no " + kManifestName + ")");
  }
  ZIPG_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  Manifest m;
  try {
    const json j = json::parse(text);
    if (j.at("format").get<std::string>() != "zipg-store") {
      return Status::Corruption(path + ": not a zipg store manifest");
    }
    m.version = j.at("version").get<uint32_t>();
    if (m.version != kStoreFormatVersion) {
      return Status::Corruption(path + ": unsupported store format version " +
                                std::to_string(m.version));
    }
    m.shards = j.at("shards").get<uint32_t>();
    if (j.contains("built_shards")) {
      m.built_shards = j.at("built_shards").get<std::vector<uint32_t>>();
    }
    m.partition = j.at("partition").get<std::string>();
    m.node_file = NodeOptionsFromJson(j.at("node_file"));
    m.edge_file = FileOptionsFromJson<layout::EdgeFileOptions>(j.at("edge_file"), 3);
    m.node_properties = j.at("node_properties").get<std::vector<std::string>>();
    m.edge_properties = j.at("edge_properties").get<std::vector<std::string>>();
    m.nodes = j.at("nodes").get<uint64_t>();
    m.edges = j.at("edges").get<uint64_t>();
    m.raw_bytes = j.at("raw_bytes").get<uint64_t>();
    for (const auto& f : j.at("files")) {
      ManifestFile file;
      file.path = f.at("path").get<std::string>();
      file.bytes = f.at("bytes").get<uint64_t>();
      file.xxh3 = std::stoull(f.at("xxh3").get<std::string>(), nullptr, 16);
      m.files.push_back(std::move(file));
    }
  } catch (const std::exception& e) {
    return Status::Corruption(path + ": malformed manifest: " + e.what());
  }
  if (m.shards == 0) return Status::Corruption(path + ": zero shards");
  for (size_t i = 0; i < m.built_shards.size(); ++i) {
    if (m.built_shards[i] >= m.shards || (i > 0 && m.built_shards[i] <= m.built_shards[i - 1])) {
      return Status::Corruption(path + ": built_shards must ascend within the " +
                                std::to_string(m.shards) + " shards");
    }
  }
  if (Status s = m.node_file.Validate(); !s.ok()) {
    return Status::Corruption(path + ": node file options: " + s.message());
  }
  if (Status s = m.edge_file.Validate(); !s.ok()) {
    return Status::Corruption(path + ": edge file options: " + s.message());
  }
  return m;
}

std::string Manifest::DescribeShards() const {
  if (built_shards.empty()) return std::to_string(shards) + " shards";
  std::string list;
  for (uint32_t s : built_shards) list += (list.empty() ? "" : ",") + std::to_string(s);
  return "shards " + list + " of " + std::to_string(shards);
}

StatusOr<uint64_t> FileChecksum(const std::string& path) {
  ZIPG_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  return Checksum64(file->data(), file->size());
}

}  // namespace zipg::graph

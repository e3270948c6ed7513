// Fuzzes the CSV loaders (graph/input.h): the input is a nodes CSV and an edges CSV separated by
// the first byte 0xFF (which valid UTF-8 never holds). Property: loading never crashes, and a
// refused file's error names the file.

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "graph/input.h"

namespace {

std::string dir;

void Write(const std::string& path, std::string_view text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(text.data(), text.size());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  dir = (std::filesystem::temp_directory_path() / ("zipg-csv-fuzz-" + std::to_string(getpid())))
            .string();
  std::filesystem::create_directories(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t cut = all.find('\xFF');
  const std::string nodes = dir + "/nodes.csv", edges = dir + "/edges.csv";
  Write(nodes, all.substr(0, cut));
  Write(edges, cut == std::string_view::npos ? std::string_view("src,dst,type,timestamp\n")
                                             : all.substr(cut + 1));
  zipg::graph::InputGraph graph;
  const zipg::Status n = zipg::graph::LoadNodesCsv(nodes, &graph);
  if (!n.ok() && n.message().find("nodes.csv") == std::string::npos) abort();
  const zipg::Status e = zipg::graph::LoadEdgesCsv(edges, &graph);
  if (!e.ok() && e.message().find("edges.csv") == std::string::npos) abort();
  return 0;
}

// The web explorer's files (http/assets/), compiled into the binary by http/CMakeLists.txt.
#pragma once

#include <string>
#include <vector>

namespace zipg::http {

struct Asset {
  const char* path;  // relative to http/assets/, e.g. "index.html", "vendor/cytoscape.min.js"
  const char* begin;
  const char* end;
};

// Every file, sorted by path.
const std::vector<Asset>& Assets();

}  // namespace zipg::http

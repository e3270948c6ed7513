#include "client/prometheus.h"

#include <httplib.h>

#include <filesystem>
#include <nlohmann/json.hpp>

namespace zipg::cli {
namespace {

// `text` as a YAML double-quoted scalar (a JSON string is one).
std::string Quoted(const std::string& text) { return nlohmann::json(text).dump(); }

// Prometheus resolves relative paths against its config file's directory, not our working
// directory: the files are named absolutely.
std::string Absolute(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

}  // namespace

std::string PrometheusConfig(const ScrapeConfig& c) {
  // Built with append: GCC 12 warns falsely (-Wrestrict) about some chains of operator+.
  std::string targets;
  for (const auto& t : c.targets) {
    if (!targets.empty()) targets.append(", ");
    targets.append(Quoted(t));
  }
  std::string out;
  out.append("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n")
      .append("scrape_configs:\n  - job_name: zipg\n    scheme: ")
      .append(c.scheme)
      .append("\n    static_configs:\n      - targets: [")
      .append(targets)
      .append("]\n");
  if (c.scheme == "https") {
    out.append("    tls_config:\n      ca_file: ")
        .append(Quoted(Absolute(c.ca_file)))
        .append("\n      cert_file: ")
        .append(Quoted(Absolute(c.cert_file)))
        .append("\n      key_file: ")
        .append(Quoted(Absolute(c.key_file)))
        .append("\n");
  }
  return out;
}

bool PrometheusReady(const std::string& host, int port) {
  httplib::Client client(host, port);
  client.set_connection_timeout(1);
  client.set_read_timeout(1);
  auto r = client.Get("/-/ready");
  return r && r->status == 200;
}

}  // namespace zipg::cli

// The configuration of a Prometheus server (Debian's `prometheus`) that scrapes a cluster's
// metrics endpoints (docs/operations.md): written by `zipg local start --prometheus` and
// `zipg node start --prometheus`.
//
// Thread-safety: plain functions; no shared state.
#pragma once

#include <string>
#include <vector>

namespace zipg::cli {

struct ScrapeConfig {
  std::vector<std::string> targets;  // HOST:PORT of each server's metrics endpoint (/metrics)
  std::string scheme = "http";       // "https": the servers' metrics speak mutual TLS
  // With https: the cluster's CA, and a certificate and key it signed (Prometheus' client
  // certificate); relative paths are made absolute (against the working directory).
  std::string ca_file, cert_file, key_file;
};

// prometheus.yml: one job, `zipg`, every target every second.
std::string PrometheusConfig(const ScrapeConfig& config);

// True if the Prometheus server at host:port answers GET /-/ready with 200 within a second.
bool PrometheusReady(const std::string& host, int port);

}  // namespace zipg::cli

// Small pieces shared by the load drivers of `zipg bench` (client/cli_bench*.cc): percentiles,
// and the CPU time and resident memory of the cluster's processes on this machine (read from
// /proc by the pids the status document lists), so that reports can give cost per unit of work.
//
// Thread-safety: pure functions and plain values.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace zipg::cli {

// The q-quantile of `v` (reorders it); 0 for an empty vector.
// Milliseconds in `d`, fractional.
inline double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

inline double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

// One cluster process as /proc sees it now.
struct ProcessSample {
  double cpu_seconds = 0;  // user + system, since it started
  uint64_t rss_bytes = 0;
};

// name -> sample, for every member of a status document whose pid runs on this machine.
inline std::map<std::string, ProcessSample> SampleProcesses(const nlohmann::json& status) {
  std::map<std::string, ProcessSample> out;
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  for (const auto& m : status.value("servers", nlohmann::json::array())) {
    const int64_t pid = m.value("pid", int64_t{0});
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(text.substr(close + 2));
    std::vector<std::string> f;
    for (std::string x; fields >> x;) f.push_back(x);
    if (f.size() < 22) continue;
    ProcessSample s;
    s.cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / tick;  // utime, stime
    s.rss_bytes = std::stoull(f[21]) * page;                        // rss (pages)
    out[m.value("name", std::to_string(pid))] = s;
  }
  return out;
}

// name -> role ("shard", "logstore", "aggregator") of every member of a status document.
inline std::map<std::string, std::string> RolesOf(const nlohmann::json& status) {
  std::map<std::string, std::string> out;
  for (const auto& m : status.value("servers", nlohmann::json::array())) {
    out[m.value("name", std::to_string(m.value("pid", int64_t{0})))] = m.value("role", "?");
  }
  return out;
}

// This process's CPU seconds (user + system) so far.
inline double OwnCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// CPU seconds the processes of `after` used since `before` (those in both).
inline double CpuSince(const std::map<std::string, ProcessSample>& before,
                       const std::map<std::string, ProcessSample>& after) {
  double total = 0;
  for (const auto& [name, s] : after) {
    auto it = before.find(name);
    if (it != before.end()) total += s.cpu_seconds - it->second.cpu_seconds;
  }
  return total;
}

}  // namespace zipg::cli

// Memory detection and sizes (util/memory.h).

#include "util/memory.h"

#include <malloc.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

namespace zipg {
namespace {

// Limits at or above this mean "no limit" (cgroup v1 writes 2^63 rounded down to a page).
constexpr uint64_t kUnlimited = uint64_t{1} << 62;

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::optional<uint64_t> ParseUint(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    if (v > (UINT64_MAX - 9) / 10) return UINT64_MAX;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

std::optional<uint64_t> ReadUint(const std::string& path) {
  auto text = ReadSmallFile(path);
  if (!text) return std::nullopt;
  return ParseUint(*text);
}

// The value of `key` in a "key value" per line file (memory.stat), or in a "Key:   value kB"
// file (/proc/meminfo, /proc/self/status) with `unit` bytes per unit.
std::optional<uint64_t> FindField(const std::string& text, std::string_view key,
                                  uint64_t unit = 1) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::string_view l(line);
    if (!l.starts_with(key) || l.size() == key.size()) continue;
    const char next = l[key.size()];
    if (next != ' ' && next != ':' && next != '\t') continue;
    l.remove_prefix(key.size());
    while (!l.empty() && (l.front() == ' ' || l.front() == ':' || l.front() == '\t')) {
      l.remove_prefix(1);
    }
    const size_t end = l.find_first_not_of("0123456789");
    auto v = ParseUint(l.substr(0, end));
    if (v) return *v * unit;
  }
  return std::nullopt;
}

// Memory one cgroup directory still allows: limit - (usage - inactive file pages), or nullopt if
// it sets no limit (or cannot be read).
std::optional<uint64_t> CgroupRoom(const std::string& dir, bool v2) {
  const auto limit_text = ReadSmallFile(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
  if (!limit_text) return std::nullopt;
  const auto limit = ParseUint(*limit_text);  // "max" (v2) does not parse: no limit
  if (!limit || *limit >= kUnlimited) return std::nullopt;
  const auto usage = ReadUint(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
  uint64_t used = usage.value_or(0);
  if (auto stat = ReadSmallFile(dir + "/memory.stat")) {
    auto inactive = v2 ? FindField(*stat, "inactive_file") : FindField(*stat, "total_inactive_file");
    if (!inactive && !v2) inactive = FindField(*stat, "inactive_file");
    if (inactive) used -= std::min(used, *inactive);
  }
  return *limit > used ? *limit - used : 0;
}

}  // namespace

StatusOr<AvailableMemory> DetectAvailableMemory(const std::string& proc,
                                                const std::string& cgroup) {
  const auto meminfo = ReadSmallFile(proc + "/meminfo");
  if (!meminfo) return Status::IOError("cannot read " + proc + "/meminfo");
  AvailableMemory best;
  if (auto available = FindField(*meminfo, "MemAvailable", 1024)) {
    best = {*available, "MemAvailable"};
  } else if (auto free = FindField(*meminfo, "MemFree", 1024)) {
    best = {*free, "MemFree"};
  } else {
    return Status::IOError(proc + "/meminfo has no MemAvailable");
  }

  namespace fs = std::filesystem;
  std::error_code ec;
  const auto groups = ReadSmallFile(proc + "/self/cgroup");
  std::istringstream in(groups.value_or(""));
  std::string line;
  while (std::getline(in, line)) {
    // hierarchy-id:controllers:path
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    std::string root;
    bool v2 = false;
    if (controllers.empty() && line.compare(0, a, "0") == 0) {
      v2 = true;
      root = fs::exists(cgroup + "/cgroup.controllers", ec) ? cgroup : cgroup + "/unified";
    } else {
      std::istringstream list(controllers);
      std::string c;
      bool memory = false;
      while (std::getline(list, c, ',')) memory = memory || c == "memory";
      if (!memory) continue;
      root = cgroup + "/memory";
    }
    // From the process's cgroup up to the root of the hierarchy.
    fs::path p = fs::path(path).lexically_normal();
    while (true) {
      const std::string dir = root + (p.string() == "/" ? "" : p.string());
      if (auto room = CgroupRoom(dir, v2); room && *room < best.bytes) {
        best = {*room, std::string(v2 ? "cgroup v2" : "cgroup v1") + " limit of " +
                           (p.string().empty() ? "/" : p.string())};
      }
      if (!p.has_relative_path() || p == p.root_path()) break;
      p = p.parent_path();
    }
  }
  return best;
}

uint64_t CurrentRss() {
  const auto status = ReadSmallFile("/proc/self/status");
  return status ? FindField(*status, "VmRSS", 1024).value_or(0) : 0;
}

ResidentMemory CurrentResident() {
  ResidentMemory m;
  const auto status = ReadSmallFile("/proc/self/status");
  if (!status) return m;
  m.total = FindField(*status, "VmRSS", 1024).value_or(0);
  m.anon = FindField(*status, "RssAnon", 1024).value_or(0);
  m.file = FindField(*status, "RssFile", 1024).value_or(0);
  return m;
}

std::string MemoryJson(uint64_t accounted_bytes) {
  const ResidentMemory m = CurrentResident();
  return "{\"rss_bytes\":" + std::to_string(m.total) + ",\"anon_bytes\":" + std::to_string(m.anon) +
         ",\"file_bytes\":" + std::to_string(m.file) +
         ",\"accounted_bytes\":" + std::to_string(accounted_bytes) + "}";
}

uint64_t PeakRss() {
  const auto status = ReadSmallFile("/proc/self/status");
  return status ? FindField(*status, "VmHWM", 1024).value_or(0) : 0;
}

void TuneAllocatorForServers() {
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  ::mallopt(M_ARENA_MAX, 4);
}

MemoryTrimmer::MemoryTrimmer(std::chrono::milliseconds period)
    : thread_([this, period] {
        std::unique_lock lock(mu_);
        while (!cv_.wait_for(lock, period, [this] { return stop_; })) ::malloc_trim(0);
      }) {}

MemoryTrimmer::~MemoryTrimmer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool ResetPeakRss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  const Status bad = Status::InvalidArgument(
      "expected a size such as 4G, 512M or 1073741824, found \"" + std::string(text) + "\"");
  size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  if (i == 0) return bad;
  double number = 0;
  try {
    size_t used = 0;
    number = std::stod(std::string(text.substr(0, i)), &used);
    if (used != i) return bad;
  } catch (...) {
    return bad;
  }
  std::string_view unit = text.substr(i);
  uint64_t scale = 1;
  if (!unit.empty()) {
    switch (unit[0]) {
      case 'k':
      case 'K':
        scale = uint64_t{1} << 10;
        break;
      case 'm':
      case 'M':
        scale = uint64_t{1} << 20;
        break;
      case 'g':
      case 'G':
        scale = uint64_t{1} << 30;
        break;
      case 't':
      case 'T':
        scale = uint64_t{1} << 40;
        break;
      case 'b':
      case 'B':
        break;
      default:
        return bad;
    }
    if (scale != 1) unit.remove_prefix(1);
    if (!unit.empty() && unit[0] == 'i' && scale != 1) unit.remove_prefix(1);
    if (!unit.empty() && (unit[0] == 'B' || unit[0] == 'b')) unit.remove_prefix(1);
    if (!unit.empty()) return bad;
  }
  const double bytes = number * static_cast<double>(scale);
  // Anything below 2^64 fits; llround would overflow its long long from 2^63 up.
  if (!std::isfinite(bytes) || bytes >= 18446744073709551616.0) return bad;
  return static_cast<uint64_t>(std::round(bytes));
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

}  // namespace zipg

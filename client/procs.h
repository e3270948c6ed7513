// Background server processes of `zipg local` and `zipg node`: starting one in its own session
// with its output in a log, telling whether it still runs and is still ours, stopping groups of
// them in order.
//
// Thread-safety: plain functions; no shared state.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/status.h"

namespace zipg::cli {

struct Process {
  std::string role;  // "etcd", "shard", "logstore", "aggregator"
  std::string name;
  pid_t pid = 0;
  std::string log;
  nlohmann::json ToJson() const {
    return {{"role", role}, {"name", name}, {"pid", pid}, {"log", log}};
  }
};

// Starts argv in its own session with stdin from /dev/null and stdout+stderr appended to `log`.
StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log);
// True if the process exists and has not exited (a zombie has exited).
bool Alive(pid_t pid);
// True if /proc/pid/cmdline contains `needle` (guards against pids reused by other programs).
bool CmdlineHas(pid_t pid, const std::string& needle);
// The last `bytes` of a log file.
std::string LogTail(const std::string& path, size_t bytes = 2000);
// SIGTERM to each live process of the group, then SIGKILL to those still alive after `grace`.
void StopGroup(const std::vector<Process>& group, std::chrono::seconds grace);
// The path of this program.
StatusOr<std::string> SelfPath();

}  // namespace zipg::cli

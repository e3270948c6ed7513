#include "client/procs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <thread>

#include "util/file.h"

namespace zipg::cli {

using Clock = std::chrono::steady_clock;

StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log) {
  const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) return Status::IOError(log + ": " + strerror(errno));
  std::vector<char*> cargs;
  for (const auto& a : argv) cargs.push_back(const_cast<char*>(a.c_str()));
  cargs.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(out);
    return Status::IOError(std::string("fork: ") + strerror(errno));
  }
  if (pid == 0) {
    setsid();
    const int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(out, 2);
    execvp(cargs[0], cargs.data());
    dprintf(2, "cannot run %s: %s\n", cargs[0], strerror(errno));
    _exit(127);
  }
  close(out);
  return pid;
}

// True if the process exists and has not exited (a zombie waiting for its parent to reap it has
// exited; this machine's init may reap late).
bool Alive(pid_t pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  auto stat = ReadFileToString("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return false;
  const size_t paren = stat->rfind(')');
  return paren == std::string::npos || paren + 2 >= stat->size() || (*stat)[paren + 2] != 'Z';
}

// True if /proc/pid/cmdline contains `needle` (guards against pids reused by other programs).
bool CmdlineHas(pid_t pid, const std::string& needle) {
  auto text = ReadFileToString("/proc/" + std::to_string(pid) + "/cmdline");
  if (!text.ok()) return false;
  std::replace(text->begin(), text->end(), '\0', ' ');
  return text->find(needle) != std::string::npos;
}

std::string LogTail(const std::string& path, size_t bytes) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return "(no log)";
  return text->size() > bytes ? "..." + text->substr(text->size() - bytes) : *text;
}

// SIGTERM to each live process of the group, then SIGKILL to those still alive after `grace`.
void StopGroup(const std::vector<Process>& group, std::chrono::seconds grace) {
  for (const auto& p : group) {
    if (Alive(p.pid)) kill(p.pid, SIGTERM);
  }
  const auto deadline = Clock::now() + grace;
  for (const auto& p : group) {
    while (Alive(p.pid) && Clock::now() < deadline) {
      waitpid(p.pid, nullptr, WNOHANG);  // reaps it if it is our child (start's error path)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (Alive(p.pid)) {
      std::cerr << "zipg: " << p.name << " (pid " << p.pid
                << ") ignored SIGTERM; killing it\n";
      kill(p.pid, SIGKILL);
      waitpid(p.pid, nullptr, 0);
    }
  }
}

StatusOr<std::string> SelfPath() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::IOError("cannot find this program: " + ec.message());
  return path.string();
}

}  // namespace zipg::cli

// transport_bench: the CPU and context switches one request/reply round trip costs on this
// machine, through the frame link the update channel and log shipping use (rpc/frame_link.h:
// Thrift's TSocket under a thread per connection) and through the plainest blocking TCP
// connection (poll, read a length-prefixed frame, write the reply, with raw system calls): the
// floor the frame link is held to. Client and server run in this process, so the figures are both
// ends of the round trip together: what one pointer batch or one shipment costs the cluster in
// transport alone (docs/write-pipeline.md; ZeroMQ, which the link replaced, measured 1.65-1.86x
// the plain socket's CPU).
//
// Usage: transport_bench [--rounds N] [--sizes 64,1024,16384]
// Prints, per transport and frame size: round trips/s, mean and p99 latency, CPU us and context
// switches per round trip, and the ratio of the frame link's CPU to plain TCP's.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "rpc/frame_link.h"

namespace zipg::bench {
namespace {

struct Usage {
  double cpu_us = 0;
  double switches = 0;
};

Usage Now() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  Usage u;
  u.cpu_us = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
             static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  u.switches = static_cast<double>(ru.ru_nvcsw + ru.ru_nivcsw);
  return u;
}

struct Result {
  double per_s = 0, mean_us = 0, p99_us = 0, cpu_us = 0, switches = 0;
};

// Runs `round` n times after a warm-up; CPU and switches are the whole process's (both ends).
template <typename Round>
Result Run(size_t n, Round round) {
  for (size_t i = 0; i < n / 10 + 1; ++i) round();
  const Usage before = Now();
  const auto start = Clock::now();
  const Latency l = Measure(n, [&](size_t) { round(); });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const Usage after = Now();
  Result r;
  r.per_s = static_cast<double>(n) / seconds;
  r.mean_us = l.mean_us;
  r.p99_us = l.p99_us;
  r.cpu_us = (after.cpu_us - before.cpu_us) / static_cast<double>(n);
  r.switches = (after.switches - before.switches) / static_cast<double>(n);
  return r;
}

Result Link(size_t n, size_t size) {
  auto server = rpc::FrameServer::Start(
      "127.0.0.1", 0, {},
      [](std::string_view request) { return std::optional<std::string>(request.substr(0, 16)); },
      "the bench socket");
  if (!server.ok()) {
    std::fprintf(stderr, "listen: %s\n", server.status().ToString().c_str());
    std::exit(1);
  }
  auto client = rpc::FrameConnection::Connect((*server)->endpoint(), {}, 1000);
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    std::exit(1);
  }
  const std::string frame(size, 'x');
  std::string reply;
  return Run(n, [&] {
    if (!(*client)->Send(frame, 1000).ok() ||
        !(*client)->Receive(&reply, Clock::now() + std::chrono::seconds(5)).ok()) {
      std::exit(1);
    }
  });
}

bool ReadAll(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t got = read(fd, p, n);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t put = write(fd, p, n);
    if (put <= 0) return false;
    p += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

// Waits for input as TSocket does when the server can interrupt it (poll, then read).
bool Readable(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, -1) == 1;
}

bool ReadFrame(int fd, std::string* out) {
  uint32_t length = 0;
  if (!Readable(fd) || !ReadAll(fd, reinterpret_cast<char*>(&length), 4)) return false;
  out->resize(length);
  return ReadAll(fd, out->data(), length);
}

bool WriteFrame(int fd, const std::string& body) {
  std::string frame(4 + body.size(), '\0');
  const uint32_t length = static_cast<uint32_t>(body.size());
  std::memcpy(frame.data(), &length, 4);
  std::memcpy(frame.data() + 4, body.data(), body.size());
  return WriteAll(fd, frame.data(), frame.size());
}

Result Tcp(size_t n, size_t size) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("listen");
    std::exit(1);
  }
  std::thread answer([&] {
    const int fd = accept(listener, nullptr, nullptr);
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::string request;
    while (ReadFrame(fd, &request)) {
      if (!WriteFrame(fd, request.substr(0, 16))) break;
    }
    close(fd);
  });
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::perror("connect");
    std::exit(1);
  }
  const std::string frame(size, 'x');
  std::string reply;
  Result r = Run(n, [&] {
    if (!WriteFrame(fd, frame) || !ReadFrame(fd, &reply)) std::exit(1);
  });
  close(fd);
  answer.join();
  close(listener);
  return r;
}

void Print(const char* name, size_t size, const Result& r) {
  std::printf(
      "%-6s %7zu B  %8.0f round trips/s  mean %6.1f us  p99 %6.1f us  CPU %6.1f us  "
      "switches %4.1f per round trip\n",
      name, size, r.per_s, r.mean_us, r.p99_us, r.cpu_us, r.switches);
}

}  // namespace
}  // namespace zipg::bench

int main(int argc, char** argv) {
  size_t rounds = 20000;
  std::vector<size_t> sizes = {64, 1024, 16384};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--rounds") {
      rounds = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (flag == "--sizes") {
      sizes.clear();
      for (char* p = argv[i + 1]; *p;) {
        sizes.push_back(std::strtoull(p, &p, 10));
        if (*p == ',') ++p;
      }
    } else {
      std::fprintf(stderr, "usage: transport_bench [--rounds N] [--sizes 64,1024,16384]\n");
      return 2;
    }
  }
  if (rounds == 0 || sizes.empty()) {
    std::fprintf(stderr, "usage: transport_bench [--rounds N] [--sizes 64,1024,16384]\n");
    return 2;
  }
  std::printf("transport_bench: %zu round trips each, client and server in this process\n", rounds);
  for (size_t size : sizes) {
    const auto link = zipg::bench::Link(rounds, size);
    const auto tcp = zipg::bench::Tcp(rounds, size);
    zipg::bench::Print("link", size, link);
    zipg::bench::Print("tcp", size, tcp);
    std::printf("       ratio link / tcp: CPU %.2f, switches %.2f, latency %.2f\n",
                link.cpu_us / tcp.cpu_us, link.switches / tcp.switches, link.mean_us / tcp.mean_us);
  }
  return 0;
}

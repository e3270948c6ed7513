// net_delay: a fixed one-way delay on the packets an iptables NFQUEUE rule hands to user space,
// for the namespace rig's scale-out runs (docs/scale.md, "Network delay"). This VM's kernel has
// no netem qdisc; NFQUEUE is there. Every packet queued is held `--delay-us` microseconds from its
// arrival and then accepted, in arrival order (a fixed delay keeps the order), so a rule on each
// namespace's egress adds d to every packet between hosts, as netem on each link would.
//
//   ip netns exec NS iptables-legacy -A OUTPUT -o DEV -j NFQUEUE --queue-num 0 --queue-bypass
//   ip netns exec NS net_delay --queue 0 --delay-us 200
//
// The packet's bytes are not copied to user space (metadata only); segmentation offload is kept
// (a GSO packet is one verdict). It prints "ready" once bound, and on SIGTERM or SIGINT accepts
// every packet it holds and prints how many it delayed and the largest lateness of a release
// (how far past its due time a packet left: the timer's precision).
//
// A tool of the test rig, not of the product: tests/net_delay_test.py checks it against
// measured round trips.

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>

extern "C" {
#include <libnetfilter_queue/libnetfilter_queue.h>
}

namespace {

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

struct Held {
  uint32_t id;
  int64_t due_ns;
};

struct State {
  int64_t delay_ns = 0;
  std::deque<Held> held;  // in arrival order, so in due order
  uint64_t delayed = 0;
  int64_t max_late_ns = 0;
};

int OnPacket(nfq_q_handle*, nfgenmsg*, nfq_data* nfa, void* data) {
  auto* state = static_cast<State*>(data);
  const nfqnl_msg_packet_hdr* hdr = nfq_get_msg_packet_hdr(nfa);
  if (hdr != nullptr) state->held.push_back({ntohl(hdr->packet_id), NowNs() + state->delay_ns});
  return 0;
}

// Accepts every held packet due by `now` (all of them with `all`).
bool Release(nfq_q_handle* qh, State* state, int64_t now, bool all) {
  while (!state->held.empty() && (all || state->held.front().due_ns <= now)) {
    const Held h = state->held.front();
    state->held.pop_front();
    if (nfq_set_verdict(qh, h.id, NF_ACCEPT, 0, nullptr) < 0) {
      std::fprintf(stderr, "net_delay: verdict for packet %u: %s\n", h.id, std::strerror(errno));
      return false;
    }
    ++state->delayed;
    if (!all && now - h.due_ns > state->max_late_ns) state->max_late_ns = now - h.due_ns;
  }
  return true;
}

int Usage() {
  std::fprintf(stderr, "usage: net_delay --delay-us D [--queue N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  long queue = 0;
  long delay_us = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    char* end = nullptr;
    const long v = std::strtol(argv[i + 1], &end, 10);
    if (*end != '\0' || v < 0) return Usage();
    if (flag == "--queue") {
      queue = v;
    } else if (flag == "--delay-us") {
      delay_us = v;
    } else {
      return Usage();
    }
  }
  if (argc % 2 != 1 || delay_us < 0 || delay_us > 10000000 || queue > 65535) return Usage();

  // The release timer's slack: the kernel's default (50 us) is a quarter of a 0.2 ms delay.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  State state;
  state.delay_ns = delay_us * 1000;
  nfq_handle* h = nfq_open();
  if (h == nullptr) {
    std::fprintf(stderr, "net_delay: nfq_open: %s\n", std::strerror(errno));
    return 1;
  }
  nfq_q_handle* qh = nfq_create_queue(h, static_cast<uint16_t>(queue), &OnPacket, &state);
  if (qh == nullptr) {
    std::fprintf(stderr, "net_delay: cannot bind queue %ld: %s\n", queue, std::strerror(errno));
    nfq_close(h);
    return 1;
  }
  if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0 || nfq_set_queue_maxlen(qh, 1 << 16) < 0) {
    std::fprintf(stderr, "net_delay: configuring queue %ld: %s\n", queue, std::strerror(errno));
    return 1;
  }
  nfq_set_queue_flags(qh, NFQA_CFG_F_GSO, NFQA_CFG_F_GSO);  // older kernels: segments instead
  nfnl_rcvbufsiz(nfq_nfnlh(h), 16 << 20);
  const int fd = nfq_fd(h);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::printf("ready\n");
  std::fflush(stdout);

  alignas(8) static char buf[1 << 16];
  int rc = 0;
  while (!g_stop) {
    int64_t now = NowNs();
    if (!Release(qh, &state, now, false)) {
      rc = 1;
      break;
    }
    timespec wait{1, 0};  // nothing held: wake once a second to look at g_stop
    if (!state.held.empty()) {
      const int64_t ns = state.held.front().due_ns - now;
      wait = {static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ppoll(&p, 1, &wait, nullptr);
    if (ready < 0 && errno != EINTR) {
      std::fprintf(stderr, "net_delay: ppoll: %s\n", std::strerror(errno));
      rc = 1;
      break;
    }
    if (ready <= 0) continue;
    while (true) {
      const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n < 0) {
        if (errno == ENOBUFS) {  // the kernel dropped messages: those packets are lost
          std::fprintf(stderr, "net_delay: the queue overflowed (ENOBUFS)\n");
          continue;
        }
        break;  // EAGAIN: read everything for now
      }
      nfq_handle_packet(h, buf, static_cast<int>(n));
    }
  }
  Release(qh, &state, NowNs(), true);
  std::printf("delayed %" PRIu64 " packets; latest release %.1f us after its due time\n",
              state.delayed, state.max_late_ns / 1000.0);
  nfq_destroy_queue(qh);
  nfq_close(h);
  return rc;
}

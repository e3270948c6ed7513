// Tests of EtcdClient against a real etcd (/usr/bin/etcd) started per test process on free
// loopback ports in a fresh temporary directory, and killed (directory removed) at the end.
//
// Reads and writes are checked against a std::map model that also predicts etcd's revisions
// (every write that changes something is one revision); leases against wall-clock TTLs; watches
// against the list of writes made. Offline tests check the error mapping with nothing listening,
// a peer that never answers, and a fake server sending canned replies (garbage, etcd errors,
// watch frames).
//
// Random values come from std::mt19937_64 (whose output the standard fixes) with fixed seeds.

#include "cluster/etcd.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster/election.h"
#include "cluster/membership.h"

namespace zipg::cluster {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kEtcdBinary = "/usr/bin/etcd";

int64_t MillisSince(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

// A loopback socket bound to a free port; listening if `listen_backlog` >= 0.
struct BoundSocket {
  int fd = -1;
  int port = 0;
  explicit BoundSocket(int listen_backlog = -1) {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        (listen_backlog >= 0 && listen(fd, listen_backlog) != 0)) {
      ADD_FAILURE() << "cannot bind a loopback socket: " << strerror(errno);
      return;
    }
    port = ntohs(addr.sin_port);
  }
  ~BoundSocket() {
    if (fd >= 0) close(fd);
  }
};

// A port nothing listens on (bound, then released).
int FreePort() { return BoundSocket().port; }

std::string ReadLog(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
}

// Random bytes (any of the 256 values) of the given length.
std::string RandomBytes(std::mt19937_64& rng, size_t length) {
  std::string out(length, '\0');
  for (char& c : out) c = static_cast<char>(rng() & 0xff);
  return out;
}

// Starts etcd with `args` (argv[0] included), output to `log_path`; the pid, or -1.
pid_t SpawnEtcd(std::vector<std::string> args, const std::string& log_path) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    ADD_FAILURE() << log_path << ": " << strerror(errno);
    return -1;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls until exec. Die with the test process, even if it crashes.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execv(kEtcdBinary, argv.data());
    _exit(127);
  }
  close(log_fd);
  if (pid < 0) ADD_FAILURE() << "fork: " << strerror(errno);
  return pid;
}

class EtcdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(access(kEtcdBinary, X_OK), 0) << kEtcdBinary << " is not installed";
    char dir_template[] = "/tmp/zipg_etcd_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr) << strerror(errno);
    dir_ = dir_template;
    const int client_port = FreePort();
    const int peer_port = FreePort();
    ASSERT_NE(client_port, 0);
    ASSERT_NE(peer_port, 0);
    const std::string client_url = "http://127.0.0.1:" + std::to_string(client_port);
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer_port);
    endpoint_ = client_url;
    // An election timeout of 500 ms makes etcd's minimum lease TTL 1 s (1.5 election timeouts,
    // rounded up to whole seconds) instead of 2 s, which keeps the lease tests short.
    std::vector<std::string> args = {kEtcdBinary,
                                     "--name=zipg-test",
                                     "--data-dir=" + dir_ + "/data",
                                     "--listen-client-urls=" + client_url,
                                     "--advertise-client-urls=" + client_url,
                                     "--listen-peer-urls=" + peer_url,
                                     "--initial-advertise-peer-urls=" + peer_url,
                                     "--initial-cluster=zipg-test=" + peer_url,
                                     "--heartbeat-interval=100",
                                     "--election-timeout=500"};
    const std::string log_path = dir_ + "/etcd.log";
    pid_ = SpawnEtcd(args, log_path);
    ASSERT_GT(pid_, 0);
    EtcdClient client(endpoint_, milliseconds(500));
    const auto start = Clock::now();
    while (true) {
      auto r = client.GetPrefix("/");
      if (r.ok()) break;
      int status = 0;
      ASSERT_EQ(waitpid(pid_, &status, WNOHANG), 0)
          << "etcd exited (status " << status << "); log:\n"
          << ReadLog(log_path);
      ASSERT_LT(MillisSince(start), 15000)
          << "etcd did not answer: " << r.status().ToString() << "\nlog:\n"
          << ReadLog(log_path);
      std::this_thread::sleep_for(milliseconds(50));
    }
  }

  static void TearDownTestSuite() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      dir_.clear();
    }
  }

  static pid_t pid_;
  static std::string dir_;
  static std::string endpoint_;
};

pid_t EtcdTest::pid_ = -1;
std::string EtcdTest::dir_;
std::string EtcdTest::endpoint_;

std::map<std::string, std::string> AsMap(const std::vector<KeyValue>& kvs) {
  std::map<std::string, std::string> out;
  for (const KeyValue& kv : kvs) out[kv.key] = kv.value;
  return out;
}

// The model: each key's value, create and mod revision, and the store revision.
struct ModelEntry {
  std::string value;
  int64_t create_revision;
  int64_t mod_revision;
};

// Random Put / PutIfAbsent / Delete / DeletePrefix / Get under one prefix, with keys and values of
// arbitrary bytes, checked after every step against the model, including every revision.
TEST_F(EtcdTest, RandomOperationsMatchModel) {
  EtcdClient etcd(endpoint_);
  const std::string prefix = std::string("/model\0\xff/", 9);
  std::mt19937_64 rng(42);
  std::vector<std::string> keys;
  for (int i = 0; i < 24; ++i) {
    // Short keys so that some share longer prefixes; byte 0xff and 0x00 included.
    std::string suffix = RandomBytes(rng, 1 + rng() % 3);
    if (i % 6 == 0) suffix += '\xff';
    keys.push_back(prefix + suffix);
  }
  // Also a key just outside the prefix, which must never show up.
  std::string outside = prefix;
  outside.back() = static_cast<char>(outside.back() + 1);
  ASSERT_TRUE(etcd.Put(outside, "outside").ok());

  int64_t revision = 0;
  {
    auto r = etcd.GetPrefix(prefix, &revision);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->empty());
  }
  std::map<std::string, ModelEntry> model;
  for (int step = 0; step < 300; ++step) {
    const std::string& key = keys[rng() % keys.size()];
    const int op = static_cast<int>(rng() % 10);
    if (op < 4) {  // Put
      std::string value = RandomBytes(rng, rng() % 40);
      ASSERT_TRUE(etcd.Put(key, value).ok());
      ++revision;
      auto [it, inserted] = model.try_emplace(key, ModelEntry{value, revision, revision});
      if (!inserted) it->second = {value, it->second.create_revision, revision};
    } else if (op < 6) {  // PutIfAbsent
      std::string value = RandomBytes(rng, rng() % 40);
      auto created = etcd.PutIfAbsent(key, value);
      ASSERT_TRUE(created.ok()) << created.status().ToString();
      EXPECT_EQ(*created, !model.contains(key)) << "step " << step;
      if (!model.contains(key)) model[key] = {value, ++revision, revision};
    } else if (op < 8) {  // Delete (of a present or absent key)
      ASSERT_TRUE(etcd.Delete(key).ok());
      if (model.erase(key) > 0) ++revision;
    } else if (op < 9) {  // DeletePrefix of the key's first 1..3 bytes after the prefix
      std::string sub = key.substr(0, prefix.size() + 1 + rng() % 3);
      ASSERT_TRUE(etcd.DeletePrefix(sub).ok());
      size_t erased = std::erase_if(model, [&](const auto& e) { return e.first.starts_with(sub); });
      if (erased > 0) ++revision;
    } else {  // Get
      auto got = etcd.Get(key);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      auto it = model.find(key);
      ASSERT_EQ(got->has_value(), it != model.end()) << "step " << step;
      if (it != model.end()) {
        EXPECT_EQ((*got)->key, key);
        EXPECT_EQ((*got)->value, it->second.value);
        EXPECT_EQ((*got)->create_revision, it->second.create_revision);
        EXPECT_EQ((*got)->mod_revision, it->second.mod_revision);
        EXPECT_EQ((*got)->lease, 0);
      }
    }
    if (step % 10 == 9 || step == 299) {
      int64_t read_revision = 0;
      auto listed = etcd.GetPrefix(prefix, &read_revision);
      ASSERT_TRUE(listed.ok()) << listed.status().ToString();
      EXPECT_EQ(read_revision, revision) << "step " << step;
      ASSERT_EQ(listed->size(), model.size()) << "step " << step;
      auto it = model.begin();
      for (const KeyValue& kv : *listed) {  // in key order, with every field
        EXPECT_EQ(kv.key, it->first);
        EXPECT_EQ(kv.value, it->second.value);
        EXPECT_EQ(kv.create_revision, it->second.create_revision);
        EXPECT_EQ(kv.mod_revision, it->second.mod_revision);
        ++it;
      }
    }
  }
  ASSERT_TRUE(etcd.DeletePrefix(prefix).ok());
  auto listed = etcd.GetPrefix(prefix);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  auto kept = etcd.Get(outside);
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE(kept->has_value());
  EXPECT_EQ((*kept)->value, "outside");
}

TEST_F(EtcdTest, BinaryLargeAndEmptyValuesRoundTrip) {
  EtcdClient etcd("127.0.0.1:" + endpoint_.substr(endpoint_.rfind(':') + 1) + "/");
  EXPECT_EQ(etcd.endpoint(), endpoint_);
  std::mt19937_64 rng(7);
  const std::map<std::string, std::string> want = {
      {std::string("/bin/\0\xff", 7), std::string("\0\xff", 2)},
      {"/bin/empty", ""},
      {"/bin/large", RandomBytes(rng, 100 * 1024)},
      {"/bin/one", "x"},
      {std::string("/bin/\xff\xff", 7), RandomBytes(rng, 1000)},
      {"/bin/two", "xy"},
  };
  for (const auto& [key, value] : want) ASSERT_TRUE(etcd.Put(key, value).ok()) << key;
  for (const auto& [key, value] : want) {
    auto got = etcd.Get(key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(got->has_value());
    EXPECT_EQ((*got)->value, value);
  }
  auto listed = etcd.GetPrefix("/bin/");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(AsMap(*listed), want);
  ASSERT_EQ(listed->size(), want.size());
  EXPECT_EQ(listed->back().key, std::string("/bin/\xff\xff", 7));  // bytes compare unsigned

  // A prefix ending in 0xff bytes, and the empty prefix (every key).
  auto ff = etcd.GetPrefix(std::string("/bin/\xff", 6));
  ASSERT_TRUE(ff.ok());
  ASSERT_EQ(ff->size(), 1u);
  EXPECT_EQ((*ff)[0].key, std::string("/bin/\xff\xff", 7));
  auto all = etcd.GetPrefix("");
  ASSERT_TRUE(all.ok());
  std::map<std::string, std::string> all_map = AsMap(*all);
  for (const auto& [key, value] : want) EXPECT_EQ(all_map[key], value);
  for (size_t i = 1; i < all->size(); ++i) EXPECT_LT((*all)[i - 1].key, (*all)[i].key);

  auto missing = etcd.Get("/bin/missing");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  EXPECT_EQ(etcd.Put("", "v").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(etcd.DeletePrefix("/bin/").ok());
  listed = etcd.GetPrefix("/bin/");
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

TEST_F(EtcdTest, PutIfAbsentCreatesOnce) {
  EtcdClient etcd(endpoint_);
  ASSERT_TRUE(etcd.Delete("/once").ok());
  auto first = etcd.PutIfAbsent("/once", "first");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(*first);
  auto second = etcd.PutIfAbsent("/once", "second");
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);
  auto got = etcd.Get("/once");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->value, "first");
  ASSERT_TRUE(etcd.Delete("/once").ok());
  ASSERT_TRUE(etcd.Delete("/once").ok());  // deleting an absent key is fine
  auto third = etcd.PutIfAbsent("/once", "third");
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(*third);
}

// The election (cluster/election.h): one holder at a time; epochs grow; writes guarded by the
// leader key fail for an earlier epoch; a holder whose lease is gone learns it (on_lost).
TEST_F(EtcdTest, ElectionHasOneHolderAndGrowingEpochs) {
  auto etcd = std::make_shared<EtcdClient>(endpoint_);
  ASSERT_TRUE(etcd->DeletePrefix("/elect/").ok());
  // A 2 s TTL: renewals every 666 ms, a term lost after 1 s without one (a loaded machine must
  // not lose it spuriously).
  Election a(etcd, "/elect/leader", 2), b(etcd, "/elect/leader", 2);
  std::atomic<int> a_lost{0}, b_lost{0};
  auto ea = a.Campaign("a", [&] { ++a_lost; });
  ASSERT_TRUE(ea.ok() && ea->has_value()) << ea.status().ToString();
  auto eb = b.Campaign("b", [&] { ++b_lost; });
  ASSERT_TRUE(eb.ok());
  EXPECT_FALSE(eb->has_value());
  EXPECT_TRUE(a.held());
  EXPECT_FALSE(b.held());
  auto holder = b.Holder();
  ASSERT_TRUE(holder.ok() && holder->has_value());
  EXPECT_EQ((*holder)->value, "a");
  EXPECT_EQ((*holder)->create_revision, **ea);
  auto put = etcd->PutIfGuard("/elect/insync", "by a", "/elect/leader", **ea);
  ASSERT_TRUE(put.ok() && *put);
  put = etcd->PutIfGuard("/elect/insync", "wrong epoch", "/elect/leader", **ea + 1);
  ASSERT_TRUE(put.ok());
  EXPECT_FALSE(*put);
  std::this_thread::sleep_for(milliseconds(2500));  // past the TTL: kept alive
  EXPECT_TRUE(a.held());
  EXPECT_EQ(a_lost.load(), 0);

  a.Resign();
  EXPECT_FALSE(a.held());
  eb = b.Campaign("b", [&] { ++b_lost; });
  ASSERT_TRUE(eb.ok() && eb->has_value()) << eb.status().ToString();
  EXPECT_GT(**eb, **ea);
  put = etcd->PutIfGuard("/elect/insync", "by a, deposed", "/elect/leader", **ea);
  ASSERT_TRUE(put.ok());
  EXPECT_FALSE(*put);
  auto insync = etcd->Get("/elect/insync");
  ASSERT_TRUE(insync.ok() && insync->has_value());
  EXPECT_EQ((*insync)->value, "by a");

  // b's lease revoked behind its back: it learns at its next renewal.
  holder = a.Holder();
  ASSERT_TRUE(holder.ok() && holder->has_value());
  ASSERT_TRUE(etcd->LeaseRevoke((*holder)->lease).ok());
  const auto start = Clock::now();
  while (b_lost.load() == 0 && MillisSince(start) < 5000)
    std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(b_lost.load(), 1);
  EXPECT_FALSE(b.held());
  ea = a.Campaign("a", [&] { ++a_lost; });
  ASSERT_TRUE(ea.ok() && ea->has_value());
  EXPECT_GT(**ea, **eb);
}

// A holder that cannot renew for half its TTL (etcd stopped) is suspended, keeps renewing, and
// resumes when a renewal succeeds: the lease never went away, so neither did its term
// (docs/logstore-ha.md). A 10 s TTL: renewals every 3.3 s, suspended 5 s after the last one,
// while the lease lasts at least 6.7 s after etcd stopped.
TEST_F(EtcdTest, AHolderThatCannotRenewIsSuspendedAndResumes) {
  auto etcd = std::make_shared<EtcdClient>(endpoint_, milliseconds(300));
  ASSERT_TRUE(etcd->DeletePrefix("/suspend/").ok());
  Election a(etcd, "/suspend/leader", 10);
  std::atomic<int> lost{0}, suspended{0}, resumed{0};
  auto ea = a.Campaign(
      "a", [&] { ++lost; }, [&](bool on) { ++(on ? suspended : resumed); });
  ASSERT_TRUE(ea.ok() && ea->has_value()) << ea.status().ToString();
  ASSERT_EQ(kill(pid_, SIGSTOP), 0);
  const auto start = Clock::now();
  while (suspended.load() == 0 && MillisSince(start) < 8000) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(kill(pid_, SIGCONT), 0);
  EXPECT_EQ(suspended.load(), 1);
  EXPECT_GE(MillisSince(start), 1500);  // not before half the TTL could have passed
  const auto resume = Clock::now();
  while (resumed.load() == 0 && lost.load() == 0 && MillisSince(resume) < 5000) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(resumed.load(), 1);
  EXPECT_EQ(lost.load(), 0);
  EXPECT_TRUE(a.held());
  auto holder = a.Holder();
  ASSERT_TRUE(holder.ok() && holder->has_value());
  EXPECT_EQ((*holder)->value, "a");
  EXPECT_EQ((*holder)->create_revision, **ea);

  // The lease revoked behind its back: the term is over at the next renewal (etcd says so).
  ASSERT_TRUE(etcd->LeaseRevoke((*holder)->lease).ok());
  const auto revoked = Clock::now();
  while (lost.load() == 0 && MillisSince(revoked) < 8000) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(lost.load(), 1);
  EXPECT_FALSE(a.held());
}

// Two leases of the minimum TTL: one left alone (its key must vanish soon after the TTL, not
// before), one kept alive well past its TTL (its key must stay), then revoked (key gone at once).
TEST_F(EtcdTest, LeasesExpireUnlessKeptAlive) {
  EtcdClient etcd(endpoint_);
  const auto start = Clock::now();
  int64_t ttl_a = 0, ttl_b = 0;
  auto a = etcd.LeaseGrant(1, &ttl_a);
  auto b = etcd.LeaseGrant(1, &ttl_b);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_NE(*a, *b);
  EXPECT_EQ(ttl_a, 1);  // the minimum for the election timeout this test's etcd runs with
  ASSERT_TRUE(etcd.Put("/lease/a", "a", *a).ok());
  ASSERT_TRUE(etcd.Put("/lease/b", "b", *b).ok());
  auto got_b = etcd.Get("/lease/b");
  ASSERT_TRUE(got_b.ok() && got_b->has_value());
  EXPECT_EQ((*got_b)->lease, *b);

  int64_t a_gone_ms = -1;
  while (MillisSince(start) < (ttl_b + 1) * 1000 + 500) {
    ASSERT_TRUE(etcd.LeaseKeepAlive(*b).ok());
    auto got = etcd.GetPrefix("/lease/");
    ASSERT_TRUE(got.ok());
    auto kvs = AsMap(*got);
    EXPECT_TRUE(kvs.contains("/lease/b")) << "kept-alive key gone after " << MillisSince(start);
    if (!kvs.contains("/lease/a") && a_gone_ms < 0) a_gone_ms = MillisSince(start);
    std::this_thread::sleep_for(milliseconds(200));
  }
  ASSERT_GE(a_gone_ms, 0) << "key of an expired lease still present";
  EXPECT_GE(a_gone_ms, ttl_a * 1000 - 100);
  EXPECT_LE(a_gone_ms, ttl_a * 1000 + 1500);
  EXPECT_EQ(etcd.LeaseKeepAlive(*a).code(), StatusCode::kNotFound);

  ASSERT_TRUE(etcd.LeaseRevoke(*b).ok());
  auto after = etcd.Get("/lease/b");
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value());
  Status keepalive = etcd.LeaseKeepAlive(*b);
  EXPECT_EQ(keepalive.code(), StatusCode::kNotFound) << keepalive.ToString();
  EXPECT_TRUE(etcd.LeaseRevoke(*b).ok());  // already gone
  EXPECT_EQ(etcd.Put("/lease/c", "c", *b).code(), StatusCode::kNotFound);
  EXPECT_EQ(etcd.LeaseGrant(0).status().code(), StatusCode::kInvalidArgument);
}

struct SeenEvent {
  WatchEvent::Type type;
  std::string key;
  std::string value;
  bool operator==(const SeenEvent&) const = default;
};

std::ostream& operator<<(std::ostream& out, const SeenEvent& e) {
  return out << (e.type == WatchEvent::Type::kPut ? "PUT " : "DELETE ") << e.key << "=" << e.value;
}

TEST_F(EtcdTest, WatchSeesPutsAndDeletesInOrder) {
  EtcdClient etcd(endpoint_);
  int64_t revision = 0;
  ASSERT_TRUE(etcd.GetPrefix("/w/", &revision).ok());

  std::mutex mu;
  std::vector<SeenEvent> seen;
  std::vector<int64_t> revisions;
  std::atomic<bool> cancel{false};
  Status watch_status;
  std::thread watcher([&] {
    watch_status = etcd.Watch(
        "/w/", revision + 1,
        [&](const std::vector<WatchEvent>& events) {
          std::lock_guard lock(mu);
          for (const WatchEvent& e : events) {
            seen.push_back({e.type, e.kv.key, e.kv.value});
            revisions.push_back(e.kv.mod_revision);
          }
          return true;
        },
        cancel);
  });
  const std::string large(50 * 1024, '\xfe');
  ASSERT_TRUE(etcd.Put("/w/a", "1").ok());
  ASSERT_TRUE(etcd.Put("/x/outside", "never seen").ok());
  ASSERT_TRUE(etcd.Put("/w/b", std::string("\0\xff\n", 3)).ok());
  ASSERT_TRUE(etcd.Put("/w/a", "2").ok());
  ASSERT_TRUE(etcd.Delete("/w/a").ok());
  ASSERT_TRUE(etcd.Put("/w/c", large).ok());
  ASSERT_TRUE(etcd.DeletePrefix("/w/").ok());
  const std::vector<SeenEvent> want = {
      {WatchEvent::Type::kPut, "/w/a", "1"},
      {WatchEvent::Type::kPut, "/w/b", std::string("\0\xff\n", 3)},
      {WatchEvent::Type::kPut, "/w/a", "2"},
      {WatchEvent::Type::kDelete, "/w/a", ""},
      {WatchEvent::Type::kPut, "/w/c", large},
      {WatchEvent::Type::kDelete, "/w/b", ""},
      {WatchEvent::Type::kDelete, "/w/c", ""},
  };
  const auto start = Clock::now();
  while (MillisSince(start) < 5000) {
    {
      std::lock_guard lock(mu);
      if (seen.size() >= want.size()) break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  std::this_thread::sleep_for(milliseconds(100));  // nothing more may arrive
  const auto cancelled = Clock::now();
  cancel = true;
  watcher.join();
  EXPECT_LT(MillisSince(cancelled), 500) << "Watch did not return promptly when cancelled";
  EXPECT_TRUE(watch_status.ok()) << watch_status.ToString();
  EXPECT_EQ(seen, want);
  // Revisions: the first write after `revision` (the outside put took one), DeletePrefix's two
  // deletes share one revision.
  ASSERT_EQ(revisions.size(), want.size());
  EXPECT_EQ(revisions, (std::vector<int64_t>{revision + 1, revision + 3, revision + 4, revision + 5,
                                             revision + 6, revision + 7, revision + 7}));

  // Replaying history from a start revision; on_events returning false ends the watch.
  std::vector<SeenEvent> replayed;
  std::atomic<bool> never{false};
  Status replay = etcd.Watch(
      "/w/", revision + 4,
      [&](const std::vector<WatchEvent>& events) {
        for (const WatchEvent& e : events) replayed.push_back({e.type, e.kv.key, e.kv.value});
        return replayed.size() < 5;  // all there is; the watch would wait for more
      },
      never);
  EXPECT_TRUE(replay.ok()) << replay.ToString();
  EXPECT_EQ(replayed, std::vector<SeenEvent>(want.begin() + 2, want.end()));
}

TEST_F(EtcdTest, IdleWatchReturnsPromptlyWhenCancelled) {
  EtcdClient etcd(endpoint_);
  std::atomic<bool> cancel{false};
  int calls = 0;
  Clock::time_point cancelled;
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(300));
    cancelled = Clock::now();
    cancel = true;
  });
  Status s = etcd.Watch(
      "/idle/", 0,
      [&](const std::vector<WatchEvent>&) {
        ++calls;
        return true;
      },
      cancel);
  const int64_t late_ms = MillisSince(cancelled);
  canceller.join();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(calls, 0);
  EXPECT_LT(late_ms, 250);
}

// Several threads share one client: puts, gets and prefix reads of distinct keys, and a watch.
TEST_F(EtcdTest, ConcurrentCallsOnOneClient) {
  EtcdClient etcd(endpoint_);
  ASSERT_TRUE(etcd.DeletePrefix("/conc/").ok());
  constexpr int kThreads = 4, kKeysPerThread = 40;
  std::atomic<int> watched{0};
  std::atomic<bool> cancel{false};
  std::thread watcher([&] {
    Status s = etcd.Watch(
        "/conc/", 0,
        [&](const std::vector<WatchEvent>& events) {
          watched += static_cast<int>(events.size());
          return true;
        },
        cancel);
    EXPECT_TRUE(s.ok()) << s.ToString();
  });
  std::this_thread::sleep_for(milliseconds(200));  // let the watch start
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int i = 0; i < kKeysPerThread; ++i) {
        std::string key = "/conc/" + std::to_string(t) + "/" + std::to_string(i);
        std::string value = RandomBytes(rng, rng() % 200);
        EXPECT_TRUE(etcd.Put(key, value).ok());
        auto got = etcd.Get(key);
        ASSERT_TRUE(got.ok() && got->has_value()) << key;
        EXPECT_EQ((*got)->value, value);
        auto listed = etcd.GetPrefix("/conc/" + std::to_string(t) + "/");
        ASSERT_TRUE(listed.ok());
        EXPECT_EQ(listed->size(), static_cast<size_t>(i + 1));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const auto start = Clock::now();
  while (watched < kThreads * kKeysPerThread && MillisSince(start) < 5000) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  cancel = true;
  watcher.join();
  EXPECT_EQ(watched, kThreads * kKeysPerThread);
  auto all = etcd.GetPrefix("/conc/");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), static_cast<size_t>(kThreads * kKeysPerThread));
}

// --- Without etcd ---

TEST(EtcdOfflineTest, NothingListeningIsUnavailableFast) {
  const int port = FreePort();
  ASSERT_NE(port, 0);
  EtcdClient etcd("127.0.0.1:" + std::to_string(port));
  const auto start = Clock::now();
  Status put = etcd.Put("k", "v");
  EXPECT_EQ(put.code(), StatusCode::kUnavailable) << put.ToString();
  EXPECT_NE(put.message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << put.message();
  EXPECT_EQ(etcd.Get("k").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(etcd.GetPrefix("k").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(etcd.LeaseGrant(5).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(etcd.LeaseKeepAlive(1).code(), StatusCode::kUnavailable);
  std::atomic<bool> cancel{false};
  Status watch = etcd.Watch(
      "k", 0, [](const std::vector<WatchEvent>&) { return true; }, cancel);
  EXPECT_EQ(watch.code(), StatusCode::kUnavailable) << watch.ToString();
  EXPECT_LT(MillisSince(start), 1000);
}

TEST(EtcdOfflineTest, SilentPeerIsDeadlineExceeded) {
  BoundSocket silent(/*listen_backlog=*/8);  // the kernel accepts; nobody ever answers
  ASSERT_NE(silent.port, 0);
  EtcdClient etcd("127.0.0.1:" + std::to_string(silent.port), milliseconds(300));
  const auto start = Clock::now();
  Status put = etcd.Put("k", "v");
  const int64_t elapsed = MillisSince(start);
  EXPECT_EQ(put.code(), StatusCode::kDeadlineExceeded) << put.ToString();
  EXPECT_GE(elapsed, 250);
  EXPECT_LT(elapsed, 1500);
  // A watch on it waits for data but still honours cancel.
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(200));
    cancel = true;
  });
  Status watch = etcd.Watch(
      "k", 0, [](const std::vector<WatchEvent>&) { return true; }, cancel);
  canceller.join();
  EXPECT_TRUE(watch.ok()) << watch.ToString();
}

// Answers every connection with an HTTP response, the same canned one or what `answer` makes of
// the request, until destroyed.
class FakeServer {
 public:
  explicit FakeServer(std::string response)
      : FakeServer([response](const std::string&) { return response; }) {}
  explicit FakeServer(std::function<std::string(const std::string& request)> answer)
      : socket_(/*listen_backlog=*/8), answer_(std::move(answer)), thread_([this] { Run(); }) {}
  ~FakeServer() {
    stop_ = true;
    thread_.join();
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(socket_.port); }

 private:
  void Run() {
    while (!stop_) {
      pollfd p{socket_.fd, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int conn = accept(socket_.fd, nullptr, nullptr);
      if (conn < 0) continue;
      // Read the whole request (so that closing does not reset the connection), answer, close.
      char buffer[65536];
      std::string request;
      size_t want = std::string::npos;
      while (request.size() < want) {
        ssize_t n = read(conn, buffer, sizeof(buffer));
        if (n <= 0) break;
        request.append(buffer, static_cast<size_t>(n));
        size_t head_end = request.find("\r\n\r\n");
        size_t length_at = request.find("Content-Length: ");
        if (head_end != std::string::npos && length_at != std::string::npos) {
          want = head_end + 4 + std::stoul(request.substr(length_at + 16));
        }
      }
      const std::string response = answer_(request);
      ssize_t ignored = write(conn, response.data(), response.size());
      (void)ignored;
      close(conn);
    }
  }

  BoundSocket socket_;
  std::function<std::string(const std::string&)> answer_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::string HttpResponse(const std::string& status_line, const std::string& body) {
  return "HTTP/1.1 " + status_line +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

TEST(EtcdOfflineTest, ReplyMapping) {
  {  // Not JSON: INTERNAL quoting the body.
    FakeServer server(HttpResponse("200 OK", "<html>not etcd</html>"));
    EtcdClient etcd(server.endpoint());
    auto got = etcd.Get("k");
    EXPECT_EQ(got.status().code(), StatusCode::kInternal);
    EXPECT_NE(got.status().message().find("not etcd"), std::string::npos);
    EXPECT_EQ(etcd.LeaseGrant(5).status().code(), StatusCode::kInternal);
  }
  {  // JSON of the wrong shape: INTERNAL, no exception.
    FakeServer server(HttpResponse("200 OK", R"({"header":{"revision":[1]},"kvs":"x"})"));
    EtcdClient etcd(server.endpoint());
    EXPECT_EQ(etcd.Get("k").status().code(), StatusCode::kInternal);
    EXPECT_EQ(etcd.GetPrefix("k").status().code(), StatusCode::kInternal);
    EXPECT_EQ(etcd.LeaseKeepAlive(1).code(), StatusCode::kInternal);
  }
  {  // Invalid base64 in a key: INTERNAL.
    FakeServer server(HttpResponse("200 OK", R"({"header":{},"kvs":[{"key":"!!!"}]})"));
    EtcdClient etcd(server.endpoint());
    EXPECT_EQ(etcd.Get("k").status().code(), StatusCode::kInternal);
  }
  {  // Member ids are uint64 (written as strings); a member not started has no name.
    FakeServer server(HttpResponse(
        "200 OK", R"({"header":{},"members":[{"ID":"18446744073709551615","name":"m0",)"
                  R"("peerURLs":["http://a:2380"],"clientURLs":["http://a:2379"]},)"
                  R"({"ID":"7","peerURLs":["http://b:2380"]}]})"));
    EtcdClient etcd(server.endpoint());
    auto members = etcd.MemberList();
    ASSERT_TRUE(members.ok()) << members.status().ToString();
    ASSERT_EQ(members->size(), 2u);
    EXPECT_EQ((*members)[0].id, 18446744073709551615ull);
    EXPECT_EQ((*members)[0].name, "m0");
    EXPECT_EQ((*members)[0].client_urls, std::vector<std::string>{"http://a:2379"});
    EXPECT_EQ((*members)[1].id, 7u);
    EXPECT_EQ((*members)[1].name, "");
    EXPECT_TRUE((*members)[1].client_urls.empty());
  }
  {  // A member list of the wrong shape: INTERNAL.
    FakeServer server(HttpResponse("200 OK", R"({"members":[{"ID":"-3"}]})"));
    EtcdClient etcd(server.endpoint());
    EXPECT_EQ(etcd.MemberList().status().code(), StatusCode::kInternal);
  }
  {  // etcd's own errors keep their gRPC meaning.
    FakeServer server(HttpResponse(
        "503 Service Unavailable",
        R"({"error":"etcdserver: no leader","message":"etcdserver: no leader","code":14})"));
    EtcdClient etcd(server.endpoint());
    Status s = etcd.Put("k", "v");
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_NE(s.message().find("no leader"), std::string::npos) << s.message();
  }
  {  // Watch frames: an event batch, then the server closes: events delivered, then UNAVAILABLE.
    FakeServer server(
        HttpResponse("200 OK",
                     "{\"result\":{\"header\":{},\"created\":true}}\n"
                     "{\"result\":{\"header\":{},\"events\":[{\"kv\":{\"key\":\"aw==\","
                     "\"value\":\"AP8=\",\"mod_revision\":\"7\"}},{\"type\":\"DELETE\","
                     "\"kv\":{\"key\":\"aw==\",\"mod_revision\":\"8\"}}]}}\n"));
    EtcdClient etcd(server.endpoint());
    std::vector<WatchEvent> seen;
    std::atomic<bool> cancel{false};
    Status s = etcd.Watch(
        "k", 0,
        [&](const std::vector<WatchEvent>& events) {
          seen.insert(seen.end(), events.begin(), events.end());
          return true;
        },
        cancel);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0].type, WatchEvent::Type::kPut);
    EXPECT_EQ(seen[0].kv.key, "k");
    EXPECT_EQ(seen[0].kv.value, std::string("\0\xff", 2));
    EXPECT_EQ(seen[0].kv.mod_revision, 7);
    EXPECT_EQ(seen[1].type, WatchEvent::Type::kDelete);
    EXPECT_EQ(seen[1].kv.mod_revision, 8);
  }
  {  // A compacted start revision: INVALID_ARGUMENT (retrying the same revision cannot help).
    FakeServer server(HttpResponse("200 OK",
                                   "{\"result\":{\"header\":{},\"created\":true,\"canceled\":true,"
                                   "\"compact_revision\":\"5\"}}\n"));
    EtcdClient etcd(server.endpoint());
    std::atomic<bool> cancel{false};
    Status s = etcd.Watch(
        "k", 2, [](const std::vector<WatchEvent>&) { return true; }, cancel);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("compacted"), std::string::npos) << s.message();
  }
  {  // An error frame inside a 200 stream keeps its gRPC meaning.
    FakeServer server(HttpResponse(
        "200 OK", R"({"error":{"grpc_code":14,"http_code":503,"message":"no leader"}})"));
    EtcdClient etcd(server.endpoint());
    std::atomic<bool> cancel{false};
    Status s = etcd.Watch(
        "k", 0, [](const std::vector<WatchEvent>&) { return true; }, cancel);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    EXPECT_NE(s.message().find("no leader"), std::string::npos) << s.message();
    EXPECT_EQ(etcd.LeaseKeepAlive(1).code(), StatusCode::kUnavailable);
  }
  {  // A bare 502 from something in between: UNAVAILABLE.
    FakeServer server("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\n\r\nbad");
    EtcdClient etcd(server.endpoint());
    EXPECT_EQ(etcd.Put("k", "v").code(), StatusCode::kUnavailable);
    std::atomic<bool> cancel{false};
    EXPECT_EQ(etcd.Watch(
                      "k", 0, [](const std::vector<WatchEvent>&) { return true; }, cancel)
                  .code(),
              StatusCode::kUnavailable);
  }
}

// Three members on loopback; a client given all three keeps working, and a watch keeps
// delivering, when the member it was using is killed (the cluster keeps its quorum).
// A registration whose lease expired gets a new one; when the put of its entry under the new lease
// fails (a partition let the grant through, not the put), the entry is put at a later refresh. A
// lease kept alive with no entry left the member out of the map for good (jepsen_netns_test: a
// replica never served again).
TEST(EtcdOfflineTest, ARegistrationPutsItsEntryAgainAfterAFailedPutUnderANewLease) {
  std::mutex mu;
  int64_t next_lease = 1;
  int64_t expired = 0;              // the lease keep-alives report as expired
  int failing_puts = 0;             // puts still to refuse
  std::vector<int64_t> put_leases;  // the lease of every put that went through
  int kept_2 = 0;                   // keep-alives of lease 2
  FakeServer etcd([&](const std::string& request) {
    std::lock_guard lock(mu);
    const std::string ok = "200 OK";
    const size_t body_at = request.find("\r\n\r\n");
    const auto body = nlohmann::json::parse(
        body_at == std::string::npos ? "{}" : request.substr(body_at + 4), nullptr, false);
    if (request.rfind("POST /v3/lease/grant ", 0) == 0) {
      return HttpResponse(ok, R"({"ID":")" + std::to_string(next_lease++) + R"(","TTL":"1"})");
    }
    if (request.rfind("POST /v3/lease/keepalive ", 0) == 0) {
      const std::string id = body.is_object() ? body.value("ID", "") : "";
      if (id == "2") ++kept_2;
      const bool gone = id == std::to_string(expired);
      return HttpResponse(ok, gone ? R"({"result":{"ID":"1"}})" : R"({"result":{"TTL":"1"}})");
    }
    if (request.rfind("POST /v3/kv/put ", 0) == 0) {
      if (failing_puts > 0) {
        --failing_puts;
        // A deadline, as when the put is lost in a partition (the client does not retry it).
        return HttpResponse(
            "504 Gateway Timeout",
            R"({"error":"context deadline exceeded","message":"context deadline exceeded","code":4})");
      }
      put_leases.push_back(std::stoll(body.is_object() ? body.value("lease", "0") : "0"));
      return HttpResponse(ok, R"({"header":{}})");
    }
    return HttpResponse(ok, "{}");  // revoke
  });
  MemberInfo info;
  info.name = "shard-0";
  info.role = "shard";
  auto registration =
      Registration::Start(std::make_shared<EtcdClient>(etcd.endpoint()), "/zipg/t/", info, 1);
  ASSERT_TRUE(registration.ok()) << registration.status().ToString();
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(put_leases, std::vector<int64_t>{1});
    expired = 1;               // lease 1 lapses...
    failing_puts = 1'000'000;  // ...and puts fail for a while
  }
  // Lease 2 granted, its put given up (the client retries for up to 5 s), and lease 2 kept alive
  // while no put gets through.
  const auto granted = Clock::now() + std::chrono::seconds(15);
  while (Clock::now() < granted) {
    {
      std::lock_guard lock(mu);
      if (kept_2 >= 2) break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  {
    std::lock_guard lock(mu);
    ASSERT_GE(kept_2, 2) << "lease 2 was not kept alive";
    ASSERT_EQ(next_lease, 3) << "more leases than two were granted";
    failing_puts = 0;  // the partition heals
  }
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < until) {
    {
      std::lock_guard lock(mu);
      if (put_leases.size() >= 2) break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  std::lock_guard lock(mu);
  EXPECT_EQ(put_leases, (std::vector<int64_t>{1, 2})) << "the entry was not put under lease 2";
}

// At the end of a test with several etcd processes: kills those still listed and removes `dir`.
struct EtcdCleanup {
  std::vector<pid_t>* pids;
  std::string dir;
  ~EtcdCleanup() {
    for (pid_t p : *pids) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

TEST(EtcdClusterTest, ClientsSurviveTheLossOfAMember) {
  char dir_template[] = "/tmp/zipg_etcd_cluster_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  std::vector<std::string> client_urls, peer_urls;
  for (int i = 0; i < 3; ++i) {
    client_urls.push_back("http://127.0.0.1:" + std::to_string(FreePort()));
    peer_urls.push_back("http://127.0.0.1:" + std::to_string(FreePort()));
  }
  std::string initial;
  for (int i = 0; i < 3; ++i) {
    initial += (i ? "," : "") + std::string("m") + std::to_string(i) + "=" + peer_urls[i];
  }
  std::vector<pid_t> pids;
  for (int i = 0; i < 3; ++i) {
    const std::string name = "m" + std::to_string(i);
    pids.push_back(SpawnEtcd(
        {kEtcdBinary, "--name=" + name, "--data-dir=" + dir + "/" + name,
         "--listen-client-urls=" + client_urls[i], "--advertise-client-urls=" + client_urls[i],
         "--listen-peer-urls=" + peer_urls[i], "--initial-advertise-peer-urls=" + peer_urls[i],
         "--initial-cluster=" + initial, "--initial-cluster-state=new", "--heartbeat-interval=100",
         "--election-timeout=500"},
        dir + "/" + name + ".log"));
    ASSERT_GT(pids.back(), 0);
  }
  EtcdCleanup cleanup{&pids, dir};

  EtcdClient etcd(client_urls[0] + "," + client_urls[1] + "," + client_urls[2], milliseconds(500));
  EXPECT_EQ(etcd.endpoint(), client_urls[0]);
  EXPECT_EQ(etcd.endpoints(), client_urls[0] + "," + client_urls[1] + "," + client_urls[2]);
  const auto start = Clock::now();
  while (!etcd.Put("/c/ready", "1").ok()) {
    ASSERT_LT(MillisSince(start), 20000) << "the 3-member cluster did not form:\n"
                                         << ReadLog(dir + "/m0.log");
    std::this_thread::sleep_for(milliseconds(100));
  }
  // A watcher as ClusterView runs one: on a broken stream, retry from the next revision.
  std::mutex mu;
  std::map<std::string, std::string> seen;
  std::atomic<bool> cancel{false};
  int64_t revision = 0;
  ASSERT_TRUE(etcd.GetPrefix("/c/", &revision).ok());
  std::thread watcher([&] {
    int64_t next = revision + 1;
    while (!cancel.load()) {
      Status s = etcd.Watch(
          "/c/k", next,
          [&](const std::vector<WatchEvent>& events) {
            std::lock_guard lock(mu);
            for (const auto& e : events) {
              seen[e.kv.key] = e.kv.value;
              next = e.kv.mod_revision + 1;
            }
            return true;
          },
          cancel);
      if (!s.ok()) std::this_thread::sleep_for(milliseconds(50));
    }
  });
  auto lease = etcd.LeaseGrant(3);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  std::map<std::string, std::string> want;
  for (int i = 0; i < 200; ++i) {
    if (i == 100) {  // the member every call has used so far
      kill(pids[0], SIGKILL);
      waitpid(pids[0], nullptr, 0);
      pids.erase(pids.begin());
    }
    const std::string key = "/c/k" + std::to_string(i);
    Status put = etcd.Put(key, "v" + std::to_string(i), i % 2 ? *lease : 0);
    ASSERT_TRUE(put.ok()) << "put " << i << ": " << put.ToString() << "\nmember logs:\n"
                          << ReadLog(dir + "/m1.log") << ReadLog(dir + "/m2.log");
    want[key] = "v" + std::to_string(i);
    if (i % 20 == 0) {
      Status renewed = etcd.LeaseKeepAlive(*lease);
      ASSERT_TRUE(renewed.ok()) << i << ": " << renewed.ToString();
    }
  }
  EXPECT_NE(etcd.endpoint(), client_urls[0]);
  auto listed = etcd.GetPrefix("/c/k");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(AsMap(*listed), want);
  const auto wait_start = Clock::now();
  while (MillisSince(wait_start) < 10000) {
    {
      std::lock_guard lock(mu);
      if (seen == want) break;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  cancel = true;
  watcher.join();
  std::lock_guard lock(mu);
  EXPECT_EQ(seen, want) << "the watch missed events across the member's loss";
}

// The member API as `zipg deploy add-host` and `remove-host` use it: a member added to a
// one-member cluster and started with --initial-cluster-state existing joins (and is listed with
// its name and client URL once it runs), the cluster serves on both, and removing it leaves the
// first member serving alone; removing an unknown member is NOT_FOUND.
TEST(EtcdClusterTest, MembersAreAddedAndRemovedThroughTheMemberApi) {
  ASSERT_EQ(access(kEtcdBinary, X_OK), 0) << kEtcdBinary << " is not installed";
  char dir_template[] = "/tmp/zipg_etcd_member_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  std::vector<std::string> client_urls, peer_urls;
  for (int i = 0; i < 2; ++i) {
    client_urls.push_back("http://127.0.0.1:" + std::to_string(FreePort()));
    peer_urls.push_back("http://127.0.0.1:" + std::to_string(FreePort()));
  }
  auto member_args = [&](int i, const std::string& initial, const std::string& state) {
    const std::string name = "m" + std::to_string(i);
    return std::vector<std::string>{kEtcdBinary,
                                    "--name=" + name,
                                    "--data-dir=" + dir + "/" + name,
                                    "--listen-client-urls=" + client_urls[i],
                                    "--advertise-client-urls=" + client_urls[i],
                                    "--listen-peer-urls=" + peer_urls[i],
                                    "--initial-advertise-peer-urls=" + peer_urls[i],
                                    "--initial-cluster=" + initial,
                                    "--initial-cluster-state=" + state,
                                    "--heartbeat-interval=100",
                                    "--election-timeout=500"};
  };
  std::vector<pid_t> pids;
  EtcdCleanup cleanup{&pids, dir};
  pids.push_back(SpawnEtcd(member_args(0, "m0=" + peer_urls[0], "new"), dir + "/m0.log"));
  EtcdClient etcd(client_urls[0], milliseconds(1000));
  const auto start = Clock::now();
  while (!etcd.Put("/m/ready", "1").ok()) {
    ASSERT_LT(MillisSince(start), 20000) << ReadLog(dir + "/m0.log");
    std::this_thread::sleep_for(milliseconds(100));
  }
  auto listed = etcd.MemberList();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "m0");
  EXPECT_EQ((*listed)[0].peer_urls, std::vector<std::string>{peer_urls[0]});
  EXPECT_EQ((*listed)[0].client_urls, std::vector<std::string>{client_urls[0]});
  const uint64_t first = (*listed)[0].id;

  auto added = etcd.MemberAdd({peer_urls[1]});
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_NE(added->id, first);
  EXPECT_EQ(added->name, "");  // not started yet
  EXPECT_EQ(added->peer_urls, std::vector<std::string>{peer_urls[1]});
  pids.push_back(SpawnEtcd(member_args(1, "m0=" + peer_urls[0] + ",m1=" + peer_urls[1], "existing"),
                           dir + "/m1.log"));
  // Joined: both named, and a write through the new member reads back through the first.
  EtcdClient second(client_urls[1], milliseconds(1000));
  while (!second.Put("/m/joined", "yes").ok()) {
    ASSERT_LT(MillisSince(start), 40000) << ReadLog(dir + "/m1.log");
    std::this_thread::sleep_for(milliseconds(100));
  }
  auto got = etcd.Get("/m/joined");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->value, "yes");
  listed = etcd.MemberList();
  ASSERT_TRUE(listed.ok());
  std::map<uint64_t, std::string> names;
  for (const auto& m : *listed) names[m.id] = m.name;
  EXPECT_EQ(names, (std::map<uint64_t, std::string>{{first, "m0"}, {added->id, "m1"}}));

  ASSERT_TRUE(etcd.MemberRemove(added->id).ok());
  listed = etcd.MemberList();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id, first);
  EXPECT_TRUE(etcd.Put("/m/after", "1").ok());  // a quorum of one again
  // The removed member stops by itself.
  bool exited = false;
  while (!exited && MillisSince(start) < 60000) {
    int status = 0;
    exited = waitpid(pids[1], &status, WNOHANG) == pids[1];
    if (!exited) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(exited) << "the removed member still runs";
  if (exited) pids.pop_back();

  Status unknown = etcd.MemberRemove(added->id);
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound) << unknown.ToString();
}

}  // namespace
}  // namespace zipg::cluster

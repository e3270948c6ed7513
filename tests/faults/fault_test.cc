// Disk faults injected into the write paths (docs/testing.md, "Fault injection"): the WAL, a
// shard's delta file (the update log a shard server applies), the LogStore's commits and
// compactions, and compress. Runs with the shim (tests/faults/shim.h) preloaded; each case arms
// one fault, drives the code through it and checks, against what was acknowledged:
//   - no acknowledged write is lost (a reopen replays it),
//   - nothing corrupt is served (a reopen replays only records that were written, in order),
//   - the failing call reports an error naming the file, and the object then either recovers
//     (a later call works) or refuses cleanly (every later call fails).

#include <dlfcn.h>
#include <errno.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "engine/delta.h"
#include "graph/compress.h"
#include "graph/graph.h"
#include "logstore/logstore.h"
#include "util/wal.h"
#include "shard/update_channel.h"
#include "tests/faults/shim.h"
#include "util/scratch_dir.h"

namespace zipg {
namespace {

namespace fs = std::filesystem;

// The shim's controls, found in the preloaded library.
struct Shim {
  decltype(&zipg_fault_arm) arm = nullptr;
  decltype(&zipg_fault_calls) calls = nullptr;
  decltype(&zipg_fault_injected) injected = nullptr;
};

const Shim& TheShim() {
  static const Shim shim = [] {
    Shim s;
    s.arm = reinterpret_cast<decltype(s.arm)>(dlsym(RTLD_DEFAULT, "zipg_fault_arm"));
    s.calls = reinterpret_cast<decltype(s.calls)>(dlsym(RTLD_DEFAULT, "zipg_fault_calls"));
    s.injected = reinterpret_cast<decltype(s.injected)>(dlsym(RTLD_DEFAULT, "zipg_fault_injected"));
    return s;
  }();
  return shim;
}

// Arms a fault for the lifetime of the object.
class Fault {
 public:
  // Fails the nth matching call (only that one) with `error` (-1: a short write).
  Fault(const char* op, const std::string& path, uint64_t nth, int error) {
    TheShim().arm(op, path.c_str(), nth, /*count=*/1, error);
  }
  ~Fault() { TheShim().arm(nullptr, nullptr, 0, 0, 0); }
  uint64_t injected() const { return TheShim().injected(); }
};

// One fault case: the operation, the call that fails, and how.
struct Case {
  const char* op;
  uint64_t nth;
  int error;  // errno, or -1: a short write
  std::string Name() const;
};

const char* ErrnoName(int error);
std::string Case::Name() const {
  return std::string(op) + "#" + std::to_string(nth) + " " + ErrnoName(error);
}

const std::vector<Case> kWriteCases = {
    {"any-write", 1, EIO}, {"any-write", 3, ENOSPC}, {"any-write", 2, -1},
    {"any-sync", 1, EIO},  {"any-sync", 4, EIO},
};

const char* ErrnoName(int error) {
  return error == -1 ? "short" : error == ENOSPC ? "ENOSPC" : error == ENOMEM ? "ENOMEM" : "EIO";
}

// One line per case for the test log (docs/testing.md lists the outcomes).
void Report(const std::string& what, size_t tried, size_t acked, size_t replayed) {
  std::cout << "fault " << what << ": " << tried << " tried, " << acked << " acknowledged, "
            << replayed << " after reopen\n";
}

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(TheShim().arm, nullptr) << "the fault shim is not preloaded (LD_PRELOAD)";
  }
};

// Replays the WAL at `path`.
std::vector<std::string> ReplayWal(const std::string& path) {
  std::vector<std::string> got;
  auto wal = Wal::Open(path, [&](std::string_view p) {
    got.emplace_back(p);
    return Status::OK();
  });
  EXPECT_TRUE(wal.ok()) << wal.status().ToString();
  return got;
}

// `replayed` holds every acknowledged record and otherwise only records that were attempted, in
// the order they were attempted.
void ExpectAckedPrefix(const std::vector<std::string>& attempted, const std::vector<bool>& acked,
                       const std::vector<std::string>& replayed, const std::string& what) {
  ASSERT_LE(replayed.size(), attempted.size()) << what;
  for (size_t i = 0; i < replayed.size(); ++i) {
    EXPECT_EQ(replayed[i], attempted[i]) << what << ": record " << i << " is not what was written";
  }
  for (size_t i = replayed.size(); i < attempted.size(); ++i) {
    EXPECT_FALSE(acked[i]) << what << ": acknowledged record " << i << " was lost";
  }
}

TEST_F(FaultTest, WalLosesNoAcknowledgedRecordAndRefusesAfterAFailure) {
  for (const Case& c : kWriteCases) {
    SCOPED_TRACE(c.Name());
    ScratchDir dir("fault_wal");
    const std::string path = dir.path() + "/wal.log";
    std::vector<std::string> attempted;
    std::vector<bool> acked;
    {
      auto wal = Wal::Open(path, {});
      ASSERT_TRUE(wal.ok());
      for (int i = 0; i < 3; ++i) {
        attempted.push_back("before " + std::to_string(i));
        acked.push_back((*wal)->Append(attempted.back()).ok());
        ASSERT_TRUE(acked.back());
      }
      Fault fault(c.op, "wal.log", c.nth, c.error);
      bool failed = false;
      for (int i = 0; i < 8; ++i) {
        attempted.push_back(std::string(100 + i, 'a' + i));
        const Status s = (*wal)->Append(attempted.back());
        acked.push_back(s.ok());
        if (!s.ok()) {
          EXPECT_NE(s.message().find("wal.log"), std::string::npos) << s.ToString();
          failed = true;
        } else {
          EXPECT_FALSE(failed) << "an Append after a failed one must fail too (poisoned log)";
        }
      }
      EXPECT_GE(fault.injected(), 1u) << "the fault never fired";
      // A short write is not an error: the log writes the rest.
      EXPECT_EQ(failed, c.error != -1);
    }
    const std::vector<std::string> replayed = ReplayWal(path);
    ExpectAckedPrefix(attempted, acked, replayed, c.Name());
    Report("wal " + c.Name(), attempted.size(), std::count(acked.begin(), acked.end(), true),
           replayed.size());
  }
}

// A base shard to apply deltas to: the small graph below, 1 shard.
graph::InputGraph SmallGraph() {
  graph::InputGraph g;
  g.node_property_names = {"name"};
  for (int64_t i = 0; i < 50; ++i) {
    g.nodes.push_back({i, {{0, "n" + std::to_string(i)}}});
    g.edges.push_back({i, (i * 7) % 50, i % 3, 100 + i, {}});
  }
  return g;
}

std::string BuildStore(const std::string& dir, graph::InputGraph g, bool overwrite = false) {
  graph::CompressOptions options;
  options.shards = 1;
  options.threads = 1;
  options.overwrite = overwrite;
  graph::CompressReport report;
  const Status s = graph::CompressGraph(std::move(g), dir, options, nullptr, &report);
  return s.ok() ? "" : s.ToString();
}

TEST_F(FaultTest, DeltaFileKeepsAcknowledgedBatchesAndServesNothingUnwritten) {
  ScratchDir dir("fault_delta");
  ASSERT_EQ(BuildStore(dir.path() + "/store", SmallGraph()), "");
  auto store = OpenStore(dir.path() + "/store", {}, nullptr);
  ASSERT_TRUE(store.ok());
  const layout::Shard& base = *store->shards[0];
  using engine::UpdateOp;
  for (const Case& c : kWriteCases) {
    SCOPED_TRACE(c.Name());
    const std::string path = dir.path() + "/delta-" + std::to_string(&c - kWriteCases.data());
    std::vector<int64_t> acked_nodes, failed_nodes;
    uint64_t id = 0;
    {
      auto index = engine::DeltaIndex::Open(path);
      ASSERT_TRUE(index.ok());
      Fault fault(c.op, "delta-", c.nth, c.error);
      bool failed = false;
      for (int64_t node = 0; node < 8; ++node) {
        auto r = (*index)->Apply(
            base, {{UpdateOp::kPutNode, node, 0, 0, 7, 0, ++id},
                   {UpdateOp::kDeleteEdge, node, node % 3, (node * 7) % 50, 0, 0, ++id}});
        if (r.ok()) {
          EXPECT_FALSE(failed) << "an Apply after a failed one must fail too";
          acked_nodes.push_back(node);
        } else {
          EXPECT_NE(r.status().message().find("delta-"), std::string::npos)
              << r.status().ToString();
          failed = true;
          failed_nodes.push_back(node);
          // Not acknowledged, so not served either.
          EXPECT_EQ((*index)->Lookup(node), nullptr) << "a failed batch is visible";
        }
      }
      EXPECT_GE(fault.injected(), 1u);
      EXPECT_EQ(failed, c.error != -1);
    }
    auto reopened = engine::DeltaIndex::Open(path);
    ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
    for (int64_t node : acked_nodes) {
      auto d = (*reopened)->Lookup(node);
      ASSERT_NE(d, nullptr) << "acknowledged batch of node " << node << " lost";
      EXPECT_EQ(d->props_generation, 7);
    }
    // Of the failed batches, at most the first may have reached the file before the failure.
    for (size_t i = 1; i < failed_nodes.size(); ++i) {
      EXPECT_EQ((*reopened)->Lookup(failed_nodes[i]), nullptr);
    }
    Report("delta " + c.Name(), 8, acked_nodes.size(), (*reopened)->size());
  }
}

// A LogStore whose base shard accepts every update (as in logstore_test.cc).
class LogStoreHarness {
 public:
  explicit LogStoreHarness(const std::string& dir) {
    auto receiver = shard::UpdateReceiver::Start(
        "127.0.0.1", 0, [](uint32_t, uint64_t, const std::vector<engine::Update>& updates) {
          return StatusOr<shard::PushAnswer>(
              shard::PushAnswer{false, std::vector<bool>(updates.size(), false)});
        });
    EXPECT_TRUE(receiver.ok());
    receiver_ = std::move(*receiver);
    sender_ = std::make_unique<shard::UpdateSender>(1, [e = receiver_->endpoint()](uint32_t) {
      return std::vector<shard::UpdateTarget>{{"base", e}};
    });
    logstore::LogStoreOptions options;
    options.dir = dir;
    options.memtable_bytes = 0;  // compactions only when asked
    options.compaction_memory_bytes = 256 << 20;
    auto store = logstore::LogStore::Open(options, nullptr, sender_.get(), [](auto) {});
    status_ = store.status();
    if (store.ok()) store_ = std::move(*store);
  }
  const Status& status() const { return status_; }
  logstore::LogStore& store() { return *store_; }

  // The edges of node `src` in every generation the LogStore holds.
  std::vector<Edge> Edges(int64_t src) {
    std::vector<int64_t> generations = store_->LogShards();
    const int64_t live = store_->StatusJson()["generation"].get<int64_t>();
    for (int64_t g = 1; g <= live; ++g) generations.push_back(g);
    auto data = store_->Fragment(src, /*any_type=*/true, 0, generations);
    EXPECT_TRUE(data.ok()) << data.status().ToString();
    return data.ok() ? data->edges : std::vector<Edge>{};
  }

 private:
  std::unique_ptr<shard::UpdateReceiver> receiver_;
  std::unique_ptr<shard::UpdateSender> sender_;
  std::unique_ptr<logstore::LogStore> store_;
  Status status_;
};

logstore::LogRecord EdgeRecord(int64_t i) {
  logstore::LogRecord r;
  r.op = engine::UpdateOp::kPutEdge;
  r.node = i;
  r.type = 1;
  r.dst = 1000 + i;
  r.timestamp = i;
  r.properties = {{"v", std::to_string(i)}};
  return r;
}

// Writes records [from, to) one commit each; returns which were acknowledged.
std::vector<bool> Commit(logstore::LogStore& store, int64_t from, int64_t to) {
  std::vector<bool> acked;
  for (int64_t i = from; i < to; ++i) {
    acked.push_back(store.CommitUnconditional({EdgeRecord(i)})[0].ok());
  }
  return acked;
}

void ExpectEdge(LogStoreHarness& h, int64_t i, const std::string& what) {
  const std::vector<Edge> edges = h.Edges(i);
  ASSERT_EQ(edges.size(), 1u) << what << ": node " << i;
  EXPECT_EQ(edges[0].dst, 1000 + i);
  EXPECT_EQ(edges[0].properties, (Properties{{"v", std::to_string(i)}}));
}

TEST_F(FaultTest, LogStoreCommitFaultsLoseNoAcknowledgedWrite) {
  for (const Case& c : kWriteCases) {
    SCOPED_TRACE(c.Name());
    ScratchDir dir("fault_logstore");
    std::vector<bool> acked;
    {
      LogStoreHarness h(dir.path());
      ASSERT_TRUE(h.status().ok()) << h.status().ToString();
      acked = Commit(h.store(), 0, 5);
      ASSERT_EQ(acked, std::vector<bool>(5, true));
      Fault fault(c.op, "wal-", c.nth, c.error);
      const std::vector<bool> more = Commit(h.store(), 5, 15);
      acked.insert(acked.end(), more.begin(), more.end());
      EXPECT_GE(fault.injected(), 1u);
      if (c.error != -1) {
        EXPECT_NE(std::count(more.begin(), more.end(), false), 0);
      }
      // After the first failure the log refuses every write (poisoned), until a restart.
      const auto first_failure = std::find(more.begin(), more.end(), false);
      EXPECT_EQ(std::count(first_failure, more.end(), true), 0) << "a write after a failed one";
      // Reads go on: every acknowledged write is served, nothing else.
      for (int64_t i = 0; i < 15; ++i) {
        if (acked[i]) {
          ExpectEdge(h, i, "before restart");
        } else {
          EXPECT_TRUE(h.Edges(i).empty()) << "a failed write of node " << i << " is served";
        }
      }
    }
    LogStoreHarness reopened(dir.path());
    ASSERT_TRUE(reopened.status().ok()) << reopened.status().ToString();
    for (int64_t i = 0; i < 15; ++i) {
      if (acked[i]) ExpectEdge(reopened, i, "after restart");
    }
    // Once restarted without the fault, writes work again.
    EXPECT_EQ(Commit(reopened.store(), 15, 17), std::vector<bool>(2, true));
    Report("logstore " + c.Name(), 15, std::count(acked.begin(), acked.end(), true), 0);
  }
}

// Waits (60 s at most) for the compaction of `generation` to end; its error, or "" if published.
// `earlier_error`: the error of an earlier attempt, which is reported until this one ends.
std::string WaitForCompaction(logstore::LogStore& store, int64_t generation,
                              const std::string& earlier_error = "") {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto status = store.StatusJson();
    if (status.contains("last_error") && status["last_error"] != earlier_error) {
      return status["last_error"].get<std::string>();
    }
    const auto& last = status["last_compaction"];
    if (!last.is_null() && last.value("generation", int64_t{0}) >= generation) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "the compaction did not end within 60 s";
}

TEST_F(FaultTest, CompactionFaultsKeepEveryWriteAndAllowARetry) {
  // The log shard's files, and the STATE file that publishes it.
  const std::vector<std::tuple<const char*, const char*, int>> points = {
      {"any-write", "shard-", EIO}, {"any-write", "shard-", ENOSPC}, {"any-sync", "shard-", EIO},
      {"rename", "shard-", EIO},    {"rename", "STATE", EIO},        {"any-write", "STATE", EIO},
      {"any-sync", "STATE", EIO}};  // files of the LogStore's directory
  for (const auto& [op, file, error] : points) {
    bool fired = false;
    for (uint64_t nth : {1, 2, 5}) {
      SCOPED_TRACE(std::string(op) + " " + file + "#" + std::to_string(nth));
      ScratchDir dir("fault_compact");
      const std::string path = dir.path() + "/" + file;  // not feed/shard-N.log
      {
        LogStoreHarness h(dir.path());
        ASSERT_TRUE(h.status().ok());
        ASSERT_EQ(Commit(h.store(), 0, 20), std::vector<bool>(20, true));
        std::string failure;
        {
          Fault fault(op, path, nth, error);
          // Freezing the memtable writes STATE: that fails the call itself.
          auto started = h.store().Compact();
          failure = started.ok() ? WaitForCompaction(h.store(), 1) : started.status().ToString();
          if (fault.injected() == 0) continue;  // the compaction has fewer such calls
          fired = true;
        }
        EXPECT_NE(failure, "") << "a compaction whose files failed reported success";
        // Every write is still served, and new writes are taken.
        for (int64_t i = 0; i < 20; ++i) ExpectEdge(h, i, "after the failed compaction");
        EXPECT_EQ(Commit(h.store(), 20, 22), std::vector<bool>(2, true));
        // Asked again, the frozen generation is built.
        auto again = h.store().Compact();
        ASSERT_TRUE(again.ok()) << again.status().ToString();
        EXPECT_EQ(WaitForCompaction(h.store(), 1, failure), "");
        EXPECT_FALSE(h.store().StatusJson().contains("last_error"));
        std::cout << "fault compaction " << op << " " << file << "#" << nth << " "
                  << ErrnoName(error) << ": failed with " << failure << "; retry ok\n";
      }
      LogStoreHarness reopened(dir.path());
      ASSERT_TRUE(reopened.status().ok()) << reopened.status().ToString();
      for (int64_t i = 0; i < 22; ++i) ExpectEdge(reopened, i, "after restart");
    }
    EXPECT_TRUE(fired) << op << " " << file << ": the fault never fired";
  }
}

// compress replacing an existing store (--force): a fault anywhere leaves the old store
// answering as before; without the fault the new one replaces it.
// Every node's properties and every edge of the store at `dir`, as text (checksums verified).
std::string Contents(const std::string& dir) {
  auto g = Graph::Open(dir);
  if (!g.ok()) return "cannot open: " + g.status().ToString();
  std::string out;
  for (int64_t i = 0; i < 50; ++i) {
    auto node = (*g)->ObjGet(i);
    if (!node.ok() || !node->has_value()) return "node " + std::to_string(i) + " missing";
    for (const auto& [k, v] : (*node)->properties) out += k + "=" + v + ";";
    for (int64_t type = 0; type < 3; ++type) {
      auto edges = (*g)->AssocRange(i, type, 0, 100);
      if (!edges.ok()) return edges.status().ToString();
      for (const Edge& e : *edges) {
        out += std::to_string(e.dst) + "@" + std::to_string(e.timestamp) + ",";
      }
    }
    out += "\n";
  }
  return out;
}

TEST_F(FaultTest, CompressFaultsLeaveTheExistingStore) {
  ScratchDir dir("fault_compress");
  const std::string out = dir.path() + "/store";
  graph::InputGraph next = SmallGraph();
  for (auto& n : next.nodes) n.properties = {{0, "new"}};
  ASSERT_EQ(BuildStore(dir.path() + "/old", SmallGraph()), "");
  ASSERT_EQ(BuildStore(dir.path() + "/new", next), "");
  const std::string old_contents = Contents(dir.path() + "/old");
  const std::string new_contents = Contents(dir.path() + "/new");
  ASSERT_NE(old_contents, new_contents);
  const std::vector<std::pair<const char*, int>> points = {
      {"any-write", EIO}, {"any-write", ENOSPC}, {"any-write", -1},
      {"any-sync", EIO},  {"rename", EIO},       {"mmap", ENOMEM}};
  for (const auto& [op, error] : points) {
    // How many calls a compress makes (never failing one), then the first, the middle and the
    // last three: the last ones are the renames that publish the store.
    ASSERT_EQ(BuildStore(out, SmallGraph(), /*overwrite=*/true), "");
    uint64_t total = 0;
    {
      Fault count(op, out, UINT64_MAX, error);
      ASSERT_EQ(BuildStore(out, next, /*overwrite=*/true), "");
      total = TheShim().calls();
    }
    ASSERT_GT(total, 0u) << op;
    std::set<uint64_t> nths = {1, (total + 1) / 2};
    for (uint64_t back = 0; back < 3 && back < total; ++back) nths.insert(total - back);
    for (uint64_t nth : nths) {
      SCOPED_TRACE(std::string(op) + "#" + std::to_string(nth) + " of " + std::to_string(total));
      ASSERT_EQ(BuildStore(out, SmallGraph(), /*overwrite=*/true), "");  // the old store
      std::string result;
      {
        Fault fault(op, out, nth, error);
        result = BuildStore(out, next, /*overwrite=*/true);
        ASSERT_EQ(fault.injected(), 1u);
      }
      std::cout << "fault compress " << op << "#" << nth << "/" << total << " " << ErrnoName(error)
                << ": " << (result.empty() ? "ok" : result) << "\n";
      if (error == -1) {
        EXPECT_EQ(result, "") << "a short write is not an error";
        EXPECT_EQ(Contents(out), new_contents);
        continue;
      }
      EXPECT_NE(result, "") << "compress ignored a failed " << op;
      EXPECT_NE(result.find(dir.path()), std::string::npos)
          << "the error names no file: " << result;
      EXPECT_EQ(Contents(out), old_contents) << "the old store changed: " << result;
    }
  }
}

TEST_F(FaultTest, OpeningAStoreWhoseMappingFailsIsAnError) {
  ScratchDir dir("fault_open");
  ASSERT_EQ(BuildStore(dir.path() + "/store", SmallGraph()), "");
  int fired = 0;
  for (uint64_t nth : {1, 2, 3}) {
    Fault fault("mmap", dir.path(), nth, ENOMEM);
    auto g = Graph::Open(dir.path() + "/store");
    if (fault.injected() == 0) continue;
    ASSERT_FALSE(g.ok()) << "mmap #" << nth << " failed but the store opened";
    EXPECT_EQ(g.status().code(), StatusCode::kIOError) << g.status().ToString();
    ++fired;
    std::cout << "fault open mmap#" << nth << ": " << g.status().ToString() << "\n";
    EXPECT_NE(g.status().message().find(dir.path()), std::string::npos) << g.status().ToString();
  }
  EXPECT_EQ(fired, 3) << "a store's opening maps at least three files";
}

}  // namespace
}  // namespace zipg

// compaction_bench: how long the LogStore takes to compress a log of a given size into a log
// shard (ZipG section 3.5's periodic compression), and how much memory that takes.
//
// Runs a LogStore in-process on --dir with a stand-in base shard (an UpdateReceiver that accepts
// every update), fills its log with assoc_add records shaped like `zipg bench --mix write` (Zipf
// source, uniform destination, 128-byte random payload) from several threads, then forces one
// compaction and waits until its log shard is published. The log is not fsync'ed while filling
// (the figure is the compaction, not the write path). Afterwards, sampled edges are read back
// through the new log shard and checked.
//
// With --generations N (> 1), the log is filled and compacted N times (log-mb / N each) with
// merges on (--merge-width W, default 4; docs/logstore-ha.md "Merges"): it reports each merge
// (time, sizes), the peak RSS, and the latency of reads of sampled edges by a reader thread while
// a merge runs and while none does. Writers go on during the merges.
//
//   compaction_bench --dir DIR [--log-mb 1024] [--nodes 10000000] [--threads 4] [--seed 1]
//                    [--generations 1] [--merge-width 4]

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/cli.h"
#include "datagen/random.h"
#include "logstore/logstore.h"
#include "shard/update_channel.h"
#include "util/status.h"

namespace {

using namespace zipg;
namespace fs = std::filesystem;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "compaction_bench: %s\n", what.c_str());
  std::exit(1);
}

// VmRSS or VmHWM of this process, in MiB.
double ProcMiB(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  }
  return 0;
}

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// An assoc_add shaped like `zipg bench --mix write`: Zipf source, uniform destination, 128-byte
// random payload, timestamp `clock`.
Edge WriteEdge(datagen::Rng& rng, const datagen::ZipfSampler& zipf, uint64_t nodes,
               int64_t clock) {
  std::string payload(128, 'a');
  for (auto& ch : payload) ch = static_cast<char>('a' + rng.Uniform(26));
  return Edge{static_cast<int64_t>(zipf.Next(rng)), static_cast<int64_t>(rng.Uniform(5)),
              static_cast<int64_t>(rng.Uniform(nodes)), clock, {{"data", payload}}};
}

// "p50 X us, p99 Y us, max Z us over N reads".
std::string Latencies(std::vector<double> us) {  // sorts a copy
  if (us.empty()) return "no reads";
  std::sort(us.begin(), us.end());
  char buf[160];
  std::snprintf(buf, sizeof(buf), "p50 %.0f us, p99 %.0f us, max %.0f us over %zu reads",
                us[us.size() / 2], us[us.size() * 99 / 100], us.back(), us.size());
  return buf;
}

// --generations: fill and compact `generations` logs of `per_generation` bytes with the writers
// never stopping, while a reader reads sampled edges back; then wait for the merges to settle.
int RunGenerations(logstore::LogStore& ls, const std::string& dir, uint64_t per_generation,
                   uint64_t generations, uint64_t merge_width, uint64_t nodes, int threads,
                   uint64_t seed, const datagen::ZipfSampler& zipf) {
  std::atomic<bool> stop{false}, full{false}, merging{false}, paused{false};
  std::atomic<int64_t> live{1};
  std::atomic<uint64_t> written{0};
  std::mutex sample_mu;
  std::vector<Edge> sample;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      datagen::Rng rng(seed * 1000 + static_cast<uint64_t>(t));
      int64_t clock = static_cast<int64_t>(t) << 40;
      for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        while (paused && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        const Edge e = WriteEdge(rng, zipf, nodes, ++clock);
        if (Status s = ls.AssocAdd(e).status(); !s.ok()) Die("assoc_add: " + s.ToString());
        ++written;
        if (i % 10000 == 0) {
          std::lock_guard lock(sample_mu);
          sample.push_back(e);
        }
        if (t == 0 && i % 2000 == 0) {
          std::error_code ec;
          const auto size =
              fs::file_size(dir + "/wal-" + std::to_string(live.load()) + ".log", ec);
          if (!ec && size >= per_generation) full = true;
        }
      }
    });
  }
  // A quiet pass (writers paused, no merge running): `n` reads of sampled edges, closed loop.
  auto quiet_pass = [&](size_t n) {
    paused = true;
    while (merging) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<Edge> picks;
    {
      std::lock_guard lock(sample_mu);
      datagen::Rng rng(seed + 99);
      for (size_t i = 0; i < n && !sample.empty(); ++i) {
        picks.push_back(sample[rng.Uniform(sample.size())]);
      }
    }
    std::vector<double> us;
    std::vector<int64_t> gens;
    for (int64_t g = 1; g <= live.load(); ++g) gens.push_back(g);
    for (const Edge& e : picks) {
      const auto t0 = std::chrono::steady_clock::now();
      auto got = ls.FragmentEdges(e.src, e.type, gens, {e.dst});
      us.push_back(Since(t0) * 1e6);
      if (!got.ok() || got->empty()) Die("a sampled edge was not found");
    }
    paused = false;
    std::sort(us.begin(), us.end());
    return us;
  };
  std::vector<double> first_pass;
  // The reader: one sampled edge at a time (never deleted, so always found), every generation.
  std::vector<double> during, outside;
  uint64_t missing = 0;
  std::atomic<bool> reader_stop{false};
  std::thread reader([&] {
    datagen::Rng rng(seed + 77);
    while (!reader_stop) {
      Edge e;
      {
        std::lock_guard lock(sample_mu);
        if (sample.empty()) {
          e.src = -1;
        } else {
          e = sample[rng.Uniform(sample.size())];
        }
      }
      if (e.src >= 0) {
        std::vector<int64_t> gens;
        for (int64_t g = 1; g <= live.load(); ++g) gens.push_back(g);
        const bool in_merge = merging.load();
        const auto t0 = std::chrono::steady_clock::now();
        auto got = ls.FragmentEdges(e.src, e.type, gens, {e.dst});
        const double us = Since(t0) * 1e6;
        if (!got.ok()) Die("fragment_edges: " + got.status().ToString());
        if (got->empty()) ++missing;
        (in_merge ? during : outside).push_back(us);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  // The watcher: reports each merge as it is published.
  std::atomic<bool> watcher_stop{false};
  std::atomic<uint64_t> merges_seen{0};
  size_t most_shards = 0;
  nlohmann::json last_seen;
  std::thread watcher([&] {
    while (!watcher_stop) {
      const nlohmann::json st = ls.StatusJson();
      if (st.contains("last_error")) Die("LogStore: " + st["last_error"].dump());
      merging = !st["merging"].is_null();
      most_shards = std::max(most_shards, st["log_shards"].size());
      // last_merge is set just after the merge count grows: wait for it.
      if (st["merges"].get<uint64_t>() > merges_seen && !st["last_merge"].is_null() &&
          st["last_merge"]["generations"] != last_seen) {
        merges_seen = st["merges"].get<uint64_t>();
        last_seen = st["last_merge"]["generations"];
        std::printf("merge %llu at %.0f s: %s; RSS %.0f MiB\n",
                    static_cast<unsigned long long>(merges_seen.load()), Since(start),
                    st["last_merge"].dump().c_str(), ProcMiB("VmRSS"));
        std::fflush(stdout);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  for (uint64_t g = 1; g <= generations; ++g) {
    while (!full) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    full = false;
    auto started = ls.Compact();
    if (!started.ok()) Die("compact: " + started.status().ToString());
    live = static_cast<int64_t>(g) + 1;
    while (true) {
      const nlohmann::json last = ls.StatusJson()["last_compaction"];
      if (!last.is_null() && last["generation"].get<uint64_t>() >= g) {
        std::printf("compaction of generation %llu at %.0f s: %.1f s, %.1f MiB log -> %.1f MiB; "
                    "%llu writes so far\n",
                    static_cast<unsigned long long>(g), Since(start),
                    last["seconds"].get<double>(), last["log_bytes"].get<double>() / 1048576.0,
                    last["stored_bytes"].get<double>() / 1048576.0,
                    static_cast<unsigned long long>(written.load()));
        std::fflush(stdout);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (g == 1) {
      first_pass = quiet_pass(2000);
      std::printf("quiet reads with one log shard: %s\n", Latencies(first_pass).c_str());
    }
  }
  stop = true;
  for (auto& w : workers) w.join();
  // Settled: no merge running for 3 s.
  for (auto quiet = std::chrono::steady_clock::now(); Since(quiet) < 3;) {
    if (merging) quiet = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  reader_stop = true;
  reader.join();
  const std::vector<double> last_pass = quiet_pass(2000);
  watcher_stop = true;
  watcher.join();
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  const nlohmann::json st = ls.StatusJson();
  // The documented bound (docs/logstore-ha.md, "Merges"): (W - 1) x ceil(log_W N) + W.
  const uint64_t width = merge_width;
  uint64_t tiers = 0;
  for (uint64_t reach = 1; reach < generations; reach *= std::max<uint64_t>(width, 2)) ++tiers;
  // The cap (max_log_shards) holds back threshold compactions; this bench's compactions are
  // explicit, so only the merges taken at the cap (forced) keep to it.
  std::printf("done in %.0f s: %llu writes, %llu merges (%llu at the cap of %u); log shards now %s "
              "(at most %zu at once; bound %llu); peak RSS %.0f MiB\n",
              Since(start), static_cast<unsigned long long>(written.load()),
              static_cast<unsigned long long>(st["merges"].get<uint64_t>()),
              static_cast<unsigned long long>(st["forced_merges"].get<uint64_t>()),
              st["max_log_shards"].get<uint32_t>(), st["log_shards"].dump().c_str(),
              most_shards, static_cast<unsigned long long>((width - 1) * tiers + width),
              ru.ru_maxrss / 1024.0);
  std::printf("reads during merges: %s\nreads otherwise: %s\nsampled edges not found: %llu\n",
              Latencies(during).c_str(), Latencies(outside).c_str(),
              static_cast<unsigned long long>(missing));
  if (!first_pass.empty() && !last_pass.empty()) {
    std::printf("quiet reads at the end: %s; p99 %.2fx, p50 %.2fx the pass after generation 1\n",
                Latencies(last_pass).c_str(),
                last_pass[last_pass.size() * 99 / 100] / first_pass[first_pass.size() * 99 / 100],
                last_pass[last_pass.size() / 2] / first_pass[first_pass.size() / 2]);
  }
  return missing == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto args = cli::Args::Parse(argc, argv, 1, {});
  if (!args.ok()) Die(args.status().ToString());
  if (Status s = args->CheckKnown(
          {"dir", "log-mb", "nodes", "threads", "seed", "generations", "merge-width"});
      !s.ok()) {
    Die(s.ToString());
  }
  const std::string dir = args->Get("dir").value_or("");
  if (dir.empty()) Die("--dir DIR is required");
  auto number = [&](const char* name, uint64_t fallback) {
    auto v = args->GetUint(name, fallback);
    if (!v.ok()) Die(v.status().ToString());
    return *v;
  };
  const uint64_t log_bytes = number("log-mb", 1024) << 20;
  const uint64_t nodes = number("nodes", 10'000'000);
  const int threads = static_cast<int>(number("threads", 4));
  const uint64_t seed = number("seed", 1);
  const uint64_t generations = std::max<uint64_t>(1, number("generations", 1));
  const uint64_t merge_width = number("merge-width", 4);
  const datagen::ZipfSampler zipf(nodes, 0.99);
  std::error_code ec;
  fs::remove_all(dir, ec);

  auto receiver = shard::UpdateReceiver::Start(
      "127.0.0.1", 0, [](uint32_t, uint64_t, const std::vector<engine::Update>& updates) {
        return StatusOr<shard::PushAnswer>(
            shard::PushAnswer{false, std::vector<bool>(updates.size(), false)});
      });
  if (!receiver.ok()) Die(receiver.status().ToString());
  const std::string endpoint = (*receiver)->endpoint();
  shard::UpdateSender sender(1, [&](uint32_t) {
    return std::vector<shard::UpdateTarget>{{"base", endpoint}};
  });
  logstore::LogStoreOptions options;
  options.dir = dir;
  options.memtable_bytes = 0;  // compact only when told
  options.sync = false;
  options.merge_width = static_cast<uint32_t>(merge_width);
  auto store = logstore::LogStore::Open(options, nullptr, &sender, [](std::vector<int64_t>) {});
  if (!store.ok()) Die(store.status().ToString());
  logstore::LogStore& ls = **store;
  const double rss_empty = ProcMiB("VmRSS");

  if (generations > 1) {
    return RunGenerations(ls, dir, log_bytes / generations, generations, merge_width, nodes,
                          threads, seed, zipf);
  }

  // Fill the log.
  const std::string wal = dir + "/wal-1.log";
  std::atomic<bool> full{false};
  std::atomic<uint64_t> written{0};
  std::mutex sample_mu;
  std::vector<Edge> sample;  // every 10000th edge of each thread
  const auto fill_start = std::chrono::steady_clock::now();
  std::vector<std::thread> writers;
  for (int t = 0; t < threads; ++t) {
    writers.emplace_back([&, t] {
      datagen::Rng rng(seed * 1000 + static_cast<uint64_t>(t));
      // Distinct timestamps per thread keep every edge key's newest version unambiguous.
      int64_t clock = static_cast<int64_t>(t) << 40;
      for (uint64_t i = 0; !full.load(std::memory_order_relaxed); ++i) {
        const Edge e = WriteEdge(rng, zipf, nodes, ++clock);
        Status s = ls.AssocAdd(e).status();
        if (!s.ok()) Die("assoc_add: " + s.ToString());
        ++written;
        if (i % 10000 == 0) {
          std::lock_guard lock(sample_mu);
          sample.push_back(e);
        }
        if (t == 0 && i % 2000 == 0 && fs::file_size(wal) >= log_bytes) full = true;
      }
    });
  }
  for (auto& w : writers) w.join();
  const double fill_seconds = Since(fill_start);
  const uint64_t wal_bytes = fs::file_size(wal);
  const double rss_before = ProcMiB("VmRSS");
  std::printf("log: %llu records, %.1f MiB in %.1f s (%.0f records/s, no fsync), RSS %.0f MiB\n",
              static_cast<unsigned long long>(written.load()), wal_bytes / 1048576.0, fill_seconds,
              written.load() / fill_seconds, rss_before);
  std::printf("commit: %s, update batches %s\n", ls.StatusJson()["commit"].dump().c_str(),
              ls.StatusJson()["update_batches"].dump().c_str());
  // The memtable's accounting against what the process really grew by (docs/writes.md,
  // "Memory").
  const double accounted = ls.StatusJson()["memtable"]["bytes"].get<double>() / 1048576.0;
  std::printf("memtable: accounted %.0f MiB, resident growth %.0f MiB (accounted / real %.2f)\n",
              accounted, rss_before - rss_empty, accounted / (rss_before - rss_empty));
  std::fflush(stdout);

  // Compact and wait for the publish.
  const auto start = std::chrono::steady_clock::now();
  auto started = ls.Compact();
  if (!started.ok()) Die("compact: " + started.status().ToString());
  nlohmann::json done;
  while (true) {
    const nlohmann::json status = ls.StatusJson();
    if (status.contains("last_error")) Die("compaction failed: " + status["last_error"].dump());
    if (!status["last_compaction"].is_null()) {
      done = status["last_compaction"];
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double seconds = Since(start);
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  uint64_t shard_bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir + "/shard-1")) {
    if (entry.is_regular_file()) shard_bytes += entry.file_size();
  }
  std::printf(
      "compaction: %.1f s (build %.1f s), %.1f MiB/s of log; log shard %.1f MiB on disk "
      "(%.2fx the log); peak RSS %.0f MiB (%.1fx the log)\n",
      seconds, done.value("build_seconds", 0.0), wal_bytes / 1048576.0 / seconds,
      shard_bytes / 1048576.0, static_cast<double>(shard_bytes) / wal_bytes, ru.ru_maxrss / 1024.0,
      ru.ru_maxrss * 1024.0 / wal_bytes);
  std::printf("summary: %s\n", done.dump().c_str());

  // Read the sampled edges back through the log shard. An edge key written twice holds only its
  // newest version; the check takes the sample's version or a newer one of the same key.
  size_t checked = 0, bad = 0;
  for (const Edge& e : sample) {
    auto got = ls.Fragment(e.src, false, e.type, {1});
    if (!got.ok()) Die("fragment: " + got.status().ToString());
    bool ok = false;
    for (const Edge& x : got->edges) {
      if (x.type != e.type || x.dst != e.dst) continue;
      // The same version, or one written later to the same key (by this thread: a larger clock;
      // by another thread: any clock, as the threads race).
      ok = x.timestamp == e.timestamp
               ? x.properties == e.properties
               : (x.timestamp >> 40) != (e.timestamp >> 40) || x.timestamp > e.timestamp;
    }
    ++checked;
    if (!ok) ++bad;
  }
  std::printf("read back: %zu sampled edges through the log shard, %zu wrong\n", checked, bad);
  return bad == 0 ? 0 : 1;
}

#include "cluster/membership.h"

#include <algorithm>
#include <charconv>
#include <iostream>

namespace zipg::cluster {

using nlohmann::json;

std::string ClusterPrefix(const std::string& cluster) { return "/zipg/" + cluster + "/"; }

std::string LayoutKey(const std::string& prefix) { return prefix + "layout"; }

json MemberInfo::ToJson() const {
  json j = {{"name", name}, {"role", role}, {"endpoint", endpoint.ToString()}, {"pid", pid}};
  if (!metrics_url.empty()) j["metrics"] = metrics_url;
  if (!http_url.empty()) j["http"] = http_url;
  if (role == "shard") {
    j["num_shards"] = num_shards;
    j["shards"] = shards;
    j["store"] = store;
    j["store_info"] = store_info;
    j["update_endpoint"] = update_endpoint;
    j["serving"] = serving;
    if (!catching_up.empty()) j["catching_up"] = catching_up;
    json v = json::object();
    for (const auto& [shard, version] : versions) v[std::to_string(shard)] = version;
    j["versions"] = v;
  }
  if (role == "logstore") {
    j["generations"] = generations;
    j["leader"] = leader;
    if (!ship_endpoint.empty()) j["ship_endpoint"] = ship_endpoint;
    if (!sync.empty()) j["sync"] = sync;
    if (epoch != 0) j["epoch"] = epoch;
  }
  return j;
}

StatusOr<MemberInfo> MemberInfo::FromJson(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::Corruption("member entry is not a JSON object");
  }
  try {
    MemberInfo m;
    m.name = j.at("name").get<std::string>();
    m.role = j.at("role").get<std::string>();
    ZIPG_ASSIGN_OR_RETURN(m.endpoint, rpc::Endpoint::Parse(j.at("endpoint").get<std::string>()));
    m.pid = j.value("pid", int64_t{0});
    m.metrics_url = j.value("metrics", std::string());
    m.http_url = j.value("http", std::string());
    if (m.role == "shard") {
      m.num_shards = j.at("num_shards").get<uint32_t>();
      m.shards = j.at("shards").get<std::vector<uint32_t>>();
      m.store = j.value("store", std::string());
      m.store_info = j.value("store_info", json::object());
      m.update_endpoint = j.value("update_endpoint", std::string());
      m.serving = j.value("serving", true);
      m.catching_up = j.value("catching_up", std::vector<uint32_t>());
      const json versions = j.value("versions", json::object());
      for (const auto& [shard, version] : versions.items()) {
        uint32_t s = 0;
        auto [end, ec] = std::from_chars(shard.data(), shard.data() + shard.size(), s);
        if (ec != std::errc() || end != shard.data() + shard.size()) {
          return Status::Corruption("member entry: bad shard number in versions: " + shard);
        }
        m.versions[s] = version.get<int64_t>();
      }
    }
    if (m.role == "logstore") {
      m.generations = j.value("generations", std::vector<int64_t>());
      m.leader = j.value("leader", true);
      m.ship_endpoint = j.value("ship_endpoint", std::string());
      m.sync = j.value("sync", std::string());
      m.epoch = j.value("epoch", int64_t{0});
    }
    return m;
  } catch (const json::exception& e) {
    return Status::Corruption(std::string("member entry: ") + e.what());
  }
}

std::shared_ptr<const ShardMap> ShardMap::Build(std::vector<MemberInfo> members, int64_t revision,
                                                uint32_t layout) {
  auto map = std::make_shared<ShardMap>();
  std::sort(members.begin(), members.end(),
            [](const MemberInfo& a, const MemberInfo& b) { return a.name < b.name; });
  map->members = std::move(members);
  map->revision = revision;
  // The shard count: the cluster's layout key (after a split), else the smallest count a shard
  // server registers. A server registered with a multiple of it (2^k times: split already)
  // covers the map's shards whose every part it hosts; one with a smaller count (not switched
  // yet) is left out (docs/cluster-changes.md, step 4).
  map->num_shards = layout;
  if (layout == 0) {
    for (const auto& m : map->members) {
      if (m.role != "shard" || m.num_shards == 0) continue;
      if (map->num_shards == 0 || m.num_shards < map->num_shards) map->num_shards = m.num_shards;
    }
  }
  for (const auto& m : map->members) {
    if (m.role != "shard" || m.num_shards < map->num_shards) continue;
    const uint32_t k = m.num_shards / map->num_shards;
    if (m.num_shards % map->num_shards != 0 || (k & (k - 1)) != 0) {
      map->problem = "shard servers disagree on the shard count (" +
                     std::to_string(map->num_shards) + " vs " + std::to_string(m.num_shards) +
                     " at " + m.name + ")";
    }
  }
  map->owners.resize(map->num_shards);
  map->replicas.resize(map->num_shards);
  for (size_t i = 0; i < map->members.size(); ++i) {
    if (map->members[i].role != "logstore") continue;
    auto& slot = map->members[i].leader ? map->logstore : map->standby;
    if (slot && map->members[i].leader && map->members[*slot].epoch != map->members[i].epoch) {
      // After a failover the old leader stays registered until its lease expires: the newer
      // epoch is the leader (docs/logstore-ha.md).
      if (map->members[i].epoch > map->members[*slot].epoch) slot = i;
      continue;
    }
    if (slot) {
      map->problem = std::string("two ") + (map->members[i].leader ? "leader" : "standby") +
                     " LogStores are registered (" + map->members[*slot].name + " and " +
                     map->members[i].name + ")";
    }
    slot = i;
  }
  for (size_t i = 0; i < map->members.size(); ++i) {
    const auto& m = map->members[i];
    if (m.role != "shard" || map->num_shards == 0 || m.num_shards < map->num_shards ||
        m.num_shards % map->num_shards != 0) {
      continue;
    }
    auto lists = [](const std::vector<uint32_t>& list, uint32_t s) {
      return std::find(list.begin(), list.end(), s) != list.end();
    };
    for (uint32_t r = 0; r < map->num_shards; ++r) {
      // Shard r of the map is shards r, r + n, r + 2n, ... of the member's count.
      bool all = true, catching_up = false;
      for (uint32_t t = r; t < m.num_shards && all; t += map->num_shards) {
        all = lists(m.shards, t);
        catching_up |= lists(m.catching_up, t);
      }
      if (!all) continue;
      map->replicas[r].push_back(i);
      if (m.serving && !catching_up) map->owners[r].push_back(i);
    }
  }
  return map;
}

std::vector<uint32_t> ShardMap::Unserved() const {
  std::vector<uint32_t> out;
  for (uint32_t s = 0; s < num_shards; ++s) {
    if (owners[s].empty()) out.push_back(s);
  }
  return out;
}

StatusOr<const MemberInfo*> ShardMap::Pick(uint32_t shard, const std::string& avoid) const {
  if (!problem.empty()) return Status::Unavailable("cluster misconfigured: " + problem);
  if (num_shards == 0) return Status::Unavailable("no shard server is registered");
  if (shard >= num_shards || owners[shard].empty()) {
    return Status::Unavailable("shard " + std::to_string(shard) + " has no live server");
  }
  std::vector<size_t> o;
  for (size_t i : owners[shard]) {
    if (members[i].name != avoid) o.push_back(i);
  }
  if (o.empty()) {
    return Status::Unavailable("shard " + std::to_string(shard) +
                               " has no other live server than " + avoid);
  }
  const size_t i = o.size() == 1 ? 0 : turn_.fetch_add(1, std::memory_order_relaxed) % o.size();
  return &members[o[i]];
}

bool RetryElsewhere(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
}

StatusOr<const MemberInfo*> ShardMap::LogStore() const {
  if (!logstore) return Status::Unavailable("no LogStore is registered");
  return &members[*logstore];
}

// --- Registration ---

StatusOr<std::unique_ptr<Registration>> Registration::Start(std::shared_ptr<EtcdClient> etcd,
                                                            const std::string& prefix,
                                                            const MemberInfo& info,
                                                            int64_t ttl_seconds) {
  std::unique_ptr<Registration> r(new Registration());
  r->etcd_ = std::move(etcd);
  r->key_ = prefix + "servers/" + info.name;
  r->value_ = info.ToJson().dump();
  const auto granted_at = std::chrono::steady_clock::now();
  ZIPG_ASSIGN_OR_RETURN(r->lease_, r->etcd_->LeaseGrant(ttl_seconds, &r->ttl_));
  r->Refreshed(granted_at);
  ZIPG_RETURN_IF_ERROR(r->etcd_->Put(r->key_, r->value_, r->lease_));
  r->thread_ = std::thread([p = r.get()] { p->KeepAlive(); });
  return r;
}

void Registration::KeepAlive() {
  const auto period = std::chrono::milliseconds(std::max<int64_t>(ttl_ * 1000 / 3, 200));
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, period, [this] { return stopping_; })) {
    const int64_t lease_id = lease_;
    std::function<void()> on_lost = on_lost_;
    lock.unlock();
    const auto sent_at = std::chrono::steady_clock::now();
    Status s = etcd_->LeaseKeepAlive(lease_id);
    if (s.ok()) {
      Refreshed(sent_at);
      s = PutIfMissing(lease_id);
    }
    if (s.code() == StatusCode::kNotFound) {
      // The lease expired (e.g. we were stalled): register again under a new one.
      if (on_lost) on_lost();
      const auto granted_at = std::chrono::steady_clock::now();
      auto lease = etcd_->LeaseGrant(ttl_, nullptr);
      if (lease.ok()) {
        {
          std::lock_guard<std::mutex> relock(mu_);
          lease_ = *lease;
          entry_put_ = false;  // the entry went with the old lease
        }
        // Failing here (a partition can let the grant through and not the put), the entry is
        // put at the next refresh: a lease kept alive with no entry would leave this member out
        // of the map for good.
        s = PutIfMissing(*lease);
        if (s.ok()) Refreshed(granted_at);
      } else {
        s = lease.status();
      }
    }
    if (!s.ok()) std::cerr << "registration " << key_ << ": " << s.ToString() << "\n";
    lock.lock();
  }
}

void Registration::Refreshed(std::chrono::steady_clock::time_point sent_at) {
  const int64_t until = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            (sent_at + std::chrono::seconds(ttl_)).time_since_epoch())
                            .count();
  valid_until_ns_ = until;
}

bool Registration::LeaseValid() const {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  return now < valid_until_ns_.load();
}

void Registration::OnLost(std::function<void()> f) {
  std::lock_guard<std::mutex> lock(mu_);
  on_lost_ = std::move(f);
}

Status Registration::Update(const MemberInfo& info) {
  int64_t lease;
  std::string value = info.ToJson().dump();
  {
    std::lock_guard<std::mutex> lock(mu_);
    value_ = value;
    lease = lease_;
  }
  Status s = etcd_->Put(key_, value, lease);
  if (s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (lease_ == lease) entry_put_ = true;
  }
  return s;
}

Status Registration::PutIfMissing(int64_t lease) {
  std::string value;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (entry_put_ || lease_ != lease) return Status::OK();
    value = value_;  // as the last Update left it
  }
  ZIPG_RETURN_IF_ERROR(etcd_->Put(key_, value, lease));
  std::lock_guard<std::mutex> lock(mu_);
  if (lease_ == lease) entry_put_ = true;
  return Status::OK();
}

Registration::~Registration() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  (void)etcd_->LeaseRevoke(lease_);
}

// --- ClusterView ---

StatusOr<std::unique_ptr<ClusterView>> ClusterView::Start(std::shared_ptr<EtcdClient> etcd,
                                                          const std::string& prefix) {
  std::unique_ptr<ClusterView> v(new ClusterView());
  v->etcd_ = std::move(etcd);
  v->prefix_ = prefix;
  ZIPG_RETURN_IF_ERROR(v->Reload());
  v->thread_ = std::thread([p = v.get()] { p->WatchLoop(); });
  return v;
}

std::unique_ptr<ClusterView> ClusterView::Fixed(std::shared_ptr<const ShardMap> map) {
  std::unique_ptr<ClusterView> view(new ClusterView());
  view->current_ = std::move(map);
  return view;
}

ClusterView::~ClusterView() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const ShardMap> ClusterView::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

Status ClusterView::Reload() {
  int64_t revision = 0;
  ZIPG_ASSIGN_OR_RETURN(auto kvs, etcd_->GetPrefix(prefix_ + "servers/", &revision));
  // The shard count after a split (docs/cluster-changes.md, step 4).
  uint32_t layout = 0;
  ZIPG_ASSIGN_OR_RETURN(auto layout_kv, etcd_->Get(LayoutKey(prefix_)));
  if (layout_kv) {
    const auto j = nlohmann::json::parse(layout_kv->value, nullptr, false);
    if (j.is_object() && j.contains("shards") && j["shards"].is_number_unsigned()) {
      layout = j["shards"].get<uint32_t>();
    } else {
      std::cerr << "ignoring " << layout_kv->key << ": not {\"shards\": N}\n";
    }
  }
  std::vector<MemberInfo> members;
  for (const auto& kv : kvs) {
    auto m = MemberInfo::FromJson(kv.value);
    if (!m.ok()) {
      std::cerr << "ignoring " << kv.key << ": " << m.status().ToString() << "\n";
      continue;
    }
    members.push_back(std::move(*m));
  }
  auto map = ShardMap::Build(std::move(members), revision, layout);
  std::lock_guard<std::mutex> lock(mu_);
  current_ = std::move(map);
  return Status::OK();
}

void ClusterView::WatchLoop() {
  // Any change under the prefix triggers a full re-read: the member list is small, and a re-read
  // can never drift from etcd the way applying deltas could after a missed event.
  while (!cancel_) {
    int64_t from;
    {
      std::lock_guard<std::mutex> lock(mu_);
      from = current_->revision + 1;
    }
    Status s = etcd_->Watch(
        prefix_, from,  // the members and the layout key
        [this](const std::vector<WatchEvent>&) {
          Status r = Reload();
          if (!r.ok()) std::cerr << "cluster view: " << r.ToString() << "\n";
          return r.ok();
        },
        cancel_);
    if (cancel_) break;
    if (!s.ok()) std::cerr << "cluster view: watch: " << s.ToString() << "; retrying\n";
    // Re-read before watching again (covers a compacted start revision and etcd restarts).
    for (int i = 0; i < 5 && !cancel_; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Status r = Reload();
    if (!r.ok()) std::cerr << "cluster view: " << r.ToString() << "\n";
  }
}

}  // namespace zipg::cluster

#include "logstore/ha.h"

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

namespace zipg::logstore {

using nlohmann::json;

namespace {
constexpr auto kPollInterval = std::chrono::milliseconds(100);
}  // namespace

HaCoordinator::HaCoordinator(std::shared_ptr<cluster::EtcdClient> etcd, const std::string& prefix,
                             std::string name, int64_t ttl_seconds)
    : etcd_(etcd),
      insync_key_(prefix + "logstore/insync"),
      name_(std::move(name)),
      election_(std::move(etcd), prefix + "logstore/leader", ttl_seconds) {}

HaCoordinator::~HaCoordinator() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  election_.Resign();
}

StatusOr<bool> HaCoordinator::Eligible() const {
  ZIPG_ASSIGN_OR_RETURN(auto kv, etcd_->Get(insync_key_));
  if (!kv) return true;
  const json j = json::parse(kv->value, nullptr, false);
  if (!j.is_object() || !j.contains("members") || !j["members"].is_array()) {
    return Status::Corruption(insync_key_ + " is not {\"epoch\", \"members\": [...]}: " +
                              kv->value);
  }
  for (const auto& m : j["members"]) {
    if (m.is_string() && m.get<std::string>() == name_) return true;
  }
  return false;
}

StatusOr<uint64_t> HaCoordinator::TryLead() {
  ZIPG_ASSIGN_OR_RETURN(bool eligible, Eligible());
  if (!eligible) return uint64_t{0};
  ZIPG_ASSIGN_OR_RETURN(auto epoch,
                        election_.Campaign(json{{"name", name_}}.dump(), callbacks_.on_lost,
                                           callbacks_.on_suspend));
  if (!epoch) return uint64_t{0};
  // Again, now that the old leader cannot change it: it may have gone on alone after our check.
  auto still = Eligible();
  if (!still.ok() || !*still) {
    std::cerr << "zipg logstore: won the election but is not in the in-sync set; giving it up\n";
    election_.Resign();
    if (!still.ok()) return still.status();
    return uint64_t{0};
  }
  return static_cast<uint64_t>(*epoch);
}

StatusOr<uint64_t> HaCoordinator::Start(Callbacks callbacks) {
  callbacks_ = std::move(callbacks);
  ZIPG_ASSIGN_OR_RETURN(uint64_t epoch, TryLead());
  if (epoch != 0) ZIPG_RETURN_IF_ERROR(PutInSync({name_}));
  return epoch;
}

void HaCoordinator::Run() {
  thread_ = std::thread([this] { Loop(); });
}

Status HaCoordinator::PutInSync(const std::vector<std::string>& members) {
  const json value = {{"epoch", election_.epoch()}, {"members", members}};
  ZIPG_ASSIGN_OR_RETURN(bool put, etcd_->PutIfGuard(insync_key_, value.dump(), election_.key(),
                                                    election_.epoch()));
  if (!put) {
    return Status::Unavailable("the in-sync set cannot be written: this LogStore no longer holds "
                               "the leadership of epoch " + std::to_string(election_.epoch()));
  }
  return Status::OK();
}

Status HaCoordinator::RecordSync(const std::string& state) {
  if (state == "degraded") return PutInSync({name_});
  std::string standby;
  {
    std::lock_guard lock(mu_);
    standby = standby_name_;
  }
  if (standby.empty()) return Status::OK();
  return PutInSync({name_, standby});
}

void HaCoordinator::Loop() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, kPollInterval, [this] { return stopping_; })) {
    lock.unlock();
    if (!election_.held() && election_.epoch() == 0) {
      // A standby: take over once the leader's key is gone.
      auto holder = election_.Holder();
      if (holder.ok() && !holder->has_value()) {
        auto epoch = TryLead();
        if (!epoch.ok()) {
          std::cerr << "zipg logstore: campaign: " << epoch.status().ToString() << "\n";
        } else if (*epoch != 0) {
          std::cerr << "zipg logstore: won the election, epoch " << *epoch << "; taking over\n";
          Status s = PutInSync({name_});
          if (s.ok()) s = callbacks_.promote(*epoch);
          if (!s.ok()) {
            std::cerr << "zipg logstore: takeover failed: " << s.ToString() << "\n";
            if (callbacks_.on_lost) callbacks_.on_lost();
          }
        }
      }
    } else if (election_.held()) {
      // The leader: ship to the registered standby. One that left the map (dead, its lease gone)
      // stays attached: the leader degrades, and probes it until it returns or another registers.
      auto [name, endpoint] = callbacks_.find_standby();
      bool changed;
      {
        std::lock_guard relock(mu_);
        changed = !endpoint.empty() && endpoint != standby_endpoint_;
        if (changed) {
          standby_name_ = name;
          standby_endpoint_ = endpoint;
        }
      }
      if (changed) callbacks_.attach(endpoint);
    }
    lock.lock();
  }
}

}  // namespace zipg::logstore

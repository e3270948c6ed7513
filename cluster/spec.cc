#include "cluster/spec.h"

#include <arpa/inet.h>

#include <algorithm>
#include <map>
#include <set>

#include "cluster/placement.h"
#include "util/file.h"

namespace zipg::cluster {

using nlohmann::json;

namespace {

// Reads fields of one JSON object, naming the spec file and the field's path in every error.
class Fields {
 public:
  Fields(const json& j, std::string path, const std::string& file)
      : j_(j), path_(std::move(path)), file_(file) {}

  Status Check(const std::set<std::string>& known) const {
    if (!j_.is_object()) return Error("", "must be an object");
    for (const auto& [key, value] : j_.items()) {
      if (!known.count(key)) return Error(key, "unknown field");
    }
    return Status::OK();
  }
  bool Has(const std::string& key) const { return j_.contains(key); }
  const json& At(const std::string& key) const { return j_.at(key); }
  std::string Path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  StatusOr<std::string> String(const std::string& key, bool required,
                               const std::string& fallback = "") const {
    if (!Has(key)) return required ? StatusOr<std::string>(Error(key, "is required")) : fallback;
    if (!j_[key].is_string() || j_[key].get<std::string>().empty()) {
      return Error(key, "must be a non-empty string");
    }
    return j_[key].get<std::string>();
  }
  StatusOr<int64_t> Int(const std::string& key, int64_t lo, int64_t hi, bool required,
                        int64_t fallback = 0) const {
    if (!Has(key)) return required ? StatusOr<int64_t>(Error(key, "is required")) : fallback;
    if (!j_[key].is_number_integer() || j_[key].get<int64_t>() < lo ||
        j_[key].get<int64_t>() > hi) {
      return Error(key, "must be an integer " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    return j_[key].get<int64_t>();
  }
  Status Error(const std::string& key, const std::string& what) const {
    const std::string where = key.empty() ? (path_.empty() ? "the document" : path_) : Path(key);
    return Status::InvalidArgument("cluster spec " + file_ + ": " + where + ": " + what);
  }

 private:
  const json& j_;
  const std::string path_;
  const std::string& file_;
};

bool IsIpv4(const std::string& s) {
  in_addr addr;
  return inet_pton(AF_INET, s.c_str(), &addr) == 1;
}

// 1-based line and column of byte `offset` of `text`.
std::string LineColumn(const std::string& text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

}  // namespace

StatusOr<ClusterSpec> ClusterSpec::Load(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return Status::InvalidArgument("cannot read the cluster spec " + path);
  return Parse(*text, path);
}

StatusOr<ClusterSpec> ClusterSpec::Parse(const std::string& text, const std::string& file) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return Status::InvalidArgument("cluster spec " + file + ": " + LineColumn(text, e.byte) +
                                   ": not valid JSON (" + e.what() + ")");
  } catch (const json::exception& e) {  // e.g. a number too large for a double (found by fuzzing)
    return Status::InvalidArgument("cluster spec " + file + ": not valid JSON (" + e.what() + ")");
  }
  ClusterSpec spec;
  Fields top(j, "", file);
  ZIPG_RETURN_IF_ERROR(top.Check({"cluster", "store", "shards", "replicas", "lease_ttl", "tls",
                                  "etcd", "hosts", "transport", "moving"}));
  ZIPG_ASSIGN_OR_RETURN(spec.cluster, top.String("cluster", false, "zipg"));
  ZIPG_ASSIGN_OR_RETURN(spec.store, top.String("store", true));
  ZIPG_ASSIGN_OR_RETURN(int64_t shards, top.Int("shards", 1, 1 << 20, true));
  ZIPG_ASSIGN_OR_RETURN(int64_t replicas, top.Int("replicas", 1, 16, false, 1));
  ZIPG_ASSIGN_OR_RETURN(int64_t ttl, top.Int("lease_ttl", 1, 3600, false, 5));
  spec.shards = static_cast<uint32_t>(shards);
  spec.replicas = static_cast<uint32_t>(replicas);
  spec.lease_ttl = static_cast<int>(ttl);

  if (top.Has("tls")) {
    Fields tls(top.At("tls"), "tls", file);
    ZIPG_RETURN_IF_ERROR(tls.Check({"ca", "cert", "key", "curve_key"}));
    ZIPG_ASSIGN_OR_RETURN(spec.tls.ca, tls.String("ca", true));
    ZIPG_ASSIGN_OR_RETURN(spec.tls.cert, tls.String("cert", true));
    ZIPG_ASSIGN_OR_RETURN(spec.tls.key, tls.String("key", true));
    ZIPG_ASSIGN_OR_RETURN(spec.tls.curve_key, tls.String("curve_key", false));
  }

  if (top.Has("transport")) {
    Fields t(top.At("transport"), "transport", file);
    ZIPG_RETURN_IF_ERROR(t.Check({"exec", "zipg"}));
    ZIPG_ASSIGN_OR_RETURN(spec.transport.exec, t.String("exec", false));
    ZIPG_ASSIGN_OR_RETURN(spec.transport.zipg, t.String("zipg", false));
  }

  if (!top.Has("hosts") || !top.At("hosts").is_array() || top.At("hosts").empty()) {
    return top.Error("hosts", "must be a non-empty list");
  }
  std::set<std::string> names;
  std::map<uint32_t, int> copies;
  int logstores = 0, aggregators = 0;
  for (size_t i = 0; i < top.At("hosts").size(); ++i) {
    const std::string path = "hosts[" + std::to_string(i) + "]";
    Fields h(top.At("hosts")[i], path, file);
    ZIPG_RETURN_IF_ERROR(
        h.Check({"name", "address", "store", "shard_server", "aggregator", "logstore"}));
    SpecHost host;
    ZIPG_ASSIGN_OR_RETURN(host.name, h.String("name", true));
    ZIPG_ASSIGN_OR_RETURN(host.address, h.String("address", true));
    ZIPG_ASSIGN_OR_RETURN(host.store, h.String("store", false));
    if (!names.insert(host.name).second) return h.Error("name", "'" + host.name + "' twice");
    if (!IsIpv4(host.address)) return h.Error("address", "must be an IPv4 address");
    std::set<int64_t> ports;
    auto port = [&](const Fields& f, const std::string& key) -> StatusOr<int> {
      ZIPG_ASSIGN_OR_RETURN(int64_t p, f.Int(key, 1, 65535, true));
      if (!ports.insert(p).second) return f.Error(key, "port " + std::to_string(p) + " is taken");
      return static_cast<int>(p);
    };
    // An optional port (metrics_port, http_port): validated and checked against the others
    // when present.
    auto optional_port = [&](const Fields& f, const std::string& key,
                             std::optional<int>* out) -> Status {
      if (!f.Has(key)) return Status::OK();
      ZIPG_ASSIGN_OR_RETURN(int p, port(f, key));
      *out = p;
      return Status::OK();
    };
    if (h.Has("shard_server")) {
      Fields s(h.At("shard_server"), path + ".shard_server", file);
      ZIPG_RETURN_IF_ERROR(s.Check({"shards", "port", "update_port", "metrics_port"}));
      ZIPG_ASSIGN_OR_RETURN(host.shard_port, port(s, "port"));
      ZIPG_ASSIGN_OR_RETURN(host.update_port, port(s, "update_port"));
      ZIPG_RETURN_IF_ERROR(optional_port(s, "metrics_port", &host.shard_metrics_port));
      // Empty: a shard server with no shards yet (a host just added, or drained).
      if (!s.Has("shards") || !s.At("shards").is_array()) {
        return s.Error("shards", "must be a list of shard numbers");
      }
      std::vector<uint32_t> list;
      for (const auto& v : s.At("shards")) {
        if (!v.is_number_unsigned() || v.get<uint64_t>() >= spec.shards) {
          return s.Error("shards",
                         "each must be a shard number 0.." + std::to_string(spec.shards - 1));
        }
        list.push_back(v.get<uint32_t>());
      }
      std::sort(list.begin(), list.end());
      if (std::adjacent_find(list.begin(), list.end()) != list.end()) {
        return s.Error("shards", "a shard is listed twice");
      }
      for (uint32_t sh : list) ++copies[sh];
      host.shards = std::move(list);
    }
    if (h.Has("aggregator")) {
      Fields a(h.At("aggregator"), path + ".aggregator", file);
      ZIPG_RETURN_IF_ERROR(a.Check({"port", "metrics_port", "http_port"}));
      ZIPG_ASSIGN_OR_RETURN(int p, port(a, "port"));
      host.aggregator_port = p;
      ZIPG_RETURN_IF_ERROR(optional_port(a, "metrics_port", &host.aggregator_metrics_port));
      ZIPG_RETURN_IF_ERROR(optional_port(a, "http_port", &host.http_port));
      ++aggregators;
    }
    if (h.Has("logstore")) {
      Fields l(h.At("logstore"), path + ".logstore", file);
      ZIPG_RETURN_IF_ERROR(l.Check({"port", "ship_port", "metrics_port"}));
      ZIPG_ASSIGN_OR_RETURN(int p, port(l, "port"));
      host.logstore_port = p;
      ZIPG_RETURN_IF_ERROR(optional_port(l, "ship_port", &host.ship_port));
      ZIPG_RETURN_IF_ERROR(optional_port(l, "metrics_port", &host.logstore_metrics_port));
      ++logstores;
    }
    spec.hosts.push_back(std::move(host));
  }
  if (logstores < 1 || logstores > 2) {
    return top.Error("hosts", "one host, or two (a leader and a standby), must run the logstore");
  }
  if (logstores == 2) {
    for (size_t i = 0; i < spec.hosts.size(); ++i) {
      if (spec.hosts[i].logstore_port && !spec.hosts[i].ship_port) {
        return Fields(top.At("hosts")[i], "hosts[" + std::to_string(i) + "]", file)
            .Error("logstore", "needs a ship_port: two LogStores ship their log to each other");
      }
    }
  }
  if (aggregators < 1) return top.Error("hosts", "at least one host must run an aggregator");
  if (top.Has("moving")) {
    Fields m(top.At("moving"), "moving", file);
    ZIPG_RETURN_IF_ERROR(m.Check({"shard", "from", "to"}));
    SpecMove move;
    ZIPG_ASSIGN_OR_RETURN(int64_t shard, m.Int("shard", 0, int64_t{spec.shards} - 1, true));
    move.shard = static_cast<uint32_t>(shard);
    ZIPG_ASSIGN_OR_RETURN(move.from, m.String("from", true));
    ZIPG_ASSIGN_OR_RETURN(move.to, m.String("to", true));
    if (move.from == move.to) return m.Error("to", "is the host it moves from");
    for (const std::string* name : {&move.from, &move.to}) {
      const SpecHost* host = nullptr;
      for (const auto& h : spec.hosts) {
        if (h.name == *name) host = &h;
      }
      const char* key = name == &move.from ? "from" : "to";
      if (!host || !host->shards) return m.Error(key, "'" + *name + "' is not a shard host");
      if (std::find(host->shards->begin(), host->shards->end(), move.shard) ==
          host->shards->end()) {
        return m.Error(key, "'" + *name + "' does not list shard " + std::to_string(shard) +
                                " (both hosts list it while it moves)");
      }
    }
    spec.moving = move;
  }
  for (uint32_t s = 0; s < spec.shards; ++s) {
    // The shard that moves is on both hosts until the move ends.
    const int extra = spec.moving && spec.moving->shard == s ? 1 : 0;
    if (copies[s] != static_cast<int>(spec.replicas) + extra) {
      return top.Error("hosts", "shard " + std::to_string(s) + " is on " +
                                    std::to_string(copies[s]) + " hosts; replicas is " +
                                    std::to_string(spec.replicas) +
                                    (extra ? " (and it is moving: one more while it moves)" : ""));
    }
  }

  if (!top.Has("etcd")) return top.Error("etcd", "is required (members or endpoints)");
  Fields etcd(top.At("etcd"), "etcd", file);
  ZIPG_RETURN_IF_ERROR(etcd.Check({"members", "endpoints"}));
  if (etcd.Has("members")) {
    if (!etcd.At("members").is_array()) return etcd.Error("members", "must be a list");
    for (size_t i = 0; i < etcd.At("members").size(); ++i) {
      Fields m(etcd.At("members")[i], "etcd.members[" + std::to_string(i) + "]", file);
      ZIPG_RETURN_IF_ERROR(m.Check({"host", "client_port", "peer_port", "join"}));
      SpecEtcdMember member;
      if (m.Has("join")) {
        if (!m.At("join").is_boolean()) return m.Error("join", "must be true or false");
        member.join = m.At("join").get<bool>();
      }
      ZIPG_ASSIGN_OR_RETURN(member.host, m.String("host", true));
      if (!names.count(member.host)) return m.Error("host", "'" + member.host + "' is no host");
      for (const auto& other : spec.etcd_members) {
        if (other.host == member.host) return m.Error("host", "two members on one host");
      }
      ZIPG_ASSIGN_OR_RETURN(int64_t c, m.Int("client_port", 1, 65535, true));
      ZIPG_ASSIGN_OR_RETURN(int64_t p, m.Int("peer_port", 1, 65535, true));
      member.client_port = static_cast<int>(c);
      member.peer_port = static_cast<int>(p);
      const SpecHost& h = *spec.Host(member.host);
      if (c == p) return m.Error("peer_port", "is the client_port");
      for (int taken : h.Ports()) {
        if (taken == c || taken == p) {
          return m.Error(
              taken == c ? "client_port" : "peer_port",
              "port " + std::to_string(taken) + " is taken by a server of host " + h.name);
        }
      }
      spec.etcd_members.push_back(member);
    }
  }
  if (etcd.Has("endpoints")) {
    if (!etcd.At("endpoints").is_array()) return etcd.Error("endpoints", "must be a list");
    for (const auto& e : etcd.At("endpoints")) {
      if (!e.is_string() || e.get<std::string>().empty()) {
        return etcd.Error("endpoints", "each must be a URL such as https://10.0.0.1:2379");
      }
      spec.etcd_endpoints.push_back(e.get<std::string>());
    }
  }
  if (spec.etcd_members.empty() == spec.etcd_endpoints.empty()) {
    return etcd.Error("",
                      "give either members (etcd run by zipg node start) or endpoints (an "
                      "existing etcd), not both or neither");
  }
  return spec;
}

json ClusterSpec::ToJson() const {
  json hosts = json::array();
  for (const SpecHost& h : this->hosts) {
    json j = {{"name", h.name}, {"address", h.address}};
    if (!h.store.empty()) j["store"] = h.store;
    if (h.shards) {
      j["shard_server"] = {
          {"shards", *h.shards}, {"port", h.shard_port}, {"update_port", h.update_port}};
      if (h.shard_metrics_port) j["shard_server"]["metrics_port"] = *h.shard_metrics_port;
    }
    if (h.aggregator_port) {
      j["aggregator"] = {{"port", *h.aggregator_port}};
      if (h.aggregator_metrics_port) j["aggregator"]["metrics_port"] = *h.aggregator_metrics_port;
      if (h.http_port) j["aggregator"]["http_port"] = *h.http_port;
    }
    if (h.logstore_port) {
      j["logstore"] = {{"port", *h.logstore_port}};
      if (h.ship_port) j["logstore"]["ship_port"] = *h.ship_port;
      if (h.logstore_metrics_port) j["logstore"]["metrics_port"] = *h.logstore_metrics_port;
    }
    hosts.push_back(j);
  }
  json etcd = json::object();
  if (!etcd_members.empty()) {
    etcd["members"] = json::array();
    for (const auto& m : etcd_members) {
      etcd["members"].push_back(
          {{"host", m.host}, {"client_port", m.client_port}, {"peer_port", m.peer_port}});
      if (m.join) etcd["members"].back()["join"] = true;
    }
  } else {
    etcd["endpoints"] = etcd_endpoints;
  }
  json j = {{"cluster", cluster},     {"store", store}, {"shards", shards}, {"replicas", replicas},
            {"lease_ttl", lease_ttl}, {"etcd", etcd},   {"hosts", hosts}};
  if (moving) j["moving"] = {{"shard", moving->shard}, {"from", moving->from}, {"to", moving->to}};
  if (!transport.exec.empty()) j["transport"]["exec"] = transport.exec;
  if (!transport.zipg.empty()) j["transport"]["zipg"] = transport.zipg;
  if (tls.enabled()) {
    j["tls"] = {{"ca", tls.ca}, {"cert", tls.cert}, {"key", tls.key}};
    if (!tls.curve_key.empty()) j["tls"]["curve_key"] = tls.curve_key;
  }
  return j;
}

std::vector<int> SpecHost::Ports() const {
  std::vector<int> out;
  if (shards) {
    out.push_back(shard_port);
    out.push_back(update_port);
  }
  for (const std::optional<int>* p :
       {&shard_metrics_port, &aggregator_port, &aggregator_metrics_port, &http_port, &logstore_port,
        &ship_port, &logstore_metrics_port}) {
    if (p->has_value()) out.push_back(**p);
  }
  return out;
}

const SpecHost* ClusterSpec::Host(const std::string& name) const {
  for (const SpecHost& h : hosts) {
    if (h.name == name) return &h;
  }
  return nullptr;
}

std::string ClusterSpec::EtcdEndpoints() const {
  std::string out;
  auto add = [&](const std::string& endpoint) {
    if (!out.empty()) out += ",";
    out += endpoint;
  };
  if (etcd_members.empty()) {
    for (const auto& e : etcd_endpoints) add(e);
    return out;
  }
  for (const auto& m : etcd_members) {
    add(std::string(tls.enabled() ? "https://" : "http://") + Host(m.host)->address + ":" +
        std::to_string(m.client_port));
  }
  return out;
}

std::string ClusterSpec::StoreOf(const SpecHost& host) const {
  return host.store.empty() ? store : host.store;
}

SpecTls ClusterSpec::TlsOf(const SpecHost& host) const {
  SpecTls t = tls;
  t.cert = ExpandHost(t.cert, host);
  t.key = ExpandHost(t.key, host);
  return t;
}

std::string ExpandHost(std::string text, const SpecHost& host) {
  return Replace(Replace(std::move(text), "{host}", host.name), "{address}", host.address);
}

StatusOr<ClusterSpec> PlanCluster(const PlanOptions& o) {
  if (o.hosts.empty()) return Status::InvalidArgument("--hosts needs at least one host");
  if (!o.addresses.empty() && o.addresses.size() != o.hosts.size()) {
    return Status::InvalidArgument("--addresses needs one address per host");
  }
  const int span = o.metrics ? 10 : 6;  // the highest offset from base_port used
  if (o.base_port < 1 || o.base_port > 65535 - span) {
    return Status::InvalidArgument("--base-port must be 1.." + std::to_string(65535 - span));
  }
  if (o.logstores < 1 || o.logstores > 2)
    return Status::InvalidArgument("--logstores must be 1 or 2");
  if (o.logstores == 2 && o.hosts.size() < 2) {
    return Status::InvalidArgument(
        "--logstores 2 needs two hosts: the LogStores run on different ones");
  }
  ZIPG_ASSIGN_OR_RETURN(auto placed,
                        PlaceReplicas(o.shards, static_cast<uint32_t>(o.hosts.size()), o.replicas));
  ClusterSpec spec;
  spec.cluster = o.cluster;
  spec.store = o.store;
  spec.shards = o.shards;
  spec.replicas = o.replicas;
  if (!o.tls_dir.empty()) {
    spec.tls.ca = o.tls_dir + "/ca.pem";
    spec.tls.cert = o.tls_dir + "/{host}.pem";
    spec.tls.key = o.tls_dir + "/{host}.key";
  }
  for (size_t i = 0; i < o.hosts.size(); ++i) {
    SpecHost h;
    h.name = o.hosts[i];
    h.address = o.addresses.empty() ? o.hosts[i] : o.addresses[i];
    if (!placed[i].empty()) {
      h.shards = placed[i];
      h.shard_port = o.base_port + 1;
      h.update_port = o.base_port + 2;
      if (o.metrics) h.shard_metrics_port = o.base_port + 7;
    }
    h.aggregator_port = o.base_port;
    if (o.metrics) {
      h.aggregator_metrics_port = o.base_port + 8;
      h.http_port = o.base_port + 10;
    }
    if (i < o.logstores) {
      h.logstore_port = o.base_port + 3;
      if (o.logstores == 2) h.ship_port = o.base_port + 6;
      if (o.metrics) h.logstore_metrics_port = o.base_port + 9;
    }
    spec.hosts.push_back(h);
  }
  const size_t members = std::min<size_t>(std::max<uint32_t>(o.etcd_members, 1), o.hosts.size());
  for (size_t i = 0; i < members; ++i) {
    spec.etcd_members.push_back({o.hosts[i], o.base_port + 4, o.base_port + 5});
  }
  // The same checks as a hand-written spec gets.
  return ClusterSpec::Parse(spec.ToJson().dump(2), "(planned)");
}

}  // namespace zipg::cluster

// Tests of the cluster spec (cluster/spec.h): a planned spec round-trips and places replicas on
// different hosts; each kind of mistake is refused with the field (or line and column) named.
#include "cluster/spec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace zipg::cluster {
namespace {

PlanOptions Plan3() {
  PlanOptions o;
  o.hosts = {"a", "b", "c"};
  o.addresses = {"10.0.0.1", "10.0.0.2", "10.0.0.3"};
  o.replicas = 2;
  o.shards = 4;
  o.store = "/srv/store";
  o.tls_dir = "/srv/tls";
  return o;
}

TEST(ClusterSpecTest, APlanRoundTripsAndPutsReplicasOnDifferentHosts) {
  auto spec = PlanCluster(Plan3());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  std::map<uint32_t, std::set<std::string>> holders;
  for (const auto& h : spec->hosts) {
    ASSERT_TRUE(h.shards.has_value()) << h.name;
    for (uint32_t s : *h.shards) holders[s].insert(h.name);
    EXPECT_TRUE(h.aggregator_port.has_value());
  }
  for (uint32_t s = 0; s < 4; ++s) EXPECT_EQ(holders[s].size(), 2u) << s;
  EXPECT_EQ(spec->etcd_members.size(), 3u);
  EXPECT_EQ(spec->EtcdEndpoints(),
            "https://10.0.0.1:7004,https://10.0.0.2:7004,https://10.0.0.3:7004");
  const auto tls = spec->TlsOf(*spec->Host("b"));
  EXPECT_EQ(tls.cert, "/srv/tls/b.pem");
  EXPECT_EQ(tls.key, "/srv/tls/b.key");
  auto again = ClusterSpec::Parse(spec->ToJson().dump(), "x.json");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->ToJson(), spec->ToJson());
  EXPECT_FALSE(spec->ToJson().contains("transport"));  // none kept: none written
  // A spec from before the update channel used the TLS files names a CURVE key: still accepted.
  nlohmann::json old_spec = spec->ToJson();
  old_spec["tls"]["curve_key"] = "/srv/tls/curve.key";
  auto old = ClusterSpec::Parse(old_spec.dump(), "old.json");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->ToJson(), old_spec);
  // A kept transport (zipg deploy) round-trips; a field of the wrong type is named.
  ClusterSpec with = *spec;
  with.transport = {"ip netns exec zipg-{host}", "/opt/zipg/bin/zipg"};
  auto kept = ClusterSpec::Parse(with.ToJson().dump(), "x.json");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->transport.exec, "ip netns exec zipg-{host}");
  EXPECT_EQ(kept->transport.zipg, "/opt/zipg/bin/zipg");
  EXPECT_EQ(kept->ToJson(), with.ToJson());
  nlohmann::json bad = with.ToJson();
  bad["transport"]["zipg"] = 7;
  auto refused = ClusterSpec::Parse(bad.dump(), "x.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("transport.zipg"), std::string::npos)
      << refused.status().ToString();
  bad["transport"] = {{"exec", "ssh"}, {"shell", "sh"}};
  refused = ClusterSpec::Parse(bad.dump(), "x.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("transport.shell"), std::string::npos)
      << refused.status().ToString();
  // Without TLS, plain http; a host may name its own store.
  auto o = Plan3();
  o.tls_dir.clear();
  o.etcd_members = 1;
  auto plain = PlanCluster(o);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->EtcdEndpoints(), "http://10.0.0.1:7004");
  auto j = plain->ToJson();
  j["hosts"][1]["store"] = "/other";
  auto own = ClusterSpec::Parse(j.dump(), "x.json");
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->StoreOf(*own->Host("b")), "/other");
  EXPECT_EQ(own->StoreOf(*own->Host("a")), "/srv/store");
  EXPECT_EQ(own->LogStores(), 1);
  EXPECT_EQ(own->LogStoreName(*own->Host("a")), "logstore");
  // Two LogStores: on the first two hosts, each with a ship port, named by host.
  o.logstores = 2;
  auto two = PlanCluster(o);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->LogStores(), 2);
  EXPECT_EQ(two->Host("a")->ship_port, std::optional<int>(7006));
  EXPECT_EQ(two->Host("b")->logstore_port, std::optional<int>(7003));
  EXPECT_FALSE(two->Host("c")->logstore_port.has_value());
  EXPECT_EQ(two->LogStoreName(*two->Host("b")), "logstore-b");
  auto two_again = ClusterSpec::Parse(two->ToJson().dump(), "x.json");
  ASSERT_TRUE(two_again.ok()) << two_again.status().ToString();
  EXPECT_EQ(two_again->ToJson(), two->ToJson());
  o.logstores = 3;
  EXPECT_EQ(PlanCluster(o).status().code(), StatusCode::kInvalidArgument);
  o.logstores = 2;
  o.hosts = {"a"};
  o.addresses = {"10.0.0.1"};
  o.replicas = 1;
  EXPECT_EQ(PlanCluster(o).status().code(), StatusCode::kInvalidArgument);
  o = Plan3();
  // More replicas than hosts cannot be placed.
  o.replicas = 4;
  EXPECT_EQ(PlanCluster(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(ClusterSpecTest, MetricsAndHttpPortsArePlannedAndRoundTrip) {
  // A plan without --metrics has none, and writes none back.
  auto plain = PlanCluster(Plan3());
  ASSERT_TRUE(plain.ok());
  for (const auto& h : plain->hosts) {
    EXPECT_FALSE(h.shard_metrics_port || h.aggregator_metrics_port || h.http_port ||
                 h.logstore_metrics_port)
        << h.name;
  }
  EXPECT_EQ(plain->ToJson().dump().find("metrics_port"), std::string::npos);
  EXPECT_EQ(plain->ToJson().dump().find("http_port"), std::string::npos);
  // With it: every process a metrics port, every aggregator an HTTP port, from base+7..base+10.
  auto o = Plan3();
  o.metrics = true;
  o.logstores = 2;
  auto spec = PlanCluster(o);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const SpecHost& a = *spec->Host("a");
  EXPECT_EQ(a.shard_metrics_port, std::optional<int>(7007));
  EXPECT_EQ(a.aggregator_metrics_port, std::optional<int>(7008));
  EXPECT_EQ(a.logstore_metrics_port, std::optional<int>(7009));
  EXPECT_EQ(a.http_port, std::optional<int>(7010));
  EXPECT_FALSE(spec->Host("c")->logstore_metrics_port.has_value());
  std::vector<int> ports = a.Ports();
  std::sort(ports.begin(), ports.end());
  EXPECT_EQ(ports, (std::vector<int>{7000, 7001, 7002, 7003, 7006, 7007, 7008, 7009, 7010}));
  const nlohmann::json j = spec->ToJson();
  EXPECT_EQ(j["hosts"][0]["shard_server"]["metrics_port"], 7007);
  EXPECT_EQ(j["hosts"][0]["aggregator"]["metrics_port"], 7008);
  EXPECT_EQ(j["hosts"][0]["aggregator"]["http_port"], 7010);
  EXPECT_EQ(j["hosts"][0]["logstore"]["metrics_port"], 7009);
  auto again = ClusterSpec::Parse(j.dump(), "x.json");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->ToJson(), j);
  // A hand-written spec may give some processes a metrics port and not others.
  nlohmann::json some = plain->ToJson();
  some["hosts"][1]["aggregator"]["http_port"] = 8080;
  some["hosts"][2]["shard_server"]["metrics_port"] = 9100;
  auto mixed = ClusterSpec::Parse(some.dump(), "x.json");
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  EXPECT_EQ(mixed->Host("b")->http_port, std::optional<int>(8080));
  EXPECT_FALSE(mixed->Host("b")->aggregator_metrics_port.has_value());
  EXPECT_EQ(mixed->Host("c")->shard_metrics_port, std::optional<int>(9100));
  EXPECT_EQ(mixed->ToJson(), some);
  // The base port leaves room for the highest offset.
  o.base_port = 65535 - 6;
  EXPECT_EQ(PlanCluster(o).status().code(), StatusCode::kInvalidArgument);
  o.metrics = false;
  EXPECT_TRUE(PlanCluster(o).ok());
}

void ExpectError(const nlohmann::json& j, const std::string& fragment) {
  auto spec = ClusterSpec::Parse(j.dump(2), "bad.json");
  ASSERT_FALSE(spec.ok()) << "accepted: " << j.dump();
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find("bad.json"), std::string::npos) << spec.status().message();
  EXPECT_NE(spec.status().message().find(fragment), std::string::npos)
      << "want '" << fragment << "' in: " << spec.status().message();
}

TEST(ClusterSpecTest, MistakesAreNamed) {
  auto good = PlanCluster(Plan3());
  ASSERT_TRUE(good.ok());
  const nlohmann::json g = good->ToJson();
  auto with = [&](auto change) {
    nlohmann::json j = g;
    change(j);
    return j;
  };
  // A number no double holds is a JSON error, not an uncaught exception (found by fuzzing).
  auto huge = ClusterSpec::Parse(R"({"shards": 1e999})", "x.json");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(huge.status().message().find("x.json: not valid JSON"), std::string::npos)
      << huge.status().ToString();
  ExpectError(with([](auto& j) { j.erase("store"); }), "store: is required");
  ExpectError(with([](auto& j) { j["replicas"] = 0; }), "replicas: must be an integer 1..16");
  ExpectError(with([](auto& j) { j["colour"] = "red"; }), "colour: unknown field");
  ExpectError(with([](auto& j) { j["hosts"][1]["address"] = "host-b"; }),
              "hosts[1].address: must be an IPv4 address");
  ExpectError(with([](auto& j) { j["hosts"][2]["name"] = "a"; }), "hosts[2].name: 'a' twice");
  ExpectError(with([](auto& j) { j["hosts"][0]["shard_server"]["port"] = 70000; }),
              "hosts[0].shard_server.port: must be an integer 1..65535");
  ExpectError(with([](auto& j) { j["hosts"][0]["shard_server"]["update_port"] = 7000; }),
              "hosts[0].aggregator.port: port 7000 is taken");
  ExpectError(with([](auto& j) {
                j["hosts"][0]["shard_server"]["shards"] = {0, 9};
              }),
              "hosts[0].shard_server.shards: each must be a shard number 0..3");
  ExpectError(with([](auto& j) { j["hosts"][0]["shard_server"]["shards"] = {0}; }),
              "is on 1 hosts; replicas is 2");
  ExpectError(with([](auto& j) {
                j["hosts"][1]["logstore"] = {{"port", 7100}};
              }),
              "hosts[0].logstore: needs a ship_port");
  ExpectError(with([](auto& j) {
                for (auto& h : j["hosts"]) h["logstore"] = {{"port", 7100}, {"ship_port", 7101}};
              }),
              "one host, or two (a leader and a standby), must run the logstore");
  ExpectError(with([](auto& j) {
                j["hosts"][0]["logstore"] = {{"port", 7100}, {"ship_port", 7000}};
              }),
              "port 7000 is taken");
  // Metrics and HTTP ports: in range, no clash with another port of the host (or its etcd
  // member's), only where they belong.
  ExpectError(with([](auto& j) { j["hosts"][0]["aggregator"]["metrics_port"] = 0; }),
              "hosts[0].aggregator.metrics_port: must be an integer 1..65535");
  ExpectError(with([](auto& j) { j["hosts"][1]["aggregator"]["http_port"] = "8080"; }),
              "hosts[1].aggregator.http_port: must be an integer 1..65535");
  ExpectError(with([](auto& j) { j["hosts"][2]["shard_server"]["metrics_port"] = 65536; }),
              "hosts[2].shard_server.metrics_port: must be an integer 1..65535");
  ExpectError(with([](auto& j) { j["hosts"][0]["shard_server"]["metrics_port"] = 7002; }),
              "hosts[0].shard_server.metrics_port: port 7002 is taken");
  ExpectError(with([](auto& j) {
                j["hosts"][1]["aggregator"]["metrics_port"] = 9100;
                j["hosts"][1]["aggregator"]["http_port"] = 9100;
              }),
              "hosts[1].aggregator.http_port: port 9100 is taken");
  ExpectError(with([](auto& j) { j["hosts"][0]["logstore"]["metrics_port"] = 7002; }),
              "hosts[0].logstore.metrics_port: port 7002 is taken");
  ExpectError(with([](auto& j) { j["hosts"][0]["aggregator"]["metrics_port"] = 7004; }),
              "etcd.members[0].client_port: port 7004 is taken by a server of host a");
  ExpectError(with([](auto& j) { j["hosts"][1]["logstore_metrics_port"] = 9100; }),
              "hosts[1].logstore_metrics_port: unknown field");
  ExpectError(with([](auto& j) { j["hosts"][0]["shard_server"]["http_port"] = 9100; }),
              "hosts[0].shard_server.http_port: unknown field");
  ExpectError(with([](auto& j) { j["etcd"]["members"][0]["host"] = "z"; }),
              "etcd.members[0].host: 'z' is no host");
  ExpectError(with([](auto& j) { j["etcd"]["endpoints"] = {"http://1.2.3.4:2379"}; }),
              "not both or neither");
  ExpectError(with([](auto& j) { j["tls"].erase("key"); }), "tls.key: is required");
  // JSON syntax errors give the line and column.
  auto broken = ClusterSpec::Parse("{\n  \"store\": \"/s\",\n  \"shards\": 4,,\n}", "syntax.json");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("syntax.json: line 3, column"), std::string::npos)
      << broken.status().message();
}

// A move under way (zipg deploy move): the shard is on both hosts, one copy more than
// `replicas`, and only while the record names it.
TEST(ClusterSpecTest, AMoveUnderWayAllowsOneMoreCopyOfItsShard) {
  auto spec = PlanCluster(Plan3());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  // A shard of a and a host without it.
  const uint32_t shard = spec->hosts[0].shards->front();
  const SpecHost* without = nullptr;
  for (const auto& h : spec->hosts) {
    if (std::find(h.shards->begin(), h.shards->end(), shard) == h.shards->end()) without = &h;
  }
  ASSERT_NE(without, nullptr);
  nlohmann::json j = spec->ToJson();
  size_t to = 0;
  for (size_t i = 0; i < j["hosts"].size(); ++i) {
    if (j["hosts"][i]["name"] == without->name) to = i;
  }
  auto& list = j["hosts"][to]["shard_server"]["shards"];
  list.push_back(shard);
  std::sort(list.begin(), list.end());  // as the spec writes its lists
  auto unrecorded = ClusterSpec::Parse(j.dump(), "m.json");
  EXPECT_FALSE(unrecorded.ok());
  EXPECT_NE(unrecorded.status().message().find("is on 3 hosts; replicas is 2"), std::string::npos)
      << unrecorded.status().message();
  j["moving"] = {{"shard", shard}, {"from", "a"}, {"to", without->name}};
  auto moving = ClusterSpec::Parse(j.dump(), "m.json");
  ASSERT_TRUE(moving.ok()) << moving.status().ToString();
  ASSERT_TRUE(moving->moving.has_value());
  EXPECT_EQ(*moving->moving, (SpecMove{shard, "a", without->name}));
  EXPECT_EQ(moving->ToJson(), j);  // round-trips
  // A record that does not match the lists is named.
  for (auto [field, value, why] :
       {std::tuple<const char*, nlohmann::json, const char*>{"from", "zz", "is not a shard host"},
        {"to", "a", "is the host it moves from"},
        {"shard", 99, "moving.shard"},
        {"extra", 1, "moving.extra"}}) {
    nlohmann::json bad = j;
    bad["moving"][field] = value;
    auto refused = ClusterSpec::Parse(bad.dump(), "m.json");
    EXPECT_FALSE(refused.ok()) << field;
    EXPECT_NE(refused.status().message().find(why), std::string::npos)
        << field << ": " << refused.status().message();
  }
  // The record without the extra copy: the source must still list it.
  nlohmann::json gone = j;
  gone["hosts"][0]["shard_server"]["shards"] = nlohmann::json::array();
  for (uint32_t s : *spec->hosts[0].shards) {
    if (s != shard) gone["hosts"][0]["shard_server"]["shards"].push_back(s);
  }
  auto refused = ClusterSpec::Parse(gone.dump(), "m.json");
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("does not list shard"), std::string::npos)
      << refused.status().message();
}

// What `zipg deploy add-host` writes: a host whose shard server has no shards yet, and an etcd
// member that joins a running etcd (started with --initial-cluster-state existing).
TEST(ClusterSpecTest, AnAddedHostHasNoShardsYetAndItsEtcdMemberJoins) {
  auto spec = PlanCluster(Plan3());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  nlohmann::json j = spec->ToJson();
  nlohmann::json added = j["hosts"][0];
  added["name"] = "d";
  added["address"] = "10.0.0.4";
  added["shard_server"]["shards"] = nlohmann::json::array();
  added.erase("logstore");  // the plan's first host runs the LogStore; d does not
  j["hosts"].push_back(added);
  nlohmann::json member = j["etcd"]["members"][0];
  member["host"] = "d";
  member["join"] = true;
  j["etcd"]["members"].push_back(member);
  auto parsed = ClusterSpec::Parse(j.dump(), "d.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const SpecHost* d = parsed->Host("d");
  ASSERT_NE(d, nullptr);
  ASSERT_TRUE(d->shards.has_value());
  EXPECT_TRUE(d->shards->empty());
  ASSERT_EQ(parsed->etcd_members.size(), 4u);
  EXPECT_FALSE(parsed->etcd_members[0].join);  // those that formed the cluster
  EXPECT_TRUE(parsed->etcd_members[3].join);
  EXPECT_EQ(parsed->ToJson(), j);  // round-trips; "join" only where it is true
  EXPECT_FALSE(parsed->ToJson()["etcd"]["members"][0].contains("join"));
  // "join" is a boolean; shards a list (empty or not).
  nlohmann::json bad = j;
  bad["etcd"]["members"][3]["join"] = "yes";
  auto refused = ClusterSpec::Parse(bad.dump(), "d.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("etcd.members[3].join"), std::string::npos)
      << refused.status().message();
  bad = j;
  bad["hosts"][3]["shard_server"]["shards"] = 2;
  refused = ClusterSpec::Parse(bad.dump(), "d.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("must be a list of shard numbers"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace zipg::cluster

// Fuzzes the deployment spec parser (cluster/spec.h, `zipg node start --spec`, `zipg deploy`).
// Properties: a refused spec is INVALID_ARGUMENT and its error names the file; an accepted spec
// written back with ToJson parses to the same spec.

#include <cstdint>
#include <string>

#include "cluster/spec.h"
#include "fuzz/fuzz_common.h"

using zipg::fuzz::Check;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zipg::fuzz::MaybeWriteSeeds([] {
    std::vector<std::string> seeds;
    zipg::cluster::PlanOptions o;
    o.hosts = {"a", "b", "c"};
    o.addresses = {"10.0.0.1", "10.0.0.2", "10.0.0.3"};
    o.shards = 6;
    o.replicas = 2;
    o.store = "/srv/store";
    for (int variant = 0; variant < 3; ++variant) {
      if (variant == 1) o.tls_dir = "/etc/zipg/tls";
      if (variant == 2) o.logstores = 2, o.etcd_members = 1;
      auto spec = zipg::cluster::PlanCluster(o);
      Check(spec.ok(), "the seed plans are valid");
      seeds.push_back(spec->ToJson().dump(2));
    }
    return seeds;
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = zipg::cluster::ClusterSpec::Parse(text, "spec.json");
  if (!spec.ok()) {
    Check(spec.status().code() == zipg::StatusCode::kInvalidArgument,
          "a bad spec is INVALID_ARGUMENT");
    Check(spec.status().message().find("spec.json") != std::string::npos,
          "a bad spec's error names the file");
    return 0;
  }
  const nlohmann::json json = spec->ToJson();
  auto again = zipg::cluster::ClusterSpec::Parse(json.dump(), "again.json");
  Check(again.ok(), "an accepted spec written back parses");
  Check(again->ToJson() == json, "an accepted spec written back parses to the same spec");
  return 0;
}

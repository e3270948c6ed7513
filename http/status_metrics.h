// Metrics read at scrape time from a server's status document (docs/operations.md, "Metrics"):
// the status document and the metrics come from the same counters, so they cannot disagree, and
// nothing is counted twice.
#pragma once

#include <nlohmann/json.hpp>

#include "util/metrics.h"

namespace zipg::http {

// Adds the samples of `status`, the status document of a shard server, a LogStore or an
// aggregator (as `zipg status --connect` prints it), to `out`. Fields a document lacks are
// skipped.
void StatusMetrics(const nlohmann::json& status, metrics::Samples* out);

}  // namespace zipg::http

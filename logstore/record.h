// A LogStore write as it is logged: one of the four unconditional operations of docs/writes.md
// with its data. The WAL payload format is, little endian:
//   u8 op | i64 node | i64 type | i64 dst | i64 timestamp | u32 n | n x (u32 len, name, u32 len,
//   value)
// (type, dst, timestamp are 0 for node ops; properties empty for deletes).
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/updates.h"
#include "model/types.h"
#include "util/status.h"

namespace zipg::logstore {

struct LogRecord {
  engine::UpdateOp op = engine::UpdateOp::kPutNode;
  int64_t node = 0;  // the node, or the edge's src
  int64_t type = 0;
  int64_t dst = 0;
  int64_t timestamp = 0;
  Properties properties;  // normalized (graph/edge_list.h)

  bool is_put() const {
    return op == engine::UpdateOp::kPutNode || op == engine::UpdateOp::kPutEdge;
  }
  bool is_edge() const {
    return op == engine::UpdateOp::kPutEdge || op == engine::UpdateOp::kDeleteEdge;
  }
  // The update a fragment receives for this record; `generation` names where the new data lives.
  engine::Update ToUpdate(int64_t generation) const {
    return engine::Update{op,
                          node,
                          type,
                          dst,
                          is_put() ? generation : 0,
                          op == engine::UpdateOp::kPutEdge ? timestamp : 0};
  }
};

std::string EncodeRecord(const LogRecord& record);
// Corruption if malformed (the WAL checksum makes that a bug or a foreign file).
Status DecodeRecord(std::string_view data, LogRecord* record);

}  // namespace zipg::logstore

// Fuzzes log replay (logstore/wal.h, logstore/record.h, engine/delta.h). The first byte picks:
//   0: the bytes are a WAL file. Wal::Open replays exactly the intact records an independent
//      parser of the framing finds, cuts the file after them, and appends after them.
//   1: the rest is payloads (each u8 length + bytes), framed into a WAL by Wal::Append and torn
//      at an offset the second byte picks. Open replays a prefix of them that holds every record
//      wholly before the tear; every payload decodes as a LogStore record or fails cleanly, and
//      a decoded record re-encodes to one that decodes the same.
//   2: the same framing, opened as a shard's delta file (DeltaIndex::Open): opens or fails with
//      CORRUPTION, and an opened index is consistent (every listed node has a delta).

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "engine/delta.h"
#include "layout/shard.h"
#include "fuzz/fuzz_common.h"
#include "graph/graph.h"
#include "logstore/record.h"
#include "util/wal.h"
#include "util/checksum.h"
#include "util/coding.h"

namespace {

using zipg::Status;
using zipg::StatusCode;
using zipg::fuzz::Check;
using zipg::Wal;

std::string path;

// The records of a WAL file, by docs/writes.md's framing; *end: where the intact records end.
std::vector<std::string> ParseFraming(std::string_view file, size_t* end) {
  std::vector<std::string> out;
  size_t at = 0;
  while (file.size() - at >= zipg::kWalHeaderSize) {
    const uint32_t length = zipg::DecodeFixed32(file.data() + at);
    if (length > zipg::kMaxWalPayload ||
        length > file.size() - at - zipg::kWalHeaderSize) {
      break;
    }
    std::string covered(file.substr(at, 4));
    covered.append(file.substr(at + zipg::kWalHeaderSize, length));
    if (zipg::Checksum64(covered.data(), covered.size()) !=
        zipg::DecodeFixed64(file.data() + at + 4)) {
      break;
    }
    out.push_back(covered.substr(4));
    at += zipg::kWalHeaderSize + length;
  }
  *end = at;
  return out;
}

std::vector<std::string> Replay(std::unique_ptr<Wal>* wal, uint64_t* dropped) {
  std::vector<std::string> got;
  auto opened = Wal::Open(
      path,
      [&](std::string_view p) {
        got.emplace_back(p);
        return Status::OK();
      },
      {.sync = false}, dropped);
  Check(opened.ok(), "a WAL file opens whatever its bytes");
  *wal = std::move(*opened);
  return got;
}

void RawFile(std::string_view bytes) {
  std::filesystem::remove(path);
  zipg::fuzz::WriteFile(path, bytes);
  size_t end = 0;
  const std::vector<std::string> expected = ParseFraming(bytes, &end);
  std::vector<std::string> read;
  Check(Wal::ReadRecords(path, 0, expected.size() + 1, &read).ok() && read == expected,
        "ReadRecords reads the intact records");
  std::unique_ptr<Wal> wal;
  uint64_t dropped = 0;
  Check(Replay(&wal, &dropped) == expected, "Open replays exactly the intact records");
  // A tail of zeros only is preallocated space, cut but not counted as dropped.
  const bool zeros = bytes.find_first_not_of('\0', end) == std::string_view::npos;
  Check(dropped == (zeros ? 0 : bytes.size() - end) && wal->size() == end,
        "Open cuts after the intact records");
  Check(wal->Append("appended").ok(), "appending after a cut tail works");
  wal.reset();
  std::vector<std::string> again = expected;
  again.push_back("appended");
  Check(Replay(&wal, &dropped) == again && dropped == 0, "the append follows the intact records");
}

// Payloads: each a u8 length and that many bytes (the last may be short).
std::vector<std::string> Payloads(std::string_view bytes) {
  std::vector<std::string> out;
  while (!bytes.empty()) {
    const size_t n = std::min<size_t>(static_cast<uint8_t>(bytes[0]), bytes.size() - 1);
    out.emplace_back(bytes.substr(1, n));
    bytes.remove_prefix(1 + n);
  }
  return out;
}

// Writes the payloads as a WAL at `path` and returns each record's end offset.
std::vector<uint64_t> WriteLog(const std::vector<std::string>& payloads) {
  std::filesystem::remove(path);
  std::unique_ptr<Wal> wal;
  uint64_t dropped = 0;
  Replay(&wal, &dropped);
  std::vector<uint64_t> ends;
  for (const auto& p : payloads) {
    Check(wal->Append(p).ok(), "Append works");
    ends.push_back(wal->size());
  }
  return ends;
}

bool SameRecord(const zipg::logstore::LogRecord& a, const zipg::logstore::LogRecord& b) {
  return a.op == b.op && a.node == b.node && a.type == b.type && a.dst == b.dst &&
         a.timestamp == b.timestamp && a.properties == b.properties;
}

void LogRecords(uint8_t tear, std::string_view bytes) {
  const std::vector<std::string> payloads = Payloads(bytes);
  for (const auto& p : payloads) {
    zipg::logstore::LogRecord record, again;
    const Status s = zipg::logstore::DecodeRecord(p, &record);
    if (!s.ok()) {
      Check(s.code() == StatusCode::kCorruption, "a bad record is CORRUPTION");
      continue;
    }
    Check(zipg::logstore::DecodeRecord(zipg::logstore::EncodeRecord(record), &again).ok() &&
              SameRecord(record, again),
          "a decoded record re-encodes to one that decodes the same");
  }
  const std::vector<uint64_t> ends = WriteLog(payloads);
  const uint64_t size = ends.empty() ? 0 : ends.back();
  const uint64_t cut = size == 0 ? 0 : size - tear % (size + 1);
  std::filesystem::resize_file(path, cut);
  std::unique_ptr<Wal> wal;
  uint64_t dropped = 0;
  const std::vector<std::string> got = Replay(&wal, &dropped);
  size_t whole = 0;
  while (whole < ends.size() && ends[whole] <= cut) ++whole;
  Check(got.size() == whole, "a torn log replays every record wholly before the tear");
  for (size_t i = 0; i < got.size(); ++i) Check(got[i] == payloads[i], "replayed in order");
}

void DeltaFile(std::string_view bytes) {
  WriteLog(Payloads(bytes));
  auto index = zipg::engine::DeltaIndex::Open(path, /*sync=*/false);
  if (!index.ok()) {
    Check(index.status().code() == StatusCode::kCorruption, "a bad delta file is CORRUPTION");
    return;
  }
  const std::vector<int64_t> nodes = (*index)->Nodes();
  Check(nodes.size() == (*index)->size(), "Nodes() lists size() nodes");
  for (int64_t n : nodes) Check((*index)->Lookup(n) != nullptr, "a listed node has a delta");
}

// Seeds: WAL files, LogStore records and a delta file written by the real encoders.
std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  const auto framed = [](char mode, const std::vector<std::string>& payloads) {
    std::string s(1, mode);
    for (const auto& p : payloads) {
      if (p.size() > 255) continue;
      s += static_cast<char>(p.size());
      s += p;
    }
    return s;
  };
  std::vector<std::string> records;
  zipg::logstore::LogRecord r;
  r.node = 7;
  r.properties = {{"name", "x"}, {"city", "y,z"}};
  records.push_back(zipg::logstore::EncodeRecord(r));
  r = {};
  r.op = zipg::engine::UpdateOp::kPutEdge;
  r.node = 1, r.type = 2, r.dst = 3, r.timestamp = -5;
  r.properties = {{"w", "1"}};
  records.push_back(zipg::logstore::EncodeRecord(r));
  r = {};
  r.op = zipg::engine::UpdateOp::kDeleteEdge;
  r.node = 1, r.type = 2, r.dst = 3;
  records.push_back(zipg::logstore::EncodeRecord(r));
  r.op = zipg::engine::UpdateOp::kDeleteNode;
  records.push_back(zipg::logstore::EncodeRecord(r));
  seeds.push_back(framed('\x01', records));

  // A delta file: updates applied to a base shard of the small graph.
  const std::string dir = zipg::fuzz::TempDir("wal-seeds");
  zipg::fuzz::CompressSmallGraph(dir + "/store", 1);
  auto store = zipg::OpenStore(dir + "/store", {}, nullptr);
  Check(store.ok(), "the small store opens");
  {
    auto index = zipg::engine::DeltaIndex::Open(dir + "/delta", /*sync=*/false);
    Check(index.ok(), "a new delta file opens");
    using zipg::engine::UpdateOp;
    std::vector<zipg::engine::Update> batch = {{UpdateOp::kPutNode, 1, 0, 0, 5, 0, 1},
                                               {UpdateOp::kDeleteEdge, 0, 5, 100, 0, 0, 2},
                                               {UpdateOp::kPutEdge, 0, 5, 999, 5, 7, 3},
                                               {UpdateOp::kDeleteNode, 2, 0, 0, 0, 0, 4}};
    Check((*index)->Apply(*store->shards[0], batch).ok(), "the seed batch applies");
    Check((*index)->Apply(*store->shards[0], {{UpdateOp::kPutNode, 50, 0, 0, 6, 0, 5}}).ok(),
          "the seed batch applies");
  }
  std::vector<std::string> delta;
  Check(Wal::ReadRecords(dir + "/delta", 0, 100, &delta).ok(), "the delta file reads");
  seeds.push_back(framed('\x02', delta));

  std::unique_ptr<Wal> wal;
  path = dir + "/wal";
  uint64_t dropped = 0;
  Replay(&wal, &dropped);
  for (const auto& p : records) Check(wal->Append(p).ok(), "Append works");
  wal.reset();
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), {});
  seeds.push_back('\x00' + file);
  seeds.push_back('\x00' + file.substr(0, file.size() - 3));  // a torn tail
  std::filesystem::remove_all(dir);
  return seeds;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zipg::fuzz::MaybeWriteSeeds(Seeds);
  path = zipg::fuzz::TempDir("wal") + "/log";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      RawFile(rest);
      break;
    case 1:
      LogRecords(rest.empty() ? 0 : static_cast<uint8_t>(rest[0]),
                 rest.empty() ? rest : rest.substr(1));
      break;
    default:
      DeltaFile(rest);
      break;
  }
  return 0;
}

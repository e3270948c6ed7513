// Fuzzes the update-batch decoder (engine/updates.h): the bytes the LogStore pushes to shard
// servers over the update channel and keeps in delta files. Property: a batch that decodes re-encodes (with
// ids and flags) to bytes that decode to the same updates and flags.

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/updates.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zipg::fuzz::MaybeWriteSeeds([] {
    using zipg::engine::UpdateOp;
    const std::vector<zipg::engine::Update> batch = {{UpdateOp::kPutNode, 1, 0, 0, 5, 0, 11},
                                                     {UpdateOp::kPutEdge, 1, 2, 3, 5, -7, 12},
                                                     {UpdateOp::kDeleteEdge, 1, 2, 3, 0, 0, 13},
                                                     {UpdateOp::kDeleteNode, 4, 0, 0, 0, 0, 14}};
    const std::vector<uint8_t> flags = {1, 0, 1, 0};
    return std::vector<std::string>{zipg::engine::EncodeUpdates(batch, nullptr),
                                    zipg::engine::EncodeUpdates(batch, &flags, true),
                                    zipg::engine::EncodeUpdates({}, nullptr, true)};
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<zipg::engine::Update> updates;
  std::vector<uint8_t> flags;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (!zipg::engine::DecodeUpdates(bytes, &updates, &flags).ok()) return 0;
  const bool with_flags = !flags.empty();
  const std::string again =
      zipg::engine::EncodeUpdates(updates, with_flags ? &flags : nullptr, /*with_ids=*/true);
  std::vector<zipg::engine::Update> updates2;
  std::vector<uint8_t> flags2;
  zipg::fuzz::Check(zipg::engine::DecodeUpdates(again, &updates2, &flags2).ok(),
                    "a re-encoded batch decodes");
  zipg::fuzz::Check(updates2 == updates && flags2 == flags,
                    "a re-encoded batch decodes to the same updates and flags");
  return 0;
}

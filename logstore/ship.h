// Log shipping from the LogStore leader to its standby over the frame link (rpc/frame_link.h;
// docs/logstore-ha.md, "Log shipping"). The leader's ShipSender sends each commit group's records,
// exactly as logged in wal-<generation>, and waits for the standby's answer before the group is
// posted to the shards; the standby's ShipReceiver hands each request to its handler (the standby
// LogStore: log with fdatasync, apply) and returns the handler's answer.
//
// Request frame: u64 sender | u64 seq | u8 kind | u64 epoch | u64 generation | u64 first_index |
//                u32 n | n x (u32 length | payload)
//   kind 1 (append): records first_index.. of wal-<generation>; 2 (freeze): the leader's live
//   generation is now `generation` (n = 0); 3 (probe): only asks where the standby is (n = 0);
//   4 (file): a re-seed's file chunk: records = [relative path, bytes at offset first_index]
//   (an empty path starts a re-seed); 5 (install): records = [the leader's STATE]: the standby
//   replaces its directory with the files received (docs/logstore-ha.md, "Re-seeding").
// Reply frame:   u64 sender | u64 seq | u8 code | u64 epoch | u64 generation | u64 next_index |
//                message
//   code 1 (ok): done, the standby's position is (generation, next_index); 2 (elsewhere): not
//   applied, the standby is at (generation, next_index) (the leader must send from there); 3
//   (fenced): the standby has seen the larger `epoch`; 0: an error (message).
// A reply is matched to its request by (sender, seq), and a request that timed out leaves its
// connection: a late reply is never taken for another request's.
//
// Thread-safety: ShipSender calls are serialized inside (one request in flight); the receiver
// runs its handler on the connection's thread, one request at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rpc/frame_link.h"
#include "util/status.h"

namespace zipg::logstore {

// kLayout: a split (docs/cluster-changes.md, step 4): generation = the new shard count,
// first_index = its mark's id.
enum class ShipKind : uint8_t {
  kAppend = 1,
  kFreeze = 2,
  kProbe = 3,
  kFile = 4,
  kInstall = 5,
  kLayout = 6
};
enum class ShipCode : uint8_t { kError = 0, kOk = 1, kElsewhere = 2, kFenced = 3 };

struct ShipRequest {
  ShipKind kind = ShipKind::kProbe;
  uint64_t epoch = 0;
  uint64_t generation = 0;
  uint64_t first_index = 0;
  std::vector<std::string_view> records;  // valid during the handler call only
};

struct ShipReply {
  ShipCode code = ShipCode::kError;
  uint64_t epoch = 0;
  uint64_t generation = 0;
  uint64_t next_index = 0;
  std::string message;
};

class ShipSender {
 public:
  // Ships to the standby at `endpoint` ("tcp://host:port").
  ShipSender(std::string endpoint, rpc::FrameSecurity security = {});
  ~ShipSender();

  // A request written to the standby whose reply is not read yet. It holds the sender: another
  // call waits until it is finished or destroyed.
  class Pending {
   private:
    friend class ShipSender;
    std::unique_lock<std::mutex> lock;
    uint64_t seq = 0;
    int timeout_ms = 0;
    std::chrono::steady_clock::time_point deadline;
    Status sent;  // a request that could not be written: Finish returns this
  };

  // Sends one request and waits up to timeout_ms for its reply (UNAVAILABLE after that; the next
  // call uses a new connection).
  StatusOr<ShipReply> Send(ShipKind kind, uint64_t epoch, uint64_t generation, uint64_t first_index,
                           const std::vector<std::string_view>& records, int timeout_ms);
  // Send in two steps on the caller's thread, so that it can log the same group between them:
  // Begin writes the request (the records are copied) and Finish reads its reply, within
  // timeout_ms of Begin.
  Pending Begin(ShipKind kind, uint64_t epoch, uint64_t generation, uint64_t first_index,
                const std::vector<std::string_view>& records, int timeout_ms);
  StatusOr<ShipReply> Finish(Pending* pending);
  const std::string& endpoint() const { return endpoint_; }

 private:
  const std::string endpoint_;
  const rpc::FrameSecurity security_;
  const uint64_t sender_id_;
  std::mutex mu_;
  std::unique_ptr<rpc::FrameConnection> connection_;  // guarded by mu_; null after a failure
  uint64_t seq_ = 0;                                  // guarded by mu_
};

class ShipReceiver {
 public:
  using Handler = std::function<ShipReply(const ShipRequest&)>;
  // Listens on host:port (port 0: any free port) and serves requests with `handler`, one at a
  // time. With TLS in `security`, only holders of the cluster's certificate get through.
  static StatusOr<std::unique_ptr<ShipReceiver>> Start(const std::string& host, int port,
                                                       Handler handler,
                                                       rpc::FrameSecurity security = {});
  ~ShipReceiver();

  const std::string& endpoint() const { return server_->endpoint(); }
  uint64_t requests() const { return requests_.load(); }
  uint64_t refused_clients() const { return server_->refused_clients(); }

 private:
  ShipReceiver() = default;
  std::optional<std::string> Handle(std::string_view frame);

  Handler handler_;
  std::mutex mu_;  // one request at a time
  std::atomic<uint64_t> requests_{0};
  std::unique_ptr<rpc::FrameServer> server_;  // last: stopped first
};

}  // namespace zipg::logstore

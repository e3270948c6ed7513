// Log shipping from the LogStore leader to its standby over ZeroMQ (docs/logstore-ha.md, "Log
// shipping"). The leader's ShipSender sends each commit group's records, exactly as logged in
// wal-<generation>, and waits for the standby's answer before the group is posted to the shards;
// the standby's ShipReceiver hands each request to its handler (the standby LogStore: log with
// fdatasync, apply) and returns the handler's answer.
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
// A reply is matched to its request by (sender, seq): a late reply to a request that timed out
// is ignored.
//
// Thread-safety: ShipSender calls are serialized inside (one request in flight); the receiver
// runs its handler on its own thread, one request at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "shard/zmq_link.h"
#include "util/status.h"

namespace zipg::logstore {

enum class ShipKind : uint8_t { kAppend = 1, kFreeze = 2, kProbe = 3, kFile = 4, kInstall = 5 };
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
  ShipSender(std::string endpoint, shard::CurveKeys curve = {});
  ~ShipSender();

  // Sends one request and waits up to timeout_ms for its reply (UNAVAILABLE after that; the next
  // call uses a new connection).
  StatusOr<ShipReply> Send(ShipKind kind, uint64_t epoch, uint64_t generation,
                           uint64_t first_index, const std::vector<std::string_view>& records,
                           int timeout_ms);
  // Send on the sender's own thread, so that the caller can log the same group meanwhile. The
  // records must stay valid until the future is ready; requests are sent in call order.
  std::future<StatusOr<ShipReply>> SendAsync(ShipKind kind, uint64_t epoch, uint64_t generation,
                                             uint64_t first_index,
                                             const std::vector<std::string_view>& records,
                                             int timeout_ms);
  const std::string& endpoint() const { return endpoint_; }

 private:
  void RunAsync();

  const std::string endpoint_;
  const shard::CurveKeys curve_;
  const uint64_t sender_id_;
  std::mutex mu_;
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> socket_;  // guarded by mu_; null after a timeout
  uint64_t seq_ = 0;                       // guarded by mu_
  // SendAsync's queue and thread (started on first use).
  std::mutex async_mu_;
  std::condition_variable async_cv_;
  std::deque<std::packaged_task<StatusOr<ShipReply>()>> async_queue_;  // guarded by async_mu_
  bool async_stopping_ = false;                                         // guarded by async_mu_
  std::thread async_thread_;
};

class ShipReceiver {
 public:
  using Handler = std::function<ShipReply(const ShipRequest&)>;
  // Binds tcp://host:port (port 0: any free port) and serves requests with `handler`. With
  // `curve`, only holders of the cluster's key pair get through.
  static StatusOr<std::unique_ptr<ShipReceiver>> Start(const std::string& host, int port,
                                                       Handler handler,
                                                       shard::CurveKeys curve = {});
  ~ShipReceiver();

  const std::string& endpoint() const { return socket_->endpoint(); }
  uint64_t requests() const { return requests_.load(); }
  uint64_t refused_clients() const { return socket_->refused_clients(); }

 private:
  ShipReceiver() = default;
  void Run();

  Handler handler_;
  std::unique_ptr<shard::RouterEndpoint> socket_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> requests_{0};
  std::thread thread_;
};

}  // namespace zipg::logstore

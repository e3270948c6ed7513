// Tests of log shipping's transport (logstore/ship.h): requests arrive whole and in order with
// their records, replies carry the handler's answer, a reply that comes too late is never taken
// for the next request's, a dead standby is UNAVAILABLE within the timeout and reached again
// when it returns, and with TLS only holders of the cluster's certificate get through.
#include "logstore/ship.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <mutex>
#include <random>
#include <thread>

#include "rpc/tls_test_files.h"
#include "util/coding.h"

namespace zipg::logstore {
namespace {

using std::chrono::milliseconds;

// A stand-in standby: keeps the records of generation 1 in order, answers "elsewhere" with its
// position to an append that does not start there.
class Standby {
 public:
  explicit Standby(rpc::FrameSecurity security = {}, int port = 0) {
    auto r = ShipReceiver::Start(
        "127.0.0.1", port,
        [this](const ShipRequest& q) {
          std::lock_guard lock(mu_);
          if (delay_ms_ > 0) std::this_thread::sleep_for(milliseconds(delay_ms_));
          ShipReply reply;
          reply.epoch = q.epoch;
          reply.generation = 1;
          if (q.kind == ShipKind::kAppend && q.first_index != log_.size()) {
            reply.code = ShipCode::kElsewhere;
          } else {
            reply.code = ShipCode::kOk;
            if (q.kind == ShipKind::kAppend)
              log_.insert(log_.end(), q.records.begin(), q.records.end());
          }
          reply.next_index = log_.size();
          kinds_.push_back(q.kind);
          return reply;
        },
        security);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    receiver_ = std::move(*r);
  }
  std::string endpoint() const { return receiver_->endpoint(); }
  std::vector<std::string> log() const {
    std::lock_guard lock(mu_);
    return log_;
  }
  std::vector<ShipKind> kinds() const {
    std::lock_guard lock(mu_);
    return kinds_;
  }
  void set_delay(int ms) {
    std::lock_guard lock(mu_);
    delay_ms_ = ms;
  }
  ShipReceiver& receiver() { return *receiver_; }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> log_;
  std::vector<ShipKind> kinds_;
  int delay_ms_ = 0;
  std::unique_ptr<ShipReceiver> receiver_;
};

std::vector<std::string_view> Views(const std::vector<std::string>& v) {
  return std::vector<std::string_view>(v.begin(), v.end());
}

TEST(ShipTest, GroupsArriveWholeAndInOrderAndTheReplyIsTheHandlers) {
  Standby standby;
  ShipSender sender(standby.endpoint());
  std::mt19937 rnd(5);
  std::vector<std::string> all;
  for (int g = 0; g < 40; ++g) {
    std::vector<std::string> group;
    for (size_t i = 0, n = 1 + rnd() % 7; i < n; ++i) {
      std::string record(rnd() % 300, '\0');
      for (char& c : record) c = static_cast<char>(rnd());
      group.push_back(record);
    }
    if (g == 3) group.push_back("");  // an empty record is a record
    auto reply = sender.Send(ShipKind::kAppend, 7, 1, all.size(), Views(group), 5000);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    all.insert(all.end(), group.begin(), group.end());
    EXPECT_EQ(reply->code, ShipCode::kOk);
    EXPECT_EQ(reply->epoch, 7u);
    EXPECT_EQ(reply->generation, 1u);
    EXPECT_EQ(reply->next_index, all.size());
  }
  EXPECT_EQ(standby.log(), all);
  // An append that does not start where the standby is: its position, nothing applied.
  auto wrong = sender.Send(ShipKind::kAppend, 7, 1, all.size() + 5, Views({"x"}), 5000);
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->code, ShipCode::kElsewhere);
  EXPECT_EQ(wrong->next_index, all.size());
  EXPECT_EQ(standby.log(), all);
  // A probe and a freeze carry no records.
  ASSERT_TRUE(sender.Send(ShipKind::kProbe, 7, 0, 0, {}, 5000).ok());
  ASSERT_TRUE(sender.Send(ShipKind::kFreeze, 7, 2, 0, {}, 5000).ok());
  EXPECT_EQ(standby.kinds().back(), ShipKind::kFreeze);
  EXPECT_EQ(standby.kinds()[standby.kinds().size() - 2], ShipKind::kProbe);
  EXPECT_EQ(standby.receiver().requests(), 43u);
}

// Begin writes the request at once (the standby has it before the caller reads anything), and
// Finish takes its reply; requests go in call order.
TEST(ShipTest, BeginWritesAtOnceAndFinishTakesTheReply) {
  Standby standby;
  ShipSender sender(standby.endpoint());
  std::vector<std::string> all;
  for (int g = 0; g < 20; ++g) {
    const std::vector<std::string> group = {std::to_string(g), std::string(g, 'x')};
    ShipSender::Pending pending =
        sender.Begin(ShipKind::kAppend, 1, 1, all.size(), Views(group), 5000);
    all.insert(all.end(), group.begin(), group.end());
    const auto until = std::chrono::steady_clock::now() + milliseconds(5000);
    while (standby.log().size() < all.size() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    EXPECT_EQ(standby.log(), all) << "group " << g << " did not arrive before Finish";
    auto reply = sender.Finish(&pending);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->code, ShipCode::kOk) << g;
    EXPECT_EQ(reply->next_index, all.size());
    EXPECT_EQ(sender.Finish(&pending).status().code(), StatusCode::kInternal);  // only once
  }
  // A shipment never finished: its reply is skipped by the next request's Finish.
  { ShipSender::Pending abandoned = sender.Begin(ShipKind::kProbe, 1, 0, 0, {}, 5000); }
  auto next = sender.Send(ShipKind::kAppend, 1, 1, all.size(), Views({"last"}), 5000);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->next_index, all.size() + 1);
}

TEST(ShipTest, ALateReplyIsNeverTakenForTheNextRequests) {
  Standby standby;
  ShipSender sender(standby.endpoint());
  standby.set_delay(400);
  auto slow = sender.Send(ShipKind::kAppend, 1, 1, 0, Views({"a"}), 100);
  EXPECT_EQ(slow.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(slow.status().message().find("did not answer"), std::string::npos);
  standby.set_delay(0);
  // The standby applied "a" after all; the next request gets its own answer, not the late one.
  auto next = sender.Send(ShipKind::kAppend, 1, 1, 0, Views({"b"}), 5000);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->code, ShipCode::kElsewhere);
  EXPECT_EQ(next->next_index, 1u);
  auto right = sender.Send(ShipKind::kAppend, 1, 1, 1, Views({"b"}), 5000);
  ASSERT_TRUE(right.ok());
  EXPECT_EQ(right->code, ShipCode::kOk);
  EXPECT_EQ(standby.log(), (std::vector<std::string>{"a", "b"}));
}

TEST(ShipTest, ADeadStandbyIsUnavailableAndReachedAgainWhenItReturns) {
  auto standby = std::make_unique<Standby>();
  const std::string endpoint = standby->endpoint();
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  ShipSender sender(endpoint);
  ASSERT_TRUE(sender.Send(ShipKind::kProbe, 1, 0, 0, {}, 5000).ok());
  standby.reset();
  const auto start = std::chrono::steady_clock::now();
  auto down = sender.Send(ShipKind::kProbe, 1, 0, 0, {}, 200);
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  Standby back({}, port);
  auto again = sender.Send(ShipKind::kAppend, 1, 1, 0, Views({"r"}), 5000);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->code, ShipCode::kOk);
  EXPECT_EQ(back.log(), (std::vector<std::string>{"r"}));
}

TEST(ShipTest, TlsLetsOnlyHoldersOfTheClusterCertificateIn) {
  signal(SIGPIPE, SIG_IGN);  // as zipg's main does (rpc/tls.h)
  rpc::TlsFiles files;
  const rpc::FrameParties parties(files);
  ASSERT_TRUE(parties.ok) << "could not make certificates with the openssl command";
  Standby standby(parties.server);
  ShipSender member(standby.endpoint(), parties.member);
  auto ok = member.Send(ShipKind::kAppend, 1, 1, 0, Views({"secret"}), 5000);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->code, ShipCode::kOk);
  ShipSender plaintext(standby.endpoint());
  EXPECT_EQ(plaintext.Send(ShipKind::kAppend, 1, 1, 1, Views({"x"}), 300).status().code(),
            StatusCode::kUnavailable);
  ShipSender stranger(standby.endpoint(), parties.stranger);
  EXPECT_EQ(stranger.Send(ShipKind::kAppend, 1, 1, 1, Views({"y"}), 300).status().code(),
            StatusCode::kUnavailable);
  EXPECT_GE(standby.receiver().refused_clients(), 1u);
  EXPECT_EQ(standby.log(), (std::vector<std::string>{"secret"}));
}

TEST(ShipTest, AMalformedRequestIsAnsweredWithAnError) {
  Standby standby;
  auto connection = rpc::FrameConnection::Connect(standby.endpoint(), {}, 5000);
  ASSERT_TRUE(connection.ok()) << connection.status().ToString();
  std::string bad(16, '\x01');
  bad += "\x01short";
  ASSERT_TRUE((*connection)->Send(bad, 5000).ok());
  std::string reply;
  ASSERT_TRUE(
      (*connection)->Receive(&reply, std::chrono::steady_clock::now() + milliseconds(5000)).ok());
  ASSERT_GE(reply.size(), 41u);
  EXPECT_EQ(DecodeFixed64(reply.data()), 0x0101010101010101u);  // answered to its sender
  EXPECT_EQ(reply[16], 0);                                      // kError
  EXPECT_NE(reply.find("malformed"), std::string::npos);
  EXPECT_TRUE(standby.log().empty());
}

}  // namespace
}  // namespace zipg::logstore

// The frame link (rpc/frame_link.h): its reader gives whole frames however the stream is cut,
// frames arrive whole and in order on every connection, one-way
// frames get no reply, a reply after the deadline is not waited for, frames over the limit are
// refused by both ends, a closed or missing peer is UNAVAILABLE at once, and with TLS only
// holders of a certificate from the cluster's CA get a frame through.

#include "rpc/frame_link.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <thrift/transport/TSocket.h>
#include <unistd.h>

#include <random>
#include <thread>
#include <vector>

#include "rpc/tls_test_files.h"
#include "util/coding.h"

namespace zipg::rpc {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point In(int ms) { return Clock::now() + std::chrono::milliseconds(ms); }

// Echoes every frame with "echo:" before it; a frame starting with '!' is one-way (no reply) and
// counted; "sleep" answers after 300 ms.
struct Echo {
  std::atomic<int> one_way{0};
  FrameServer::Handler Handler() {
    return [this](std::string_view request) -> std::optional<std::string> {
      if (!request.empty() && request[0] == '!') {
        ++one_way;
        return std::nullopt;
      }
      if (request == "sleep") std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return "echo:" + std::string(request);
    };
  }
};

std::unique_ptr<FrameServer> StartEcho(Echo* echo, const FrameSecurity& security = {}) {
  auto server = FrameServer::Start("127.0.0.1", 0, security, echo->Handler(), "the test socket");
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(*server) : nullptr;
}

// FrameReader reads ahead: however the stream is cut into reads (a frame split anywhere, several
// frames and part of the next in one read), it gives the frames whole and in order, the empty
// frame included, then says the stream closed; a length over the limit is kTooLarge.
TEST(FrameLinkTest, TheReaderGivesWholeFramesHoweverTheStreamIsCut) {
  std::vector<std::string> frames = {"a", "", std::string(70'000, 'x'), "bc",
                                     std::string(300, 'y')};
  for (int i = 0; i < 40; ++i)
    frames.push_back(std::string(static_cast<size_t>(i * 37 % 900), 'a' + i % 26));
  std::string stream;
  for (const auto& f : frames) {
    PutFixed32(&stream, static_cast<uint32_t>(f.size()));
    stream += f;
  }
  std::mt19937 rng(7);
  for (const size_t max_cut : {size_t{1}, size_t{5}, size_t{4096}, stream.size()}) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    // The writer cuts the stream into random pieces of at most max_cut bytes, then closes.
    std::thread writer([&, fd = fds[1]] {
      for (size_t at = 0; at < stream.size();) {
        const size_t n = std::min(stream.size() - at, 1 + rng() % max_cut);
        ASSERT_EQ(write(fd, stream.data() + at, n), static_cast<ssize_t>(n));
        at += n;
      }
      close(fd);
    });
    apache::thrift::transport::TSocket socket(fds[0]);
    socket.setRecvTimeout(5000);
    FrameReader reader;
    std::vector<std::string> got;
    std::string frame;
    FrameReader::Step step;
    while ((step = reader.Read(socket, &frame)) != FrameReader::Step::kClosed) {
      ASSERT_NE(step, FrameReader::Step::kTooLarge);
      if (step == FrameReader::Step::kFrame) got.push_back(frame);
    }
    writer.join();
    EXPECT_EQ(got, frames) << "pieces of at most " << max_cut << " bytes";
    socket.close();
  }

  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  std::string over;
  PutFixed32(&over, kMaxFrameBytes + 1);
  ASSERT_EQ(write(fds[1], over.data(), over.size()), 4);
  apache::thrift::transport::TSocket socket(fds[0]);
  socket.setRecvTimeout(5000);
  FrameReader reader;
  std::string frame;
  EXPECT_EQ(reader.Read(socket, &frame), FrameReader::Step::kTooLarge);
  socket.close();
  close(fds[1]);
}

TEST(FrameLinkTest, FramesComeBackWholeAndInOrderOnEveryConnection) {
  Echo echo;
  auto server = StartEcho(&echo);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->endpoint().rfind("tcp://127.0.0.1:", 0), 0u) << server->endpoint();
  std::vector<std::thread> clients;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 6; ++t) {
    clients.emplace_back([&, t] {
      auto c = FrameConnection::Connect(server->endpoint(), {}, 1000);
      if (!c.ok()) {
        ++wrong;
        return;
      }
      for (int i = 0; i < 200; ++i) {
        // Sizes from empty to 1 MiB, so that frames span many reads and writes.
        std::string body(i == 0 ? 0 : (i % 50 == 0 ? (1 << 20) : 1 + (i * 37 + t) % 3000),
                         static_cast<char>('a' + (i + t) % 26));
        const std::string request = std::to_string(t) + "/" + std::to_string(i) + "/" + body;
        std::string reply;
        if (!(*c)->Send(request, 1000).ok() || !(*c)->Receive(&reply, In(5000)).ok() ||
            reply != "echo:" + request) {
          ++wrong;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(FrameLinkTest, OneWayFramesGetNoReplyAndKeepTheOrder) {
  Echo echo;
  auto server = StartEcho(&echo);
  ASSERT_NE(server, nullptr);
  auto c = FrameConnection::Connect(server->endpoint(), {}, 1000);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE((*c)->Send("!notice", 1000).ok());
  ASSERT_TRUE((*c)->Send("after", 1000).ok());
  std::string reply;
  ASSERT_TRUE((*c)->Receive(&reply, In(2000)).ok());
  EXPECT_EQ(reply, "echo:after");  // the first reply is the request's: the notices had none
  EXPECT_EQ(echo.one_way.load(), 50);
}

TEST(FrameLinkTest, AReplyAfterTheDeadlineIsNotWaitedFor) {
  Echo echo;
  auto server = StartEcho(&echo);
  ASSERT_NE(server, nullptr);
  auto c = FrameConnection::Connect(server->endpoint(), {}, 1000);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Send("sleep", 1000).ok());
  std::string reply;
  const auto start = Clock::now();
  const Status late = (*c)->Receive(&reply, In(50));
  EXPECT_TRUE(late.code() == StatusCode::kUnavailable) << late.ToString();
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(250));
  // A new connection is answered at once (the server has a thread per connection).
  auto fresh = FrameConnection::Connect(server->endpoint(), {}, 1000);
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->Send("x", 1000).ok());
  ASSERT_TRUE((*fresh)->Receive(&reply, In(2000)).ok());
  EXPECT_EQ(reply, "echo:x");
}

TEST(FrameLinkTest, FramesOverTheLimitAreRefusedByBothEnds) {
  Echo echo;
  auto server = StartEcho(&echo);
  ASSERT_NE(server, nullptr);
  auto c = FrameConnection::Connect(server->endpoint(), {}, 1000);
  ASSERT_TRUE(c.ok());
  const char byte = 0;  // Send checks the size before it reads any of the frame
  EXPECT_TRUE((*c)->Send(std::string_view(&byte, size_t{kMaxFrameBytes} + 1), 1000).code() ==
              StatusCode::kInvalidArgument);
  // A peer that announces a frame over the limit is dropped without an answer.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(std::stoi(server->endpoint().substr(server->endpoint().rfind(':') + 1)));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::string prefix;
  PutFixed32(&prefix, kMaxFrameBytes + 1);
  ASSERT_EQ(write(fd, prefix.data(), prefix.size()), 4);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[16];
  EXPECT_EQ(read(fd, buf, sizeof(buf)), 0);  // closed by the server
  close(fd);
  // The connection that behaved is still served.
  ASSERT_TRUE((*c)->Send("fine", 1000).ok());
  std::string reply;
  ASSERT_TRUE((*c)->Receive(&reply, In(2000)).ok());
  EXPECT_EQ(reply, "echo:fine");
}

TEST(FrameLinkTest, AClosedOrMissingPeerIsUnavailableAtOnce) {
  Echo echo;
  auto server = StartEcho(&echo);
  ASSERT_NE(server, nullptr);
  const std::string endpoint = server->endpoint();
  auto c = FrameConnection::Connect(endpoint, {}, 1000);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Send("sleep", 1000).ok());
  server.reset();  // stops while the request is handled: the reply is written, then it closes
  std::string reply;
  const auto start = Clock::now();
  Status s = (*c)->Receive(&reply, In(5000));
  if (s.ok()) {
    EXPECT_EQ(reply, "echo:sleep");
    s = (*c)->Receive(&reply, In(5000));
  }
  EXPECT_TRUE(s.code() == StatusCode::kUnavailable) << s.ToString();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  auto refused = FrameConnection::Connect(endpoint, {}, 1000);
  EXPECT_TRUE(refused.status().code() == StatusCode::kUnavailable) << refused.status().ToString();
  EXPECT_TRUE(FrameConnection::Connect("nohostport", {}, 1000).status().code() ==
              StatusCode::kInvalidArgument);
}

TEST(FrameLinkTest, TlsLetsOnlyHoldersOfACertificateFromTheClusterCaIn) {
  signal(SIGPIPE, SIG_IGN);  // as zipg's main does (rpc/tls.h)
  TlsFiles files;
  const FrameParties parties(files);
  ASSERT_TRUE(parties.ok) << "could not make certificates with the openssl command";
  EXPECT_TRUE(parties.server.tls());
  EXPECT_FALSE(FrameSecurity().tls());
  EXPECT_TRUE(FrameSecurity::Make(TlsOptions{"/no/ca.pem", "", ""}).status().code() ==
              StatusCode::kInvalidArgument);
  Echo echo;
  auto server = StartEcho(&echo, parties.server);
  ASSERT_NE(server, nullptr);
  std::string reply;
  {
    auto c = FrameConnection::Connect(server->endpoint(), parties.member, 1000);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_TRUE((*c)->Send("secret", 1000).ok());
    ASSERT_TRUE((*c)->Receive(&reply, In(3000)).ok());
    EXPECT_EQ(reply, "echo:secret");
  }
  EXPECT_EQ(server->refused_clients(), 0u);
  // A certificate from another CA, and no TLS at all: no frame reaches the handler, no reply.
  const FrameSecurity plain;
  for (const FrameSecurity* who : std::vector<const FrameSecurity*>{&parties.stranger, &plain}) {
    auto c = FrameConnection::Connect(server->endpoint(), *who, 1000);
    if (!c.ok()) continue;  // refused at connect: as good
    (void)(*c)->Send("intruder", 1000);
    EXPECT_FALSE((*c)->Receive(&reply, In(1000)).ok()) << reply;
  }
  const auto until = In(3000);
  while (server->refused_clients() < 2 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server->refused_clients(), 2u);
  // A member's client to a plaintext server gets nothing either.
  Echo plain_echo;
  auto plain_server = StartEcho(&plain_echo);
  ASSERT_NE(plain_server, nullptr);
  auto c = FrameConnection::Connect(plain_server->endpoint(), parties.member, 1000);
  if (c.ok()) {
    (void)(*c)->Send("mismatch", 1000);
    EXPECT_FALSE((*c)->Receive(&reply, In(1000)).ok());
  }
}

}  // namespace
}  // namespace zipg::rpc

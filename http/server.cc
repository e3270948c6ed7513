#include "http/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "http/query_json.h"

namespace zipg::http {
namespace {

// cpp-httplib's task queue, bounded: `workers` threads serve connections; a connection accepted
// while all are busy waits here, and once `workers` wait, the accept loop blocks, so that later
// connections wait in the kernel's listen queue.
class BoundedQueue final : public httplib::TaskQueue {
 public:
  explicit BoundedQueue(size_t workers) : limit_(workers) {
    for (size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { Work(); });
  }
  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(mu_);
    space_.wait(lock, [&] { return jobs_.size() < limit_ || shutdown_; });
    jobs_.push_back(std::move(fn));
    ready_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      shutdown_ = true;
    }
    ready_.notify_all();
    space_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mu_);
        ready_.wait(lock, [&] { return !jobs_.empty() || shutdown_; });
        if (jobs_.empty()) return;  // shut down
        fn = std::move(jobs_.front());
        jobs_.pop_front();
        space_.notify_one();
      }
      fn();
    }
  }

  const size_t limit_;
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<std::function<void()>> jobs_;
  bool shutdown_ = false;
  std::vector<std::thread> threads_;
};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpOptions& options,
                                                        HttpHandler handler) {
  const int tls_files =
      !options.tls_ca.empty() + !options.tls_cert.empty() + !options.tls_key.empty();
  if (tls_files != 0 && tls_files != 3) {
    return Status::InvalidArgument("HTTP TLS needs a CA, a certificate and a key");
  }
  if (options.max_connections < 1) {
    return Status::InvalidArgument("HTTP connections at once must be at least 1");
  }
  std::unique_ptr<HttpServer> s(new HttpServer());
  if (tls_files == 3) {
    auto tls = std::make_unique<httplib::SSLServer>(
        options.tls_cert.c_str(), options.tls_key.c_str(), options.tls_ca.c_str());
    if (!tls->is_valid()) {
      return Status::InvalidArgument("HTTP TLS: cannot load " + options.tls_cert + ", " +
                                     options.tls_key + " or " + options.tls_ca);
    }
    s->server_ = std::move(tls);
  } else {
    s->server_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& server = *s->server_;
  const size_t workers = static_cast<size_t>(options.max_connections);
  server.new_task_queue = [workers] { return new BoundedQueue(workers); };
  server.set_payload_max_length(options.max_body_bytes);
  server.set_read_timeout(std::chrono::milliseconds(options.read_timeout_ms));
  server.set_write_timeout(std::chrono::milliseconds(options.read_timeout_ms));
  server.set_keep_alive_max_count(static_cast<size_t>(options.keep_alive_max));
  server.set_keep_alive_timeout(options.keep_alive_timeout_s);
  // Not SO_REUSEPORT (cpp-httplib's default): a second server on a taken port must fail, not
  // share it.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // Every request is ours to route (api.h): one handler for every path and method. Bodies are
  // read here, so that one over the bound is refused with 413 (cpp-httplib answers 400).
  auto answer = [handler](const httplib::Request& req, httplib::Response& res, std::string body) {
    HttpRequest r;
    r.method = req.method;
    r.path = req.path;
    for (const auto& [k, v] : req.params) r.params.emplace(k, v);  // the first of a name
    for (const auto& [k, v] : req.headers) r.headers.emplace(Lower(k), v);
    r.body = std::move(body);
    HttpResponse out = handler(r);
    res.status = out.status;
    res.set_content(std::move(out.body), out.content_type.c_str());
  };
  auto refuse = [](httplib::Response& res, int status, const Status& why) {
    res.status = status;
    res.set_header("Connection", "close");
    res.set_content(ResponseLine(ErrorJson(why)) + "\n", "application/json");
  };
  const size_t max_body = options.max_body_bytes;
  const Status too_big =
      Status::ResourceExhausted("the body is over " + std::to_string(max_body) + " bytes");
  auto with_body = [answer, refuse, max_body, too_big](const httplib::Request& req,
                                                       httplib::Response& res,
                                                       const httplib::ContentReader& reader) {
    if (req.has_header("Content-Length")) {
      const std::string length = req.get_header_value("Content-Length");
      uint64_t bytes = 0;
      const auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), bytes);
      if (ec == std::errc::result_out_of_range || (ec == std::errc() && bytes > max_body)) {
        return refuse(res, 413, too_big);
      }
    }
    std::string body;
    bool over = false;
    const bool read = reader([&](const char* data, size_t n) {
      if (body.size() + n > max_body) {
        over = true;
        return false;
      }
      body.append(data, n);
      return true;
    });
    if (over) return refuse(res, 413, too_big);
    if (!read) {
      return refuse(res, 408, Status::DeadlineExceeded("the request body did not arrive in time"));
    }
    answer(req, res, std::move(body));
  };
  auto without_body = [answer](const httplib::Request& req, httplib::Response& res) {
    answer(req, res, req.body);
  };
  server.Get(".*", without_body);  // and HEAD
  server.Options(".*", without_body);
  server.Post(".*", with_body);
  server.Put(".*", with_body);
  server.Patch(".*", with_body);
  server.Delete(".*", with_body);
  const int port = options.port == 0
                       ? server.bind_to_any_port(options.host)
                       : (server.bind_to_port(options.host, options.port) ? options.port : -1);
  if (port <= 0) {
    return Status::Unavailable("cannot listen on " + options.host + ":" +
                               std::to_string(options.port) + " (HTTP)");
  }
  s->port_ = port;
  s->thread_ = std::thread([&server] { server.listen_after_bind(); });
  // Serving once Start returns: a Stop before the accept loop had started would not reach it
  // (cpp-httplib's stop() acts only on a running server) and would wait on it for good.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server.is_running()) {
    if (std::chrono::steady_clock::now() > give_up) {
      s->Stop();
      return Status::Unavailable("the HTTP server on " + options.host + ":" + std::to_string(port) +
                                 " did not start serving");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return s;
}

void HttpServer::Stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

HttpServer::~HttpServer() { Stop(); }

}  // namespace zipg::http

#include "cluster/etcd.h"

#include <curl/curl.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>

namespace zipg::cluster {
namespace {

using Json = nlohmann::json;

// How much of an unexpected reply an error message quotes.
constexpr size_t kExcerptBytes = 300;
// How long a Watch waits for data before it looks at `cancel` again.
constexpr long kWatchPollMillis = 100;
// Idle unary handles kept for reuse (each holds at most one keep-alive connection).
constexpr size_t kMaxIdleHandles = 8;

Status GlobalInit() {
  // curl_global_init is not thread-safe in every libcurl build; a function-local static is
  // initialized exactly once.
  static const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (rc != CURLE_OK) {
    return Status::Internal(std::string("curl_global_init failed: ") + curl_easy_strerror(rc));
  }
  return Status::OK();
}

Status DeadlineExceeded(std::string message) {
  return Status(StatusCode::kDeadlineExceeded, std::move(message));
}

std::string Excerpt(std::string_view body) {
  std::string out;
  for (char c : body.substr(0, kExcerptBytes)) {
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  if (body.size() > kExcerptBytes) out += "...";
  return out;
}

// --- base64 (the gateway's encoding of protobuf bytes fields) ---

constexpr char kBase64Chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(in[i])); };
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out += kBase64Chars[v >> 18];
    out += kBase64Chars[(v >> 12) & 63];
    out += kBase64Chars[(v >> 6) & 63];
    out += kBase64Chars[v & 63];
  }
  if (size_t rest = in.size() - i; rest > 0) {
    uint32_t v = byte(i) << 16 | (rest == 2 ? byte(i + 1) << 8 : 0);
    out += kBase64Chars[v >> 18];
    out += kBase64Chars[(v >> 12) & 63];
    out += rest == 2 ? kBase64Chars[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;  // standard or URL-safe alphabet
  if (c == '/' || c == '_') return 63;
  return -1;
}

// Standard or URL-safe alphabet, padded or not.
bool Base64Decode(std::string_view in, std::string* out) {
  out->clear();
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return false;
  out->reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = Base64Value(c);
    if (v < 0) return false;
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
      acc &= (1u << bits) - 1;
    }
  }
  return true;
}

// The end of the key range [key, end) holding every key that starts with prefix: the prefix with
// its last byte below 0xff incremented (and the 0xff bytes after it dropped); "\0", which etcd
// reads as "to the end of the key space", if there is no such byte.
std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto last = static_cast<unsigned char>(end.back());
    if (last != 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

// A range request's "key" and "range_end" for every key starting with prefix.
Json PrefixRange(const std::string& prefix) {
  return {{"key", Base64Encode(prefix.empty() ? std::string(1, '\0') : prefix)},
          {"range_end", Base64Encode(PrefixEnd(prefix))}};
}

// --- the gateway's JSON ---

// What error messages start with: "etcd http://host:port Op".
std::string Where(const std::string& endpoint, const char* op) {
  return "etcd " + endpoint + " " + op;
}

// int64 fields are sent as JSON strings, as the gateway itself writes them.
std::string ToString(int64_t v) { return std::to_string(v); }

// Never throws: requests hold only ASCII (base64, digits, names).
std::string Dump(const Json& request) {
  return request.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Status UnexpectedReply(const std::string& where, std::string_view body) {
  return Status::Internal(where + ": unexpected reply: " + Excerpt(body));
}

std::optional<Json> ParseJson(std::string_view text) {
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return std::nullopt;
  return json;
}

// The reply of a unary call: one JSON object.
StatusOr<Json> ParseObject(const std::string& where, std::string_view body) {
  auto json = ParseJson(body);
  if (!json || !json->is_object()) return UnexpectedReply(where, body);
  return std::move(*json);
}

// int64 fields arrive as JSON strings ("42") and are omitted when zero.
// One template for both: a 64-bit field arrives as a JSON string ("42", as the gateway writes
// them) or a number, and is 0 when absent.
template <typename T>
bool GetInteger(const Json& object, const char* name, T* out) {
  *out = 0;
  if (!object.is_object()) return false;
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return true;
  if (std::is_signed_v<T> ? it->is_number_integer() : it->is_number_unsigned()) {
    *out = it->get<T>();
    return true;
  }
  if (!it->is_string()) return false;
  const auto& s = it->get_ref<const std::string&>();
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}
constexpr auto& GetInt64 = GetInteger<int64_t>;
constexpr auto& GetUint64 = GetInteger<uint64_t>;

// A list of strings (absent: empty).
bool GetStrings(const Json& object, const char* name, std::vector<std::string>* out) {
  out->clear();
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return true;
  if (!it->is_array()) return false;
  for (const auto& v : *it) {
    if (!v.is_string()) return false;
    out->push_back(v.get<std::string>());
  }
  return true;
}

bool ParseMember(const Json& m, EtcdMember* out) {
  if (!m.is_object() || !GetUint64(m, "ID", &out->id) || out->id == 0 ||
      !GetStrings(m, "peerURLs", &out->peer_urls) ||
      !GetStrings(m, "clientURLs", &out->client_urls)) {
    return false;
  }
  auto name = m.find("name");
  out->name = name != m.end() && name->is_string() ? name->get<std::string>() : "";
  return true;
}

// bool fields are omitted when false.
bool GetBool(const Json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

// bytes fields arrive base64-encoded and are omitted when empty.
bool GetBytes(const Json& object, const char* name, std::string* out) {
  out->clear();
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return true;
  return it->is_string() && Base64Decode(it->get_ref<const std::string&>(), out);
}

bool DecodeKeyValue(const Json& json, KeyValue* kv) {
  return json.is_object() && GetBytes(json, "key", &kv->key) &&
         GetBytes(json, "value", &kv->value) &&
         GetInt64(json, "create_revision", &kv->create_revision) &&
         GetInt64(json, "mod_revision", &kv->mod_revision) && GetInt64(json, "lease", &kv->lease);
}

// A gRPC status code (as etcd reports it) as ours.
StatusCode FromGrpcCode(int64_t code) {
  switch (code) {
    case 1:   // CANCELLED
    case 10:  // ABORTED
    case 14:  // UNAVAILABLE (no leader, request timed out inside the cluster, ...)
      return StatusCode::kUnavailable;
    case 3:   // INVALID_ARGUMENT (empty key, request too large, ...)
    case 11:  // OUT_OF_RANGE (compacted or future revision)
      return StatusCode::kInvalidArgument;
    case 4:
      return StatusCode::kDeadlineExceeded;
    case 5:
      return StatusCode::kNotFound;
    case 6:
      return StatusCode::kAlreadyExists;
    case 8:
      return StatusCode::kResourceExhausted;
    default:
      return StatusCode::kInternal;
  }
}

}  // namespace

// --- handles ---

class EtcdClient::HandlePool {
 public:
  ~HandlePool() {
    for (CURL* handle : idle_) curl_easy_cleanup(handle);
  }
  // An idle handle, or a new one (nullptr if libcurl cannot make one).
  CURL* Take() {
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        CURL* handle = idle_.back();
        idle_.pop_back();
        return handle;
      }
    }
    return curl_easy_init();
  }
  // Keeps a handle (and its connection) for reuse after a successful request.
  void Return(CURL* handle) {
    curl_easy_reset(handle);
    std::lock_guard lock(mu_);
    if (idle_.size() < kMaxIdleHandles) {
      idle_.push_back(handle);
      return;
    }
    curl_easy_cleanup(handle);
  }

 private:
  std::mutex mu_;
  std::vector<CURL*> idle_;  // guarded by mu_
};

namespace {

// Options shared by unary requests and watches. `headers` and `body` must outlive the transfer.
void SetCommonOptions(CURL* handle, const std::string& url, const std::string& body,
                      curl_slist* headers, std::string* reply, char* error_buffer,
                      std::chrono::milliseconds connect_timeout, const EtcdTls& tls) {
  auto write = +[](char* data, size_t size, size_t count, void* out) -> size_t {
    static_cast<std::string*>(out)->append(data, size * count);
    return size * count;
  };
  curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
  curl_easy_setopt(handle, CURLOPT_POST, 1L);
  curl_easy_setopt(handle, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, write);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, reply);
  curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, connect_timeout.count())));
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);  // required with timeouts in threaded programs
  curl_easy_setopt(handle, CURLOPT_PROXY, "");     // etcd is never reached through http_proxy
  curl_easy_setopt(handle, CURLOPT_TCP_KEEPALIVE, 1L);
  // https endpoints: the cluster's CA, and this member's certificate for mutual TLS.
  curl_easy_setopt(handle, CURLOPT_CAINFO, tls.ca.empty() ? nullptr : tls.ca.c_str());
  curl_easy_setopt(handle, CURLOPT_SSLCERT, tls.cert.empty() ? nullptr : tls.cert.c_str());
  curl_easy_setopt(handle, CURLOPT_SSLKEY, tls.key.empty() ? nullptr : tls.key.c_str());
}

// Content-Type, and no "Expect: 100-continue" (which would stall bodies over 1 KB).
curl_slist* JsonHeaders() {
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  return headers == nullptr ? nullptr : curl_slist_append(headers, "Expect:");
}

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using HeaderList = std::unique_ptr<curl_slist, SlistDeleter>;

std::string TransportDetail(CURLcode rc, const char* error_buffer) {
  std::string detail = curl_easy_strerror(rc);
  if (error_buffer[0] != '\0') detail += std::string(" (") + error_buffer + ")";
  return detail;
}

// A non-200 reply: etcd's {"error", "code", "message"} mapped by its gRPC code; otherwise 5xx is
// UNAVAILABLE (a proxy or a gateway without a backend) and anything else INTERNAL.
Status HttpError(const std::string& where, long http_status, const std::string& body) {
  std::string prefix = where + ": HTTP " + std::to_string(http_status) + ": ";
  if (auto json = ParseJson(body); json && json->is_object()) {
    int64_t code = 0;
    auto message = json->find("message");
    if (GetInt64(*json, "code", &code) && code != 0 && message != json->end() &&
        message->is_string()) {
      return Status(FromGrpcCode(code), prefix + message->get<std::string>());
    }
  }
  if (http_status >= 500) return Status::Unavailable(prefix + Excerpt(body));
  return UnexpectedReply(where + ": HTTP " + std::to_string(http_status), body);
}

// An error frame of a streaming call, {"error": {"grpc_code", "message", ...}}.
Status StreamError(const std::string& where, const Json& error) {
  int64_t code = 0;
  if (!error.is_object() || !GetInt64(error, "grpc_code", &code)) code = 2;  // UNKNOWN
  std::string message = Dump(error);
  if (auto it = error.find("message"); error.is_object() && it != error.end() && it->is_string()) {
    message = it->get<std::string>();
  }
  return Status(code == 0 ? StatusCode::kInternal : FromGrpcCode(code), where + ": " + message);
}

// The "result" object of one message of a streaming call.
StatusOr<Json> UnwrapStreamMessage(const std::string& where, std::string_view line) {
  ZIPG_ASSIGN_OR_RETURN(Json json, ParseObject(where, line));
  if (auto it = json.find("error"); it != json.end()) return StreamError(where, *it);
  auto it = json.find("result");
  if (it == json.end() || !it->is_object()) return UnexpectedReply(where, line);
  return std::move(*it);
}

}  // namespace

// --- EtcdClient ---

EtcdClient::EtcdClient(std::string endpoints, std::chrono::milliseconds timeout)
    : timeout_(std::max(timeout, std::chrono::milliseconds(1))),
      pool_(std::make_unique<HandlePool>()) {
  size_t start = 0;
  while (start <= endpoints.size()) {
    size_t end = endpoints.find(',', start);
    if (end == std::string::npos) end = endpoints.size();
    std::string e = endpoints.substr(start, end - start);
    if (!e.empty()) {
      if (e.find("://") == std::string::npos) e = "http://" + e;
      while (!e.empty() && e.back() == '/') e.pop_back();
      endpoints_.push_back(e);
    }
    start = end + 1;
  }
  if (endpoints_.empty()) endpoints_.push_back("http://127.0.0.1:2379");
}

std::string EtcdClient::endpoints() const {
  std::string out;
  for (const auto& e : endpoints_) out += (out.empty() ? "" : ",") + e;
  return out;
}

void EtcdClient::SetTls(EtcdTls tls) { tls_ = std::move(tls); }

EtcdClient::~EtcdClient() = default;

StatusOr<std::string> EtcdClient::Post(const char* op, const char* path, const std::string& body) {
  // The current endpoint first; where it cannot answer (down, no leader), the next ones. When a
  // member was reached but could not answer (no leader, or no reply in time: an election is under
  // way after the leader's loss; timeouts count only with several endpoints), go round again
  // until kElectionWindow has passed. If no member could even be connected to,
  // fail at once.
  // A new leader takes one or two election timeouts (1 s each by default); on a loaded machine
  // whose members miss heartbeats, elections can follow one another for longer.
  constexpr auto kElectionWindow = std::chrono::milliseconds(5000);
  const auto start = std::chrono::steady_clock::now();
  const size_t n = endpoints_.size();
  StatusOr<std::string> reply = Status::Unavailable("no etcd endpoint");
  for (;;) {
    const size_t first = current_.load();
    bool reached = false;
    for (size_t k = 0; k < n; ++k) {
      const size_t at = (first + k) % n;
      bool answered = false;
      reply = PostTo(endpoints_[at], op, path, body, &answered);
      if (reply.ok() || (reply.status().code() != StatusCode::kUnavailable &&
                         reply.status().code() != StatusCode::kDeadlineExceeded)) {
        if (at != first) current_ = at;
        return reply;
      }
      // A member that timed out may be waiting for a new leader; with one endpoint it is more
      // likely gone, and waiting again would only double the caller's wait.
      reached =
          reached || answered || (n > 1 && reply.status().code() == StatusCode::kDeadlineExceeded);
    }
    if (!reached || std::chrono::steady_clock::now() - start >= kElectionWindow) return reply;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

StatusOr<std::string> EtcdClient::PostTo(const std::string& endpoint, const char* op,
                                         const char* path, const std::string& body,
                                         bool* answered) {
  const std::string where = Where(endpoint, op);
  ZIPG_RETURN_IF_ERROR(GlobalInit());
  HeaderList headers(JsonHeaders());
  CURL* handle = pool_->Take();
  if (handle == nullptr || headers == nullptr) {
    if (handle != nullptr) curl_easy_cleanup(handle);
    return Status::Internal(where + ": libcurl out of memory");
  }
  std::string reply;
  char error_buffer[CURL_ERROR_SIZE] = "";
  const std::string url = endpoint + path;
  SetCommonOptions(handle, url, body, headers.get(), &reply, error_buffer, timeout_, tls_);
  curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_.count()));
  CURLcode rc = curl_easy_perform(handle);
  long http_status = 0;
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &http_status);
  if (rc != CURLE_OK) {
    curl_easy_cleanup(handle);  // its connection may be half-used; do not reuse it
    if (rc == CURLE_OPERATION_TIMEDOUT) {
      return DeadlineExceeded(where + ": no reply within " + std::to_string(timeout_.count()) +
                              " ms (" + TransportDetail(rc, error_buffer) + ")");
    }
    return Status::Unavailable(where + ": POST " + path +
                               " failed: " + TransportDetail(rc, error_buffer));
  }
  pool_->Return(handle);
  *answered = true;
  if (http_status != 200) return HttpError(where, http_status, reply);
  return reply;
}

StatusOr<int64_t> EtcdClient::LeaseGrant(int64_t ttl_seconds, int64_t* granted_ttl) {
  const std::string where = Where(endpoint(), "LeaseGrant");
  if (ttl_seconds <= 0) {
    return Status::InvalidArgument(where + ": TTL must be positive, got " +
                                   std::to_string(ttl_seconds));
  }
  ZIPG_ASSIGN_OR_RETURN(std::string body, Post("LeaseGrant", "/v3/lease/grant",
                                               Dump({{"TTL", ToString(ttl_seconds)}})));
  ZIPG_ASSIGN_OR_RETURN(Json reply, ParseObject(where, body));
  int64_t id = 0, ttl = 0;
  if (!GetInt64(reply, "ID", &id) || !GetInt64(reply, "TTL", &ttl) || id == 0 || ttl <= 0) {
    return UnexpectedReply(where, body);
  }
  if (granted_ttl != nullptr) *granted_ttl = ttl;
  return id;
}

Status EtcdClient::LeaseKeepAlive(int64_t lease) {
  const std::string where = Where(endpoint(), "LeaseKeepAlive");
  // A streaming call: the reply is one {"result": ...} (or {"error": ...}) message, and an
  // unknown or expired lease is not an error but a result without a TTL.
  ZIPG_ASSIGN_OR_RETURN(std::string body, Post("LeaseKeepAlive", "/v3/lease/keepalive",
                                               Dump({{"ID", ToString(lease)}})));
  ZIPG_ASSIGN_OR_RETURN(Json result, UnwrapStreamMessage(where, body));
  int64_t ttl = 0;
  if (!GetInt64(result, "TTL", &ttl)) return UnexpectedReply(where, body);
  if (ttl <= 0) {
    return Status::NotFound(where + ": lease " + std::to_string(lease) +
                            " has expired or does not exist");
  }
  return Status::OK();
}

Status EtcdClient::LeaseRevoke(int64_t lease) {
  auto reply = Post("LeaseRevoke", "/v3/lease/revoke", Dump({{"ID", ToString(lease)}}));
  if (!reply.ok() && reply.status().code() != StatusCode::kNotFound) return reply.status();
  return Status::OK();
}

namespace {

Json PutRequest(const std::string& key, const std::string& value, int64_t lease) {
  Json request = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease != 0) request["lease"] = ToString(lease);
  return request;
}

Status CheckKey(const std::string& where, const std::string& key) {
  if (key.empty()) return Status::InvalidArgument(where + ": empty key");
  return Status::OK();
}

}  // namespace

Status EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  ZIPG_RETURN_IF_ERROR(CheckKey(Where(endpoint(), "Put"), key));
  return Post("Put", "/v3/kv/put", Dump(PutRequest(key, value, lease))).status();
}

StatusOr<bool> EtcdClient::PutIfAbsent(const std::string& key, const std::string& value,
                                       int64_t lease) {
  const std::string where = Where(endpoint(), "PutIfAbsent");
  ZIPG_RETURN_IF_ERROR(CheckKey(where, key));
  Json request = {
      {"compare", Json::array({{{"key", Base64Encode(key)},
                                {"target", "CREATE"},
                                {"result", "EQUAL"},
                                {"create_revision", "0"}}})},
      {"success", Json::array({{{"request_put", PutRequest(key, value, lease)}}})},
  };
  ZIPG_ASSIGN_OR_RETURN(std::string body, Post("PutIfAbsent", "/v3/kv/txn", Dump(request)));
  ZIPG_ASSIGN_OR_RETURN(Json reply, ParseObject(where, body));
  return GetBool(reply, "succeeded");  // omitted when false
}

StatusOr<bool> EtcdClient::PutIfGuard(const std::string& key, const std::string& value,
                                      const std::string& guard_key, int64_t guard_revision) {
  const std::string where = Where(endpoint(), "PutIfGuard");
  ZIPG_RETURN_IF_ERROR(CheckKey(where, key));
  ZIPG_RETURN_IF_ERROR(CheckKey(where, guard_key));
  Json request = {
      {"compare", Json::array({{{"key", Base64Encode(guard_key)},
                                {"target", "CREATE"},
                                {"result", "EQUAL"},
                                {"create_revision", std::to_string(guard_revision)}}})},
      {"success", Json::array({{{"request_put", PutRequest(key, value, 0)}}})},
  };
  ZIPG_ASSIGN_OR_RETURN(std::string body, Post("PutIfGuard", "/v3/kv/txn", Dump(request)));
  ZIPG_ASSIGN_OR_RETURN(Json reply, ParseObject(where, body));
  return GetBool(reply, "succeeded");
}

StatusOr<std::optional<KeyValue>> EtcdClient::Get(const std::string& key) {
  const std::string where = Where(endpoint(), "Get");
  ZIPG_RETURN_IF_ERROR(CheckKey(where, key));
  ZIPG_ASSIGN_OR_RETURN(std::string body,
                        Post("Get", "/v3/kv/range", Dump({{"key", Base64Encode(key)}})));
  ZIPG_ASSIGN_OR_RETURN(Json reply, ParseObject(where, body));
  auto kvs = reply.find("kvs");  // omitted when empty
  if (kvs == reply.end()) return std::optional<KeyValue>();
  KeyValue kv;
  if (!kvs->is_array() || kvs->size() != 1 || !DecodeKeyValue((*kvs)[0], &kv) || kv.key != key) {
    return UnexpectedReply(where, body);
  }
  return std::optional<KeyValue>(std::move(kv));
}

StatusOr<std::vector<KeyValue>> EtcdClient::GetPrefix(const std::string& prefix,
                                                      int64_t* revision) {
  const std::string where = Where(endpoint(), "GetPrefix");
  ZIPG_ASSIGN_OR_RETURN(std::string body,
                        Post("GetPrefix", "/v3/kv/range", Dump(PrefixRange(prefix))));
  ZIPG_ASSIGN_OR_RETURN(Json reply, ParseObject(where, body));
  int64_t read_revision = 0;
  auto header = reply.find("header");
  if (header == reply.end() || !GetInt64(*header, "revision", &read_revision)) {
    return UnexpectedReply(where, body);
  }
  std::vector<KeyValue> out;
  if (auto kvs = reply.find("kvs"); kvs != reply.end()) {
    if (!kvs->is_array()) return UnexpectedReply(where, body);
    out.resize(kvs->size());
    for (size_t i = 0; i < kvs->size(); ++i) {
      if (!DecodeKeyValue((*kvs)[i], &out[i])) return UnexpectedReply(where, body);
    }
  }
  if (revision != nullptr) *revision = read_revision;
  return out;
}

Status EtcdClient::Delete(const std::string& key) {
  ZIPG_RETURN_IF_ERROR(CheckKey(Where(endpoint(), "Delete"), key));
  return Post("Delete", "/v3/kv/deleterange", Dump({{"key", Base64Encode(key)}})).status();
}

Status EtcdClient::DeletePrefix(const std::string& prefix) {
  return Post("DeletePrefix", "/v3/kv/deleterange", Dump(PrefixRange(prefix))).status();
}

// --- Members ---

StatusOr<std::vector<EtcdMember>> EtcdClient::MemberList() {
  const std::string where = Where(endpoint(), "MemberList");
  ZIPG_ASSIGN_OR_RETURN(std::string body, Post("MemberList", "/v3/cluster/member/list", "{}"));
  ZIPG_ASSIGN_OR_RETURN(Json reply, ParseObject(where, body));
  std::vector<EtcdMember> members;
  auto it = reply.find("members");
  if (it == reply.end() || !it->is_array()) return UnexpectedReply(where, body);
  for (const Json& m : *it) {
    if (!ParseMember(m, &members.emplace_back())) return UnexpectedReply(where, body);
  }
  return members;
}

StatusOr<EtcdMember> EtcdClient::MemberAdd(const std::vector<std::string>& peer_urls) {
  const std::string where = Where(endpoint(), "MemberAdd");
  if (peer_urls.empty()) return Status::InvalidArgument(where + ": no peer URL");
  ZIPG_ASSIGN_OR_RETURN(std::string body, Post("MemberAdd", "/v3/cluster/member/add",
                                               Dump({{"peerURLs", peer_urls}})));
  ZIPG_ASSIGN_OR_RETURN(Json reply, ParseObject(where, body));
  EtcdMember member;
  auto it = reply.find("member");
  if (it == reply.end() || !ParseMember(*it, &member)) return UnexpectedReply(where, body);
  return member;
}

Status EtcdClient::MemberRemove(uint64_t id) {
  // An unknown member is etcd's NotFound ("member not found").
  return Post("MemberRemove", "/v3/cluster/member/remove", Dump({{"ID", std::to_string(id)}}))
      .status();
}

// --- Watch ---

namespace {

// One streaming transfer driven by a multi handle, so that the caller can wake up to look at
// `cancel` while no data arrives. Cleans up in the order libcurl requires.
class WatchTransfer {
 public:
  WatchTransfer() : multi_(curl_multi_init()), easy_(curl_easy_init()) {}
  ~WatchTransfer() {
    if (added_) curl_multi_remove_handle(multi_, easy_);
    if (easy_ != nullptr) curl_easy_cleanup(easy_);
    if (multi_ != nullptr) curl_multi_cleanup(multi_);
  }
  WatchTransfer(const WatchTransfer&) = delete;
  WatchTransfer& operator=(const WatchTransfer&) = delete;

  bool valid() const { return multi_ != nullptr && easy_ != nullptr; }
  CURL* easy() { return easy_; }
  CURLM* multi() { return multi_; }
  bool Start() { return added_ = curl_multi_add_handle(multi_, easy_) == CURLM_OK; }

 private:
  CURLM* multi_;
  CURL* easy_;
  bool added_ = false;
};

// Decodes one watch message. Sets *events (possibly empty: the "created" message, progress
// notifications) or returns why the watch is over.
Status DecodeWatchMessage(const std::string& where, std::string_view line,
                          std::vector<WatchEvent>* events) {
  events->clear();
  ZIPG_ASSIGN_OR_RETURN(Json result, UnwrapStreamMessage(where, line));
  if (GetBool(result, "canceled")) {
    int64_t compact_revision = 0;
    if (GetInt64(result, "compact_revision", &compact_revision) && compact_revision > 0) {
      return Status::InvalidArgument(where + ": start revision has been compacted; oldest " +
                                     "available revision is " + std::to_string(compact_revision));
    }
    std::string reason;
    if (auto it = result.find("cancel_reason"); it != result.end() && it->is_string()) {
      reason = it->get<std::string>();
    }
    return Status::Unavailable(where + ": watch canceled by etcd: " + reason);
  }
  auto list = result.find("events");
  if (list == result.end()) return Status::OK();
  if (!list->is_array()) return UnexpectedReply(where, line);
  events->resize(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& event = (*list)[i];
    auto kv = event.find("kv");
    if (!event.is_object() || kv == event.end() || !DecodeKeyValue(*kv, &(*events)[i].kv)) {
      return UnexpectedReply(where, line);
    }
    auto type = event.find("type");  // omitted for PUT, the enum's zero value
    if (type == event.end() || *type == "PUT" || *type == 0) {
      (*events)[i].type = WatchEvent::Type::kPut;
    } else if (*type == "DELETE" || *type == 1) {
      (*events)[i].type = WatchEvent::Type::kDelete;
    } else {
      return UnexpectedReply(where, line);
    }
  }
  return Status::OK();
}

}  // namespace

Status EtcdClient::Watch(const std::string& prefix, int64_t start_revision,
                         const std::function<bool(const std::vector<WatchEvent>&)>& on_events,
                         const std::atomic<bool>& cancel) {
  const size_t at = current_.load();
  Status s = WatchAt(endpoints_[at % endpoints_.size()], prefix, start_revision, on_events, cancel);
  if (s.code() == StatusCode::kUnavailable && endpoints_.size() > 1) {
    // The caller retries: on the next endpoint, unless a unary call moved on already.
    size_t expected = at;
    current_.compare_exchange_strong(expected, (at + 1) % endpoints_.size());
  }
  return s;
}

Status EtcdClient::WatchAt(const std::string& endpoint, const std::string& prefix,
                           int64_t start_revision,
                           const std::function<bool(const std::vector<WatchEvent>&)>& on_events,
                           const std::atomic<bool>& cancel) {
  const std::string where = Where(endpoint, "Watch");
  if (start_revision < 0) {
    return Status::InvalidArgument(where + ": negative start revision " +
                                   std::to_string(start_revision));
  }
  ZIPG_RETURN_IF_ERROR(GlobalInit());
  Json create = PrefixRange(prefix);
  if (start_revision > 0) create["start_revision"] = ToString(start_revision);
  const std::string body = Dump({{"create_request", create}});
  const std::string url = endpoint + "/v3/watch";

  HeaderList headers(JsonHeaders());
  WatchTransfer transfer;
  if (!transfer.valid() || headers == nullptr) {
    return Status::Internal(where + ": libcurl out of memory");
  }
  std::string buffer;  // received bytes not yet decoded; messages end with '\n'
  char error_buffer[CURL_ERROR_SIZE] = "";
  SetCommonOptions(transfer.easy(), url, body, headers.get(), &buffer, error_buffer, timeout_,
                   tls_);
  if (!transfer.Start()) return Status::Internal(where + ": curl_multi_add_handle failed");

  std::vector<WatchEvent> events;
  CURLcode result = CURLE_OK;
  long http_status = 0;
  while (true) {
    int running = 0;
    if (CURLMcode mc = curl_multi_perform(transfer.multi(), &running); mc != CURLM_OK) {
      return Status::Internal(where + ": " + curl_multi_strerror(mc));
    }
    curl_easy_getinfo(transfer.easy(), CURLINFO_RESPONSE_CODE, &http_status);
    if (http_status == 200) {
      size_t start = 0;
      for (size_t end; (end = buffer.find('\n', start)) != std::string::npos; start = end + 1) {
        std::string_view line(buffer.data() + start, end - start);
        if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
        ZIPG_RETURN_IF_ERROR(DecodeWatchMessage(where, line, &events));
        if (!events.empty() && !on_events(events)) return Status::OK();
        if (cancel.load()) return Status::OK();
      }
      buffer.erase(0, start);
    }
    if (running == 0) {
      int queued = 0;
      while (CURLMsg* msg = curl_multi_info_read(transfer.multi(), &queued)) {
        if (msg->msg == CURLMSG_DONE) result = msg->data.result;
      }
      break;
    }
    if (cancel.load()) return Status::OK();
    if (CURLMcode mc = curl_multi_poll(transfer.multi(), nullptr, 0, kWatchPollMillis, nullptr);
        mc != CURLM_OK) {
      return Status::Internal(where + ": " + curl_multi_strerror(mc));
    }
  }
  // The stream is over without having been cancelled.
  if (result != CURLE_OK) {
    return Status::Unavailable(where +
                               ": POST /v3/watch failed: " + TransportDetail(result, error_buffer));
  }
  if (http_status != 200) {
    Status error = HttpError(where, http_status, buffer);
    // Whatever the gateway says, a watch that could not be set up is worth retrying.
    return error.code() == StatusCode::kInternal ? Status::Unavailable(error.message()) : error;
  }
  if (buffer.find_first_not_of(" \r\t\n") != std::string::npos) {
    // A final message without its newline: if it is an error, report that.
    ZIPG_RETURN_IF_ERROR(DecodeWatchMessage(where, buffer, &events));
    if (!events.empty() && !on_events(events)) return Status::OK();
  }
  return Status::Unavailable(where + ": stream closed by etcd");
}

}  // namespace zipg::cluster

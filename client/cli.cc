#include "client/cli.h"

#include <algorithm>
#include <charconv>
#include <iostream>
#include <sstream>

#include "util/memory.h"

namespace zipg::cli {

StatusOr<Args> Args::Parse(int argc, char** argv, int first,
                           const std::vector<std::string>& boolean_flags) {
  Args args;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      std::string name = a.substr(2), value;
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      } else if (std::find(boolean_flags.begin(), boolean_flags.end(), name) !=
                 boolean_flags.end()) {
        value = "true";
      } else {
        if (i + 1 >= argc) return Status::InvalidArgument("option --" + name + " needs a value");
        value = argv[++i];
      }
      args.options_[name] = value;
    } else {
      args.positional_.push_back(a);
    }
  }
  return args;
}

std::optional<std::string> Args::Get(const std::string& name) const {
  auto it = options_.find(name);
  if (it == options_.end()) return std::nullopt;
  return it->second;
}

StatusOr<uint64_t> Args::GetUint(const std::string& name, uint64_t fallback) const {
  auto v = Get(name);
  if (!v) return fallback;
  return ParseUint(*v, "--" + name);
}

Status Args::CheckKnown(const std::vector<std::string>& known) const {
  for (const auto& [name, value] : options_) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return Status::InvalidArgument("unknown option --" + name);
    }
  }
  return Status::OK();
}

rpc::TlsOptions TlsFromArgs(const Args& args) {
  rpc::TlsOptions tls;
  tls.ca = args.Get("tls-ca").value_or("");
  tls.cert = args.Get("tls-cert").value_or("");
  tls.key = args.Get("tls-key").value_or("");
  return tls;
}

StatusOr<rpc::TlsOptions> ApplyTlsArgs(const Args& args) {
  rpc::TlsOptions tls = TlsFromArgs(args);
  ZIPG_RETURN_IF_ERROR(SetDefaultTls(tls));
  return tls;
}

std::vector<std::string> WithTls(std::vector<std::string> known) {
  return WithFlags(std::move(known), kTlsFlags);
}

std::vector<std::string> WithFlags(std::vector<std::string> known,
                                   const std::vector<std::string>& more) {
  known.insert(known.end(), more.begin(), more.end());
  return known;
}

StatusOr<graph::TraversalLimits> TraversalLimitsFromArgs(const Args& args) {
  graph::TraversalLimits limits;
  ZIPG_ASSIGN_OR_RETURN(uint64_t ms, args.GetUint("traversal-deadline-ms",
                                                  static_cast<uint64_t>(limits.deadline.count())));
  limits.deadline = std::chrono::milliseconds(std::min<uint64_t>(ms, uint64_t{1} << 40));
  if (auto text = args.Get("traversal-memory")) {
    auto bytes = ParseByteSize(*text);
    if (!bytes.ok()) {
      return Status::InvalidArgument("--traversal-memory: " + bytes.status().message());
    }
    limits.memory_bytes = *bytes;
  }
  if (Status valid = limits.Validate(); !valid.ok()) {
    return Status::InvalidArgument("--traversal-deadline-ms / --traversal-memory: " +
                                   valid.message());
  }
  return limits;
}

StatusOr<uint64_t> ParseUint(const std::string& text, const std::string& what) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return Status::InvalidArgument(what + " must be a non-negative integer, got '" + text + "'");
  }
  return v;
}

int Fail(const Status& status) {
  std::cerr << "zipg: error: " << status.ToString() << "\n";
  return kExitFailure;
}

int UsageError(const std::string& message, const std::string& usage) {
  std::cerr << "zipg: " << message << "\n" << usage;
  return kExitUsage;
}

StatusOr<std::vector<uint32_t>> ParseShardList(const std::string& text) {
  std::vector<uint32_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    ZIPG_ASSIGN_OR_RETURN(uint64_t v, ParseUint(item, "--shards"));
    if (v > 1u << 20) return Status::InvalidArgument("--shards: " + item + " is too large");
    out.push_back(static_cast<uint32_t>(v));
  }
  if (out.empty()) return Status::InvalidArgument("--shards needs a list such as 0,1");
  return out;
}

}  // namespace zipg::cli

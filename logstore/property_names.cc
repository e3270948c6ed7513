#include "logstore/property_names.h"

#include <algorithm>

namespace zipg::logstore {

namespace {
const char* const kKindName[2] = {"node", "edge"};
}  // namespace

StatusOr<std::unique_ptr<PropertyNames>> PropertyNames::Open(const std::string& path, bool sync,
                                                             size_t bound) {
  std::set<std::string> names[2];
  auto replay = [&](std::string_view record) -> Status {
    if (record.empty() || (record[0] != 'n' && record[0] != 'e')) {
      return Status::Corruption(path + ": a property name record must start with 'n' or 'e'");
    }
    names[record[0] == 'e'].emplace(record.substr(1));
    return Status::OK();
  };
  WalOptions options;
  options.sync = sync;
  ZIPG_ASSIGN_OR_RETURN(auto log, Wal::Open(path, replay, options));
  std::unique_ptr<PropertyNames> p(new PropertyNames(std::move(log), bound));
  p->names_[kNode] = std::move(names[kNode]);
  p->names_[kEdge] = std::move(names[kEdge]);
  return p;
}

Status PropertyNames::Persist(Kind kind, const std::vector<std::string>& fresh) {
  std::vector<std::string> records;
  records.reserve(fresh.size());
  for (const std::string& name : fresh) records.push_back((kind == kEdge ? "e" : "n") + name);
  std::vector<std::string_view> views(records.begin(), records.end());
  return log_->AppendAll(views.data(), views.size());
}

std::vector<std::string> PropertyNames::FreshLocked(Kind kind,
                                                    const std::vector<std::string>& names) const {
  std::vector<std::string> fresh;
  for (const std::string& name : names) {
    if (names_[kind].count(name) == 0) fresh.push_back(name);
  }
  std::sort(fresh.begin(), fresh.end());
  fresh.erase(std::unique(fresh.begin(), fresh.end()), fresh.end());
  return fresh;
}

Status PropertyNames::Admit(Kind kind, const Properties& properties) {
  std::vector<std::string> names;
  for (const auto& [name, value] : properties) names.push_back(name);
  std::lock_guard lock(mu_);
  const std::vector<std::string> fresh = FreshLocked(kind, names);
  if (fresh.empty()) return Status::OK();
  if (names_[kind].size() + fresh.size() > bound_) {
    return Status::ResourceExhausted(
        "the store holds at most " + std::to_string(bound_) + " distinct " + kKindName[kind] +
        " property names, and has " + std::to_string(names_[kind].size()) + "; '" + fresh[0] +
        "' would be " + (fresh.size() > 1 ? "one of the new ones" : "a new one"));
  }
  ZIPG_RETURN_IF_ERROR(Persist(kind, fresh));
  names_[kind].insert(fresh.begin(), fresh.end());
  return Status::OK();
}

Status PropertyNames::Learn(Kind kind, const std::vector<std::string>& names) {
  std::lock_guard lock(mu_);
  const std::vector<std::string> fresh = FreshLocked(kind, names);
  if (fresh.empty()) return Status::OK();
  names_[kind].insert(fresh.begin(), fresh.end());  // known even if not kept (see the header)
  return Persist(kind, fresh);
}

size_t PropertyNames::count(Kind kind) const {
  std::lock_guard lock(mu_);
  return names_[kind].size();
}

}  // namespace zipg::logstore

#include "logstore/record.h"

#include "util/coding.h"

namespace zipg::logstore {

namespace {
void PutString(std::string* out, const std::string& s) {
  PutFixed32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}
bool GetString(std::string_view* in, std::string* s) {
  if (in->size() < 4) return false;
  const uint32_t n = DecodeFixed32(in->data());
  if (in->size() - 4 < n) return false;
  s->assign(in->data() + 4, n);
  in->remove_prefix(4 + n);
  return true;
}
}  // namespace

std::string EncodeRecord(const LogRecord& r) {
  std::string out;
  out.push_back(static_cast<char>(r.op));
  PutFixed64(&out, static_cast<uint64_t>(r.node));
  PutFixed64(&out, static_cast<uint64_t>(r.type));
  PutFixed64(&out, static_cast<uint64_t>(r.dst));
  PutFixed64(&out, static_cast<uint64_t>(r.timestamp));
  PutFixed32(&out, static_cast<uint32_t>(r.properties.size()));
  for (const auto& [name, value] : r.properties) {
    PutString(&out, name);
    PutString(&out, value);
  }
  return out;
}

Status DecodeRecord(std::string_view in, LogRecord* r) {
  const auto bad = [] { return Status::Corruption("malformed LogStore record"); };
  if (in.size() < 1 + 4 * 8 + 4) return bad();
  const uint8_t op = static_cast<uint8_t>(in[0]);
  if (op < 1 || op > 4) return bad();
  r->op = static_cast<engine::UpdateOp>(op);
  r->node = static_cast<int64_t>(DecodeFixed64(in.data() + 1));
  r->type = static_cast<int64_t>(DecodeFixed64(in.data() + 9));
  r->dst = static_cast<int64_t>(DecodeFixed64(in.data() + 17));
  r->timestamp = static_cast<int64_t>(DecodeFixed64(in.data() + 25));
  const uint32_t n = DecodeFixed32(in.data() + 33);
  in.remove_prefix(37);
  r->properties.clear();
  for (uint32_t i = 0; i < n; ++i) {
    std::string name, value;
    if (!GetString(&in, &name) || !GetString(&in, &value)) return bad();
    r->properties.emplace_back(std::move(name), std::move(value));
  }
  if (!in.empty()) return bad();
  return Status::OK();
}

}  // namespace zipg::logstore

// Side files: see side_file.h for the format.

#include "layout/side_file.h"

#include "util/checksum.h"
#include "util/coding.h"
#include "util/file.h"

namespace zipg::layout {

Status WriteSideFile(const std::string& path, std::string_view magic, uint32_t version,
                     std::string_view payload) {
  std::string head(magic);
  PutFixed32(&head, version);
  PutFixed64(&head, payload.size());
  std::string whole = head;
  whole.append(payload);
  std::string tail;
  PutFixed64(&tail, Checksum64(whole.data(), whole.size()));
  return WriteFileAtomically(path, [&](const FileSink& sink) {
    ZIPG_RETURN_IF_ERROR(sink(whole));
    return sink(tail);
  });
}

StatusOr<std::string> ReadSideFile(const std::string& path, std::string_view magic,
                                   uint32_t version) {
  uint32_t found;
  return ReadSideFile(path, magic, version, version, &found);
}

StatusOr<std::string> ReadSideFile(const std::string& path, std::string_view magic,
                                   uint32_t min_version, uint32_t max_version,
                                   uint32_t* version) {
  ZIPG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  constexpr size_t kHead = 8 + 4 + 8;
  if (bytes.size() < kHead + 8 || bytes.compare(0, 8, magic) != 0) {
    return Status::Corruption(path + ": not a " + std::string(magic.substr(0, 7)) + " file");
  }
  *version = DecodeFixed32(bytes.data() + 8);
  if (*version < min_version || *version > max_version) {
    return Status::Corruption(path + ": unsupported format version " + std::to_string(*version));
  }
  const uint64_t length = DecodeFixed64(bytes.data() + 12);
  if (length != bytes.size() - kHead - 8) return Status::Corruption(path + ": truncated");
  const uint64_t stored = DecodeFixed64(bytes.data() + kHead + length);
  if (stored != Checksum64(bytes.data(), kHead + length)) {
    return Status::Corruption(path + ": checksum mismatch");
  }
  return bytes.substr(kHead, length);
}

bool PayloadReader::GetFixed32(uint32_t* v) {
  if (rest_.size() < 4) return false;
  *v = DecodeFixed32(rest_.data());
  rest_.remove_prefix(4);
  return true;
}
bool PayloadReader::GetFixed64(uint64_t* v) {
  if (rest_.size() < 8) return false;
  *v = DecodeFixed64(rest_.data());
  rest_.remove_prefix(8);
  return true;
}
bool PayloadReader::GetBytes(size_t n, std::string_view* s) {
  if (rest_.size() < n) return false;
  *s = rest_.substr(0, n);
  rest_.remove_prefix(n);
  return true;
}
bool PayloadReader::GetString(std::string* s) {
  uint32_t n;
  std::string_view bytes;
  if (!GetFixed32(&n) || !GetBytes(n, &bytes)) return false;
  s->assign(bytes);
  return true;
}
void PutLengthPrefixed(std::string* dst, std::string_view s) {
  PutFixed32(dst, static_cast<uint32_t>(s.size()));
  dst->append(s);
}

}  // namespace zipg::layout

#include "http/assets.h"

#include <string_view>

#include "http/api.h"

namespace zipg::http {
namespace {

std::string ContentType(std::string_view path) {
  auto ends = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.substr(path.size() - suffix.size()) == suffix;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".png")) return "image/png";
  if (ends(".svg")) return "image/svg+xml";
  return "text/plain; charset=utf-8";
}

}  // namespace

bool FindAsset(const std::string& path, std::string* body, std::string* content_type) {
  std::string_view name = path;
  if (name == "/") {
    name = "index.html";
  } else if (name.substr(0, 8) == "/static/") {
    name.remove_prefix(8);
  } else {
    return false;
  }
  for (const Asset& a : Assets()) {
    if (name == a.path) {
      body->assign(a.begin, a.end);
      *content_type = ContentType(name);
      return true;
    }
  }
  return false;
}

}  // namespace zipg::http

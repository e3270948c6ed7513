// A test helper shared by the tests of every TLS channel (Thrift, the frame link).
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "rpc/frame_link.h"
#include "rpc/tls.h"

namespace zipg::rpc {

// Certificates made with the openssl command line, as `zipg deploy certs` makes them: a CA with a
// server and a client certificate, and a second CA (a stranger's) with a client certificate.
class TlsFiles {
 public:
  TlsFiles() {
    char dir[] = "/tmp/zipg_rpc_tls.XXXXXX";
    if (mkdtemp(dir) == nullptr) return;
    dir_ = dir;
    ok_ = Ca("ca") && Ca("other") && Cert("ca", "server") && Cert("ca", "client") &&
          Cert("other", "stranger");
  }
  ~TlsFiles() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  bool ok() const { return ok_; }
  TlsOptions Of(const std::string& ca, const std::string& name) const {
    return {dir_ + "/" + ca + ".pem", dir_ + "/" + name + ".pem", dir_ + "/" + name + ".key"};
  }

 private:
  bool Run(const std::string& args) {
    return std::system(("openssl " + args + " >/dev/null 2>&1").c_str()) == 0;
  }
  bool Ca(const std::string& name) {
    return Run("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + dir_ +
               "/" + name + ".key -out " + dir_ + "/" + name + ".pem -days 2 -subj /CN=" + name);
  }
  bool Cert(const std::string& ca, const std::string& name) {
    const std::string base = dir_ + "/" + name;
    return Run("req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + base +
               ".key -out " + base + ".csr -subj /CN=" + name) &&
           Run("x509 -req -in " + base + ".csr -CA " + dir_ + "/" + ca + ".pem -CAkey " + dir_ +
               "/" + ca + ".key -CAcreateserial -out " + base + ".pem -days 2");
  }

  std::string dir_;
  bool ok_ = false;
};

// The frame link's parties, from TlsFiles: the server and a member of the cluster, and a
// stranger whose certificate is from another CA. `ok` is false if any set-up failed.
struct FrameParties {
  explicit FrameParties(const TlsFiles& files) {
    auto s = FrameSecurity::Make(files.Of("ca", "server"));
    auto m = FrameSecurity::Make(files.Of("ca", "client"));
    auto x = FrameSecurity::Make(files.Of("other", "stranger"));
    ok = files.ok() && s.ok() && m.ok() && x.ok();
    if (ok) {
      server = *s;
      member = *m;
      stranger = *x;
    }
  }
  FrameSecurity server, member, stranger;
  bool ok = false;
};

}  // namespace zipg::rpc

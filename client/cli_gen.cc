// zipg gen text: deterministic synthetic data for tests, examples and benchmarks.

#include <iostream>

#include "client/cli.h"
#include "datagen/random.h"
#include "util/file.h"

namespace zipg::cli {
namespace {

const char kUsage[] =
    "usage:\n"
    "  zipg gen text --bytes N --out FILE [--seed S]\n"
    "      N bytes of text-like data (Zipf-distributed pseudo-English words), deterministic in (N, "
    "S)\n";

}  // namespace

int RunGen(int argc, char** argv) {
  if (argc < 3 || std::string(argv[2]) != "text") return UsageError("gen needs 'text'", kUsage);
  auto args = Args::Parse(argc, argv, 3);
  if (!args.ok()) return UsageError(args.status().message(), kUsage);
  if (Status s = args->CheckKnown({"bytes", "out", "seed"}); !s.ok()) {
    return UsageError(s.message(), kUsage);
  }
  auto bytes = args->GetUint("bytes", 0);
  auto seed = args->GetUint("seed", 1);
  auto out = args->Get("out");
  if (!bytes.ok()) return UsageError(bytes.status().message(), kUsage);
  if (!seed.ok()) return UsageError(seed.status().message(), kUsage);
  if (!args->Has("bytes") || !out || !args->positional().empty()) {
    return UsageError("gen text needs --bytes and --out", kUsage);
  }
  std::string text = datagen::GenerateText(*bytes, *seed);
  Status s = WriteFileAtomically(*out, [&](const FileSink& sink) { return sink(text); });
  return s.ok() ? kExitOk : Fail(s);
}

}  // namespace zipg::cli

// zipg file build|extract|search|count|stats: the compressed flat file from the shell.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/cli.h"
#include "layout/compressed_file.h"
#include "util/file.h"

namespace zipg::cli {
namespace {

// The defaults shown come from CompressedFileOptions, their one definition.
const std::string kUsage =
    "usage:\n"
    "  zipg file build IN OUT [--sa-rate N] [--isa-rate N] [--psi-block N]\n"
    "      compress the bytes of file IN into the compressed file OUT (written atomically)\n"
    "      defaults: --sa-rate " +
    std::to_string(layout::CompressedFileOptions{}.sa_sampling_rate) + " --isa-rate " +
    std::to_string(layout::CompressedFileOptions{}.isa_sampling_rate) + " --psi-block " +
    std::to_string(layout::CompressedFileOptions{}.psi_block_size) +
    " (powers of two)\n"
    "  zipg file extract FILE OFFSET LEN   raw bytes [OFFSET, OFFSET+LEN) to stdout (clamped at "
    "the end)\n"
    "  zipg file search FILE PATTERN       offsets of all occurrences, one per line, ascending\n"
    "  zipg file count FILE PATTERN        number of occurrences\n"
    "  zipg file stats FILE                JSON: input bytes, stored bytes, ratio, breakdown\n";

StatusOr<std::unique_ptr<layout::CompressedFile>> OpenFile(const std::string& path) {
  return layout::CompressedFile::Open(path);
}

int Build(const Args& args) {
  if (Status s = args.CheckKnown({"sa-rate", "isa-rate", "psi-block"}); !s.ok()) {
    return UsageError(s.message(), kUsage);
  }
  if (args.positional().size() != 3) return UsageError("file build takes IN OUT", kUsage);
  layout::CompressedFileOptions options;
  auto sa = args.GetUint("sa-rate", options.sa_sampling_rate);
  auto isa = args.GetUint("isa-rate", options.isa_sampling_rate);
  auto psi = args.GetUint("psi-block", options.psi_block_size);
  for (const auto* v : {&sa, &isa, &psi}) {
    if (!v->ok()) return UsageError(v->status().message(), kUsage);
    if (v->value() > UINT32_MAX) return UsageError("sampling option out of range", kUsage);
  }
  options.sa_sampling_rate = static_cast<uint32_t>(*sa);
  options.isa_sampling_rate = static_cast<uint32_t>(*isa);
  options.psi_block_size = static_cast<uint32_t>(*psi);
  if (Status s = options.Validate(); !s.ok()) return UsageError(s.message(), kUsage);

  auto start = std::chrono::steady_clock::now();
  auto text = ReadFileToString(args.positional()[1]);
  if (!text.ok()) return Fail(text.status());
  const std::string& out = args.positional()[2];
  if (Status s = layout::CompressedFile::Build(*text, options, out); !s.ok()) return Fail(s);
  auto file = OpenFile(out);
  if (!file.ok()) return Fail(file.status());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t n = text->size();
  std::fprintf(stderr, "built %s: %llu -> %llu bytes (%.3fx) in %.2f s\n", out.c_str(),
               static_cast<unsigned long long>(n),
               static_cast<unsigned long long>((*file)->SizeInBytes()),
               n ? static_cast<double>((*file)->SizeInBytes()) / n : 0.0, secs);
  return kExitOk;
}

int Extract(const Args& args) {
  if (args.positional().size() != 4)
    return UsageError("file extract takes FILE OFFSET LEN", kUsage);
  auto offset = ParseUint(args.positional()[2], "OFFSET");
  auto len = ParseUint(args.positional()[3], "LEN");
  if (!offset.ok()) return UsageError(offset.status().message(), kUsage);
  if (!len.ok()) return UsageError(len.status().message(), kUsage);
  auto file = OpenFile(args.positional()[1]);
  if (!file.ok()) return Fail(file.status());
  // Stream in chunks so that a large LEN does not need the whole range in memory.
  constexpr uint64_t kChunk = 1 << 20;
  uint64_t pos = *offset,
           end = *offset + std::min(*len, (*file)->size() - std::min(*offset, (*file)->size()));
  std::string buf;
  do {
    buf.clear();
    if (Status s = (*file)->Extract(pos, std::min(kChunk, end - pos), &buf); !s.ok())
      return Fail(s);
    if (std::fwrite(buf.data(), 1, buf.size(), stdout) != buf.size()) {
      return Fail(Status::IOError("cannot write to stdout"));
    }
    pos += buf.size();
  } while (pos < end);
  return std::fflush(stdout) == 0 ? kExitOk : Fail(Status::IOError("cannot write to stdout"));
}

int SearchOrCount(const Args& args, bool count_only) {
  if (args.positional().size() != 3) {
    return UsageError(
        std::string("file ") + (count_only ? "count" : "search") + " takes FILE PATTERN", kUsage);
  }
  auto file = OpenFile(args.positional()[1]);
  if (!file.ok()) return Fail(file.status());
  const std::string& pattern = args.positional()[2];
  if (count_only) {
    auto n = (*file)->Count(pattern);
    if (!n.ok()) return Fail(n.status());
    std::printf("%llu\n", static_cast<unsigned long long>(*n));
    return kExitOk;
  }
  auto offsets = (*file)->Search(pattern);
  if (!offsets.ok()) return Fail(offsets.status());
  std::string out;
  for (uint64_t o : *offsets) {
    out += std::to_string(o);
    out += '\n';
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}

int Stats(const Args& args) {
  if (args.positional().size() != 2) return UsageError("file stats takes FILE", kUsage);
  auto file = OpenFile(args.positional()[1]);
  if (!file.ok()) return Fail(file.status());
  const auto& f = **file;
  nlohmann::ordered_json j;
  j["input_bytes"] = f.size();
  j["stored_bytes"] = f.SizeInBytes();
  j["ratio"] =
      f.size() ? static_cast<double>(f.SizeInBytes()) / static_cast<double>(f.size()) : 0.0;
  j["sa_sampling_rate"] = f.options().sa_sampling_rate;
  j["isa_sampling_rate"] = f.options().isa_sampling_rate;
  j["psi_block_size"] = f.options().psi_block_size;
  nlohmann::ordered_json breakdown = nlohmann::ordered_json::object();
  for (const auto& c : f.Breakdown()) breakdown[c.name] = c.bytes;
  j["breakdown"] = breakdown;
  std::cout << j.dump() << "\n";
  return kExitOk;
}

}  // namespace

int RunFile(int argc, char** argv) {
  // argv[0] = "zipg", argv[1] = "file", argv[2] = verb
  if (argc < 3) return UsageError("file needs a command", kUsage);
  auto args = Args::Parse(argc, argv, 2);
  if (!args.ok()) return UsageError(args.status().message(), kUsage);
  const std::string verb = argv[2];
  if (verb == "build") return Build(*args);
  if (args->Has("sa-rate") || args->Has("isa-rate") || args->Has("psi-block")) {
    return UsageError("sampling options only apply to 'file build'", kUsage);
  }
  if (Status s = args->CheckKnown({}); !s.ok()) return UsageError(s.message(), kUsage);
  if (verb == "extract") return Extract(*args);
  if (verb == "search") return SearchOrCount(*args, false);
  if (verb == "count") return SearchOrCount(*args, true);
  if (verb == "stats") return Stats(*args);
  if (verb == "help" || verb == "--help") {
    std::cout << kUsage;
    return kExitOk;
  }
  return UsageError("unknown file command '" + verb + "'", kUsage);
}

}  // namespace zipg::cli

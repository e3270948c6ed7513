// Checksums for on-disk data: XXH3-64 (xxHash), which verifies at memory bandwidth so that checking
// a whole file at open costs little next to reading it.
//
// Thread-safety: pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zipg {

uint64_t Checksum64(const void* data, size_t size);

}  // namespace zipg

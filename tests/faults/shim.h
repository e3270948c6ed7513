// The fault-injection shim (tests/faults/shim.cc, docs/testing.md, "Fault injection"): an
// LD_PRELOAD library that makes chosen file operations fail, short-write or report ENOSPC.
//
// Configuration, from the environment at load (for whole processes: `zipg compress`, servers) or
// at run time through zipg_fault_arm (in-process tests; find it with dlsym):
//   ZIPG_FAULT_OP     write | pwrite | fsync | fdatasync | rename | mmap | ftruncate | any-sync
//                     (fsync or fdatasync) | any-write (write or pwrite)
//   ZIPG_FAULT_PATH   the operation's file path (for rename: the source) must contain this
//   ZIPG_FAULT_NTH    the first matching call to fail (1-based; default 1)
//   ZIPG_FAULT_COUNT  how many matching calls fail from there (default 1; 0: every one)
//   ZIPG_FAULT_ERRNO  EIO (default) | ENOSPC | EDQUOT | ENOMEM; or "short": a write or pwrite of
//                     more than one byte writes only the first half and returns that count
//   ZIPG_FAULT_LOG    a file to which each injected fault appends one line (op, path, call)
// Calls that do not match pass straight to the C library. Thread-safe.
#pragma once

#include <cstdint>

extern "C" {
// Arms a fault as the environment variables above describe (op null or "": disarmed). `error` is
// an errno value, or -1 for a short write. Resets the count of matching calls.
void zipg_fault_arm(const char* op, const char* path, uint64_t nth, uint64_t count, int error);
// Matching calls seen since the last arm, and faults injected.
uint64_t zipg_fault_calls();
uint64_t zipg_fault_injected();
}

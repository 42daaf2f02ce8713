// Fuzz target for reading the agent's disk spool
// (exporters/pyroscope/spool.cc, Spool::Open and Spool::Oldest): files
// left by an earlier run, possibly cut short by a crash or a full disk,
// damaged on disk, or put there by anyone who can write the directory.
// The input is one spool file; seeds are spool files of both versions
// (GFSPOOL2, and GFSPOOL1 that is still read), holding pprof files of the
// end-to-end tests.
//
// Checked: a damaged file is dropped and counted, never replayed; a file
// that is replayed survives a round trip (Replace it, or Put what Oldest
// returned, and it reads back the same request).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "exporters/pyroscope/spool.h"
#include "fuzz_check.h"
#include "input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = gpuflame::fuzz::ScratchDir() + "/spool";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  const std::string file = dir + "/00000000000000000007.push";
  gpuflame::fuzz::WriteWhole(file, data, size);

  auto spool = gpuflame::exporters::Spool::Open(dir, 1ull << 30);
  FUZZ_CHECK(spool.ok() && spool->count() == 1 && spool->bytes() == size);
  auto request = spool->Oldest();
  if (!request) {
    FUZZ_CHECK(spool->corrupt() == 1 && spool->empty() && spool->bytes() == 0);
    FUZZ_CHECK(access(file.c_str(), F_OK) != 0);  // dropped: not replayed at the next start either
    return 0;
  }
  FUZZ_CHECK(request->sequence == 7 && spool->corrupt() == 0);
  // Rewritten in place with what it holds (as after a partial delivery),
  // then put anew: both read back the same.
  FUZZ_CHECK(spool->Replace(7, request->body, request->series).ok());
  auto replaced = spool->Read(7);
  FUZZ_CHECK(replaced && replaced->body == request->body && replaced->series == request->series);
  spool->Remove(7);
  FUZZ_CHECK(spool->empty());
  auto sequence = spool->Put(request->body, request->series);
  FUZZ_CHECK(sequence.ok() && *sequence > 7);
  auto again = spool->Oldest();
  FUZZ_CHECK(again && again->sequence == *sequence && again->body == request->body && again->series == request->series);
  return 0;
}

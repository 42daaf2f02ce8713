// `gpuflame symbolize` on hostile files: memory stays bounded and the answer
// is one clear line. A 1 MB gzip of a valid pprof holding one 1000 MiB string
// took 4.1 GB; here the binary runs under a 1 GiB address-space limit, which
// the old reader broke (inflate, parse, index and serialize each held a
// copy) and the bounded one keeps well within.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <string>

#include "e2e/e2e_support.h"

namespace gpuflame::e2e {
namespace {

void Varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// A gzip of a valid pprof (one sample type) whose string table ends with
// |big| bytes of 'a', compressed in a stream: the test never holds it whole.
std::string WriteBigStringProfile(const std::string& path, uint64_t big) {
  std::string head;
  const std::string value_type = {0x08, 0x01, 0x10, 0x02};  // type=1, unit=2
  head += "\x0a";
  Varint(head, value_type.size());
  head += value_type;
  for (const std::string s : {"", "alloc_space", "bytes"}) {
    head += "\x32";
    Varint(head, s.size());
    head += s;
  }
  head += "\x32";
  Varint(head, big);
  gzFile f = gzopen(path.c_str(), "wb9");
  if (!f) return "cannot write " + path;
  gzwrite(f, head.data(), static_cast<unsigned>(head.size()));
  const std::string chunk(1 << 20, 'a');
  for (uint64_t left = big; left > 0;) {
    const auto n = static_cast<unsigned>(std::min<uint64_t>(left, chunk.size()));
    gzwrite(f, chunk.data(), n);
    left -= n;
  }
  gzclose(f);
  return "";
}

RunResult SymbolizeUnderOneGiB(const std::string& in, const std::string& out) {
  return Sh("ulimit -v 1048576; " + std::string(GPUFLAME_BIN) + " symbolize " + in + " -o " + out + " 2>&1");
}

TEST(SymbolizeTest, AProfileInflatingPastTheLimitIsRefusedInBoundedMemory) {
  std::string dir = TempDir("symbolize-bomb");
  ASSERT_EQ(WriteBigStringProfile(dir + "/bomb.pb.gz", 300ull << 20), "");
  RunResult r = SymbolizeUnderOneGiB(dir + "/bomb.pb.gz", dir + "/out.pb.gz");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_EQ(r.output,
            "gpuflame: " + dir + "/bomb.pb.gz: the profile inflates to more than the 256 MiB symbolize reads\n");
}

TEST(SymbolizeTest, AProfileJustUnderTheLimitIsSymbolizedInBoundedMemory) {
  std::string dir = TempDir("symbolize-big");
  ASSERT_EQ(WriteBigStringProfile(dir + "/big.pb.gz", 200ull << 20), "");
  RunResult r = SymbolizeUnderOneGiB(dir + "/big.pb.gz", dir + "/out.pb.gz");
  EXPECT_EQ(r.status, 0) << r.output;
  pprof::Profile p;
  ASSERT_TRUE(LoadPprof(dir + "/out.pb.gz", &p));
  ASSERT_EQ(p.string_table_size(), 4);
  EXPECT_EQ(p.string_table(3).size(), 200u << 20);
}

TEST(SymbolizeTest, AFileLargerThanTheLimitIsNotRead) {
  std::string dir = TempDir("symbolize-file");
  ASSERT_EQ(Sh("head -c 300000000 /dev/zero > " + dir + "/zeros.pb").status, 0);
  RunResult r = SymbolizeUnderOneGiB(dir + "/zeros.pb", dir + "/out.pb.gz");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output, "gpuflame: " + dir + "/zeros.pb: 286 MiB, more than the 256 MiB symbolize reads\n");
}

}  // namespace
}  // namespace gpuflame::e2e

// A temporary folder of this test process's own: ctest runs tests of one
// binary in parallel processes, and CI and a developer may run the same
// binary at once; fixed names in ::testing::TempDir() raced (one test read
// another's half-written config).
#ifndef GPUFLAME_TESTS_SUPPORT_TEMP_DIR_H_
#define GPUFLAME_TESTS_SUPPORT_TEMP_DIR_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace gpuflame::testing {

// Made on first use, removed with everything in it at exit.
inline const std::string& ProcessTempDir() {
  struct Owned {
    std::string path;
    ~Owned() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Owned dir{[] {
    std::string d = ::testing::TempDir() + "/gpuflame-unit-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    return d;
  }()};
  return dir.path;
}

}  // namespace gpuflame::testing

#endif  // GPUFLAME_TESTS_SUPPORT_TEMP_DIR_H_

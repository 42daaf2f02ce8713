#include <string>

#include "base/json_string.h"
#include "base/utf8.h"
#include "gtest/gtest.h"

namespace gpuflame::base {
namespace {

TEST(JsonStringTest, EscapesControlCharacters) {
  EXPECT_EQ(JsonString("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
}

TEST(Utf8Test, InvalidBytesFromProfiledProcessesBecomeReplacementCharacters) {
  EXPECT_EQ(ValidUtf8("Trainer > step"), "Trainer > step");
  EXPECT_EQ(ValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x94\xA5"), "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x94\xA5");
  EXPECT_EQ(ValidUtf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(ValidUtf8("\xC3"), "\xEF\xBF\xBD");                       // truncated
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_TRUE(IsValidUtf8(ValidUtf8(std::string("\x80\x81\xFE", 3))));
}

}  // namespace
}  // namespace gpuflame::base

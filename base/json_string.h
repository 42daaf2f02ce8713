// JSON string literals for the documents gpuflame writes by hand (the HTML
// report's data block, summary.json): escaped so that the text is valid JSON
// and safe inside an HTML <script> element, whatever bytes the profiled
// process put in its names.
#ifndef GPUFLAME_BASE_JSON_STRING_H_
#define GPUFLAME_BASE_JSON_STRING_H_

#include <string>
#include <string_view>

namespace gpuflame::base {

// |s| as a JSON string, quotes included. Invalid UTF-8 becomes U+FFFD;
// '<', '>' and '&' are written as \u escapes so "</script>" never appears.
std::string JsonString(std::string_view s);

}  // namespace gpuflame::base

#endif  // GPUFLAME_BASE_JSON_STRING_H_

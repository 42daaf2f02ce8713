// A schema check of every event of a trace gpuflame writes (Chrome Trace
// Event JSON, exporters/trace), and its spans as a reader pairs them: for
// the unit and end-to-end tests alike.
#ifndef GPUFLAME_TESTS_SUPPORT_TRACE_SCHEMA_H_
#define GPUFLAME_TESTS_SUPPORT_TRACE_SCHEMA_H_

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpuflame {

// Every event as the Trace Event Format and its readers want it: a phase
// we write, a name, a pid, a tid where the phase has one, times as numbers
// of microseconds, whole spans with a duration, instants with a scope,
// counters with numeric series, flows with a bind ID and a direction; and
// on each thread, begins and ends that nest (an end names the span on top)
// and all end.
inline void CheckTraceSchema(const nlohmann::json& doc) {
  ASSERT_TRUE(doc.contains("traceEvents") && doc["traceEvents"].is_array());
  ASSERT_TRUE(doc.contains("metadata") && doc["metadata"].is_object());
  std::map<std::pair<uint64_t, uint64_t>, std::vector<std::string>> open;
  for (const nlohmann::json& e : doc["traceEvents"]) {
    SCOPED_TRACE(e.dump());
    ASSERT_TRUE(e.is_object());
    ASSERT_TRUE(e.contains("ph") && e["ph"].is_string());
    const std::string ph = e["ph"];
    ASSERT_TRUE(ph == "X" || ph == "B" || ph == "E" || ph == "i" || ph == "C" || ph == "M") << ph;
    ASSERT_TRUE(e.contains("name") && e["name"].is_string() && !e["name"].get<std::string>().empty());
    ASSERT_TRUE(e.contains("pid") && e["pid"].is_number_unsigned());
    if (ph != "C") {
      ASSERT_TRUE(e.contains("tid") && e["tid"].is_number_unsigned());
    }
    if (ph == "M") {
      const std::string name = e["name"];
      ASSERT_TRUE(name == "process_name" || name == "thread_name" || name == "thread_sort_index");
      ASSERT_TRUE(e["args"].contains(name == "thread_sort_index" ? "sort_index" : "name"));
      continue;
    }
    ASSERT_TRUE(e.contains("ts") && e["ts"].is_number() && e["ts"].get<double>() >= 0);
    ASSERT_TRUE(e.contains("cat") || ph == "C");
    if (ph == "X") {
      ASSERT_TRUE(e.contains("dur") && e["dur"].is_number() && e["dur"].get<double>() >= 0);
    }
    if (ph == "i") {
      ASSERT_TRUE(e.contains("s") && (e["s"] == "t" || e["s"] == "g"));
    }
    if (ph == "C") {
      ASSERT_TRUE(e["args"].is_object() && !e["args"].empty());
      for (const auto& [k, v] : e["args"].items()) ASSERT_TRUE(v.is_number()) << k;
    }
    if (e.contains("bind_id")) {
      ASSERT_TRUE(ph == "X" || ph == "B");
      ASSERT_TRUE(e["bind_id"].is_string());
      ASSERT_TRUE(e.value("flow_in", false) || e.value("flow_out", false));
    }
    auto& stack = open[{e["pid"].get<uint64_t>(), e.value("tid", uint64_t{0})}];
    if (ph == "B") stack.push_back(e["name"]);
    if (ph == "E") {
      ASSERT_FALSE(stack.empty()) << "an end without its begin";
      ASSERT_EQ(stack.back(), e["name"].get<std::string>()) << "an end that is not the innermost span's";
      stack.pop_back();
    }
  }
  for (const auto& [thread, stack] : open) EXPECT_TRUE(stack.empty()) << thread.second << ": spans never ended";
}

// A span as a reader pairs it: a B and its E, or an X.
struct TraceSpan {
  std::string name;
  double ts = 0, dur = 0;
  uint64_t pid = 0, tid = 0;
  nlohmann::json begin;  // the B or X event (args, bind_id)
};

// The spans of category |cat| in the order they begin.
inline std::vector<TraceSpan> TraceSpans(const nlohmann::json& doc, const std::string& cat) {
  std::vector<TraceSpan> spans;
  std::map<std::pair<uint64_t, uint64_t>, std::vector<size_t>> open;
  for (const nlohmann::json& e : doc["traceEvents"]) {
    if (e.value("cat", "") != cat) continue;
    const std::string ph = e["ph"];
    const std::pair<uint64_t, uint64_t> thread{e["pid"], e["tid"]};
    if (ph == "X" || ph == "B") {
      spans.push_back({e["name"], e["ts"], ph == "X" ? e["dur"].get<double>() : 0.0, thread.first, thread.second, e});
      if (ph == "B") open[thread].push_back(spans.size() - 1);
    } else if (ph == "E" && !open[thread].empty()) {
      TraceSpan& s = spans[open[thread].back()];
      s.dur = e["ts"].get<double>() - s.ts;
      open[thread].pop_back();
    }
  }
  return spans;
}

}  // namespace gpuflame

#endif  // GPUFLAME_TESTS_SUPPORT_TRACE_SCHEMA_H_

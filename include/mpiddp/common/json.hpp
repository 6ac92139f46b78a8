#pragma once
// JSON for metrics.jsonl and summary.json, written with nlohmann-json.
// ordered_json keeps the fields in the order they are added, so the records read
// the same way from one run to the next.
#include <nlohmann/json.hpp>
#include <string>

namespace mpiddp {

using Json = nlohmann::ordered_json;

// One line, no spaces ("type":"eval", which the tests and scripts grep for).
// NaN and infinities become null (JSON has neither); bytes that are not UTF-8
// (a path, a name from the input file) become U+FFFD instead of throwing.
inline std::string json_line(const Json& json) {
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace mpiddp

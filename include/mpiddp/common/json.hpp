#pragma once
// A flat JSON object written field by field (all mpiddp needs for metrics.jsonl
// and summary.json).
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

namespace mpiddp {

class JsonObject {
 public:
  JsonObject& add(const std::string& key, const std::string& value) {
    field(key) << quote(value);
    return *this;
  }
  JsonObject& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonObject& add(const std::string& key, double value) {
    if (std::isfinite(value)) {
      field(key).precision(9);
      out_ << value;
    } else {
      field(key) << "null";  // JSON has no NaN/Inf
    }
    return *this;
  }
  JsonObject& add(const std::string& key, std::int64_t value) {
    field(key) << value;
    return *this;
  }
  JsonObject& add(const std::string& key, int value) { return add(key, static_cast<std::int64_t>(value)); }
  JsonObject& add(const std::string& key, bool value) {
    field(key) << (value ? "true" : "false");
    return *this;
  }
  std::string str() const { return "{" + out_.str() + "}"; }

  static std::string quote(const std::string& text) {
    std::string q = "\"";
    for (char c : text) {
      if (c == '"' || c == '\\') {
        q += '\\';
        q += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        q += buf;
      } else {
        q += c;
      }
    }
    return q + "\"";
  }

 private:
  std::ostringstream& field(const std::string& key) {
    if (!first_) out_ << ",";
    first_ = false;
    out_ << quote(key) << ":";
    return out_;
  }
  std::ostringstream out_;
  bool first_ = true;
};

}  // namespace mpiddp

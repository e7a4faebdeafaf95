// Strict JSON text for configs (config/json_text.h).
#include "config/json_text.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace ddgnn {

namespace {

using json = nlohmann::json;

// nlohmann's byte count -> 1-based line and column of the offending character.
std::pair<std::size_t, std::size_t> line_col(const std::string& text, std::size_t byte) {
  const std::size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  std::size_t line = 1, line_start = 0;
  for (std::size_t i = 0; i < end; ++i)
    if (text[i] == '\n') ++line, line_start = i + 1;
  return {line, end - line_start + 1};
}

// Objects and arrays nested deeper than this are refused while parsing: a config is a few levels
// deep, and a value nested tens of thousands of levels would overflow the stack of every recursive
// walk (and of the parsed value's destructor).
constexpr int kMaxJsonDepth = 64;

[[noreturn]] void too_deep(const std::string& source) {
  throw ConfigError(
      source + ": JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep",
      "a config's values are numbers, strings and short lists a few levels deep: "
      "look for a generated or corrupted file");
}

}  // namespace

json parse_json_text(const std::string& text, const std::string& source) {
  // A stack of the keys seen in each open object, to refuse duplicates (nlohmann keeps the last).
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string current;
  };
  std::vector<Frame> stack;
  auto callback = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        if (stack.size() >= size_t(kMaxJsonDepth)) too_deep(source);
        stack.push_back({true, {}, {}});
        break;
      case json::parse_event_t::array_start:
        if (stack.size() >= size_t(kMaxJsonDepth)) too_deep(source);
        stack.push_back({false, {}, {}});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        stack.pop_back();
        break;
      case json::parse_event_t::key: {
        Frame& top = stack.back();
        top.current = parsed.get<std::string>();
        if (!top.keys.insert(top.current).second) {
          std::string dotted;
          for (const auto& frame : stack)
            if (frame.object) dotted += (dotted.empty() ? "" : ".") + frame.current;
          throw ConfigError(source + ": " + dotted + ": duplicate key",
                            "JSON keeps only the last of them; remove the other");
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text, callback);
  } catch (const json::out_of_range& e) {
    // "[json.exception.out_of_range.406] number overflow parsing '1e400'"
    std::string message = e.what();
    const auto close = message.find("] ");
    if (close != std::string::npos) message = message.substr(close + 2);
    throw ConfigError(source + ": " + message + " (beyond the range of a double, ±1.8e308)",
                      "write the number in the range of a 64-bit float");
  } catch (const json::parse_error& e) {
    const auto [line, col] = line_col(text, e.byte);
    std::string message = e.what();
    // "[json.exception.parse_error.101] parse error at line 2, column 5: syntax error ..."
    const auto column = message.find("column ");
    const auto colon = message.find(": ", column == std::string::npos ? 0 : column);
    if (colon != std::string::npos) message = message.substr(colon + 2);
    throw ConfigError(source + ":" + std::to_string(line) + ":" + std::to_string(col) +
                          ": JSON syntax error: " + message,
                      "a config is strict JSON: no comments, no trailing commas, keys in quotes");
  }
}

json parse_json_value(const std::string& text, const std::string& source) {
  return json::parse(text, [&](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      too_deep(source);
    return true;
  });
}

}  // namespace ddgnn

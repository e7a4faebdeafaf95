// Strict JSON text for configs: syntax errors as ConfigErrors with line:col, duplicate keys
// refused (JSON keeps only the last), numbers beyond a double named, and objects and arrays nested
// deeper than 64 levels refused while parsing (a config is a few levels deep; tens of thousands
// would overflow the stack of every recursive walk and of the parsed value's destructor).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ddgnn {

// A config file's text; `source` names it in errors.
nlohmann::json parse_json_text(const std::string& text, const std::string& source);

// A value given on the command line: nlohmann's parse with the nesting bound (a ConfigError
// naming `source`); its parse_error and out_of_range reach the caller, which may read the text as
// a plain string instead.
nlohmann::json parse_json_value(const std::string& text, const std::string& source);

}  // namespace ddgnn

#pragma once
/// @file json.hpp
/// @brief JSON input/output for every disttrain value type.
///
/// disttrain reads and writes specs, plans, profiles and traces as JSON through
/// nlohmann/json (a well-kept, header-only library that every C++ package
/// manager ships; writing our own parser would be more code to trust than the
/// dependency costs). Reading goes through the helpers below so that a missing
/// or mistyped field is reported as `errc::parse_error` naming the field path,
/// e.g. `cluster.gpu.hbm_bytes`.
///
/// @code
/// auto j = disttrain::parse_json(R"({"layers": 32})", "config.json");
/// int layers = disttrain::detail::json_get<int>(j, "layers", "model.backbone");
/// @endcode

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "disttrain/core/error.hpp"

namespace disttrain {

/// @brief The JSON value type used in all disttrain APIs.
using json = nlohmann::json;

/// @brief Parses JSON text; `source` names it in errors (a file name or "<string>").
[[nodiscard]] inline json parse_json(std::string_view text, std::string_view source = "<string>") {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    detail::fail(errc::parse_error, source, "malformed JSON: ", e.what());
  }
}

/// @brief Reads and parses a JSON file.
[[nodiscard]] inline json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) detail::fail(errc::parse_error, path, "cannot open file for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_json(ss.str(), path);
}

/// @brief Writes `j` to `path`, pretty-printed with `indent` spaces.
inline void write_json_file(const std::string& path, const json& j, int indent = 2) {
  std::ofstream out(path);
  if (!out) detail::fail(errc::invalid_argument, path, "cannot open file for writing");
  out << j.dump(indent) << '\n';
  if (!out) detail::fail(errc::invalid_argument, path, "write failed");
}

namespace detail {

/// @brief Joins a parent path and a key: `join_path("model", "layers") == "model.layers"`.
[[nodiscard]] inline std::string join_path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  std::string s(parent);
  s += '.';
  s += key;
  return s;
}

/// @brief Reads required field `key` of object `j` as `T`; errors name `path.key`.
template <class T>
[[nodiscard]] T json_get(const json& j, std::string_view key, std::string_view path = {}) {
  const std::string where = join_path(path, key);
  if (!j.is_object()) fail(errc::parse_error, path, "expected a JSON object, got ", j.type_name());
  auto it = j.find(std::string(key));
  if (it == j.end()) fail(errc::parse_error, where, "required field is missing");
  try {
    return it->template get<T>();
  } catch (const disttrain::error&) {
    throw;
  } catch (const json::exception& e) {
    fail(errc::parse_error, where, "wrong type (", it->type_name(), "): ", e.what());
  }
}

/// @brief Reads optional field `key` of `j` as `T`, or returns `fallback`.
template <class T>
[[nodiscard]] T json_get_or(const json& j, std::string_view key, T fallback,
                            std::string_view path = {}) {
  if (!j.is_object()) fail(errc::parse_error, path, "expected a JSON object, got ", j.type_name());
  if (!j.contains(std::string(key))) return fallback;
  return json_get<T>(j, key, path);
}

}  // namespace detail
}  // namespace disttrain

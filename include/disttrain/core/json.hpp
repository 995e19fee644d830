#pragma once
/// @file json.hpp
/// @brief The JSON value type, parsing and file helpers, and the field
/// readers every part's JSON input/output is written with.
///
/// disttrain reads and writes specs, plans, profiles and traces as JSON through
/// nlohmann/json (a well-kept, header-only library that every C++ package
/// manager ships; writing our own parser would be more code to trust than the
/// dependency costs). Reading goes through the helpers below so that a missing
/// or mistyped field is reported as `errc::parse_error` naming the field path,
/// e.g. `cluster.gpu.hbm_bytes`.
///
/// A part's `to_json`/`from_json` live in `<part>/json.hpp` (model, cost,
/// plan, reorder, comm, schedule, bind; traces in sim/trace.hpp and
/// exec/trace.hpp), apart from the value types, so that a program including
/// value headers (the reorderer, the routes, the executor, the planner)
/// parses no JSON library. The umbrellas leave them out too:
/// `disttrain/json.hpp` includes every one.
///
/// A value type's fields are described once, by a descriptor (a `std::tuple`
/// of `detail::required_field` / `detail::optional_field`): `fields_to_json`
/// writes them, `read_fields` reads them with the key check and path-aware
/// errors; a nested value is read at its own path by its reader. The JSON
/// headers write only what a descriptor cannot say (a derived value, a
/// variant picked by a kind name, a value written as an array).
///
/// @snippet core.cpp json

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "disttrain/core/check.hpp"
#include "disttrain/core/topology.hpp"

namespace disttrain {

/// @brief The JSON value type used in all disttrain APIs.
using json = nlohmann::json;

/// @brief Parses JSON text; `source` names it in errors (a file name or "<string>").
[[nodiscard]] inline json parse_json(std::string_view text, std::string_view source = "<string>") {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail(errc::parse_error, source, "malformed JSON: ", e.what());
  }
}

/// @brief Reads and parses a JSON file.
[[nodiscard]] inline json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(errc::parse_error, path, "cannot open file for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_json(ss.str(), path);
}

/// @brief Writes `j` to `path`, pretty-printed with `indent` spaces.
inline void write_json_file(const std::string& path, const json& j, int indent = 2) {
  std::ofstream out(path);
  if (!out) fail(errc::invalid_argument, path, "cannot open file for writing");
  out << j.dump(indent) << '\n';
  if (!out) fail(errc::invalid_argument, path, "write failed");
}

namespace detail {

/// @brief True for the integer types `json_get` range-checks (not bool).
template <class T>
inline constexpr bool is_json_integer_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;
/// @brief True for `std::vector` of such integers, or of such vectors, at any depth.
template <class T>
inline constexpr bool is_json_integer_vector_v = false;
template <class T, class A>
inline constexpr bool is_json_integer_vector_v<std::vector<T, A>> =
    is_json_integer_v<T> || is_json_integer_vector_v<T>;

/// @brief Converts JSON number `v` to integer type `T` exactly, or throws
/// `parse_error` at `where`: nlohmann would truncate 2.7 to 2 and wrap
/// 4294967360 to 64. An integral float (`64.0`, `1e3`) is accepted.
template <class T>
[[nodiscard]] T json_to_integer(const json& v, std::string_view where) {
  static_assert(is_json_integer_v<T>);
  using lim = std::numeric_limits<T>;
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (!std::isfinite(x) || std::floor(x) != x)
      fail(errc::parse_error, where, "must be an integer, got ", v.dump());
    // 2^63 and 2^64 are exact doubles: the half-open bounds are exact too.
    const bool fits = lim::is_signed ? (x >= -9223372036854775808.0 && x < 9223372036854775808.0)
                                     : (x >= 0 && x < 18446744073709551616.0);
    if (!fits)
      fail(errc::parse_error, where, "out of range: must be in [", +lim::min(), ", ", +lim::max(),
           "], got ", v.dump());
    if constexpr (lim::is_signed)
      return json_to_integer<T>(json(static_cast<std::int64_t>(x)), where);
    else
      return json_to_integer<T>(json(static_cast<std::uint64_t>(x)), where);
  }
  if (v.is_number_unsigned()) {
    const auto x = v.get<std::uint64_t>();
    if (x > static_cast<std::uint64_t>(lim::max()))
      fail(errc::parse_error, where, "out of range: must be in [", +lim::min(), ", ", +lim::max(),
           "], got ", x);
    return static_cast<T>(x);
  }
  if (v.is_number_integer()) {
    const auto x = v.get<std::int64_t>();
    const bool fits =
        lim::is_signed
            ? (x >= static_cast<std::int64_t>(lim::min()) &&
               x <= static_cast<std::int64_t>(lim::max()))
            : (x >= 0 && static_cast<std::uint64_t>(x) <= static_cast<std::uint64_t>(lim::max()));
    if (!fits)
      fail(errc::parse_error, where, "out of range: must be in [", +lim::min(), ", ", +lim::max(),
           "], got ", x);
    return static_cast<T>(x);
  }
  fail(errc::parse_error, where, "wrong type (", v.type_name(), "): expected an integer");
}

/// @brief The names of enumeration `T`'s JSON table (`NLOHMANN_JSON_SERIALIZE_ENUM`),
/// quoted, in enumerator order, for error messages: found by writing the
/// values 0 .. 63 (nlohmann writes a value outside the table as its first
/// name, already listed). Empty for an unscoped enumeration (its values
/// outside the enumerators are not all valid).
template <class T>
[[nodiscard]] std::string json_enum_names() {
  static_assert(std::is_enum_v<T>);
  std::string names;
  if constexpr (!std::is_convertible_v<T, std::underlying_type_t<T>>) {  // scoped
    std::vector<std::string> seen;
    for (int i = 0; i < 64; ++i) {
      const json j = static_cast<T>(i);
      if (!j.is_string()) continue;
      std::string name = j.dump();
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
      names += names.empty() ? name : ", " + name;
      seen.push_back(std::move(name));
    }
  }
  return names;
}

/// @brief `v` as `T`; integers (and arrays of integers, nested at any depth)
/// are converted exactly by `json_to_integer`; an enumeration is read by name
/// (its `NLOHMANN_JSON_SERIALIZE_ENUM` table), and a name not in the table is
/// an error, not the first enumerator; errors name `where`.
template <class T>
[[nodiscard]] T json_convert(const json& v, std::string_view where) {
  if constexpr (is_json_integer_v<T>) {
    return json_to_integer<T>(v, where);
  } else if constexpr (std::is_enum_v<T>) {
    if (!v.is_string()) fail(errc::parse_error, where, "expected a string, got ", v.type_name());
    const T e = v.template get<T>();
    // nlohmann maps unknown strings to the first enumerator; reject them instead.
    if (json(e) != v) {
      const std::string names = json_enum_names<T>();
      fail(errc::parse_error, where, "unknown value ", v.dump(),
           names.empty() ? "" : cat(" (valid: ", names, ")"));
    }
    return e;
  } else if constexpr (is_json_integer_vector_v<T>) {
    if (!v.is_array()) fail(errc::parse_error, where, "expected an array, got ", v.type_name());
    T out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      out.push_back(json_convert<typename T::value_type>(v[i], cat(where, "[", i, "]")));
    return out;
  } else {
    try {
      return v.template get<T>();
    } catch (const disttrain::error&) {
      throw;
    } catch (const json::exception& e) {
      fail(errc::parse_error, where, "wrong type (", v.type_name(), "): ", e.what());
    }
  }
}

/// @brief Levenshtein distance between `a` and `b` (for "did you mean" hints).
[[nodiscard]] inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t k = 0; k <= b.size(); ++k) row[k] = k;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t k = 1; k <= b.size(); ++k) {
      const std::size_t up = row[k];
      row[k] = std::min({row[k] + 1, row[k - 1] + 1, diag + (a[i - 1] == b[k - 1] ? 0U : 1U)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace detail

/// @brief Reads required field `key` of object `j` as `T`; errors name `path.key`.
/// Integer fields reject fractions and out-of-range values instead of truncating.
template <class T>
[[nodiscard]] T json_get(const json& j, std::string_view key, std::string_view path = {}) {
  const std::string where = detail::join_path(path, key);
  if (!j.is_object()) fail(errc::parse_error, path, "expected a JSON object, got ", j.type_name());
  auto it = j.find(std::string(key));
  if (it == j.end()) fail(errc::parse_error, where, "required field is missing");
  return detail::json_convert<T>(*it, where);
}

/// @brief Reads optional field `key` of `j` as `T`, or returns `fallback`.
template <class T>
[[nodiscard]] T json_get_or(const json& j, std::string_view key, T fallback,
                            std::string_view path = {}) {
  if (!j.is_object()) fail(errc::parse_error, path, "expected a JSON object, got ", j.type_name());
  if (!j.contains(std::string(key))) return fallback;
  return json_get<T>(j, key, path);
}

/// @brief Throws `parse_error` at `path.key` for the first key of object `j`
/// not in `allowed`: "unknown key 'num_gpu'; did you mean 'num_gpus'?" (the
/// nearest allowed key by edit distance, when close), else the allowed keys.
/// A typo in an optional field would otherwise silently keep the default.
/// Does nothing when `j` is not an object (the readers report that).
inline void check_keys(const json& j, std::span<const std::string_view> allowed,
                       std::string_view path) {
  if (!j.is_object()) return;
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    if (std::find(allowed.begin(), allowed.end(), std::string_view(key)) != allowed.end()) continue;
    std::string_view best;
    std::size_t best_d = std::numeric_limits<std::size_t>::max();
    for (std::string_view k : allowed) {
      const std::size_t d = detail::edit_distance(key, k);
      if (d < best_d) best_d = d, best = k;
    }
    if (!best.empty() && best_d <= std::max<std::size_t>(2, key.size() / 3))
      fail(errc::parse_error, detail::join_path(path, key), "unknown key '", key,
           "'; did you mean '", best, "'?");
    std::string known;
    for (std::string_view k : allowed) {
      if (!known.empty()) known += ", ";
      known += k;
    }
    fail(errc::parse_error, detail::join_path(path, key), "unknown key '", key,
         "' (known keys: ", known, ")");
  }
}

/// @brief `check_keys` with the allowed keys listed in place.
inline void check_keys(const json& j, std::initializer_list<std::string_view> allowed,
                       std::string_view path) {
  check_keys(j, std::span<const std::string_view>(allowed.begin(), allowed.size()), path);
}

namespace detail {

/// @brief Throws `parse_error` at `where`: "unknown <what> '<name>' (expected
/// a, b or c)", the end of a reader that picks a variant by a kind name.
[[noreturn]] inline void fail_unknown_name(std::string_view where, std::string_view what,
                                           std::string_view name,
                                           std::initializer_list<std::string_view> expected) {
  std::string list;
  for (std::size_t i = 0; i < expected.size(); ++i)
    list += cat(i == 0 ? "" : i + 1 == expected.size() ? " or " : ", ", expected.begin()[i]);
  fail(errc::parse_error, where, "unknown ", what, " '", name, "' (expected ", list, ")");
}

/// @brief One field of a type's JSON descriptor: the key, the member it holds,
/// and whether a reader requires it (an optional field left out keeps the
/// value the object already has, its default). A type's descriptor is a
/// `std::tuple` of these; `fields_to_json` and `read_fields` then do its JSON
/// output and input, so each field is named once (the key list of
/// `check_keys`, the writer and the reader all come from it).
///
/// A nested value whose own reader names its fields (`read_model_spec(j,
/// path)`) gives that reader as `read`: it is called at `path.key`, so errors
/// read `scenario.model.modules[0].name`, not `model.modules[0].name`.
template <class T, class M>
struct json_field {
  using member_pointer = M T::*;  // (an alias: nvcc's host code would parenthesise the declarator)
  using reader = M (*)(const json&, std::string_view path);
  std::string_view key;
  member_pointer member;
  bool required;
  reader read = nullptr;  ///< null: `json_get` (nlohmann's `from_json`, integers checked)
};

/// @brief A field readers may leave out (it keeps its default); `read`, if
/// given, reads it at its own path.
template <class T, class M>
[[nodiscard]] constexpr json_field<T, M> optional_field(
    std::string_view key, M T::*member, typename json_field<T, M>::reader read = nullptr) noexcept {
  return {key, member, false, read};
}

/// @brief A field readers must find (`parse_error` "required field is
/// missing"); `read`, if given, reads it at its own path.
template <class T, class M>
[[nodiscard]] constexpr json_field<T, M> required_field(
    std::string_view key, M T::*member, typename json_field<T, M>::reader read = nullptr) noexcept {
  return {key, member, true, read};
}

/// @brief The JSON object of the fields of `v` that `fields` (a descriptor) lists.
template <class T, class... M>
[[nodiscard]] json fields_to_json(const T& v, const std::tuple<json_field<T, M>...>& fields) {
  json j = json::object();
  std::apply([&](const auto&... f) { ((j[std::string(f.key)] = v.*(f.member)), ...); }, fields);
  return j;
}

/// @brief Reads the fields `fields` lists from object `j` into `v` (errors name
/// `path.key`, integers are range-checked as in `json_get`); a key that is
/// neither a field nor one of `extra` is an unknown-key error (`check_keys`).
template <class T, class... M>
void read_fields(const json& j, T& v, const std::tuple<json_field<T, M>...>& fields,
                 std::string_view path, std::initializer_list<std::string_view> extra = {}) {
  if (!j.is_object()) fail(errc::parse_error, path, "expected a JSON object, got ", j.type_name());
  std::vector<std::string_view> keys;
  keys.reserve(sizeof...(M) + extra.size());
  std::apply([&](const auto&... f) { (keys.push_back(f.key), ...); }, fields);
  keys.insert(keys.end(), extra.begin(), extra.end());
  check_keys(j, keys, path);
  const auto read = [&](const auto& f) {
    using member_type = std::remove_cvref_t<decltype(v.*(f.member))>;
    if (f.read != nullptr) {
      if (const auto it = j.find(std::string(f.key)); it != j.end())
        v.*(f.member) = f.read(*it, join_path(path, f.key));
      else if (f.required)
        fail(errc::parse_error, join_path(path, f.key), "required field is missing");
    } else if constexpr (requires { j.template get<member_type>(); }) {
      v.*(f.member) = f.required ? json_get<member_type>(j, f.key, path)
                                 : json_get_or<member_type>(j, f.key, v.*(f.member), path);
    } else {  // a type without `from_json` needs a reader
      fail(errc::invalid_argument, join_path(path, f.key), "the descriptor gives no reader");
    }
  };
  std::apply([&](const auto&... f) { (read(f), ...); }, fields);
}

/// @brief A `T` read with `read_fields` at `path`, then checked with
/// `validate(path)` where `T` has one: the whole reader of a type whose JSON
/// is its descriptor (keys in `extra` are the caller's to read).
template <class T, class... M>
[[nodiscard]] T read_validated(const json& j, const std::tuple<json_field<T, M>...>& fields,
                               std::string_view path,
                               std::initializer_list<std::string_view> extra = {}) {
  T v;
  read_fields(j, v, fields, path, extra);
  if constexpr (requires { v.validate(path); }) v.validate(path);
  return v;
}

}  // namespace detail

// ---- topology.hpp ----
// module_role by `to_string`'s names (core/topology.hpp), with the semantics
// of NLOHMANN_JSON_SERIALIZE_ENUM that `json_convert` relies on: a value
// outside the enumeration writes the first name, an unknown name reads as the
// first enumerator (which `json_convert` then rejects, listing the names).
inline void to_json(json& j, const module_role& r) {
  for (const module_role x : module_roles)
    if (x == r) {
      j = std::string(to_string(x));
      return;
    }
  j = std::string(to_string(module_roles[0]));
}
inline void from_json(const json& j, module_role& r) {
  r = module_roles[0];
  if (!j.is_string()) return;
  for (const module_role x : module_roles)
    if (j.get_ref<const std::string&>() == to_string(x)) r = x;
}

namespace detail {
[[nodiscard]] inline module_role read_module_role(const json& j, std::string_view path) {
  if (!j.is_string())
    fail(errc::parse_error, path, "expected encoder, backbone or generator, got ", j.dump());
  return parse_module_role(j.get<std::string>(), path);
}
inline constexpr auto topology_module_fields =
    std::tuple{required_field("name", &topology_module::name),
               required_field("role", &topology_module::role, read_module_role),
               optional_field("tp", &topology_module::tp),
               optional_field("pp", &topology_module::pp),
               optional_field("dp", &topology_module::dp),
               optional_field("trainable", &topology_module::trainable),
               optional_field("colocated", &topology_module::colocated),
               optional_field("layers", &topology_module::layers),
               optional_field("chunks", &topology_module::chunks)};
}  // namespace detail

/// @brief `{"name", "role", "tp", "pp", "dp", "trainable", "colocated"}`, and
/// `"layers"` when the module has them and `"chunks"` when more than 1.
inline void to_json(json& j, const topology_module& g) {
  j = detail::fields_to_json(g, detail::topology_module_fields);
  if (g.layers.empty()) j.erase("layers");
  if (g.chunks == 1) j.erase("chunks");
}
/// @brief `{"modules": [...]}`.
inline void to_json(json& j, const topology& t) { j = json{{"modules", t.modules()}}; }
/// @brief Reads `{"modules": [...]}`: each module needs `name` and `role`,
/// tp/pp/dp and chunks default 1, trainable true, colocated false, layers none; then
/// validates (`topology`'s checks). Errors name `topology.modules[i].<key>`.
inline void from_json(const json& j, topology& t) {
  check_keys(j, {"modules"}, "topology");
  const json& ms = json_get<json>(j, "modules", "topology");
  if (!ms.is_array()) fail(errc::parse_error, "topology.modules", "expected an array");
  std::vector<topology_module> mods(ms.size());
  for (std::size_t i = 0; i < ms.size(); ++i)
    detail::read_fields(ms[i], mods[i], detail::topology_module_fields,
                        cat("topology.modules[", i, "]"));
  t = topology(std::move(mods));
}

}  // namespace disttrain

// A small JSON value with a parser and a writer: the bundle's graph is JSON, and the runtime must
// read it without any library beyond the standard one. Numbers keep their integer value exactly
// when they are integers (shapes, offsets, byte counts).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace kiln {

class Json {
 public:
  using Array = std::vector<Json>;
  using Object = std::map<std::string, Json>;

  Json() = default;                            // null
  Json(bool b) : v_(b) {}                      // NOLINT(google-explicit-constructor)
  Json(int v) : v_(int64_t{v}) {}              // NOLINT(google-explicit-constructor)
  Json(int64_t v) : v_(v) {}                   // NOLINT(google-explicit-constructor)
  Json(double v) : v_(v) {}                    // NOLINT(google-explicit-constructor)
  Json(const char* s) : v_(std::string(s)) {}  // NOLINT(google-explicit-constructor)
  Json(std::string s) : v_(std::move(s)) {}    // NOLINT(google-explicit-constructor)
  Json(Array a) : v_(std::make_shared<Array>(std::move(a))) {}    // NOLINT
  Json(Object o) : v_(std::make_shared<Object>(std::move(o))) {}  // NOLINT

  /// Parses `text`; kiln::Error naming `origin` and the position on malformed input.
  static Json parse(const std::string& text, const std::string& origin = "json");
  /// Compact JSON text.
  std::string dump() const;

  bool is_null() const { return v_.index() == 0; }
  bool is_object() const { return std::holds_alternative<std::shared_ptr<Object>>(v_); }
  bool is_array() const { return std::holds_alternative<std::shared_ptr<Array>>(v_); }

  // Typed access: kiln::Error naming `what` when the value has another type.
  int64_t as_int(const std::string& what) const;
  double as_double(const std::string& what) const;
  const std::string& as_string(const std::string& what) const;
  bool as_bool(const std::string& what) const;
  const Array& as_array(const std::string& what) const;
  const Object& as_object(const std::string& what) const;
  /// Member `key` of an object; kiln::Error naming `what` and the key when missing.
  const Json& at(const std::string& key, const std::string& what) const;
  bool has(const std::string& key) const;

 private:
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>>
      v_;
};

}  // namespace kiln

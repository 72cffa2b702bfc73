// JSON parsing and writing.
#include "base/json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "base/error.h"

namespace kiln {
namespace {

class Parser {
 public:
  Parser(const std::string& text, const std::string& origin) : s_(text), origin_(origin) {}

  Json parse_document() {
    Json v = value(0);
    skip_space();
    if (pos_ != s_.size()) fail("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    KILN_USER_ERROR() << origin_ << ": malformed JSON at byte " << pos_ << ": " << what;
  }

  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool consume(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }

  Json value(int depth) {
    if (depth > 256) fail("nesting is too deep");
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end");
    char c = s_[pos_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return string();
    if (s_.compare(pos_, 4, "true") == 0) return pos_ += 4, Json(true);
    if (s_.compare(pos_, 5, "false") == 0) return pos_ += 5, Json(false);
    if (s_.compare(pos_, 4, "null") == 0) return pos_ += 4, Json();
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    fail(std::string("unexpected character '") + c + "'");
  }

  Json object(int depth) {
    ++pos_;
    Json::Object o;
    if (consume('}')) return o;
    do {
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a member name");
      std::string key = string().as_string("key");
      expect(':');
      o[key] = value(depth + 1);
    } while (consume(','));
    expect('}');
    return o;
  }

  Json array(int depth) {
    ++pos_;
    Json::Array a;
    if (consume(']')) return a;
    do {
      a.push_back(value(depth + 1));
    } while (consume(','));
    expect(']');
    return a;
  }

  Json string() {
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      char c = s_[pos_++];
      if (c == '"') break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t code = hex4();
          // A surrogate pair (\uD83D\uDE00) is one code point beyond the 16-bit plane.
          if (code >= 0xD800 && code < 0xDC00 && s_.compare(pos_, 2, "\\u") == 0) {
            const size_t at = pos_;
            pos_ += 2;
            const uint32_t low = hex4();
            if (low >= 0xDC00 && low < 0xE000) {
              code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            } else {
              pos_ = at;  // not a pair: the second escape stands alone
            }
          }
          append_utf8(code, out);
          break;
        }
        default:
          fail(std::string("unknown escape '\\") + e + "'");
      }
    }
    return out;
  }

  /// The 4 hex digits of a \\u escape.
  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) fail("short \\u escape");
    uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_];
      uint32_t digit;
      if (c >= '0' && c <= '9')
        digit = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        digit = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        digit = static_cast<uint32_t>(c - 'A' + 10);
      else
        fail("bad \\u escape: '" + std::string(1, c) + "' is not a hex digit");
      code = code * 16 + digit;
      ++pos_;
    }
    return code;
  }

  static void append_utf8(uint32_t code, std::string& out) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  Json number() {
    size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    bool is_int = true;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        is_int = false;
        ++pos_;
      } else {
        break;
      }
    }
    std::string text = s_.substr(start, pos_ - start);
    try {
      size_t used = 0;
      if (is_int) {
        int64_t v = std::stoll(text, &used);
        if (used == text.size()) return v;
      }
      // Not std::stod: it refuses an underflow (a subnormal number, which dump() writes), and
      // the text here holds no "inf", "nan" or hex digits for strtod to take.
      char* end = nullptr;
      errno = 0;
      const double d = std::strtod(text.c_str(), &end);
      if (end == text.c_str() + text.size() && !(errno == ERANGE && std::isinf(d))) return d;
    } catch (const std::exception&) {
    }
    pos_ = start;
    fail("bad number '" + text + "'");
  }

  const std::string& s_;
  const std::string& origin_;
  size_t pos_ = 0;
};

void write_string(std::ostringstream& os, const std::string& s) {
  os << '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        os << "\\\"";
        break;
      case '\\':
        os << "\\\\";
        break;
      case '\n':
        os << "\\n";
        break;
      case '\r':
        os << "\\r";
        break;
      case '\t':
        os << "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          os << buf;
        } else {
          os << c;
        }
    }
  }
  os << '"';
}

}  // namespace

Json Json::parse(const std::string& text, const std::string& origin) {
  return Parser(text, origin).parse_document();
}

std::string Json::dump() const {
  std::ostringstream os;
  std::function<void(const Json&)> write = [&](const Json& j) {
    switch (j.v_.index()) {
      case 0:
        os << "null";
        break;
      case 1:
        os << (std::get<bool>(j.v_) ? "true" : "false");
        break;
      case 2:
        os << std::get<int64_t>(j.v_);
        break;
      case 3: {
        double d = std::get<double>(j.v_);
        if (!std::isfinite(d)) {
          os << "null";
        } else {
          char buf[32];
          std::snprintf(buf, sizeof(buf), "%.17g", d);
          os << buf;
        }
        break;
      }
      case 4:
        write_string(os, std::get<std::string>(j.v_));
        break;
      case 5: {
        os << '[';
        bool first = true;
        for (auto& e : *std::get<std::shared_ptr<Array>>(j.v_)) {
          if (!first) os << ',';
          first = false;
          write(e);
        }
        os << ']';
        break;
      }
      case 6: {
        os << '{';
        bool first = true;
        for (auto& [k, e] : *std::get<std::shared_ptr<Object>>(j.v_)) {
          if (!first) os << ',';
          first = false;
          write_string(os, k);
          os << ':';
          write(e);
        }
        os << '}';
        break;
      }
    }
  };
  write(*this);
  return os.str();
}

int64_t Json::as_int(const std::string& what) const {
  if (auto p = std::get_if<int64_t>(&v_)) return *p;
  KILN_USER_ERROR() << what << " must be an integer";
}

double Json::as_double(const std::string& what) const {
  if (auto p = std::get_if<double>(&v_)) return *p;
  if (auto p = std::get_if<int64_t>(&v_)) return static_cast<double>(*p);
  KILN_USER_ERROR() << what << " must be a number";
}

const std::string& Json::as_string(const std::string& what) const {
  if (auto p = std::get_if<std::string>(&v_)) return *p;
  KILN_USER_ERROR() << what << " must be a string";
}

bool Json::as_bool(const std::string& what) const {
  if (auto p = std::get_if<bool>(&v_)) return *p;
  KILN_USER_ERROR() << what << " must be true or false";
}

const Json::Array& Json::as_array(const std::string& what) const {
  if (auto p = std::get_if<std::shared_ptr<Array>>(&v_)) return **p;
  KILN_USER_ERROR() << what << " must be an array";
}

const Json::Object& Json::as_object(const std::string& what) const {
  if (auto p = std::get_if<std::shared_ptr<Object>>(&v_)) return **p;
  KILN_USER_ERROR() << what << " must be an object";
}

const Json& Json::at(const std::string& key, const std::string& what) const {
  const Object& o = as_object(what);
  auto it = o.find(key);
  KILN_USER_CHECK(it != o.end()) << what << " has no member '" << key << "'";
  return it->second;
}

bool Json::has(const std::string& key) const {
  auto p = std::get_if<std::shared_ptr<Object>>(&v_);
  return p && (*p)->count(key) > 0;
}

}  // namespace kiln

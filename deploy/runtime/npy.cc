// The .npy format: the magic "\x93NUMPY", a version (major, minor), the header length (2 bytes in
// version 1, 4 bytes in versions 2 and 3), a Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and a newline to a multiple of 64 bytes, then the raw elements.
#include "deploy/runtime/npy.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>

#include "base/shape_string.h"

namespace kiln::runtime {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

struct DescrEntry {
  const char* code;  // the type part of 'descr', without the byte-order character
  KilnDType dtype;
};

constexpr DescrEntry kDescrs[] = {
    {"f2", kFloat16},
    {"f4", kFloat32},
    {"f8", kFloat64},
    {"i1", kInt8},
    {"i2", kInt16},
    {"i4", kInt32},
    {"i8", kInt64},
    {"u1", kUInt8},
    {"u2", {kKilnUInt, 16, 1}},
    {"u4", {kKilnUInt, 32, 1}},
    {"u8", {kKilnUInt, 64, 1}},
    {"b1", kBool},
};

/// The descr string for `dtype` ("<f4", "|u1"); kiln::Error if .npy cannot hold it.
std::string descr_of(KilnDType dtype, const std::string& origin) {
  for (const DescrEntry& e : kDescrs) {
    if (dtype_equal(e.dtype, dtype)) {
      return std::string(dtype_bytes(dtype) == 1 ? "|" : "<") + e.code;
    }
  }
  KILN_USER_ERROR() << "save_npy: '" << origin << "': dtype " << dtype_to_string(dtype)
                    << " cannot be stored in .npy";
}

/// A cursor over the header dict, just enough Python literal syntax for what numpy writes.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& origin) : s_(text), origin_(origin) {}

  void parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        *descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        skip_space();
        if (s_.substr(pos_).starts_with("True")) {
          *fortran = true;
          pos_ += 4;
        } else if (s_.substr(pos_).starts_with("False")) {
          *fortran = false;
          pos_ += 5;
        } else {
          fail("fortran_order is neither True nor False");
        }
        have_fortran = true;
      } else if (key == "shape") {
        *shape = tuple();
        have_shape = true;
      } else {
        fail("unexpected key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_space();
      if (peek() != '}') fail("expected ',' or '}'");
    }
    if (!have_descr || !have_fortran || !have_shape) {
      fail("the header lacks one of 'descr', 'fortran_order', 'shape'");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    KILN_USER_ERROR() << "load_npy: '" << origin_ << "': bad header: " << what << " in \""
                      << std::string(s_) << "\"";
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    char q = peek();
    if (q != '\'' && q != '"') fail("expected a string");
    size_t end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(');
    while (true) {
      skip_space();
      if (peek() == ')') {
        ++pos_;
        return dims;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected a dimension");
      int64_t d = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (d > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("dimension too large");
        d = d * 10 + (s_[pos_++] - '0');
      }
      if (peek() == 'L') ++pos_;  // Python 2 longs
      dims.push_back(d);
      skip_space();
      if (peek() == ',') ++pos_;
    }
  }

  std::string_view s_;
  const std::string& origin_;
  size_t pos_ = 0;
};

}  // namespace

NDArray parse_npy(const std::string& bytes, const std::string& origin) {
  KILN_USER_CHECK(bytes.size() >= kMagic.size() + 2 &&
                  std::string_view(bytes).substr(0, kMagic.size()) == kMagic)
      << "load_npy: '" << origin << "' is not a .npy file (bad magic)";
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  const int major = u[6];
  KILN_USER_CHECK(major >= 1 && major <= 3)
      << "load_npy: '" << origin << "': unsupported .npy version " << major << "." << int(u[7]);
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagic.size() + 2 + len_bytes;
  KILN_USER_CHECK(bytes.size() >= prefix) << "load_npy: '" << origin << "': truncated header";
  size_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) header_len |= size_t(u[8 + i]) << (8 * i);
  KILN_USER_CHECK(bytes.size() - prefix >= header_len)
      << "load_npy: '" << origin << "': truncated header (" << header_len << " bytes announced, "
      << bytes.size() - prefix << " present)";

  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
  HeaderParser(std::string_view(bytes).substr(prefix, header_len), origin)
      .parse(&descr, &fortran, &shape);

  KILN_USER_CHECK(!fortran) << "load_npy: '" << origin
                            << "': Fortran-order arrays are not supported (save with C order, "
                               "e.g. np.ascontiguousarray)";
  KILN_USER_CHECK(descr.size() >= 2) << "load_npy: '" << origin << "': bad dtype '" << descr << "'";
  const char order = descr[0];
  const std::string code = descr.substr(1);
  KILN_USER_CHECK(order != '>') << "load_npy: '" << origin << "': big-endian dtype '" << descr
                                << "' is not supported";
  const DescrEntry* entry = nullptr;
  if (order == '<' || order == '|' || order == '=') {
    for (const DescrEntry& e : kDescrs) {
      if (code == e.code) entry = &e;
    }
  }
  KILN_USER_CHECK(entry != nullptr)
      << "load_npy: '" << origin << "': unsupported dtype '" << descr
      << "' (supported: f2, f4, f8, i1, i2, i4, i8, u1, u2, u4, u8, b1, little-endian)";

  // The size the header announces is checked against the file before anything is allocated.
  const size_t data_start = prefix + header_len;
  const size_t have = bytes.size() - data_start;
  const auto want = static_cast<size_t>(NDArray::nbytes_for(shape, entry->dtype));
  if (have < want) {
    KILN_USER_ERROR() << "load_npy: '" << origin << "': truncated data: shape "
                      << shape_string(shape) << " of " << descr << " needs " << want
                      << " bytes, the file holds " << have;
  }
  NDArray a = NDArray::empty(shape, entry->dtype);
  if (want != 0) std::memcpy(a.data(), bytes.data() + data_start, want);
  return a;
}

NDArray load_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_USER_CHECK(in.good()) << "load_npy: cannot open '" << path << "': " << std::strerror(errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_npy(ss.str(), path);
}

std::string serialize_npy(const NDArray& array) {
  std::ostringstream dict;
  dict << "{'descr': '" << descr_of(array.dtype(), "<memory>") << "', 'fortran_order': False, "
       << "'shape': (";
  for (size_t i = 0; i < array.shape().size(); ++i) {
    // Python's tuple syntax: "(3,)" for one dimension, "(2, 3)" for more.
    dict << array.shape()[i];
    if (array.shape().size() == 1) dict << ",";
    if (i + 1 < array.shape().size()) dict << ", ";
  }
  dict << "), }";
  std::string header = dict.str();
  // Pad with spaces so that magic + version + length + header + '\n' is a multiple of 64.
  size_t prefix = kMagic.size() + 2 + 2;
  int major = 1;
  if (header.size() + 1 + 64 > 65535) {  // the padded header no longer fits 2 bytes
    major = 2;
    prefix = kMagic.size() + 2 + 4;
  }
  const size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header.push_back('\n');

  std::string out(kMagic);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  const size_t len = header.size();
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) {
    out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  }
  out += header;
  out.append(static_cast<const char*>(array.data()), static_cast<size_t>(array.nbytes()));
  return out;
}

void save_npy(const std::string& path, const NDArray& array) {
  KILN_USER_CHECK(array.defined()) << "save_npy: '" << path << "': the array is null";
  descr_of(array.dtype(), path);  // names the file when the dtype cannot be stored
  const std::string bytes = serialize_npy(array);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  KILN_USER_CHECK(out.good()) << "save_npy: cannot open '" << path
                              << "' for writing: " << std::strerror(errno);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  KILN_USER_CHECK(out.good()) << "save_npy: writing '" << path << "' failed";
}

}  // namespace kiln::runtime

// Parsing and printing of IR types.
#include "compiler/ir/type.h"

#include "base/error.h"

namespace kiln::ir {

DataType DataType::parse(const std::string& s) {
  auto with_bits = [&](const std::string& prefix, TypeCode code) -> DataType {
    int bits = std::stoi(s.substr(prefix.size()));
    return DataType(code, bits);
  };
  if (s == "bool") return Bool();
  if (s == "handle") return Handle();
  if (s == "float16" || s == "float32" || s == "float64")
    return with_bits("float", TypeCode::kFloat);
  if (s == "int8" || s == "int16" || s == "int32" || s == "int64")
    return with_bits("int", TypeCode::kInt);
  if (s == "uint8" || s == "uint16" || s == "uint32" || s == "uint64")
    return with_bits("uint", TypeCode::kUInt);
  KILN_USER_ERROR()
      << "unknown dtype '" << s
      << "' (known: bool, float16, float32, float64, int8, int16, int32, int64, uint8, "
         "uint16, uint32, uint64)";
}

std::string DataType::str() const {
  std::string s;
  switch (code_) {
    case TypeCode::kInt:
      s = "int" + std::to_string(bits_);
      break;
    case TypeCode::kUInt:
      s = "uint" + std::to_string(bits_);
      break;
    case TypeCode::kFloat:
      s = "float" + std::to_string(bits_);
      break;
    case TypeCode::kBool:
      s = "bool";
      break;
    case TypeCode::kHandle:
      return is_void() ? "void" : "handle";
  }
  if (lanes_ > 1) s += "x" + std::to_string(lanes_);
  return s;
}

}  // namespace kiln::ir

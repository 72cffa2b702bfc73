// The JSON of base/json.h: round trips, exact integers, escapes, and malformed text reported with
// its position.
#include <gtest/gtest.h>

#include "base/json.h"
#include "tests/common/expect_error.h"

namespace kiln {
namespace {

TEST(Json, ParsesAndWritesBack) {
  std::string text =
      R"({"a":[1,-2,3.5,true,false,null],"b":{"c":"x\"y\n"},"big":9007199254740993})";
  Json j = Json::parse(text);
  EXPECT_EQ(j.at("a", "j").as_array("a")[1].as_int("a1"), -2);
  EXPECT_DOUBLE_EQ(j.at("a", "j").as_array("a")[2].as_double("a2"), 3.5);
  EXPECT_EQ(j.at("b", "j").at("c", "b").as_string("c"), "x\"y\n");
  EXPECT_EQ(j.at("big", "j").as_int("big"), 9007199254740993);  // not rounded through a double
  EXPECT_EQ(Json::parse(j.dump()).dump(), j.dump());
}

// Found by fuzz_grpc: a subnormal number (a driver's best latency of 3.65e-313 s) was written but
// not read back ("bad number"), which made its job unreadable.
TEST(Json, SubnormalNumbersRoundTrip) {
  for (double d : {3.6515003342272834e-313, 4.9406564584124654e-324, -2.2250738585072009e-308}) {
    const Json back = Json::parse(Json(d).dump());
    EXPECT_EQ(back.as_double("d"), d);
  }
  EXPECT_EQ(Json::parse("1e-400").as_double("d"), 0.0);  // below every subnormal: zero
  EXPECT_ERROR_CONTAINS(Json::parse("1e400", "g"), "bad number '1e400'");  // no infinity
}

TEST(Json, MalformedTextNamesOriginAndPosition) {
  EXPECT_ERROR_CONTAINS(Json::parse("{\"a\": [1, 2", "graph.json"), "graph.json: malformed JSON");
  EXPECT_ERROR_CONTAINS(Json::parse("{\"a\" 1}", "g"), "expected ':'");
  EXPECT_ERROR_CONTAINS(Json::parse("[1] x", "g"), "after the value");
  EXPECT_ERROR_CONTAINS(Json::parse("\"abc", "g"), "unterminated string");
  EXPECT_ERROR_CONTAINS(Json::parse(std::string(1000, '['), "g"), "too deep");
  // A unicode escape takes exactly four hex digits (a std::invalid_argument escaped here).
  EXPECT_ERROR_CONTAINS(Json::parse(R"("\uzzzz")", "g"), "bad \\u escape");
  EXPECT_ERROR_CONTAINS(Json::parse(R"("\u12x4")", "g"), "bad \\u escape");
  EXPECT_EQ(Json::parse(R"("\u00e9\u0041")").as_string("s"),
            "\xc3\xa9"
            "A");
}

TEST(Json, UnicodeEscapes) {
  EXPECT_EQ(Json::parse(R"("A\u00e9\u2603")").as_string("s"), "A\xc3\xa9\xe2\x98\x83");
  EXPECT_EQ(Json::parse(R"("\uD83D\uDE00")").as_string("s"), "\xf0\x9f\x98\x80");  // a pair
  EXPECT_EQ(Json::parse(R"("\u00AF")").as_string("s"), "\xc2\xaf");
  // Found by fuzz_record: a non-hex digit threw std::invalid_argument out of the parser.
  EXPECT_ERROR_CONTAINS(Json::parse(R"("\u12G4")", "g"),
                        "g: malformed JSON at byte 5: bad \\u escape");
  EXPECT_ERROR_CONTAINS(Json::parse(R"("\u+123")", "g"), "not a hex digit");
  EXPECT_ERROR_CONTAINS(Json::parse(R"("\u 123")", "g"), "not a hex digit");
  EXPECT_ERROR_CONTAINS(Json::parse(R"("\u12")", "g"), "short \\u escape");
}

TEST(Json, TypedAccessNamesTheField) {
  Json j = Json::parse(R"({"n": "seven"})");
  EXPECT_ERROR_CONTAINS(j.at("n", "node").as_int("node n"), "node n must be an integer");
  EXPECT_ERROR_CONTAINS(j.at("m", "node"), "node has no member 'm'");
}

}  // namespace
}  // namespace kiln

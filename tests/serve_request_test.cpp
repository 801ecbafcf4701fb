// serve/request.h's parse_body, the first thing a request body meets: JSON nested deeper than
// kMaxBodyDepth is refused while parsing (a 400, before any recursive copy of it can overflow
// the stack), up to that depth it parses; bytes that are not UTF-8 give a 400 whose error body
// can still be written (serve_test sends the same bodies to a running server).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve/request.h"
#include "serve/responses.h"

namespace dsinfer::serve_request_test {
namespace {

using json = nlohmann::json;

std::string nested(int depth, char open = '[', char close = ']') {
  return std::string(static_cast<size_t>(depth), open) +
         std::string(static_cast<size_t>(depth), close);
}

ApiError rejection(const std::string& text) {
  try {
    parse_body(text);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted a body of " << text.size() << " bytes";
  return {};
}

TEST(ParseBody, NestingUpToTheLimitParses) {
  // the outermost object is depth 0: the limit's deepest value is kMaxBodyDepth levels below it
  const json body = parse_body("{\"tool_choice\":" + nested(kMaxBodyDepth) + "}");
  const json* v = &body["tool_choice"];
  int depth = 1;
  while (!v->empty()) v = &(*v)[0], ++depth;
  EXPECT_EQ(depth, kMaxBodyDepth);
}

TEST(ParseBody, DeeperNestingIsA400WhateverTheField) {
  std::vector<std::string> bodies;
  bodies.push_back("{\"tool_choice\":" + nested(kMaxBodyDepth + 1) + "}");
  bodies.push_back("{\"messages\":[{\"role\":\"user\",\"content\":" + nested(250000) + "}]}");
  bodies.push_back(nested(250000, '{', '}'));  // not even valid: refused as bad JSON at once
  bodies.push_back("{\"a\":" + std::string(200000, '['));  // cut off: refused for depth first
  for (const std::string& body : bodies) {
    const ApiError e = rejection(body);
    EXPECT_EQ(e.status, 400);
    EXPECT_TRUE(e.message.find("deeper than") != std::string::npos ||
                e.message.find("not valid JSON") != std::string::npos)
        << e.message;
  }
  const ApiError e = rejection("{\"tools\":" + nested(100000) + "}");
  EXPECT_NE(e.message.find("deeper than 128 levels"), std::string::npos) << e.message;
}

TEST(ParseBody, BytesThatAreNotUtf8GiveAnErrorBodyThatCanBeWritten) {
  const ApiError e = rejection("{\"messages\": \"\xff\xfe\x80 oops");
  EXPECT_EQ(e.status, 400);
  const json written = json::parse(error_body(e));  // it used to throw while being dumped
  EXPECT_NE(written["error"]["message"].get<std::string>().find("not valid JSON"),
            std::string::npos);
}

}  // namespace
}  // namespace dsinfer::serve_request_test

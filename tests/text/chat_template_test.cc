// Chat templates against transformers' renderer: the templates of Llama 3, Qwen2, Zephyr /
// TinyLlama, Llama 2 and Mistral, and one exercising the rest of the Jinja subset, on several
// conversations with and without the generation prompt (scripts/make_chat_template_goldens.py),
// including the templates' own raise_exception errors; and unsupported syntax as a clear error.
#include "text/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"

namespace axle::text {
namespace {

using ::testing::HasSubstr;

TEST(ChatTemplate, RendersAsTransformers) {
  std::ifstream in(std::string(AXLE_SOURCE_DIR) + "/tests/text/goldens/chat_templates.json");
  const nlohmann::ordered_json cases = nlohmann::ordered_json::parse(in);
  ASSERT_GE(cases.size(), 40u);
  int errors = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const ChatTemplate t = ChatTemplate::Parse(c["template"].get<std::string>(), c["name"].get<std::string>());
    if (c.contains("error")) {
      ++errors;
      try {
        t.Render(c["context"]);
        ADD_FAILURE() << "expected an error: " << c["error"];
      } catch (const Error& e) {
        EXPECT_THAT(std::string(e.what()), HasSubstr(c["error"].get<std::string>()));
      }
      continue;
    }
    EXPECT_EQ(t.Render(c["context"]), c["expected"].get<std::string>());
  }
  EXPECT_GT(errors, 0);
}

TEST(ChatTemplate, UnsupportedSyntaxIsAClearError) {
  auto error = [](const std::string& src, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object()) -> std::string {
    try {
      ChatTemplate::Parse(src, "cfg.json (chat_template)").Render(ctx);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_THAT(error("a\n{% macro f() %}x{% endmacro %}"), HasSubstr("cfg.json (chat_template): line 2: the statement 'macro'"));
  EXPECT_THAT(error("{% if x %}never closed"), HasSubstr("'if' without 'endif'"));
  EXPECT_THAT(error("{{ x | frobnicate }}"), HasSubstr("the filter 'frobnicate' is not supported"));
  EXPECT_THAT(error("{{ 'a' + 1 }}"), HasSubstr("cannot apply '+'"));
  EXPECT_THAT(error("{{ x"), HasSubstr("is never closed"));
  EXPECT_THAT(error("{{ raise_exception('no system role') }}"), HasSubstr("the template raised: no system role"));
}

}  // namespace
}  // namespace axle::text

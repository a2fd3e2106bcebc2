// io/jinja against @huggingface/jinja: every template of tests/io/fixtures/jinja/templates (the
// real chat templates of Llama 3, Llama 3.1, Qwen 2.5, Qwen 3, Gemma 3 and Mistral NeMo from
// the npm tokenizer packages, and hand-written copies of Qwen 2's and Mistral v0.1's / v0.3's)
// on every conversation of conversations.json (tool calls and tool results included),
// add_generation_prompt true and false, without and with `tools` (tools.json), renders byte
// for byte as the reference did (rendered.json, made by `node scripts/jinja_reference.js
// fixtures`); where the reference raised, io/jinja fails too.
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "io/jinja/template.h"
#include "nlohmann/json.hpp"

namespace anvil::io::jinja {
namespace {

using json = nlohmann::ordered_json;
const std::string kDir = "tests/io/fixtures/jinja/";

std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(JinjaParity, RealTemplatesRenderAsHuggingFaceJinja) {
  const json conversations = json::parse(read(kDir + "conversations.json"));
  const json rendered = json::parse(read(kDir + "rendered.json"));
  const json tools = json::parse(read(kDir + "tools.json"));
  ASSERT_GE(rendered.size(), 280u);
  std::map<std::string, Template> templates;
  int compared = 0, errors = 0;
  for (const json& row : rendered) {
    const std::string name = row["template"];
    if (!templates.count(name)) {
      absl::StatusOr<Template> t = Template::parse(read(kDir + "templates/" + name + ".jinja"));
      ASSERT_TRUE(t.ok()) << name << ": " << t.status();
      templates.emplace(name, *t);
    }
    json context = {{"messages", conversations[row["conversation"].get<int>()]},
                    {"add_generation_prompt", row["add_generation_prompt"]},
                    {"bos_token", row["bos_token"]},
                    {"eos_token", row["eos_token"]}};
    const bool with_tools = row.value("tools", false);
    if (with_tools) context["tools"] = tools;
    absl::StatusOr<std::string> out = templates.at(name).render(context);
    const std::string where = name + " conversation " + row["conversation"].dump() +
                              " add_generation_prompt " + row["add_generation_prompt"].dump() +
                              (with_tools ? " with tools" : "");
    if (row.contains("error")) {
      EXPECT_FALSE(out.ok()) << where << " rendered where the reference raised: " << *out;
      ++errors;
    } else {
      ASSERT_TRUE(out.ok()) << where << ": " << out.status();
      EXPECT_EQ(*out, row["output"].get<std::string>()) << where;
      ++compared;
    }
  }
  EXPECT_EQ(templates.size(), 9u);
  EXPECT_GT(compared, 200);
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace anvil::io::jinja

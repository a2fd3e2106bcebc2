// Post-processors of tokenizer.json (io/tokenizers/hf_post_processors.h).
#include "io/tokenizers/hf_post_processors.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/status.h"

namespace anvil::io::hf_internal {
namespace {

// A template: ids to put before and after the sequence.
class Wrap final : public PostProcessor {
 public:
  Wrap(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<int32_t>* ids) const override {
    ids->insert(ids->begin(), before_.begin(), before_.end());
    ids->insert(ids->end(), after_.begin(), after_.end());
  }

 private:
  std::vector<int32_t> before_, after_;
};

class Sequence final : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void process(std::vector<int32_t>* ids) const override {
    for (const auto& s : steps_) s->process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

// BertProcessing / RobertaProcessing's "sep" / "cls": [token, id].
absl::Status get_token_pair(const Ctx& ctx, const json& p, const char* key,
                            const std::string& where, int32_t* id) {
  const auto it = p.find(key);
  const std::string w = absl::StrCat(where, ".", key);
  if (it == p.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_string()) {
    return ctx.bad(w, "must be [token, id]");
  }
  return get_id(ctx, (*it)[1], w + "[1]", id);
}

absl::Status parse_template(const Ctx& ctx, const json& p, const std::string& where,
                            std::unique_ptr<PostProcessor>* out) {
  ANVIL_ASSIGN_OR_RETURN(const json* single, get_array(ctx, p, "single", where));
  const auto specials = p.find("special_tokens");
  if (specials == p.end() || !specials->is_object()) {
    return ctx.bad(where + ".special_tokens", "must be an object");
  }
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const json& item = (*single)[i];
    const std::string w = absl::StrCat(where, ".single[", i, "]");
    if (item.contains("Sequence")) {
      if (seen_sequence) return ctx.bad(w, "is a second Sequence in a single template");
      seen_sequence = true;
      continue;
    }
    const auto st = item.find("SpecialToken");
    if (st == item.end() || !st->is_object() || !st->contains("id") || !(*st)["id"].is_string()) {
      return ctx.bad(w, "must be {\"Sequence\": ...} or {\"SpecialToken\": {\"id\": ...}}");
    }
    const std::string name = (*st)["id"].get<std::string>();
    const auto sp = specials->find(name);
    if (sp == specials->end() || !sp->is_object() || !sp->contains("ids") ||
        !(*sp)["ids"].is_array()) {
      return ctx.bad(w, absl::StrCat("names \"", name, "\", which special_tokens lacks"));
    }
    for (const json& id : (*sp)["ids"]) {
      int32_t v = 0;
      ANVIL_RETURN_IF_ERROR(get_id(ctx, id, absl::StrCat(where, ".special_tokens.", name), &v));
      (seen_sequence ? after : before).push_back(v);
    }
  }
  if (!seen_sequence) return ctx.bad(where + ".single", "has no Sequence");
  *out = std::make_unique<Wrap>(std::move(before), std::move(after));
  return absl::OkStatus();
}

}  // namespace

absl::Status parse_post_processor(const Ctx& ctx, const json& p, const std::string& where,
                                  std::unique_ptr<PostProcessor>* out) {
  out->reset();
  if (p.is_null()) return absl::OkStatus();
  ANVIL_ASSIGN_OR_RETURN(const std::string type, get_type(ctx, p, where));
  if (type == "Sequence") {
    ANVIL_ASSIGN_OR_RETURN(const json* list, get_array(ctx, p, "processors", where));
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      std::unique_ptr<PostProcessor> step;
      ANVIL_RETURN_IF_ERROR(parse_post_processor(
          ctx, (*list)[i], absl::StrCat(where, ".processors[", i, "]"), &step));
      if (step != nullptr) steps.push_back(std::move(step));
    }
    *out = std::make_unique<Sequence>(std::move(steps));
  } else if (type == "TemplateProcessing") {
    return parse_template(ctx, p, where, out);
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    int32_t cls = 0, sep = 0;
    ANVIL_RETURN_IF_ERROR(get_token_pair(ctx, p, "cls", where, &cls));
    ANVIL_RETURN_IF_ERROR(get_token_pair(ctx, p, "sep", where, &sep));
    *out = std::make_unique<Wrap>(std::vector<int32_t>{cls}, std::vector<int32_t>{sep});
  } else if (type == "ByteLevel") {
    *out = std::make_unique<Sequence>(std::vector<std::unique_ptr<PostProcessor>>());
  } else {
    return ctx.unsupported(where, type,
                           "supported: TemplateProcessing, BertProcessing, RobertaProcessing, "
                           "ByteLevel, Sequence");
  }
  return absl::OkStatus();
}

}  // namespace anvil::io::hf_internal

// RACE directory reader (see race.h).
#include "io/race.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "engine/status.h"
#include "io/file_checks.h"
#include "io/json_fields.h"
#include "io/task_text.h"

namespace anvil::io {
namespace {

using json = nlohmann::json;

absl::StatusOr<std::vector<std::string>> txt_files(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    const int err = errno;
    const std::string msg = errno_message(dir, "open the RACE directory", err);
    return err == ENOENT ? absl::NotFoundError(msg) : absl::InvalidArgumentError(msg);
  }
  std::vector<std::string> out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (absl::EndsWith(name, ".txt")) out.push_back(dir + "/" + name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<std::vector<std::string>> strings(const json& v, const std::string& what,
                                                 const std::string& where) {
  if (!v.is_array())
    return absl::DataLossError(absl::StrCat(where, ": ", what, ": expected a list"));
  std::vector<std::string> out;
  for (const json& s : v) {
    if (!s.is_string()) {
      return absl::DataLossError(absl::StrCat(where, ": ", what, ": expected strings"));
    }
    out.push_back(s.get<std::string>());
  }
  return out;
}

absl::Status document(const json& j, const std::string& where, std::vector<ChoiceExample>& out) {
  ANVIL_ASSIGN_OR_RETURN(std::string article, json_string(j, "article", where));
  ANVIL_ASSIGN_OR_RETURN(const json* qs, json_field(j, "questions", where));
  ANVIL_ASSIGN_OR_RETURN(const json* os, json_field(j, "options", where));
  ANVIL_ASSIGN_OR_RETURN(const json* as, json_field(j, "answers", where));
  ANVIL_ASSIGN_OR_RETURN(std::vector<std::string> questions, strings(*qs, "questions", where));
  ANVIL_ASSIGN_OR_RETURN(std::vector<std::string> answers, strings(*as, "answers", where));
  if (!os->is_array() || os->size() != questions.size() || answers.size() != questions.size()) {
    return absl::DataLossError(absl::StrFormat(
        "%s: %d questions, %d options lists and %d answers: expected as many of each", where,
        questions.size(), os->is_array() ? os->size() : 0, answers.size()));
  }
  const std::string context = clean_text(article);
  for (size_t q = 0; q < questions.size(); ++q) {
    const std::string at = absl::StrCat(where, ": question ", q);
    ANVIL_ASSIGN_OR_RETURN(std::vector<std::string> options, strings((*os)[q], "options", at));
    if (options.size() != static_cast<size_t>(kRaceChoices)) {
      return absl::DataLossError(
          absl::StrFormat("%s: %d options, expected %d", at, options.size(), kRaceChoices));
    }
    const std::string& a = answers[q];
    if (a.size() != 1 || a[0] < 'A' || a[0] >= 'A' + kRaceChoices) {
      return absl::DataLossError(absl::StrCat(at, ": answer \"", a, "\": expected A, B, C or D"));
    }
    ChoiceExample e;
    e.context = context;
    e.label = a[0] - 'A';
    for (const std::string& o : options) e.qa.push_back(clean_text(race_merge(questions[q], o)));
    out.push_back(std::move(e));
  }
  return absl::OkStatus();
}

}  // namespace

std::string race_merge(const std::string& question, const std::string& option) {
  if (absl::StrContains(question, "_")) return absl::StrReplaceAll(question, {{"_", option}});
  return absl::StrCat(question, " ", option);
}

absl::StatusOr<std::vector<ChoiceExample>> read_race_dir(const std::string& dir) {
  ANVIL_ASSIGN_OR_RETURN(std::vector<std::string> files, txt_files(dir));
  std::vector<ChoiceExample> out;
  for (const std::string& f : files) {
    ANVIL_RETURN_IF_ERROR(for_each_jsonl(
        f, [&](const json& j, const std::string& where) { return document(j, where, out); }));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: no RACE questions (%d *.txt files)", dir, files.size()));
  }
  return out;
}

}  // namespace anvil::io

// MNLI and QQP TSV readers (see glue_tsv.h).
#include "io/glue_tsv.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/status.h"
#include "io/durable_file.h"
#include "io/task_text.h"

namespace anvil::io {
namespace {

constexpr const char* kMnliLabels[] = {"contradiction", "entailment", "neutral"};

// Python's int(s.strip()) for the uid: an optional sign and digits, >= 0 (Megatron asserts it).
absl::StatusOr<int64_t> parse_uid(absl::string_view s, const std::string& where) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(s), &v) || v < 0) {
    return absl::DataLossError(absl::StrCat(where, ": id \"", s, "\": expected an integer >= 0"));
  }
  return v;
}

// Calls fn(columns, "path:line", is_header) for every line (line.strip().split('\t')).
absl::Status for_each_row(const std::string& path,
                          const std::function<absl::Status(const std::vector<absl::string_view>&,
                                                           const std::string&, bool)>& fn) {
  ANVIL_ASSIGN_OR_RETURN(std::string data, read_file(path));
  size_t pos = 0;
  for (int64_t line_no = 1; pos < data.size(); ++line_no) {
    size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    const absl::string_view line =
        absl::StripAsciiWhitespace(absl::string_view(data).substr(pos, end - pos));
    pos = end + 1;
    const std::vector<absl::string_view> row = absl::StrSplit(line, '\t');
    ANVIL_RETURN_IF_ERROR(fn(row, absl::StrCat(path, ":", line_no), line_no == 1));
  }
  return absl::OkStatus();
}

absl::Status mnli_row(const std::vector<absl::string_view>& row, const std::string& where,
                      bool is_test, int32_t test_label, GlueFile& out) {
  if (row.size() < 10) {
    return absl::DataLossError(absl::StrFormat(
        "%s: %d tab-separated columns, expected at least 10 (text_a is column 8, text_b 9)", where,
        row.size()));
  }
  TextPair p;
  ANVIL_ASSIGN_OR_RETURN(p.uid, parse_uid(row[0], where));
  p.text_a = clean_text(absl::StripAsciiWhitespace(row[8]));
  p.text_b = clean_text(absl::StripAsciiWhitespace(row[9]));
  if (p.text_a.empty() || p.text_b.empty()) {
    return absl::DataLossError(absl::StrCat(where, ": empty sentence", p.text_a.empty() ? "1" : "2",
                                            " (column ", p.text_a.empty() ? 8 : 9, ")"));
  }
  p.label = test_label;
  if (!is_test) {
    const absl::string_view label = absl::StripAsciiWhitespace(row.back());
    p.label = -1;
    for (int k = 0; k < 3; ++k) {
      if (label == kMnliLabels[k]) p.label = k;
    }
    if (p.label < 0) {
      return absl::DataLossError(absl::StrCat(where, ": label \"", label,
                                              "\" (last column): expected contradiction, "
                                              "entailment or neutral"));
    }
  }
  out.examples.push_back(std::move(p));
  return absl::OkStatus();
}

absl::Status qqp_row(const std::vector<absl::string_view>& row, const std::string& where,
                     bool is_test, int32_t test_label, GlueFile& out) {
  TextPair p;
  const size_t want = is_test ? 3 : 6;
  if (row.size() != want) {
    if (is_test) {
      return absl::DataLossError(
          absl::StrFormat("%s: %d tab-separated columns, expected 3 in a test file (id, "
                          "question1, question2)",
                          where, row.size()));
    }
    out.warnings.push_back(absl::StrFormat("%s: skipped: %d columns, expected 6: %s", where,
                                           row.size(), absl::StrJoin(row, " | ")));
    return absl::OkStatus();
  }
  ANVIL_ASSIGN_OR_RETURN(p.uid, parse_uid(row[0], where));
  p.text_a = clean_text(absl::StripAsciiWhitespace(row[is_test ? 1 : 3]));
  p.text_b = clean_text(absl::StripAsciiWhitespace(row[is_test ? 2 : 4]));
  if (p.text_a.empty() || p.text_b.empty()) {
    if (is_test) return absl::DataLossError(where + ": empty question");
    out.warnings.push_back(
        absl::StrCat(where, ": skipped: empty question", p.text_a.empty() ? "1" : "2"));
    return absl::OkStatus();
  }
  p.label = test_label;
  if (!is_test) {
    const absl::string_view label = absl::StripAsciiWhitespace(row[5]);
    if (label != "0" && label != "1") {
      return absl::DataLossError(
          absl::StrCat(where, ": is_duplicate \"", label, "\" (column 5): expected 0 or 1"));
    }
    p.label = label == "1" ? 1 : 0;
  }
  out.examples.push_back(std::move(p));
  return absl::OkStatus();
}

}  // namespace

int glue_num_classes(GlueTask task) { return task == GlueTask::kMnli ? 3 : 2; }

absl::StatusOr<GlueTask> parse_glue_task(const std::string& name) {
  if (name == "mnli") return GlueTask::kMnli;
  if (name == "qqp") return GlueTask::kQqp;
  return absl::InvalidArgumentError(absl::StrCat("GLUE task \"", name, "\": expected mnli or qqp"));
}

absl::StatusOr<GlueFile> read_glue_tsv(GlueTask task, const std::string& path, int32_t test_label) {
  if (test_label < 0 || test_label >= glue_num_classes(task)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("test label %d: expected 0 .. %d", test_label, glue_num_classes(task) - 1));
  }
  GlueFile out;
  ANVIL_RETURN_IF_ERROR(for_each_row(
      path,
      [&](const std::vector<absl::string_view>& row, const std::string& where,
          bool header) -> absl::Status {
        if (header) {
          if (task == GlueTask::kMnli) {
            out.is_test = row.size() == 10;
          } else if (row.size() == 3 || row.size() == 6) {
            out.is_test = row.size() == 3;
          } else {
            return absl::DataLossError(
                absl::StrFormat("%s: QQP header of %d columns, expected 6 (train/dev) or 3 (test)",
                                where, row.size()));
          }
          return absl::OkStatus();
        }
        if (row.size() == 1 && row[0].empty()) return absl::OkStatus();  // a blank line
        return task == GlueTask::kMnli ? mnli_row(row, where, out.is_test, test_label, out)
                                       : qqp_row(row, where, out.is_test, test_label, out);
      }));
  if (out.examples.empty()) return absl::InvalidArgumentError(path + ": no examples");
  return out;
}

}  // namespace anvil::io

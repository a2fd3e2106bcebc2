// Zero-shot tasks during training (see eval_suite.h): evaluate, then one log line per task.
#include "model/tasks/eval_suite.h"

#include <string>

#include "absl/strings/str_format.h"
#include "engine/status.h"

namespace anvil::model {

namespace {

// "step  100/1000 | eval " for the log lines.
std::string step_prefix(int64_t step, int64_t steps) {
  const int width = static_cast<int>(std::to_string(steps).size());
  return absl::StrFormat("step %*d/%d | eval ", width, step, steps);
}

void log_text(const engine::LogContext& log, const std::string& at, const EvalSuite& suite,
              const LmEvalResult& r, double seconds) {
  const LmReport rep = lm_report(r, suite.text_words);
  engine::log_info(log, absl::StrFormat("%stext %s: loss %.4f | ppl %.2f | adjusted ppl %.2f | %s",
                                        at, suite.text_name, rep.loss, rep.ppl, rep.adjusted_ppl,
                                        engine::format_duration(seconds)));
}

void log_lambada(const engine::LogContext& log, const std::string& at, const EvalSuite& suite,
                 const ClozeResult& r, double seconds) {
  engine::log_info(
      log, absl::StrFormat("%slambada %s: accuracy %.4f (%d/%d) | %s", at, suite.lambada_name,
                           r.accuracy(), r.correct, r.total, engine::format_duration(seconds)));
}

}  // namespace

absl::Status run_eval_suite(const EvalSuite& suite, GptModel& model, const GptRunShape& shape,
                            const EvalParallel& par, engine::Stream& stream,
                            const engine::LogContext& log, int64_t step, int64_t steps) {
  const std::string at = step_prefix(step, steps);
  if (!suite.text_name.empty()) {
    engine::Timer t;
    ANVIL_ASSIGN_OR_RETURN(LmEvalResult r, evaluate_lm(model, shape, suite.text_tokens,
                                                       suite.text_stride, suite.pad, stream, par));
    log_text(log, at, suite, r, t.seconds());
  }
  if (!suite.lambada_name.empty()) {
    engine::Timer t;
    ANVIL_ASSIGN_OR_RETURN(ClozeResult r,
                           evaluate_cloze(model, shape, suite.lambada, suite.pad, stream, par));
    log_lambada(log, at, suite, r, t.seconds());
  }
  return absl::OkStatus();
}

absl::Status run_seq2seq_eval_suite(const EvalSuite& suite, Model& model,
                                    const Seq2SeqEvalShape& shape, const EvalParallel& par,
                                    engine::Stream& stream, const engine::LogContext& log,
                                    int64_t step, int64_t steps) {
  const std::string at = step_prefix(step, steps);
  Seq2SeqEvalShape s = shape;
  s.pad = suite.pad;
  s.decoder_start = suite.decoder_start;
  if (!suite.text_name.empty()) {
    engine::Timer t;
    ANVIL_ASSIGN_OR_RETURN(LmEvalResult r, evaluate_lm_seq2seq(model, s, suite.text_tokens,
                                                               suite.text_stride, stream, par));
    log_text(log, at, suite, r, t.seconds());
  }
  if (!suite.lambada_name.empty()) {
    engine::Timer t;
    ANVIL_ASSIGN_OR_RETURN(ClozeResult r,
                           evaluate_cloze_seq2seq(model, s, suite.lambada, stream, par));
    log_lambada(log, at, suite, r, t.seconds());
  }
  return absl::OkStatus();
}

}  // namespace anvil::model

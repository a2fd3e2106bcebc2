// Parsing of --{train,valid,test}-weighted-split-paths groups (see data_groups.h).
#include "model/train/data_groups.h"

#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace anvil::model {

absl::StatusOr<std::vector<DataGroup>> parse_data_groups(const std::string& text) {
  std::vector<DataGroup> groups;
  std::set<std::string> names;
  for (const std::string& item :
       std::vector<std::string>(absl::StrSplit(text, ';', absl::SkipWhitespace()))) {
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "group \"%s\": %s (expected \"NAME: W1 START1:END1 PREFIX1, W2 START2:END2 PREFIX2\")",
          std::string(absl::StripAsciiWhitespace(item)), why));
    };
    const size_t colon = item.find(':');
    if (colon == std::string::npos) return bad("no NAME:");
    DataGroup g;
    g.name = std::string(absl::StripAsciiWhitespace(item.substr(0, colon)));
    if (g.name.empty() || g.name.find_first_of(" \t/") != std::string::npos) {
      return bad("the name must be one word without '/'");
    }
    if (!names.insert(g.name).second) return bad("the name is used twice");
    for (const std::string& d :
         std::vector<std::string>(absl::StrSplit(item.substr(colon + 1), ','))) {
      const std::vector<std::string> f =
          absl::StrSplit(d, absl::ByAnyChar(" \t"), absl::SkipEmpty());
      if (f.size() != 3) {
        return bad(absl::StrFormat("'%s' is not WEIGHT START:END PREFIX",
                                   std::string(absl::StripAsciiWhitespace(d))));
      }
      double w = 0.0, a = 0.0, b = 0.0;
      const std::vector<std::string> ends = absl::StrSplit(f[1], ':');
      if (!absl::SimpleAtod(f[0], &w) || !(w >= 0.0)) {
        return bad(absl::StrFormat("weight '%s' is not a number >= 0", f[0]));
      }
      if (ends.size() != 2 || !absl::SimpleAtod(ends[0], &a) || !absl::SimpleAtod(ends[1], &b) ||
          !(a >= 0.0 && a < b && b <= 1.0)) {
        return bad(absl::StrFormat("range '%s' is not START:END with 0 <= START < END <= 1", f[1]));
      }
      g.weights.push_back(w);
      g.ranges.emplace_back(a, b);
      g.prefixes.push_back(f[2]);
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

}  // namespace anvil::model

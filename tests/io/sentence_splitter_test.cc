// The rule-based sentence splitter (io/sentence_splitter.h): boundaries, abbreviations,
// initials, decimals, ellipses, quotes after the period, list enumerators, and the layout of
// whitespace with and without keep_newlines (Megatron's punkt CustomLanguageVars).
#include "io/sentence_splitter.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace anvil::io {
namespace {

std::vector<std::string> split(const std::string& text, bool keep_newlines = false) {
  std::vector<std::string> out;
  for (const std::string_view s : SentenceSplitter(keep_newlines).split(text)) {
    out.emplace_back(s);
  }
  return out;
}
using Sentences = std::vector<std::string>;

TEST(SentenceSplitter, BasicBoundaries) {
  EXPECT_EQ(split(""), Sentences{});
  EXPECT_EQ(split("   "), Sentences{"   "});
  EXPECT_EQ(split("One sentence without an end"), Sentences{"One sentence without an end"});
  EXPECT_EQ(split("Hello world. This is a test. Last one."),
            (Sentences{"Hello world.", "This is a test.", "Last one."}));
  EXPECT_EQ(split("Really? Yes! Good."), (Sentences{"Really?", "Yes!", "Good."}));
  EXPECT_EQ(split("What?! No way."), (Sentences{"What?!", "No way."}));
  // Born in 1990. A number before the period is an ordinary word.
  EXPECT_EQ(split("He was born in 1990. Then he grew up."),
            (Sentences{"He was born in 1990.", "Then he grew up."}));
  // The next sentence may start with a digit or an opening quote.
  EXPECT_EQ(split("It ended. 2001 was next."), (Sentences{"It ended.", "2001 was next."}));
  EXPECT_EQ(split("He left. \"Why?\" I asked."), (Sentences{"He left.", "\"Why?\"", "I asked."}));
}

TEST(SentenceSplitter, AbbreviationsAndInitials) {
  EXPECT_EQ(split("Mr. Smith met Dr. Jones and Prof. Lee today."),
            Sentences{"Mr. Smith met Dr. Jones and Prof. Lee today."});
  EXPECT_EQ(split("Use tools, e.g. Hammers, i.e. Heavy ones. Done."),
            (Sentences{"Use tools, e.g. Hammers, i.e. Heavy ones.", "Done."}));
  EXPECT_EQ(split("The U.S. Army is large. It grew."),
            (Sentences{"The U.S. Army is large.", "It grew."}));
  // ...but an abbreviation before a capitalized frequent sentence starter ends the sentence.
  EXPECT_EQ(split("He moved to the U.S. The economy was good."),
            (Sentences{"He moved to the U.S.", "The economy was good."}));
  EXPECT_EQ(split("Apples, pears etc. They are fruit."),
            (Sentences{"Apples, pears etc.", "They are fruit."}));
  EXPECT_EQ(split("Acme Inc. Products are sold here."),
            Sentences{"Acme Inc. Products are sold here."});
  EXPECT_EQ(split("J. R. R. Tolkien wrote it. Then he slept."),
            (Sentences{"J. R. R. Tolkien wrote it.", "Then he slept."}));
  EXPECT_EQ(split("See No. 5 and Fig. 3 for details."),
            Sentences{"See No. 5 and Fig. 3 for details."});
  EXPECT_EQ(split("They said no. John agreed."), (Sentences{"They said no.", "John agreed."}));
  EXPECT_EQ(split("We met at 5 p.m. We talked."), (Sentences{"We met at 5 p.m.", "We talked."}));
  EXPECT_EQ(split("Ask Lt.-Col. Smith."), Sentences{"Ask Lt.-Col. Smith."});
  // Case does not matter for the abbreviation list.
  EXPECT_EQ(split("MR. SMITH IS HERE."), Sentences{"MR. SMITH IS HERE."});
}

TEST(SentenceSplitter, DecimalsEllipsesLowercaseAndLists) {
  EXPECT_EQ(split("Pi is 3.14 roughly. Next."), (Sentences{"Pi is 3.14 roughly.", "Next."}));
  EXPECT_EQ(split("Visit example.com today. Ok."), (Sentences{"Visit example.com today.", "Ok."}));
  EXPECT_EQ(split("Wait... what happened? Nothing."),
            (Sentences{"Wait... what happened?", "Nothing."}));
  EXPECT_EQ(split("I thought... Maybe not."), (Sentences{"I thought...", "Maybe not."}));
  EXPECT_EQ(split("Well\xe2\x80\xa6 Fine."), (Sentences{"Well\xe2\x80\xa6", "Fine."}));
  // A lowercase word after the period: not a boundary (punkt would split "approx. five").
  EXPECT_EQ(split("It costs approx. five dollars. Cheap."),
            (Sentences{"It costs approx. five dollars.", "Cheap."}));
  EXPECT_EQ(split("Oh! he said."), Sentences{"Oh! he said."});
  // List enumerators at the start of a sentence or line.
  EXPECT_EQ(split("1. First item\n2. Second item"), Sentences{"1. First item\n2. Second item"});
  EXPECT_EQ(split("Steps:\na. Open it. Then close it."),
            (Sentences{"Steps:\na. Open it.", "Then close it."}));
}

TEST(SentenceSplitter, QuotesAndBracketsStayWithTheirSentence) {
  EXPECT_EQ(split("He said \"Stop.\" Then he left."),
            (Sentences{"He said \"Stop.\"", "Then he left."}));
  EXPECT_EQ(split("(It was late.) We slept."), (Sentences{"(It was late.)", "We slept."}));
  EXPECT_EQ(split("She wrote \xe2\x80\x9c"
                  "Done.\xe2\x80\x9d Then rested."),
            (Sentences{"She wrote \xe2\x80\x9c"
                       "Done.\xe2\x80\x9d",
                       "Then rested."}));
  EXPECT_EQ(split("It's 'fine.' Sure."), (Sentences{"It's 'fine.'", "Sure."}));
}

TEST(SentenceSplitter, WhitespaceLayout) {
  // Between sentences the whitespace is dropped; at the ends of the text it stays.
  EXPECT_EQ(split("  Lead space. Two.\n\nThree.  "),
            (Sentences{"  Lead space.", "Two.", "Three.  "}));
  // Newlines alone never split; newlines inside a sentence stay.
  EXPECT_EQ(split("Title line\nbody text here.\nMore."),
            (Sentences{"Title line\nbody text here.", "More."}));
  // keep_newlines: the whitespace after a sentence is part of it, so the sentences tile the
  // text exactly.
  const std::string text = "  Lead space. Two.\n\nThree.  ";
  const Sentences kept = split(text, true);
  EXPECT_EQ(kept, (Sentences{"  Lead space. ", "Two.\n\n", "Three.  "}));
  std::string joined;
  for (const std::string& s : kept) joined += s;
  EXPECT_EQ(joined, text);
  // Non-breaking space separates sentences too.
  EXPECT_EQ(split("One.\xc2\xa0Two."), (Sentences{"One.", "Two."}));
}

TEST(SentenceSplitter, ViewsPointIntoTheTextAndBytesPassThrough) {
  const std::string text = "Bad \xff byte. Next \xfe one.";
  const std::vector<std::string_view> s = SentenceSplitter().split(text);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].data(), text.data());
  EXPECT_EQ(s[0], "Bad \xff byte.");
  EXPECT_EQ(s[1], "Next \xfe one.");
  // Terminators at the very end or followed only by whitespace do not create empty sentences.
  EXPECT_EQ(split("End.   "), Sentences{"End.   "});
  EXPECT_EQ(split("..."), Sentences{"..."});
  EXPECT_EQ(split(". . ."), (Sentences{".", ".", "."}));
}

}  // namespace
}  // namespace anvil::io

// Config loading: every value type and spelling, defaults and override precedence, every error
// path with its message (file:line, section, key, what was expected, suggestions), dump()
// round-trip and the markdown reference.
#include "engine/config.h"

#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace anvil::engine {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ConfigSchema test_schema() {
  ConfigSchema s;
  s.add("model", "hidden_size", ConfigType::kInt, "768", "Width of the residual stream.");
  s.add("model", "num_layers", ConfigType::kInt, "12", "Transformer blocks.");
  s.add("model", "dtype", ConfigType::kString, "bf16", "Activation dtype.", {"bf16", "f16", "f32"});
  s.add("train", "steps", ConfigType::kInt, "100", "Optimizer steps.");
  s.add("train", "seed", ConfigType::kInt, "-1", "Seed (-1: from time).");
  s.add("train", "run_name", ConfigType::kString, "", "Name of the run | used in paths.");
  s.add("optim", "lr", ConfigType::kFloat, "3e-4", "Peak learning rate.");
  s.add("optim", "use_fused", ConfigType::kBool, "true", "Fused AdamW.");
  s.add("model", "tie_embeddings", ConfigType::kBool, "no", "Tie input/output embeddings.");
  s.add("model", "layers", ConfigType::kInt, "12", "Alias of num_layers.");
  s.add_alias("model", "layers", "num_layers");
  return s;
}

absl::StatusOr<Config> load(const std::string& text, const std::vector<std::string>& ov = {}) {
  static const ConfigSchema* schema = new ConfigSchema(test_schema());
  return Config::load_string(text, "x.ini", *schema, ov);
}

std::string error_of(const std::string& text, const std::vector<std::string>& ov = {}) {
  absl::StatusOr<Config> c = load(text, ov);
  EXPECT_FALSE(c.ok()) << text;
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  return std::string(c.status().message());
}

TEST(ConfigTest, DefaultsWhenEmpty) {
  absl::StatusOr<Config> c = load("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->get_int("model", "hidden_size"), 768);
  EXPECT_EQ(c->get_int("train", "seed"), -1);
  EXPECT_EQ(c->get_string("model", "dtype"), "bf16");
  EXPECT_EQ(c->get_string("train", "run_name"), "");
  EXPECT_DOUBLE_EQ(c->get_float("optim", "lr"), 3e-4);
  EXPECT_TRUE(c->get_bool("optim", "use_fused"));
  EXPECT_FALSE(c->get_bool("model", "tie_embeddings"));
  EXPECT_EQ(c->origin("model", "hidden_size"), "default");
}

TEST(ConfigTest, ParsesValuesCommentsAndOrigins) {
  const std::string text =
      "; a comment\n"
      "# another comment\n"
      "[model]\n"
      "hidden_size = 1024   ; inline comment\n"
      "  num_layers = 24    # hash comment, indented key\n"
      "    dtype = f32\n"
      "\n"
      "[optim]\n"
      "lr=1.5e-3\n"
      "[train]\n"
      "run_name = run#3\n"  // '#' not after whitespace is part of the value
      "steps = +7\r\n";
  absl::StatusOr<Config> c = load(text);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->get_int("model", "hidden_size"), 1024);
  EXPECT_EQ(c->get_int("model", "num_layers"), 24);  // not glued to hidden_size as a continuation
  EXPECT_EQ(c->get_string("model", "dtype"), "f32");
  EXPECT_DOUBLE_EQ(c->get_float("optim", "lr"), 1.5e-3);
  EXPECT_EQ(c->get_string("train", "run_name"), "run#3");
  EXPECT_EQ(c->get_int("train", "steps"), 7);
  EXPECT_EQ(c->origin("model", "hidden_size"), "x.ini:4");
  EXPECT_EQ(c->origin("model", "num_layers"), "x.ini:5");
  EXPECT_EQ(c->origin("train", "steps"), "x.ini:12");
}

TEST(ConfigTest, AliasSetByAnOverrideSupersedesTheFile) {
  // The file names num_layers, the command line its alias: the override wins, stored under the
  // key; the effective configuration has one line for the setting.
  absl::StatusOr<Config> c = load("[model]\nnum_layers = 24\n", {"model.layers=6"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->get_int("model", "num_layers"), 6);
  EXPECT_EQ(c->origin("model", "num_layers"), "override 1");
  EXPECT_THAT(c->dump(), HasSubstr("\nnum_layers = 6\n"));
  EXPECT_THAT(c->dump(), Not(HasSubstr("\nlayers =")));
  // The dump loads again (it is what checkpoints keep).
  EXPECT_TRUE(load(c->dump()).ok());
  // The alias alone in the file; two overrides: the later one wins, whichever name it uses.
  c = load("[model]\nlayers = 3\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->get_int("model", "num_layers"), 3);
  c = load("", {"model.num_layers=8", "model.layers=6"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->get_int("model", "num_layers"), 6);
  c = load("", {"model.layers=6", "model.num_layers=8"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->get_int("model", "num_layers"), 8);
}

TEST(ConfigTest, AliasAndKeyInTheSamePlaceAreAmbiguous) {
  EXPECT_THAT(error_of("[model]\nnum_layers = 24\nlayers = 6\n"),
              HasSubstr("x.ini:3: [model] layers is an alias of num_layers, which is also set "
                        "(x.ini:2)"));
}

TEST(ConfigTest, BoolSpellings) {
  for (const char* t : {"true", "TRUE", "True", "1", "yes", "YES", "on", "On"}) {
    absl::StatusOr<Config> c = load(std::string("[optim]\nuse_fused = ") + t + "\n");
    ASSERT_TRUE(c.ok()) << t << ": " << c.status();
    EXPECT_TRUE(c->get_bool("optim", "use_fused")) << t;
  }
  for (const char* f : {"false", "FALSE", "0", "no", "No", "off", "OFF"}) {
    absl::StatusOr<Config> c = load(std::string("[optim]\nuse_fused = ") + f + "\n");
    ASSERT_TRUE(c.ok()) << f << ": " << c.status();
    EXPECT_FALSE(c->get_bool("optim", "use_fused")) << f;
  }
  EXPECT_THAT(error_of("[optim]\nuse_fused = maybe\n"),
              HasSubstr("x.ini:2: [optim] use_fused: expected a boolean"));
  EXPECT_THAT(error_of("[optim]\nuse_fused = 2\n"), HasSubstr("got '2'"));
}

TEST(ConfigTest, IntErrors) {
  EXPECT_THAT(error_of("[train]\nsteps = ten\n"),
              HasSubstr("x.ini:2: [train] steps: expected an integer, got 'ten'"));
  for (const char* bad : {"1e3", "1_000", "12.0", "0x10", "", "-", "1 2"}) {
    EXPECT_THAT(error_of(std::string("[train]\nsteps = ") + bad + "\n"),
                HasSubstr("expected an integer"))
        << bad;
  }
  EXPECT_THAT(error_of("[train]\nsteps = 99999999999999999999\n"), HasSubstr("out of range"));
  absl::StatusOr<Config> c = load("[train]\nsteps = -9223372036854775808\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->get_int("train", "steps"), INT64_MIN);
}

TEST(ConfigTest, FloatErrors) {
  EXPECT_THAT(error_of("[optim]\nlr = fast\n"),
              HasSubstr("x.ini:2: [optim] lr: expected a finite number, got 'fast'"));
  for (const char* bad : {"nan", "inf", "-inf", "1e999", "1.0x", "1,5", ""}) {
    EXPECT_THAT(error_of(std::string("[optim]\nlr = ") + bad + "\n"),
                HasSubstr("expected a finite number"))
        << bad;
  }
  absl::StatusOr<Config> c = load("[optim]\nlr = 2\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->get_float("optim", "lr"), 2.0);
}

TEST(ConfigTest, Choices) {
  const std::string msg = error_of("[model]\ndtype = bf61\n");
  EXPECT_THAT(msg, HasSubstr("x.ini:2: [model] dtype: expected one of bf16, f16, f32, got 'bf61'"));
  EXPECT_THAT(msg, HasSubstr("did you mean 'bf16'?"));
  EXPECT_THAT(error_of("[model]\ndtype = BF16\n"), HasSubstr("expected one of"));  // exact match
}

TEST(ConfigTest, UnknownSection) {
  const std::string msg = error_of("[modle]\nhidden_size = 8\n");
  EXPECT_THAT(msg, HasSubstr("x.ini:1: unknown section [modle] (known: model, train, optim"));
  EXPECT_THAT(msg, HasSubstr("did you mean [model]?"));
  // An unknown section is an error even with no keys under it.
  EXPECT_THAT(error_of("[model]\nhidden_size = 8\n\n[loging]\n"),
              HasSubstr("x.ini:4: unknown section [loging]"));
}

TEST(ConfigTest, UnknownKey) {
  EXPECT_THAT(error_of("[train]\nsteps = 1\nstpes = 10\n"),
              HasSubstr("x.ini:3: [train] unknown key 'stpes' (did you mean 'steps'?)"));
  EXPECT_THAT(error_of("[model]\nhidden-size = 10\n"),
              HasSubstr("[model] unknown key 'hidden-size' (did you mean 'hidden_size'?)"));
  // A key from another section is pointed to its section.
  EXPECT_THAT(error_of("[train]\nlr = 0.1\n"),
              HasSubstr("x.ini:2: [train] unknown key 'lr' (did you mean [optim] lr?)"));
  // Nothing close: list the section's keys instead of guessing.
  const std::string msg = error_of("[train]\nbananas = 1\n");
  EXPECT_THAT(msg, HasSubstr("[train] unknown key 'bananas'"));
  EXPECT_THAT(msg, HasSubstr("known: steps, seed, run_name"));
  EXPECT_THAT(msg, Not(HasSubstr("did you mean")));
}

TEST(ConfigTest, DuplicateKeyNamesBothLines) {
  EXPECT_THAT(error_of("[train]\nsteps = 1\nseed = 2\nsteps = 3\n"),
              HasSubstr("x.ini:4: [train] steps: duplicate key, already set at x.ini:2"));
  // Also when the section is opened twice.
  EXPECT_THAT(error_of("[train]\nsteps = 1\n[model]\n[train]\nsteps = 3\n"),
              HasSubstr("x.ini:5: [train] steps: duplicate key, already set at x.ini:2"));
}

TEST(ConfigTest, MalformedLines) {
  EXPECT_THAT(error_of("[train]\nsteps = 1\njust words\n"),
              HasSubstr("x.ini:3: malformed line 'just words'"));
  EXPECT_THAT(error_of("[train\nsteps = 1\n"), HasSubstr("x.ini:1: malformed line"));
  EXPECT_THAT(error_of("[train]\n= 5\n"), HasSubstr("x.ini:2: malformed line"));
  EXPECT_THAT(error_of("steps = 1\n"), HasSubstr("x.ini:1: key 'steps' is outside any [section]"));
  // The earliest problem is reported, whichever kind it is.
  EXPECT_THAT(error_of("[train]\nsteps = x\nwords\n"), HasSubstr("x.ini:2: [train] steps"));
  EXPECT_THAT(error_of("[train]\nwords\nsteps = x\n"), HasSubstr("x.ini:2: malformed line"));
}

TEST(ConfigTest, LongLinesAreNotTruncated) {
  // libinih's line buffer is 200 bytes in Debian's build; longer values must arrive whole.
  const std::string name(1000, 'n');
  absl::StatusOr<Config> c = load("[train]\nrun_name = " + name + "  ; comment\nsteps = 5\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->get_string("train", "run_name"), name);
  EXPECT_EQ(c->get_int("train", "steps"), 5);
  EXPECT_EQ(c->origin("train", "steps"), "x.ini:3");
  EXPECT_THAT(error_of("[train]\n" + name + "\n"), HasSubstr("x.ini:2: malformed line"));
}

TEST(ConfigTest, NulByteIsRefusedWithFileLineAndKey) {
  // inih reads C strings: "paths = a\0b" would silently become "paths = a".
  using namespace std::string_literals;
  EXPECT_THAT(error_of("[train]\nrun_name = a\0b\nsteps = 5\n"s),
              HasSubstr("x.ini:2: [train] run_name: the line contains a NUL byte"));
  EXPECT_THAT(error_of("[train]\nsteps = 5\0 0\n"s),
              HasSubstr("x.ini:2: [train] steps: the line contains a NUL byte"));
}

TEST(ConfigTest, HugeValuesAreCutInMessages) {
  const std::string huge(1 << 20, '7');
  const std::string e = error_of("[train]\nsteps = x" + huge + "\n");
  EXPECT_THAT(e, HasSubstr("got 'x" + huge.substr(0, 63) + "...'"));
  EXPECT_LT(e.size(), 200u);
}

TEST(ConfigTest, OverridesWinInOrder) {
  absl::StatusOr<Config> c =
      load("[train]\nsteps = 10\n", {"train.steps=20", "optim.lr = 0.5", "train.steps=30"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->get_int("train", "steps"), 30);
  EXPECT_EQ(c->origin("train", "steps"), "override 3");
  EXPECT_DOUBLE_EQ(c->get_float("optim", "lr"), 0.5);
  EXPECT_EQ(c->origin("optim", "lr"), "override 2");
  // An override may set a string to something with '=' in it.
  c = load("", {"train.run_name=a=b"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->get_string("train", "run_name"), "a=b");
}

TEST(ConfigTest, OverrideErrors) {
  for (const char* bad : {"steps=5", "train.steps", ".steps=5", "train.=5", "=5"}) {
    EXPECT_THAT(error_of("", {bad}),
                HasSubstr(std::string("override '") + bad + "': expected section.key=value"));
  }
  EXPECT_THAT(error_of("", {"train.steps=1", "train.stpes=1"}),
              HasSubstr("override 2: [train] unknown key 'stpes' (did you mean 'steps'?)"));
  EXPECT_THAT(error_of("", {"trian.steps=1"}), HasSubstr("override 1: unknown section [trian]"));
  EXPECT_THAT(error_of("", {"train.steps=ten"}),
              HasSubstr("override 1: [train] steps: expected an integer, got 'ten'"));
  EXPECT_THAT(error_of("", {"model.dtype=fp8"}), HasSubstr("override 1: [model] dtype"));
  // A value the ini syntax could not carry would break dump(): refused.
  EXPECT_THAT(error_of("", {"train.run_name=a ;b"}), HasSubstr("cannot be written in an ini"));
}

TEST(ConfigTest, LoadFile) {
  absl::StatusOr<Config> missing = Config::load_file("/nonexistent/dir/anvil.ini", test_schema());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/dir/anvil.ini"));

  const std::string path = ::testing::TempDir() + "config_test.ini";
  auto write = [&](const char* text) {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text, f);
    std::fclose(f);
  };
  const ConfigSchema schema = test_schema();
  write("[train]\nsteps = 12\nseed = x\n");
  absl::StatusOr<Config> bad = Config::load_file(path, schema, {"train.seed=4"});
  ASSERT_FALSE(bad.ok());  // an override does not excuse a bad value in the file
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(path + ":3: [train] seed"));
  write("[train]\nsteps = 12\n");
  absl::StatusOr<Config> good = Config::load_file(path, schema, {"train.seed=4"});
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->get_int("train", "steps"), 12);
  EXPECT_EQ(good->get_int("train", "seed"), 4);
  EXPECT_EQ(good->origin("train", "steps"), path + ":2");
  std::remove(path.c_str());
}

TEST(ConfigTest, ErrorHelper) {
  absl::StatusOr<Config> c = load("[model]\nhidden_size = 100\n", {"model.num_layers=3"});
  ASSERT_TRUE(c.ok()) << c.status();
  absl::Status s = c->error("model", "hidden_size", "must be divisible by heads (12)");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "x.ini:2: [model] hidden_size: must be divisible by heads (12)");
  EXPECT_EQ(c->error("model", "num_layers", "odd").message(),
            "override 1: [model] num_layers: odd");
  EXPECT_EQ(c->error("optim", "lr", "too big").message(), "default: [optim] lr: too big");
}

TEST(ConfigTest, DumpRoundTrips) {
  absl::StatusOr<Config> c =
      load("[optim]\nlr = 0.1\nuse_fused = OFF\n[model]\ndtype = f16\nhidden_size = 64\n",
           {"train.run_name=my run/1", "train.seed=-5"});
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string text = c->dump();
  // Grouped by section in schema order, keys in schema order, canonical spellings.
  EXPECT_LT(text.find("[model]"), text.find("[train]"));
  EXPECT_LT(text.find("[train]"), text.find("[optim]"));
  EXPECT_LT(text.find("hidden_size"), text.find("tie_embeddings"));
  EXPECT_THAT(text, HasSubstr("use_fused = false\n"));
  EXPECT_THAT(text, HasSubstr("lr = 0.1\n"));
  absl::StatusOr<Config> again = load(text);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << text;
  EXPECT_EQ(again->dump(), text);
  const ConfigSchema schema = test_schema();
  for (const ConfigSchema::Key& k : schema.keys()) {
    switch (k.type) {
      case ConfigType::kInt:
        EXPECT_EQ(again->get_int(k.section, k.key), c->get_int(k.section, k.key)) << k.key;
        break;
      case ConfigType::kFloat:
        EXPECT_EQ(again->get_float(k.section, k.key), c->get_float(k.section, k.key)) << k.key;
        break;
      case ConfigType::kBool:
        EXPECT_EQ(again->get_bool(k.section, k.key), c->get_bool(k.section, k.key)) << k.key;
        break;
      case ConfigType::kString:
        EXPECT_EQ(again->get_string(k.section, k.key), c->get_string(k.section, k.key)) << k.key;
        break;
    }
  }
}

TEST(ConfigTest, FloatsRoundTripExactly) {
  for (const char* v : {"0.1", "3e-4", "1e-300", "123456789.123456789", "-2.5", "6.02214076e23"}) {
    absl::StatusOr<Config> c = load(std::string("[optim]\nlr = ") + v + "\n");
    ASSERT_TRUE(c.ok()) << v;
    absl::StatusOr<Config> again = load(c->dump());
    ASSERT_TRUE(again.ok()) << v;
    EXPECT_EQ(again->get_float("optim", "lr"), std::strtod(v, nullptr)) << v;
  }
}

TEST(ConfigTest, Markdown) {
  const ConfigSchema schema = test_schema();
  const std::string md = schema.markdown();
  EXPECT_THAT(md, HasSubstr("| key | type | default | description |"));
  for (const ConfigSchema::Key& k : schema.keys()) {
    EXPECT_THAT(md, HasSubstr("| `" + k.key + "` |")) << k.key;
  }
  EXPECT_THAT(md, HasSubstr("## [model]"));
  EXPECT_THAT(md, HasSubstr("| `hidden_size` | int | `768` | Width of the residual stream. |"));
  EXPECT_THAT(md, HasSubstr("One of: `bf16`, `f16`, `f32`."));
  EXPECT_THAT(md, HasSubstr("Name of the run \\| used in paths."));  // '|' escaped in a cell
  EXPECT_LT(md.find("## [model]"), md.find("## [train]"));
}

TEST(ConfigDeathTest, GettersCheckSchemaAndType) {
  absl::StatusOr<Config> c = load("");
  ASSERT_TRUE(c.ok());
  EXPECT_DEATH(c->get_int("train", "stpes"), "not declared in the schema");
  EXPECT_DEATH(c->get_float("train", "steps"), "is int, read as float");
  EXPECT_DEATH(c->get_string("optim", "use_fused"), "is bool, read as string");
}

TEST(ConfigDeathTest, SchemaRejectsBadDeclarations) {
  ConfigSchema s;
  s.add("a", "k", ConfigType::kInt, "1", "doc");
  EXPECT_DEATH(s.add("a", "k", ConfigType::kInt, "1", "doc"), "declared twice");
  EXPECT_DEATH(s.add("a", "j", ConfigType::kInt, "one", "doc"), "expected an integer");
  EXPECT_DEATH(s.add("a", "c", ConfigType::kString, "z", "doc", {"x", "y"}), "expected one of");
  EXPECT_DEATH(s.add("a.b", "k", ConfigType::kInt, "1", "doc"), "bad config section name");
}

}  // namespace
}  // namespace anvil::engine

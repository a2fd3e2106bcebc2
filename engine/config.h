// Typed ini configuration (libinih): a schema declares every section.key with its type, default,
// allowed values and documentation; loading validates the file against it and applies
// `section.key=value` overrides. Every error names the file, line and key and what was expected
// ("configs/x.ini:12: [train] steps: expected an integer, got 'ten'"). An unknown section or key
// is an error (typos must not be ignored).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::engine {

enum class ConfigType { kInt, kFloat, kBool, kString };

class ConfigSchema {
 public:
  struct Key {
    std::string section, key;
    ConfigType type;
    std::string default_value;         // textual, parsed with the same rules as the file
    std::string doc;                   // one line for docs/config.md and --help
    std::vector<std::string> choices;  // allowed values for kString (empty = any)
  };
  void add(std::string section, std::string key, ConfigType type, std::string default_value,
           std::string doc, std::vector<std::string> choices = {});
  const Key* find(std::string_view section, std::string_view key) const;
  const std::vector<Key>& keys() const { return keys_; }
  // Declares [section] alias as another name of [section] key (both declared with add()). A
  // value given under the alias is stored under the key (the alias reads as its default and
  // dump() leaves it out). Both set in the file is ambiguous: an error; otherwise the later
  // setting wins (an override over the file, a later override over an earlier one).
  void add_alias(std::string section, std::string alias, std::string key);
  struct Alias {
    std::string section, alias, key;
  };
  const std::vector<Alias>& aliases() const { return aliases_; }
  // Markdown: one table per section (key, type, default, description).
  std::string markdown() const;

 private:
  std::vector<Key> keys_;
  std::vector<Alias> aliases_;
};

class Config {
 public:
  // Parses `path`, then `overrides` ("section.key=value", applied in order, origin
  // "override N"). NotFound for a missing file; InvalidArgument for anything malformed.
  static absl::StatusOr<Config> load_file(const std::string& path, const ConfigSchema& schema,
                                          const std::vector<std::string>& overrides = {});
  // Same from text; `name` stands in for the file name in messages.
  static absl::StatusOr<Config> load_string(const std::string& text, const std::string& name,
                                            const ConfigSchema& schema,
                                            const std::vector<std::string>& overrides = {});

  // Typed getters. Asking for a key the schema does not declare, or with the wrong type, is a
  // programming error (CHECK).
  int64_t get_int(std::string_view section, std::string_view key) const;
  double get_float(std::string_view section, std::string_view key) const;
  bool get_bool(std::string_view section, std::string_view key) const;
  std::string get_string(std::string_view section, std::string_view key) const;

  // "file:line", "override 2" or "default": for consumers' own validation messages.
  std::string origin(std::string_view section, std::string_view key) const;
  // InvalidArgument "<origin>: [section] key: <what>" for consumers' semantic checks.
  absl::Status error(std::string_view section, std::string_view key, std::string_view what) const;
  // The effective configuration as ini text (every key, defaults included).
  std::string dump() const;

 private:
  struct Value {
    std::string text;
    std::string origin;
  };
  const ConfigSchema* schema_ = nullptr;
  std::map<std::string, Value> values_;  // "section.key" -> value
};

}  // namespace anvil::engine

// Per-field value handling shared by the TOML reader and the CLI parser.
#pragma once

#include <string>

#include "config/schema.h"

namespace titan {

// Throws ConfigError at `at` when the field's current value breaks its choices or bounds.
void check_field_value(const FieldSpec& spec, const std::string& at);

// true/false, 1/0, yes/no in any case: the boolean spellings the command line accepts.
bool parse_bool_text(const std::string& text, bool& out);

// Sets a string or enum field to `text`. Throws ConfigError at `at` (listing the allowed values,
// with a did-you-mean) when the field has choices and `text` is not one of them.
void set_choice(const FieldSpec& spec, const std::string& text, const std::string& at);

// Parses `text` as the field's type and stores it. Throws ConfigError at `at` on a bad value.
void set_field_from_text(const FieldSpec& spec, const std::string& text, const std::string& at);

// The field's numeric bounds as text (">= 1 and <= 100000000"), or "" when it has none.
std::string bound_text(const FieldSpec& spec);

// A valid example value for hints: the first choice, or the current value.
std::string example_value(const FieldSpec& spec);

}  // namespace titan

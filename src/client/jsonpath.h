// kubectl's JSONPath templates, for fabctl's `-o jsonpath=...`, `-o custom-columns=...` and
// `--sort-by`: text with {expressions} in it, each expression a path into a JSON document.
//
// Paths: .field (a \. escapes a dot in it), ['field'], [N] and [-N], [A:B], [*] and .* (every
// element or value), ..field (the field at any depth), [?(@.path OP VALUE)] with OP one of ==,
// !=, <, <=, >, >= and VALUE a quoted string, a number, true or false ([?(@.path)]: where it is
// set), [A,B] (a union of indexes or quoted fields). A path starts at the element a {range} is
// on, or at the document with $.
// Templates: {PATH} prints what the path selects, several values joined by spaces (a string as
// it is, anything else as compact JSON; nothing where it selects nothing, as kubectl's default
// --allow-missing-template-keys); {range PATH}…{end} repeats its body for each value selected;
// {"text"} prints text, with \n, \t, \" and \\ read as in C. An index past an array's end is an
// error in a template, as kubectl's, and selects nothing in a path alone.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace fabrica::jsonpath {

// The values `path` selects in `doc`. As kubectl's --sort-by and custom-columns take a path,
// the braces and the leading dot may be left out: "{.metadata.name}", ".metadata.name" and
// "metadata.name" are one path.
Result<std::vector<nlohmann::json>> Select(const nlohmann::json& doc, const std::string& path);

// `tmpl` applied to `doc`: the error names what in the template is malformed.
Result<std::string> Render(const std::string& tmpl, const nlohmann::json& doc);

// How a selected value prints: a string as it is, anything else as compact JSON.
std::string Text(const nlohmann::json& value);

}  // namespace fabrica::jsonpath

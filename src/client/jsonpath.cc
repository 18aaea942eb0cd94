#include "client/jsonpath.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <memory>
#include <optional>

namespace fabrica::jsonpath {
namespace {

using json = nlohmann::json;

// One step of a path: what it takes from each value the steps before it selected.
struct Step {
  enum Kind { kField, kDescendant, kAll, kIndex, kSlice, kFilter, kUnion } kind = kField;
  std::string name;                 // kField, kDescendant ("*": every descendant)
  int64_t index = 0;                // kIndex
  std::optional<int64_t> from, to;  // kSlice
  int64_t step = 1;                 // kSlice
  std::vector<Step> parts;          // kUnion: [0,2] or ['a','b'], each a field or an index
  std::vector<Step> filter;         // kFilter: the path from @
  std::string op;                   // kFilter: "" (the path is set), ==, !=, <, <=, >, >=
  json value;                       // kFilter: what the op compares with
};

struct Path {
  bool from_root = false;  // $: from the document, not the element a range is on
  std::vector<Step> steps;
};

Status Malformed(const std::string& path, const std::string& why) {
  return InvalidArgument("jsonpath '" + path + "': " + why);
}

// A name after a dot: up to the next unescaped '.' or '['.
std::string ReadName(const std::string& p, size_t& at) {
  std::string name;
  while (at < p.size() && p[at] != '.' && p[at] != '[') {
    if (p[at] == '\\' && at + 1 < p.size()) ++at;
    name += p[at++];
  }
  return name;
}

// Where what opened at `open` (a '[' or a '{') closes with `close`, past quoted text and
// parentheses; npos where it does not.
size_t Closing(const std::string& p, size_t open, char close) {
  char quote = 0;
  int depth = 0;
  for (size_t i = open + 1; i < p.size(); ++i) {
    const char c = p[i];
    if (quote) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == close && depth == 0) {
      return i;
    }
  }
  return std::string::npos;
}

std::string Trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// A whole number, none where the text is not one or is past int64's range.
std::optional<int64_t> Integer(const std::string& s) {
  const std::string t = Trim(s);
  int64_t v = 0;
  const auto [end, error] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || error != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return v;
}

// `text` split at its commas outside quotes.
std::vector<std::string> SplitOutsideQuotes(const std::string& text) {
  std::vector<std::string> parts(1);
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote && c == '\\' && i + 1 < text.size()) {
      parts.back() += c;
      parts.back() += text[++i];
      continue;
    }
    if (quote ? c == quote : c == '\'' || c == '"') quote = quote ? 0 : c;
    if (c == ',' && !quote) {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

// A filter's VALUE: 'text', "text", a number, true, false or null.
std::optional<json> Literal(const std::string& s) {
  const std::string t = Trim(s);
  if (t.size() >= 2 && (t.front() == '\'' || t.front() == '"') && t.back() == t.front())
    return json(t.substr(1, t.size() - 2));
  json v = json::parse(t, nullptr, false);
  if (v.is_discarded() || v.is_object() || v.is_array()) return std::nullopt;
  return v;
}

Result<Path> Compile(const std::string& text);

Result<Step> Bracket(const std::string& path, const std::string& inside) {
  Step s;
  const std::string in = Trim(inside);
  if (const std::vector<std::string> parts = SplitOutsideQuotes(in);
      parts.size() > 1 && in.rfind("?(", 0) != 0) {
    s.kind = Step::kUnion;
    for (const std::string& part : parts) {
      ASSIGN_OR_RETURN(Step one, Bracket(path, part));
      if (one.kind != Step::kField && one.kind != Step::kIndex)
        return Malformed(path, "[" + in + "]: a union lists indexes or quoted fields");
      s.parts.push_back(std::move(one));
    }
  } else if (in == "*") {
    s.kind = Step::kAll;
  } else if (in.size() >= 2 && (in[0] == '\'' || in[0] == '"') && in.back() == in[0]) {
    s.name = in.substr(1, in.size() - 2);
  } else if (in.size() >= 3 && in[0] == '?' && in[1] == '(' && in.back() == ')') {
    s.kind = Step::kFilter;
    const std::string cond = Trim(in.substr(2, in.size() - 3));
    size_t at = std::string::npos, len = 0;
    for (const char* op : {"==", "!=", "<=", ">=", "<", ">"}) {
      const size_t found = cond.find(op);
      if (found != std::string::npos && (at == std::string::npos || found < at)) {
        at = found;
        len = std::string(op).size();
      }
    }
    const std::string lhs = Trim(cond.substr(0, at));
    if (lhs.empty() || lhs[0] != '@')
      return Malformed(path, "a filter compares a path from @: [?(@.field==\"value\")]");
    ASSIGN_OR_RETURN(Path sub, Compile(lhs.substr(1)));
    s.filter = std::move(sub.steps);
    if (at != std::string::npos) {
      s.op = cond.substr(at, len);
      std::optional<json> v = Literal(cond.substr(at + len));
      if (!v)
        return Malformed(path, "'" + Trim(cond.substr(at + len)) +
                                   "' is not a value to compare with (a quoted string, a "
                                   "number, true, false)");
      s.value = std::move(*v);
    }
  } else if (const size_t colon = in.find(':'); colon != std::string::npos) {
    s.kind = Step::kSlice;
    const size_t second = in.find(':', colon + 1);
    const std::string a = Trim(in.substr(0, colon)),
                      b = Trim(in.substr(colon + 1, second == std::string::npos
                                                        ? std::string::npos
                                                        : second - colon - 1)),
                      c = second == std::string::npos ? "" : Trim(in.substr(second + 1));
    const std::string slice = "[" + in + "]: expected [A:B] or [A:B:STEP], whole numbers";
    if (!a.empty() && !(s.from = Integer(a))) return Malformed(path, slice);
    if (!b.empty() && !(s.to = Integer(b))) return Malformed(path, slice);
    if (!c.empty()) {
      const std::optional<int64_t> step = Integer(c);
      if (!step || *step <= 0) return Malformed(path, slice + " (a STEP of 1 or more)");
      s.step = *step;
    }
  } else if (std::optional<int64_t> i = Integer(in)) {
    s.kind = Step::kIndex;
    s.index = *i;
  } else {
    return Malformed(path,
                     "[" + in + "]: expected [N], [A:B], [*], ['field'] or [?(@.field==VALUE)]");
  }
  return s;
}

Result<Path> Compile(const std::string& text) {
  std::string p = Trim(text);
  if (p.size() >= 2 && p.front() == '{' && p.back() == '}') p = Trim(p.substr(1, p.size() - 2));
  if (p.find_first_of("{}") != std::string::npos)
    return Malformed(text, "a path holds no '{' or '}' (one {PATH}, as {.metadata.name})");
  Path out;
  size_t at = 0;
  if (at < p.size() && (p[at] == '$' || p[at] == '@')) out.from_root = p[at++] == '$';
  // (kubectl's relaxed form: "metadata.name" is ".metadata.name".)
  if (at < p.size() && p[at] != '.' && p[at] != '[') p = p.substr(0, at) + '.' + p.substr(at);
  while (at < p.size()) {
    if (p.compare(at, 2, "..") == 0) {
      at += 2;
      Step s;
      s.kind = Step::kDescendant;
      s.name = ReadName(p, at);
      if (s.name.empty()) return Malformed(text, "'..' is followed by a field name or *");
      out.steps.push_back(std::move(s));
    } else if (p[at] == '.') {
      ++at;
      const std::string name = ReadName(p, at);
      if (name.empty()) continue;  // ("." alone: the value itself)
      Step s;
      if (name == "*") {
        s.kind = Step::kAll;
      } else {
        s.name = name;
      }
      out.steps.push_back(std::move(s));
    } else if (p[at] == '[') {
      const size_t close = Closing(p, at, ']');
      if (close == std::string::npos) return Malformed(text, "a '[' is not closed");
      ASSIGN_OR_RETURN(Step s, Bracket(text, p.substr(at + 1, close - at - 1)));
      out.steps.push_back(std::move(s));
      at = close + 1;
    } else {
      return Malformed(text, std::string("unexpected '") + p[at] +
                                 "' (a path is .field, [N] or "
                                 "['field'] steps)");
    }
  }
  return out;
}

void Descendants(const json& v, const std::string& name, std::vector<json>& out) {
  if (v.is_object()) {
    for (const auto& [key, child] : v.items()) {
      if (name == "*" || key == name) out.push_back(child);
    }
  } else if (v.is_array() && name == "*") {
    for (const json& child : v) out.push_back(child);
  }
  if (v.is_object() || v.is_array())
    for (const json& child : v) Descendants(child, name, out);
}

// `bounds`, where given, says the first index past the end of an array ("" if none): a
// template's error, as kubectl's, where a filter or a sort key just selects nothing.
std::vector<json> Apply(const std::vector<Step>& steps, std::vector<json> values,
                        std::string* bounds = nullptr);

bool Holds(const Step& s, const json& element) {
  const std::vector<json> found = Apply(s.filter, {element});
  if (found.empty()) return false;
  if (s.op.empty()) return true;
  const json& v = found.front();
  if (s.op == "==") return v == s.value;
  if (s.op == "!=") return v != s.value;
  // (An order between numbers, or between strings; none between a number and a string.)
  const bool numbers = v.is_number() && s.value.is_number();
  const bool strings = v.is_string() && s.value.is_string();
  if (!numbers && !strings) return false;
  if (s.op == "<") return v < s.value;
  if (s.op == "<=") return v <= s.value;
  if (s.op == ">") return v > s.value;
  return v >= s.value;
}

std::vector<json> Apply(const std::vector<Step>& steps, std::vector<json> values,
                        std::string* bounds) {
  for (const Step& s : steps) {
    std::vector<json> next;
    for (const json& v : values) {
      switch (s.kind) {
        case Step::kField:
          if (v.is_object() && v.contains(s.name)) next.push_back(v[s.name]);
          break;
        case Step::kDescendant:
          Descendants(v, s.name, next);
          break;
        case Step::kAll:
          if (v.is_object() || v.is_array())
            for (const json& child : v) next.push_back(child);
          break;
        case Step::kIndex:
          if (v.is_array()) {
            const int64_t n = static_cast<int64_t>(v.size());
            const int64_t i = s.index < 0 ? n + s.index : s.index;
            if (i >= 0 && i < n) {
              next.push_back(v[static_cast<size_t>(i)]);
            } else if (bounds && bounds->empty()) {
              *bounds = "array index out of bounds: index " + std::to_string(s.index) +
                        ", length " + std::to_string(n);
            }
          }
          break;
        case Step::kSlice:
          if (v.is_array()) {
            const int64_t n = static_cast<int64_t>(v.size());
            auto bound = [n](std::optional<int64_t> b, int64_t fallback) {
              const int64_t x = b ? (*b < 0 ? n + *b : *b) : fallback;
              return std::clamp<int64_t>(x, 0, n);
            };
            const int64_t end = bound(s.to, n);
            for (int64_t i = bound(s.from, 0); i < end; i = s.step >= end - i ? end : i + s.step)
              next.push_back(v[static_cast<size_t>(i)]);
          }
          break;
        case Step::kUnion:
          for (const Step& part : s.parts) {
            std::vector<json> one = Apply({part}, {v}, bounds);
            next.insert(next.end(), one.begin(), one.end());
          }
          break;
        case Step::kFilter:
          if (v.is_array()) {
            for (const json& element : v)
              if (Holds(s, element)) next.push_back(element);
          } else if (Holds(s, v)) {
            next.push_back(v);
          }
          break;
      }
    }
    values = std::move(next);
  }
  return values;
}

// A template, read into pieces: text as it is, and expressions, a range holding its body.
struct Piece {
  enum Kind { kText, kPath, kRange } kind = kText;
  std::string text;  // kText
  Path path;         // kPath, kRange
  std::vector<Piece> body;
};

// A {"…"} literal's text, with C's escapes read.
std::string Unquote(const std::string& quoted) {
  std::string out;
  for (size_t i = 1; i + 1 < quoted.size(); ++i) {
    if (quoted[i] == '\\' && i + 2 < quoted.size()) {
      const char c = quoted[++i];
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
    } else {
      out += quoted[i];
    }
  }
  return out;
}

constexpr const char* kNoEnd = "jsonpath template: a {range} has no {end}";

Status Parse(const std::string& tmpl, size_t& at, std::vector<Piece>& out, bool in_range) {
  while (at < tmpl.size()) {
    const size_t open = tmpl.find('{', at);
    if (open != at) {
      Piece text;
      text.text = tmpl.substr(at, open == std::string::npos ? std::string::npos : open - at);
      out.push_back(std::move(text));
      if (open == std::string::npos) break;
    }
    const size_t close = Closing(tmpl, open, '}');
    if (close == std::string::npos)
      return InvalidArgument("jsonpath template: the '{' at " + std::to_string(open + 1) +
                             " is not closed");
    const std::string expr = Trim(tmpl.substr(open + 1, close - open - 1));
    at = close + 1;
    if (expr == "end") {
      if (!in_range)
        return InvalidArgument("jsonpath template: an {end} at " + std::to_string(open + 1) +
                               " with no {range} open");
      return Status::Ok();
    }
    Piece piece;
    if (!expr.empty() && (expr[0] == '"' || expr[0] == '\'')) {
      if (expr.size() < 2 || expr.back() != expr[0])
        return InvalidArgument("jsonpath template: {" + expr + "} is an unclosed quote");
      piece.text = Unquote(expr);
    } else if (expr.rfind("range ", 0) == 0 || expr == "range") {
      piece.kind = Piece::kRange;
      ASSIGN_OR_RETURN(piece.path, Compile(expr.substr(5)));
      // (It returns at its {end}, or fails for want of one.)
      if (Status s = Parse(tmpl, at, piece.body, true); !s.ok())
        return s.message() != kNoEnd ? s
                                     : InvalidArgument("jsonpath template: the {range} at " +
                                                       std::to_string(open + 1) + " has no {end}");
    } else {
      piece.kind = Piece::kPath;
      ASSIGN_OR_RETURN(piece.path, Compile(expr));
    }
    out.push_back(std::move(piece));
  }
  if (in_range) return InvalidArgument(kNoEnd);
  return Status::Ok();
}

void Write(const std::vector<Piece>& pieces, const json& root, const json& here, std::string& out,
           std::string* bounds) {
  for (const Piece& p : pieces) {
    if (p.kind == Piece::kText) {
      out += p.text;
      continue;
    }
    const std::vector<json> found = Apply(p.path.steps, {p.path.from_root ? root : here}, bounds);
    if (p.kind == Piece::kRange) {
      for (const json& v : found) Write(p.body, root, v, out, bounds);
      continue;
    }
    for (size_t i = 0; i < found.size(); ++i) {
      if (i > 0) out += ' ';
      out += Text(found[i]);
    }
  }
}

}  // namespace

std::string Text(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

Result<std::vector<json>> Select(const json& doc, const std::string& path) {
  ASSIGN_OR_RETURN(Path compiled, Compile(path));
  return Apply(compiled.steps, {doc});
}

Result<std::string> Render(const std::string& tmpl, const json& doc) {
  std::vector<Piece> pieces;
  size_t at = 0;
  RETURN_IF_ERROR(Parse(tmpl, at, pieces, false));
  std::string out, bounds;
  Write(pieces, doc, doc, out, &bounds);
  if (!bounds.empty()) return InvalidArgument("jsonpath: " + bounds);
  return out;
}

}  // namespace fabrica::jsonpath

#include "api/conceal.h"

#include <cctype>

namespace fabrica {

std::string ConcealText(const std::string& text,
                        const std::function<bool(const std::string&)>& readable) {
  if (text.find('/') == std::string::npos) return text;
  const auto name_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  };
  const auto word_char = [&](char c) {
    return name_char(c) || (c >= 'A' && c <= 'Z') || c == '_' || c == '/';
  };
  std::string out;
  size_t done = 0;
  for (size_t slash = text.find('/'); slash != std::string::npos;
       slash = text.find('/', slash + 1)) {
    size_t from = slash;
    while (from > done && name_char(text[from - 1])) --from;
    size_t to = slash + 1;
    while (to < text.size() && name_char(text[to])) ++to;
    while (to > slash + 1 && text[to - 1] == '.') --to;  // (a sentence's full stop)
    const std::string tenant = text.substr(from, slash - from);
    if (tenant.empty() || to == slash + 1 || (from > 0 && word_char(text[from - 1])) ||
        tenant.find_first_not_of("0123456789.") == std::string::npos ||
        !std::isalnum(static_cast<unsigned char>(tenant[0])) || tenant == "workload" ||
        tenant == "node" || tenant == "queue" || readable(tenant))
      continue;
    out += text.substr(done, from - done) + kAnotherTenants;
    done = to;
    slash = to - 1;
  }
  return done == 0 ? text : out + text.substr(done);
}

void Conceal(nlohmann::json& j, const std::function<bool(const std::string&)>& readable) {
  if (j.is_string()) {
    j = ConcealText(j.get_ref<const std::string&>(), readable);
  } else if (j.is_structured()) {
    for (nlohmann::json& v : j) Conceal(v, readable);
  }
}

}  // namespace fabrica

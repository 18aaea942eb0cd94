#include "api/conceal.h"

#include <cctype>

namespace fabrica {

std::string ConcealText(const std::string& text,
                        const std::function<bool(const std::string&)>& readable) {
  if (text.find('/') == std::string::npos) return text;
  // (Tenant and workload names are DNS labels: no dots. A word with one before the slash is a
  // label or taint key, "fabrica.dev/gpu-model", not a tenant: a review saw node selectors
  // garbled.)
  const auto name_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  };
  const auto word_char = [&](char c) {
    return name_char(c) || (c >= 'A' && c <= 'Z') || c == '_' || c == '/' || c == '.';
  };
  std::string out;
  size_t done = 0;
  for (size_t slash = text.find('/'); slash != std::string::npos;
       slash = text.find('/', slash + 1)) {
    size_t from = slash;
    while (from > done && name_char(text[from - 1])) --from;
    size_t to = slash + 1;
    while (to < text.size() && name_char(text[to])) ++to;
    const std::string tenant = text.substr(from, slash - from);
    if (tenant.empty() || to == slash + 1 || (from > 0 && word_char(text[from - 1])) ||
        tenant.find_first_not_of("0123456789") == std::string::npos ||
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
    // (Most strings name no one: left as they are, not copied.)
    if (j.get_ref<const std::string&>().find('/') != std::string::npos)
      j = ConcealText(j.get_ref<const std::string&>(), readable);
  } else if (j.is_structured()) {
    for (nlohmann::json& v : j) Conceal(v, readable);
  }
}

}  // namespace fabrica

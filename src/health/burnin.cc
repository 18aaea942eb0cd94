#include "health/burnin.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

namespace fabrica::health {

namespace {

using nlohmann::json;

const json* Member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

Result<std::string> Text(const json& obj, const char* key, const std::string& path) {
  const json* v = Member(obj, key);
  if (v == nullptr) return InvalidArgument(path + "." + key + ": missing");
  if (!v->is_string()) return InvalidArgument(path + "." + key + ": expected a string");
  return v->get<std::string>();
}

Result<int> GpuOf(const json& result, const std::string& path) {
  for (const char* key : {"gpu_id", "entity_id"}) {
    const json* v = Member(result, key);
    if (v == nullptr) continue;
    if (v->is_number_integer() && v->get<int64_t>() >= 0 && v->get<int64_t>() < kMaxGpusPerNode) {
      return v->get<int>();
    }
    if (v->is_string()) {
      const std::string s = v->get<std::string>();
      char* end = nullptr;
      const long n = std::strtol(s.c_str(), &end, 10);
      if (!s.empty() && *end == '\0' && n >= 0 && n < kMaxGpusPerNode) return static_cast<int>(n);
    }
    return InvalidArgument(path + "." + key + ": expected a GPU index");
  }
  return InvalidArgument(path + ": no gpu_id or entity_id");
}

bool KnownStatus(const std::string& s) {
  for (const char* k : {"Pass", "Fail", "Warn", "Skip", "Not Run"}) {
    if (s == k) return true;
  }
  return false;
}

std::string Warnings(const json* warnings) {
  if (warnings == nullptr || !warnings->is_array()) return "";
  std::string out;
  for (const json& w : *warnings) {
    std::string text;
    if (w.is_string()) {
      text = w.get<std::string>();
    } else if (w.is_object() && w.contains("warning") && w["warning"].is_string()) {
      text = w["warning"].get<std::string>();
    }
    if (text.empty()) continue;
    if (!out.empty()) out += "; ";
    out += text;
  }
  return out;
}

}  // namespace

Result<DcgmDiagReport> ParseDcgmDiagJson(const std::string& text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("dcgmi diag report: not valid JSON");
  if (!doc.is_object()) return InvalidArgument("dcgmi diag report: expected an object");
  const json* diag = Member(doc, "DCGM GPU Diagnostic");
  std::string root = "DCGM GPU Diagnostic";
  if (diag == nullptr) {
    diag = Member(doc, "DCGM Diagnostic");
    root = "DCGM Diagnostic";
  }
  if (diag == nullptr || !diag->is_object()) {
    return InvalidArgument(
        "dcgmi diag report: no \"DCGM GPU Diagnostic\" or \"DCGM Diagnostic\" object");
  }
  const json* categories = Member(*diag, "test_categories");
  if (categories == nullptr || !categories->is_array() || categories->empty()) {
    return InvalidArgument(root + ".test_categories: expected a non-empty list");
  }
  DcgmDiagReport report;
  for (size_t c = 0; c < categories->size(); ++c) {
    const json& cat = (*categories)[c];
    const std::string cpath = root + ".test_categories[" + std::to_string(c) + "]";
    if (!cat.is_object()) return InvalidArgument(cpath + ": expected an object");
    ASSIGN_OR_RETURN(std::string category, Text(cat, "category", cpath));
    const json* tests = Member(cat, "tests");
    if (tests == nullptr || !tests->is_array()) {
      return InvalidArgument(cpath + ".tests: expected a list");
    }
    for (size_t t = 0; t < tests->size(); ++t) {
      const json& test = (*tests)[t];
      const std::string tpath = cpath + ".tests[" + std::to_string(t) + "]";
      if (!test.is_object()) return InvalidArgument(tpath + ": expected an object");
      ASSIGN_OR_RETURN(std::string name, Text(test, "name", tpath));
      const json* results = Member(test, "results");
      if (results == nullptr || !results->is_array()) {
        return InvalidArgument(tpath + ".results: expected a list");
      }
      for (size_t r = 0; r < results->size(); ++r) {
        const json& res = (*results)[r];
        const std::string rpath = tpath + ".results[" + std::to_string(r) + "]";
        if (!res.is_object()) return InvalidArgument(rpath + ": expected an object");
        DcgmTestResult out;
        out.category = category;
        out.test = name;
        ASSIGN_OR_RETURN(out.gpu, GpuOf(res, rpath));
        ASSIGN_OR_RETURN(out.status, Text(res, "status", rpath));
        if (!KnownStatus(out.status)) {
          return InvalidArgument(rpath + ".status: '" + out.status +
                                 "' is not Pass, Fail, Warn, Skip or Not Run");
        }
        out.warning = Warnings(Member(res, "warnings"));
        report.results.push_back(std::move(out));
      }
    }
  }
  if (report.results.empty()) return InvalidArgument(root + ": no test results");
  return report;
}

double NcclReport::peak_busbw_gbps() const {
  if (rows.empty()) return 0;
  const NcclSizeRow* largest = &rows.front();
  for (const NcclSizeRow& r : rows) {
    if (r.bytes >= largest->bytes) largest = &r;
  }
  return std::max(largest->out_busbw_gbps, largest->in_busbw_gbps);
}

namespace {

bool ParseDouble(const std::string& s, double* out) {
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return !s.empty() && *end == '\0' && std::isfinite(*out) && *out >= 0;
}

bool ParseInt(const std::string& s, int64_t* out) {
  char* end = nullptr;
  *out = std::strtoll(s.c_str(), &end, 10);
  return !s.empty() && *end == '\0' && *out >= 0;
}

// "#wrong" is a count, or "N/A" when the run was not checked (-c 0).
bool ParseWrong(const std::string& s, int64_t* out) {
  if (s == "N/A") {
    *out = -1;
    return true;
  }
  return ParseInt(s, out);
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The value after "# <label> :" on a footer line, or nullopt when the line is not that footer.
std::optional<std::string> Footer(const std::string& line, const char* label) {
  std::string body = Trim(line.substr(1));
  if (body.rfind(label, 0) != 0) return std::nullopt;
  const size_t colon = body.find(':');
  if (colon == std::string::npos) return std::string();
  return Trim(body.substr(colon + 1));
}

}  // namespace

Result<NcclReport> ParseNcclAllReduce(const std::string& text) {
  NcclReport report;
  bool have_avg = false;
  std::istringstream in(text);
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    const std::string where = "all_reduce_perf output line " + std::to_string(lineno);
    const std::string t = Trim(line);
    if (t.empty()) continue;
    if (t[0] == '#') {
      if (auto v = Footer(t, "Avg bus bandwidth")) {
        if (!ParseDouble(*v, &report.avg_busbw_gbps)) {
          return InvalidArgument(where + ": bad average bus bandwidth '" + *v + "'");
        }
        have_avg = true;
      } else if (auto v = Footer(t, "Out of bounds values")) {
        std::istringstream f(*v);
        std::string count, verdict;
        f >> count >> verdict;
        if (!ParseInt(count, &report.out_of_bounds) || (verdict != "OK" && verdict != "FAILED")) {
          return InvalidArgument(where + ": expected 'Out of bounds values : <n> OK|FAILED'");
        }
        report.out_of_bounds_ok = verdict == "OK";
      }
      continue;
    }
    // Lines that are neither comments nor table rows are the tool's own chatter (NCCL INFO
    // lines, warnings); a table row starts with a digit.
    if (!std::isdigit(static_cast<unsigned char>(t[0]))) continue;
    std::vector<std::string> tok;
    std::istringstream f(t);
    for (std::string s; f >> s;) tok.push_back(s);
    // nccl-tests 2.x prints a root column ("-1" for all-reduce); older versions do not.
    if (tok.size() != 13 && tok.size() != 12) {
      return InvalidArgument(where + ": expected 12 or 13 columns, found " +
                             std::to_string(tok.size()));
    }
    const size_t k = tok.size() == 13 ? 5 : 4;  // first timing column
    NcclSizeRow r;
    r.type = tok[2];
    r.redop = tok[3];
    auto bad = [&](const char* column, const std::string& value) {
      return InvalidArgument(where + ": column " + column + ": '" + value + "' is not a number");
    };
    if (!ParseInt(tok[0], &r.bytes)) return bad("size", tok[0]);
    if (!ParseInt(tok[1], &r.count)) return bad("count", tok[1]);
    if (!ParseDouble(tok[k], &r.out_time_us)) return bad("time", tok[k]);
    if (!ParseDouble(tok[k + 1], &r.out_algbw_gbps)) return bad("algbw", tok[k + 1]);
    if (!ParseDouble(tok[k + 2], &r.out_busbw_gbps)) return bad("busbw", tok[k + 2]);
    if (!ParseWrong(tok[k + 3], &r.out_wrong)) return bad("#wrong", tok[k + 3]);
    if (!ParseDouble(tok[k + 4], &r.in_time_us)) return bad("in-place time", tok[k + 4]);
    if (!ParseDouble(tok[k + 5], &r.in_algbw_gbps)) return bad("in-place algbw", tok[k + 5]);
    if (!ParseDouble(tok[k + 6], &r.in_busbw_gbps)) return bad("in-place busbw", tok[k + 6]);
    if (!ParseWrong(tok[k + 7], &r.in_wrong)) return bad("in-place #wrong", tok[k + 7]);
    report.rows.push_back(std::move(r));
  }
  if (report.rows.empty()) return InvalidArgument("all_reduce_perf output: no result rows");
  if (!have_avg) return InvalidArgument("all_reduce_perf output: no 'Avg bus bandwidth' line");
  return report;
}

std::optional<BusBwBand> ExpectedAllReduceBusBw(const std::string& model, int gpus) {
  // NVLink4 through NVSwitch: ~370 GB/s with ring, up to ~480 GB/s with NVLink SHARP at 8 GB
  // (reference §5.4). H200 has the same fabric.
  if ((model == "H100" || model == "H200") && gpus == 8) return BusBwBand{370, 480};
  return std::nullopt;
}

BurnInResult JudgeBurnIn(const Node& node, const DcgmDiagReport* dcgm, const NcclReport* nccl) {
  CHECK(dcgm != nullptr || nccl != nullptr);
  BurnInResult r;
  if (dcgm != nullptr) {
    for (const DcgmTestResult& t : dcgm->results) {
      if (t.status != "Fail") continue;
      r.failures.push_back("dcgmi diag " + t.category + "/" + t.test + " failed on GPU " +
                           std::to_string(t.gpu) + (t.warning.empty() ? "" : ": " + t.warning));
      if (std::find(r.failed_gpus.begin(), r.failed_gpus.end(), t.gpu) == r.failed_gpus.end()) {
        r.failed_gpus.push_back(t.gpu);
      }
    }
    std::sort(r.failed_gpus.begin(), r.failed_gpus.end());
  }
  if (nccl != nullptr) {
    int64_t wrong = 0;
    for (const NcclSizeRow& row : nccl->rows) {
      wrong += std::max<int64_t>(row.out_wrong, 0) + std::max<int64_t>(row.in_wrong, 0);
    }
    if (wrong > 0) {
      r.failures.push_back("all_reduce_perf: " + std::to_string(wrong) + " wrong values");
    }
    if (!nccl->out_of_bounds_ok) {
      r.failures.push_back("all_reduce_perf: " + std::to_string(nccl->out_of_bounds) +
                           " out-of-bounds values");
    }
    if (auto band = ExpectedAllReduceBusBw(node.gpu_model(), node.gpu_count())) {
      const double peak = nccl->peak_busbw_gbps();
      if (peak < band->min_gbps) {
        std::ostringstream m;
        m << "all_reduce_perf: bus bandwidth " << peak << " GB/s at the largest size, expected "
          << band->min_gbps << "-" << band->max_gbps << " GB/s for " << node.gpu_count() << "x"
          << node.gpu_model();
        r.failures.push_back(m.str());
      }
    }
  }
  r.passed = r.failures.empty();
  if (r.passed) {
    r.summary = "burn-in passed";
    if (nccl != nullptr) {
      std::ostringstream m;
      m << " (all-reduce " << nccl->peak_busbw_gbps() << " GB/s)";
      r.summary += m.str();
    }
  } else {
    r.summary = "burn-in failed: " + r.failures.front();
    if (r.failures.size() > 1)
      r.summary += " (+" + std::to_string(r.failures.size() - 1) + " more)";
  }
  return r;
}

BurnInResult SimulatedBurnIn(const Node& node, const std::vector<int>& bad_gpus) {
  DcgmDiagReport dcgm;
  for (int d = 0; d < node.gpu_count(); ++d) {
    const bool bad = std::find(bad_gpus.begin(), bad_gpus.end(), d) != bad_gpus.end();
    dcgm.results.push_back(
        {"Hardware", "Memory", d, bad ? "Fail" : "Pass", bad ? "simulated memory error" : ""});
  }
  if (dcgm.results.empty()) dcgm.results.push_back({"Deployment", "Software", 0, "Pass", ""});
  std::optional<BusBwBand> band = ExpectedAllReduceBusBw(node.gpu_model(), node.gpu_count());
  if (!band) return JudgeBurnIn(node, &dcgm, nullptr);
  NcclReport nccl;
  NcclSizeRow row;
  row.bytes = int64_t{8} << 30;
  row.count = row.bytes / 4;
  row.type = "float";
  row.redop = "sum";
  row.out_busbw_gbps = row.in_busbw_gbps = (band->min_gbps + band->max_gbps) / 2;
  nccl.rows.push_back(row);
  nccl.avg_busbw_gbps = row.out_busbw_gbps;
  return JudgeBurnIn(node, &dcgm, &nccl);
}

}  // namespace fabrica::health

#include "control/agent_service.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>

#include "api/json_fields.h"
#include "api/replies.h"

namespace fabrica {
namespace {

using json = nlohmann::json;
using jsonf::Field;
using jsonf::List;
using jsonf::Str;

constexpr char kApi[] = "/apis/fabrica.dev/v1";
constexpr char kTruncated[] = "\n[fabrica: log limit reached; later output dropped]\n";

HttpResponse JsonReply(int status, const json& body) { return replies::Json(status, body); }
HttpResponse ErrorReply(int status, const std::string& message) {
  return replies::Error(status, message);
}
HttpResponse ErrorReply(const Status& st) { return replies::Error(st); }

// Splits "a/b/c" into its non-empty parts.
std::vector<std::string> Parts(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    if (slash > start) out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

Result<int64_t> QueryInt(const HttpRequest& req, const char* key, int64_t fallback) {
  auto it = req.query.find(key);
  if (it == req.query.end()) return fallback;
  try {
    size_t used = 0;
    long long v = std::stoll(it->second, &used);
    if (used != it->second.size() || v < 0) throw std::invalid_argument("");
    return static_cast<int64_t>(v);
  } catch (...) {
    return InvalidArgument(std::string(key) + ": expected a non-negative integer, got '" +
                           it->second + "'");
  }
}

int64_t FileSize(const std::string& path) {
  struct stat sb;
  return stat(path.c_str(), &sb) == 0 ? static_cast<int64_t>(sb.st_size) : 0;
}

void MakeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') mkdir(path.substr(0, i).c_str(), 0700);
  }
}

// The last `lines` lines of `text` (all of it when it has fewer).
std::string Tail(const std::string& text, int64_t lines) {
  if (lines <= 0) return "";
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  while (pos > 0) {
    size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    if (--lines == 0) return text.substr(nl + 1);
    pos = nl;
  }
  return text;
}

}  // namespace

AgentService::AgentService(Store& store, Authorizer& auth,
                           std::function<Result<std::string>(const std::string&)> issue_token,
                           AgentServiceOptions options)
    : store_(store),
      auth_(auth),
      issue_token_(std::move(issue_token)),
      options_(std::move(options)) {}

ApiServer::Extension AgentService::Routes() {
  return [this](const HttpRequest& req, const Result<Principal>& principal,
                const std::vector<std::string>& tenants,
                bool all) { return Serve(req, principal, tenants, all); };
}

std::optional<HttpResponse> AgentService::Serve(const HttpRequest& req,
                                                const Result<Principal>& principal,
                                                const std::vector<std::string>& tenants, bool all) {
  if (req.path.rfind(kApi, 0) != 0) return std::nullopt;
  const std::vector<std::string> parts = Parts(req.path.substr(sizeof(kApi) - 1));
  const bool token_path = parts.size() == 3 && parts[0] == "nodes" && parts[2] == "token";
  const bool log_path =
      parts.size() == 5 && parts[0] == "namespaces" && parts[2] == "workloads" && parts[4] == "log";
  if (!token_path && !log_path) return std::nullopt;
  if (!principal.ok()) return ErrorReply(principal.status());
  const Principal& p = *principal;

  if (token_path) {
    const std::string& node = parts[1];
    if (req.method != "POST") return ErrorReply(405, "token: use POST");
    // Only a platform admin may mint node identities; a node may not mint another's.
    Status allowed = p.node.empty() ? auth_.Check(p, Verb::kCreate, "nodes", "", node)
                                    : Status(StatusCode::kPermissionDenied,
                                             "node identities may not issue node tokens");
    if (!allowed.ok()) return ErrorReply(allowed);
    auto token = issue_token_(node);
    if (!token.ok()) return ErrorReply(token.status());
    return JsonReply(201, {{"kind", "NodeToken"}, {"node", node}, {"token", *token}});
  }

  const std::string& ns = parts[1];
  const std::string& name = parts[3];
  auto workload = store_.Get("/registry/workloads/" + ns + "/" + name);
  if (!workload.ok()) {
    if (workload.status().code() == StatusCode::kNotFound) {
      return ErrorReply(404, "workload " + ns + "/" + name + " not found");
    }
    return ErrorReply(workload.status());
  }
  const json w = json::parse(workload->value, nullptr, false);
  std::string pod = req.query.count("pod") ? req.query.at("pod") : "";
  const json& assignments = List(Field(w, "status"), "assignments");
  if (pod.empty()) {
    // (Its first pod bound to a node: one listed with none completed before a requeue.)
    pod = assignments.empty() ? "0" : Str(assignments[0], "pod", "0");
    for (const json& a : assignments)
      if (!Str(a, "node").empty()) {
        pod = Str(a, "pod", "0");
        break;
      }
  }
  if (pod.find('/') != std::string::npos || pod.find("..") != std::string::npos) {
    return ErrorReply(400, "pod: '" + pod + "' is not a pod name");
  }
  const std::string dir = options_.log_dir + "/" + ns + "/" + name;
  const std::string file = dir + "/" + pod + ".log";
  auto offset = QueryInt(req, "offset", -1);
  if (!offset.ok()) return ErrorReply(offset.status());

  if (req.method == "POST") {
    // The node that runs the pod (or a platform admin) writes its log.
    if (!p.node.empty()) {
      bool runs_it = false;
      for (const json& a : assignments) {
        if (Str(a, "node") == p.node && Str(a, "pod", "0") == pod) runs_it = true;
      }
      if (!runs_it) {
        return ErrorReply(403,
                          "node " + p.node + " does not run pod " + pod + " of " + ns + "/" + name);
      }
    } else {
      Status allowed = auth_.Check(p, Verb::kUpdate, "workloads", ns, name, true);
      if (!allowed.ok()) return ErrorReply(allowed);
    }
    std::lock_guard<std::mutex> lock(mu_);
    MakeDirs(dir);
    int64_t size = FileSize(file);
    int64_t from = *offset < 0 ? size : *offset;
    if (from > size) {
      json body = replies::StatusBody(
          409, "log of pod " + pod + " has " + std::to_string(size) + " bytes; send from there");
      body["size"] = size;
      return JsonReply(409, body);
    }
    std::string chunk = req.body.substr(std::min<size_t>(req.body.size(), size - from));
    if (size >= options_.max_log_bytes) chunk.clear();  // already at the limit
    if (!chunk.empty()) {
      if (size + static_cast<int64_t>(chunk.size()) > options_.max_log_bytes) {
        chunk = chunk.substr(0, options_.max_log_bytes - size) + kTruncated;
      }
      std::ofstream out(file, std::ios::app | std::ios::binary);
      out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      if (!out) return ErrorReply(500, "cannot write the log of " + ns + "/" + name);
    }
    // The agent continues from what it sent, whatever was dropped at the limit.
    return JsonReply(200, {{"size", from + static_cast<int64_t>(req.body.size())}});
  }
  if (req.method != "GET") return ErrorReply(405, "log: use GET, or POST from the node");
  if (!all && std::find(tenants.begin(), tenants.end(), ns) == tenants.end()) {
    return ErrorReply(403, "user " + p.user + " may not read workloads of tenant " + ns);
  }
  auto tail = QueryInt(req, "tailLines", -1);
  if (!tail.ok()) return ErrorReply(tail.status());
  if (req.query.count("pod") && !req.query.at("pod").empty()) {
    // A pod the workload does not have — by its pod sets NAME-0 ... NAME-(count-1), or one it
    // was placed with — is not found, as kubectl says of a container it lacks (a trial's typo
    // printed nothing and succeeded).
    bool has = false;
    std::string list;
    for (const json& ps : List(Field(w, "spec"), "podSets")) {
      const std::string set = Str(ps, "name", "main");
      const json& count = Field(ps, "count");
      int64_t n = 1;
      if (count.is_number_integer()) n = count.get<int64_t>();
      if (count.is_string())
        std::from_chars(
            count.get_ref<const std::string&>().data(),
            count.get_ref<const std::string&>().data() + count.get_ref<const std::string&>().size(),
            n);
      list += (list.empty() ? "" : ", ") + set + "-0" +
              (n > 1 ? ".." + set + "-" + std::to_string(n - 1) : "");
      if (pod.rfind(set + "-", 0) != 0) continue;
      int64_t index = -1;
      const char* first = pod.data() + set.size() + 1;
      const char* last = pod.data() + pod.size();
      if (auto [end, ec] = std::from_chars(first, last, index);
          ec == std::errc() && end == last && first != last && index >= 0 && index < n)
        has = true;
    }
    for (const json& a : assignments) has |= Str(a, "pod", "0") == pod;
    std::lock_guard<std::mutex> lock(mu_);
    if (!has && FileSize(file) <= 0)
      return ErrorReply(404, "workload " + ns + "/" + name + " has no pod " + pod +
                                 (list.empty() ? "" : " (its pods: " + list + ")"));
  }
  std::string text;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::ifstream in(file, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const int64_t size = static_cast<int64_t>(text.size());
  if (*offset > 0) text = text.substr(std::min<int64_t>(*offset, size));
  if (*tail >= 0) text = Tail(text, *tail);
  HttpResponse r;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(text);
  r.headers.emplace_back("X-Fabrica-Log-Size", std::to_string(size));
  return r;
}

}  // namespace fabrica

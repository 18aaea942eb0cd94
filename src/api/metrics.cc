#include "api/metrics.h"

#include <cstdio>

namespace fabrica {
namespace {
const std::vector<double> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                     0.05,   0.1,   0.25,   0.5,   1,    2.5};
}

std::string PromLabel(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void Metrics::ObserveRequest(const std::string& verb, const std::string& resource, int code,
                             double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string base =
      "verb=\"" + PromLabel(verb) + "\",resource=\"" + PromLabel(resource) + "\"";
  requests_[base + ",code=\"" + std::to_string(code) + "\""] += 1;
  Histogram& h = latencies_[base];
  if (h.buckets.empty()) h.buckets.assign(kBounds.size(), 0);
  for (size_t i = 0; i < kBounds.size(); ++i) {
    if (seconds <= kBounds[i]) h.buckets[i] += 1;
  }
  h.count += 1;
  h.sum += seconds;
}

void Metrics::SetGauge(const std::string& name, const std::string& help, const std::string& labels,
                       double value) {
  std::lock_guard<std::mutex> lock(mu_);
  Gauge& g = gauges_[name];
  g.help = help;
  g.series[labels] = value;
}

void Metrics::ReplaceGauge(const std::string& name, const std::string& help,
                           const std::map<std::string, double>& values) {
  std::lock_guard<std::mutex> lock(mu_);
  Gauge& g = gauges_[name];
  g.help = help;
  g.series = values;
}

double& Metrics::CounterLocked(const std::string& name, const std::string& help,
                               const std::string& labels) {
  Gauge& g = gauges_[name];
  g.help = help;
  g.counter = true;
  return g.series[labels];
}

void Metrics::AddCounter(const std::string& name, const std::string& help,
                         const std::string& labels, double delta) {
  std::lock_guard<std::mutex> lock(mu_);
  CounterLocked(name, help, labels) += delta > 0 ? delta : 0;
}

void Metrics::SetCounter(const std::string& name, const std::string& help,
                         const std::string& labels, double total) {
  std::lock_guard<std::mutex> lock(mu_);
  CounterLocked(name, help, labels) = total;
}

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  char num[64];
  out += "# HELP fabrica_api_requests_total API requests by verb, resource and HTTP code.\n";
  out += "# TYPE fabrica_api_requests_total counter\n";
  for (const auto& [labels, n] : requests_) {
    out += "fabrica_api_requests_total{" + labels + "} " + std::to_string(n) + "\n";
  }
  out += "# HELP fabrica_api_request_duration_seconds API request latency.\n";
  out += "# TYPE fabrica_api_request_duration_seconds histogram\n";
  for (const auto& [labels, h] : latencies_) {
    for (size_t i = 0; i < kBounds.size(); ++i) {
      std::snprintf(num, sizeof(num), "%g", kBounds[i]);
      out += "fabrica_api_request_duration_seconds_bucket{" + labels + ",le=\"" + num + "\"} " +
             std::to_string(h.buckets[i]) + "\n";
    }
    out += "fabrica_api_request_duration_seconds_bucket{" + labels + ",le=\"+Inf\"} " +
           std::to_string(h.count) + "\n";
    std::snprintf(num, sizeof(num), "%.6f", h.sum);
    out += "fabrica_api_request_duration_seconds_sum{" + labels + "} " + num + "\n";
    out += "fabrica_api_request_duration_seconds_count{" + labels + "} " + std::to_string(h.count) +
           "\n";
  }
  for (const auto& [name, g] : gauges_) {
    out += "# HELP " + name + " " + g.help + "\n# TYPE " + name +
           (g.counter ? " counter\n" : " gauge\n");
    for (const auto& [labels, v] : g.series) {
      // (A counter in full: %.6g would round a count past a million.)
      std::snprintf(num, sizeof(num), g.counter ? "%.17g" : "%.6g", v);
      out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + num + "\n";
    }
  }
  return out;
}

}  // namespace fabrica

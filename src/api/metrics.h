// Metrics: a small registry rendered in the Prometheus text exposition format at /metrics.
// Request counts and latency histograms by verb, resource and code; gauges set by controllers
// (scheduler cycle time, pending workloads by queue, GPUs allocated by tenant). Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace fabrica {

class Metrics {
 public:
  void ObserveRequest(const std::string& verb, const std::string& resource, int code,
                      double seconds);
  // Sets gauge `name` with `labels` (already formatted: key="value",...). Replace drops every
  // series of the gauge not set in `values`.
  void SetGauge(const std::string& name, const std::string& help, const std::string& labels,
                double value);
  void ReplaceGauge(const std::string& name, const std::string& help,
                    const std::map<std::string, double>& values);
  // Adds `delta` (at least 0) to counter `name` with `labels`: Prometheus type counter, from 0
  // at the process's start, so that rate() and increase() see what happens between scrapes.
  void AddCounter(const std::string& name, const std::string& help, const std::string& labels,
                  double delta);
  // Sets counter `name` to `total`, a count its caller keeps that only grows.
  void SetCounter(const std::string& name, const std::string& help, const std::string& labels,
                  double total);
  std::string Render() const;

 private:
  struct Histogram {
    std::vector<uint64_t> buckets;  // cumulative counts per bound
    uint64_t count = 0;
    double sum = 0;
  };
  struct Gauge {
    std::string help;
    std::map<std::string, double> series;
    bool counter = false;  // rendered as a counter
  };
  // The series of counter `name` (created, typed a counter); mu_ held.
  double& CounterLocked(const std::string& name, const std::string& help,
                        const std::string& labels);
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> requests_;    // labels -> count
  std::map<std::string, Histogram> latencies_;  // labels (verb, resource) -> histogram
  std::map<std::string, Gauge> gauges_;
};

// Escapes a label value for the exposition format.
std::string PromLabel(const std::string& value);

}  // namespace fabrica

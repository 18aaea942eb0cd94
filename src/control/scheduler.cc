#include "control/scheduler.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "api/json_fields.h"
#include "api/metrics.h"
#include "core/fleet.h"
#include "core/workload.h"
#include "sched/frag.h"
#include "sched/placer.h"

namespace fabrica {
namespace {

using json = nlohmann::json;

struct StoredWorkload {
  KeyValue kv;
  json obj;
  Workload w;
  std::vector<PodRequest> pods;
  Status request_error;
};

bool Bound(const std::string& phase) { return phase == "Scheduled" || phase == "Running"; }

using jsonf::Field;
using jsonf::Int;
using jsonf::List;
using jsonf::Str;

}  // namespace

Scheduler::Scheduler(Store& store, const Clock& clock, SchedulerOptions options, Metrics* metrics)
    : store_(store), clock_(clock), options_(std::move(options)), metrics_(metrics) {}

Result<CycleStats> Scheduler::RunOnce() {
  const auto start = std::chrono::steady_clock::now();
  const int64_t now = clock_.NowMs();
  CycleStats stats;

  // Tenants.
  ASSIGN_OR_RETURN(ListResult tenant_list, store_.List("/registry/tenants/", "", 0));
  std::vector<Tenant> tenants;
  for (const KeyValue& kv : tenant_list.items) {
    auto m = ParseManifestYaml(kv.value, kv.key);
    if (m.ok() && !m->tenants.empty()) tenants.push_back(m->tenants.front());
  }

  // Nodes: every registered node is in the fleet; readiness and cordons decide where new work
  // may go.
  ASSIGN_OR_RETURN(ListResult node_list, store_.List("/registry/nodes/", "", 0));
  ASSIGN_OR_RETURN(ListResult lease_list, store_.List("/registry/leases/", "", 0));
  std::map<std::string, int64_t> renewed;
  for (const KeyValue& kv : lease_list.items) {
    json l = json::parse(kv.value, nullptr, false);
    if (l.is_discarded()) continue;
    renewed[Str(Field(l, "metadata"), "name")] = ParseTimestamp(Str(Field(l, "spec"), "renewTime"));
  }
  // Health records (control/health_controller.h): a node out of service and GPUs cordoned one
  // by one take no new work.
  ASSIGN_OR_RETURN(ListResult health_list, store_.List("/registry/nodehealth/", "", 0));
  std::set<std::string> health_held;
  std::set<std::string> has_record;
  std::map<std::string, std::vector<int>> cordoned_gpus;
  for (const KeyValue& kv : health_list.items) {
    json h = json::parse(kv.value, nullptr, false);
    const std::string name = Str(Field(h, "metadata"), "name");
    has_record.insert(name);
    if (Field(h, "schedulable") == false) health_held.insert(name);
    for (const json& g : List(h, "gpus")) {
      if (Field(g, "schedulable") == false) {
        cordoned_gpus[name].push_back(static_cast<int>(Int(g, "index", -1)));
      }
    }
  }
  Fleet fleet;
  std::set<std::string> unusable;
  for (const KeyValue& kv : node_list.items) {
    json n = json::parse(kv.value, nullptr, false);
    json spec = Field(n, "spec");
    if (!spec.is_object()) continue;
    const std::string name = Str(Field(n, "metadata"), "name");
    const bool cordoned = Field(spec, "unschedulable") == true;
    spec.erase("unschedulable");
    spec["name"] = name;
    auto parsed = ParseFleetYaml(json{{"nodes", json::array({spec})}}.dump(), kv.key);
    if (!parsed.ok()) continue;
    fleet.nodes.push_back(parsed->nodes.front());
    auto it = renewed.find(name);
    const bool ready =
        it != renewed.end() && it->second >= 0 && now - it->second <= options_.node_grace_ms;
    const bool unproven = options_.require_health_record && !has_record.count(name);
    if (cordoned || !ready || unproven || health_held.count(name)) unusable.insert(name);
    if (!ready) unusable.insert("!" + name);  // marks NotReady, for requeue
    // The Node's Ready condition follows its lease; written only when it changes, so that a
    // healthy fleet costs no writes.
    const std::string want = ready ? "True" : "False";
    std::string have;
    for (const json& cond : List(Field(n, "status"), "conditions")) {
      if (Str(cond, "type") == "Ready") have = Str(cond, "status");
    }
    if (have != want) {
      json next = n;
      next["status"] = {
          {"conditions",
           {{{"type", "Ready"},
             {"status", want},
             {"reason",
              ready ? "LeaseRenewed" : (it == renewed.end() ? "NoLease" : "LeaseExpired")},
             {"message", ready ? "the node agent renews its lease"
                               : "the node agent has not renewed its lease within " +
                                     std::to_string(options_.node_grace_ms / 1000) + " s"},
             {"lastTransitionTime", FormatTimestamp(now)}}}}};
      (void)store_.Put(kv.key, next.dump(), kv.mod_revision);  // a conflict retries next cycle
    }
  }
  ClusterState state(fleet, tenants);
  std::map<std::string, int> node_index;
  for (int i = 0; i < state.node_count(); ++i) node_index[state.node(i).name.str()] = i;

  // Workloads.
  ASSIGN_OR_RETURN(ListResult workload_list, store_.List("/registry/workloads/", "", 0));
  std::vector<StoredWorkload> pending;
  std::map<std::string, double> allocated_by_tenant;
  std::map<std::string, double> pending_by_queue;
  for (const KeyValue& kv : workload_list.items) {
    // One workload's bad record costs that workload this cycle, never the scheduler thread.
    try {
      StoredWorkload sw;
      sw.kv = kv;
      sw.obj = json::parse(kv.value, nullptr, false);
      if (!sw.obj.is_object() || !Field(sw.obj, "metadata").is_object()) continue;
      json for_parse = sw.obj;
      for_parse["metadata"]["tenant"] = Str(sw.obj["metadata"], "namespace");
      for_parse["metadata"].erase("namespace");
      auto m = ParseManifestJson(for_parse, kv.key);
      if (!m.ok() || m->workloads.empty()) continue;
      sw.w = m->workloads.front();
      for (const PodSet& ps : sw.w.pod_sets) {
        auto r = state.MakeRequest(ps, sw.w.tenant);
        if (!r.ok()) {
          sw.request_error = r.status();
          break;
        }
        for (int i = 0; i < ps.count; ++i) sw.pods.push_back(*r);
      }
      const json& status = Field(sw.obj, "status");
      const std::string phase = Str(status, "phase", "Pending");
      if (Bound(phase)) {
        // Account for it, unless its node is gone (or it names devices the node does not
        // have): then it goes back to the queue.
        bool lost = false;
        std::vector<Assignment> assignments;
        for (const json& a : List(status, "assignments")) {
          const std::string node = Str(a, "node");
          auto it = node_index.find(node);
          if (it == node_index.end() || unusable.count("!" + node)) {
            lost = true;
            break;
          }
          const Node& n = state.node(it->second);
          Assignment asg;
          asg.node = it->second;
          for (const json& d : List(a, "devices")) {
            DeviceShare share;
            share.device = static_cast<int>(Int(d, "index", -1));
            share.milli = Int(d, "gpuMilli");
            share.memory_mib = Int(d, "memoryMiB");
            share.mig_slice = static_cast<int>(Int(d, "migSlice", -1));
            if (share.device < 0 || share.device >= static_cast<int>(n.devices.size()) ||
                share.mig_slice >= static_cast<int>(n.devices[share.device].mig_slices.size())) {
              lost = true;
              break;
            }
            asg.devices.push_back(share);
          }
          assignments.push_back(asg);
        }
        if (lost || assignments.size() != sw.pods.size()) {
          json patch = sw.obj;
          patch["status"] = {{"phase", "Pending"},
                             {"message", "requeued: its node stopped renewing its lease"},
                             {"reason", "NodeLost"}};
          if (store_.Put(kv.key, patch.dump(), kv.mod_revision).ok()) ++stats.requeued;
          continue;
        }
        for (size_t i = 0; i < assignments.size(); ++i) state.Apply(assignments[i], sw.pods[i]);
        for (const PodRequest& r : sw.pods)
          allocated_by_tenant[sw.w.tenant.str()] += r.total_gpu_milli() / 1000.0;
        ++stats.running;
        continue;
      }
      if (phase == "Pending") pending.push_back(std::move(sw));
    } catch (const std::exception&) {
      continue;
    }
  }

  // A cordoned GPU's free capacity is held for the cycle, so nothing new lands on it while the
  // rest of its node keeps taking work.
  const PodRequest hold{};  // a reservation: no CPU, no memory, no tenant
  for (const auto& [name, gpus] : cordoned_gpus) {
    auto it = node_index.find(name);
    if (it == node_index.end()) continue;
    const int n = it->second;
    for (int d : gpus) {
      if (d < 0 || d >= static_cast<int>(state.devices(n).size())) continue;
      const DeviceState& ds = state.devices(n)[d];
      Assignment a;
      a.node = n;
      if (state.node(n).devices[d].mig_enabled()) {
        for (int slice = 0; slice < 32; ++slice) {
          if (ds.mig_free >> slice & 1) a.devices.push_back({d, 0, 0, slice});
        }
      } else if (ds.free_milli > 0 || ds.free_memory_mib > 0) {
        a.devices.push_back({d, ds.free_milli, ds.free_memory_mib, -1});
      }
      if (!a.devices.empty()) state.Apply(a, hold);
    }
  }

  // The expected mix for the policy: the pods waiting now.
  std::vector<PodRequest> waiting;
  for (const StoredWorkload& sw : pending)
    waiting.insert(waiting.end(), sw.pods.begin(), sw.pods.end());
  const std::vector<TypicalPod> typical = TypicalMix(waiting);
  ASSIGN_OR_RETURN(std::unique_ptr<Policy> policy, MakePolicy(options_.policy, typical, &state));
  Placer placer(*policy);
  Rng rng(static_cast<uint64_t>(now));

  // Work may not land on cordoned or NotReady nodes: hold them with a placeholder exclusive use
  // for the cycle by placing only among usable nodes.
  std::vector<int> usable_nodes;
  for (int i = 0; i < state.node_count(); ++i) {
    if (!unusable.count(state.node(i).name.str())) usable_nodes.push_back(i);
  }

  std::sort(pending.begin(), pending.end(), [](const StoredWorkload& a, const StoredWorkload& b) {
    if (a.w.priority != b.w.priority) return a.w.priority > b.w.priority;
    return a.kv.create_revision < b.kv.create_revision;
  });
  for (StoredWorkload& sw : pending) {
    const json& status = Field(sw.obj, "status");
    std::string message, reason;
    std::vector<Assignment> placed;
    std::optional<std::string> hold;
    if (options_.admission_hold) {
      hold = options_.admission_hold(sw.w.tenant.str(),
                                     sw.w.queue.empty() ? sw.w.tenant.str() : sw.w.queue.str());
    }
    if (!sw.request_error.ok()) {
      message = sw.request_error.message();
      reason = "Unschedulable";
    } else if (hold) {
      message = *hold;
      reason = "BudgetExceeded";
    } else {
      GangPlacement g;
      if (usable_nodes.size() == static_cast<size_t>(state.node_count())) {
        g = placer.PlaceGang(state, sw.pods, sw.w.topology, rng);
      } else {
        // Restricting to usable nodes: place pod by pod among them (all or nothing).
        g.outcome = Outcome::kPlaced;
        for (const PodRequest& r : sw.pods) {
          PodPlacement p = placer.PlaceIn(state, usable_nodes, r, rng);
          if (p.outcome != Outcome::kPlaced) {
            for (size_t i = g.pods.size(); i-- > 0;) state.Release(g.pods[i], sw.pods[i]);
            g.pods.clear();
            g.outcome = p.outcome;
            g.reason = p.reason;
            break;
          }
          state.Apply(p.assignment, r);
          g.pods.push_back(p.assignment);
        }
      }
      if (g.outcome == Outcome::kPlaced) {
        placed = std::move(g.pods);
      } else {
        message = g.reason;
        reason = g.outcome == Outcome::kInfeasible ? "Unschedulable" : "InsufficientCapacity";
      }
    }
    json next = sw.obj;
    if (!placed.empty()) {
      json assignments = json::array();
      size_t pod = 0;
      for (const PodSet& ps : sw.w.pod_sets) {
        for (int i = 0; i < ps.count; ++i, ++pod) {
          const Assignment& a = placed[pod];
          const Node& node = state.node(a.node);
          json devices = json::array();
          for (const DeviceShare& d : a.devices) {
            json dj = {
                {"index", d.device}, {"uuid", node.devices[d.device].uuid}, {"gpuMilli", d.milli}};
            if (d.memory_mib) dj["memoryMiB"] = d.memory_mib;
            if (d.mig_slice >= 0) {
              dj["migSlice"] = d.mig_slice;
              dj["migProfile"] = node.devices[d.device].mig_slices[d.mig_slice];
            }
            devices.push_back(dj);
          }
          json assignment = {{"pod", ps.name + "-" + std::to_string(i)},
                             {"node", node.name.str()},
                             {"devices", devices}};
          // The NUMA node of the pod's GPUs and the NIC there, for the agent to pin CPUs and
          // pick the network device.
          std::vector<int> gpus;
          for (const DeviceShare& d : a.devices) gpus.push_back(d.device);
          const PodLocality where = LocalityOf(node, gpus, node.leaf);
          if (where.numa >= 0) assignment["numa"] = where.numa;
          if (!where.nic.empty()) assignment["nic"] = where.nic;
          assignments.push_back(assignment);
        }
      }
      std::string isolation = "none";
      switch (sw.pods.front().kind) {
        case DeviceKind::kNone:
          isolation = "no GPU";
          break;
        case DeviceKind::kWhole:
          isolation = "whole GPUs";
          break;
        case DeviceKind::kMig:
          isolation = "MIG slice";
          break;
        case DeviceKind::kFraction:
          isolation = "fractional share within one trust domain";
          break;
      }
      next["status"] = {{"phase", "Scheduled"},
                        {"assignments", assignments},
                        {"isolation", isolation},
                        {"scheduledTime", FormatTimestamp(now)},
                        {"conditions",
                         {{{"type", "Scheduled"},
                           {"status", "True"},
                           {"lastTransitionTime", FormatTimestamp(now)}}}}};
      if (store_.Put(sw.kv.key, next.dump(), sw.kv.mod_revision).ok()) {
        ++stats.scheduled;
        for (const PodRequest& r : sw.pods)
          allocated_by_tenant[sw.w.tenant.str()] += r.total_gpu_milli() / 1000.0;
      }
      continue;
    }
    ++stats.pending;
    pending_by_queue["queue=\"" +
                     PromLabel(sw.w.queue.empty() ? sw.w.tenant.str() : sw.w.queue.str()) + "\""] +=
        1;
    if (Str(status, "message") != message || Str(status, "reason") != reason) {
      next["status"] = {{"phase", "Pending"},
                        {"message", message},
                        {"reason", reason},
                        {"conditions",
                         {{{"type", "Scheduled"},
                           {"status", "False"},
                           {"reason", reason},
                           {"message", message},
                           {"lastTransitionTime", FormatTimestamp(now)}}}}};
      (void)store_.Put(sw.kv.key, next.dump(), sw.kv.mod_revision);
    }
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (metrics_) {
    metrics_->SetGauge("fabrica_scheduler_cycle_seconds", "Duration of the last scheduling cycle.",
                       "", stats.seconds);
    metrics_->ReplaceGauge("fabrica_pending_workloads", "Pending workloads by queue.",
                           pending_by_queue);
    std::map<std::string, double> by_tenant;
    for (const auto& [t, g] : allocated_by_tenant) by_tenant["tenant=\"" + PromLabel(t) + "\""] = g;
    metrics_->ReplaceGauge("fabrica_gpus_allocated", "GPUs allocated by tenant.", by_tenant);
  }
  return stats;
}

}  // namespace fabrica

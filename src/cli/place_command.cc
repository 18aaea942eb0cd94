#include "cli/place_command.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/fleet.h"
#include "core/workload.h"
#include "sched/frag.h"
#include "sched/placer.h"
#include "sim/openb.h"

namespace fabrica::cli {
namespace {

struct PlaceArgs {
  std::string fleet, manifest, policy = "fabrica";
  bool json = false;
};

// What the server does as it stores a workload of `tenant`: the tenant's tolerations and
// nodeSelector are given to each pod set, a selector value other than the tenant's is refused,
// and every toleration must be among the tenant's allowedTolerations where it has them.
Status GiveTenantRules(const Tenant& tenant, Workload& wl) {
  for (PodSet& ps : wl.pod_sets) {
    for (const Toleration& t : tenant.tolerations)
      if (std::find(ps.nodes.tolerations.begin(), ps.nodes.tolerations.end(), t) ==
          ps.nodes.tolerations.end())
        ps.nodes.tolerations.push_back(t);
    for (const auto& [key, value] : tenant.node_selector) {
      auto [it, added] = ps.nodes.labels.emplace(key, value);
      if (!added && it->second != value)
        return Status(StatusCode::kPermissionDenied,
                      "nodeSelector." + key + ": tenant " + tenant.name.str() +
                          " keeps its work on nodes with " + key + "=" + value +
                          " (its spec.nodeSelector); the workload has " + key + "=" + it->second);
    }
    if (tenant.allowed_tolerations)
      for (const Toleration& t : ps.nodes.tolerations)
        if (!ToleratesAllowed(*tenant.allowed_tolerations, t))
          return Status(StatusCode::kPermissionDenied,
                        "tolerations: tenant " + tenant.name.str() + " may not tolerate " +
                            t.ToString() + " (not among its spec.allowedTolerations)");
  }
  return Status::Ok();
}

// What keeps this pod apart from other tenants' work on its devices, as the API reports it.
std::string Isolation(const ClusterState& s, const PodRequest& r) {
  switch (r.kind) {
    case DeviceKind::kNone:
      return "no GPU";
    case DeviceKind::kWhole:
      return "whole GPUs";
    case DeviceKind::kMig:
      return "MIG slice (hardware partition)";
    case DeviceKind::kFraction: {
      if (r.tenant < 0) return "fractional share";
      const Tenant& t = s.tenant(r.tenant);
      if (t.trust == TrustLevel::kTrusted) {
        return "fractional share within trust domain " +
               (t.trust_domain.empty() ? t.name.str() : t.trust_domain);
      }
      return "fractional share with its own tenant only";
    }
  }
  return "?";
}

int Run(const PlaceArgs& args) {
  auto fail = [](const Status& st) {
    std::cerr << "fabrica place: " << st.message() << "\n";
    return 2;
  };
  auto fleet_text = sim::ReadFile(args.fleet);
  if (!fleet_text.ok()) return fail(fleet_text.status());
  auto fleet = ParseFleetYaml(*fleet_text, args.fleet);
  if (!fleet.ok()) return fail(fleet.status());
  auto manifest_text = sim::ReadFile(args.manifest);
  if (!manifest_text.ok()) return fail(manifest_text.status());
  auto manifest = ParseManifestYaml(*manifest_text, args.manifest);
  if (!manifest.ok()) return fail(manifest.status());
  if (manifest->workloads.empty()) return fail(InvalidArgument(args.manifest + ": no workload"));

  ClusterState state(*fleet, manifest->tenants);
  // Every pod as a request; the mix of them is the typical workload the policy plans for.
  std::vector<std::vector<PodRequest>> requests(manifest->workloads.size());
  std::vector<Status> errors(manifest->workloads.size());
  for (size_t w = 0; w < manifest->workloads.size(); ++w) {
    Workload& wl = manifest->workloads[w];
    for (const Tenant& t : manifest->tenants)
      if (t.name == wl.tenant) errors[w] = GiveTenantRules(t, wl);
    if (!errors[w].ok()) continue;
    for (const PodSet& ps : wl.pod_sets) {
      auto r = state.MakeRequest(ps, wl.tenant);
      if (!r.ok()) {
        errors[w] = r.status();
        break;
      }
      for (int i = 0; i < ps.count; ++i) requests[w].push_back(*r);
    }
  }
  std::vector<PodRequest> all;
  for (const auto& rs : requests) all.insert(all.end(), rs.begin(), rs.end());
  const std::vector<TypicalPod> typical = TypicalMix(all);
  auto policy = MakePolicy(args.policy, typical, &state);
  if (!policy.ok()) return fail(policy.status());
  Placer placer(**policy);
  Rng rng(42);

  nlohmann::json out = nlohmann::json::array();
  for (size_t w = 0; w < manifest->workloads.size(); ++w) {
    const Workload& wl = manifest->workloads[w];
    nlohmann::json j;
    j["workload"] = wl.name.str();
    j["tenant"] = wl.tenant.str();
    if (!errors[w].ok()) {
      j["outcome"] = "Infeasible";
      j["reason"] = errors[w].message();
      out.push_back(j);
      continue;
    }
    j["isolation"] = Isolation(state, requests[w].front());
    std::vector<Assignment> placed;
    Outcome outcome = Outcome::kPlaced;
    std::string reason;
    // (The nodes a nodeAffinity prefers first, as the server places: PlacePreferring.)
    if (wl.gang || wl.topology.level != TopologyLevel::kNone) {
      PlacePreferring(
          requests[w], wl.topology,
          [&](const std::vector<PodRequest>& pods, const TopologyConstraint& t, bool last) {
            placer.set_explain(last);
            GangPlacement g = placer.PlaceGang(state, pods, t, rng);
            outcome = g.outcome;
            reason = g.reason;
            placed = std::move(g.pods);
            return outcome == Outcome::kPlaced;
          });
      placer.set_explain(true);
    } else {
      // Independent pods: each is placed on its own; the workload is Placed when all are.
      for (const PodRequest& r : requests[w]) {
        PodPlacement p;
        PlacePreferring(
            {r}, wl.topology,
            [&](const std::vector<PodRequest>& one, const TopologyConstraint&, bool last) {
              placer.set_explain(last);
              p = placer.Place(state, one[0], rng);
              return p.outcome == Outcome::kPlaced;
            });
        placer.set_explain(true);
        if (p.outcome != Outcome::kPlaced) {
          outcome = p.outcome;
          reason = p.reason;
          continue;
        }
        state.Apply(p.assignment, r);
        placed.push_back(std::move(p.assignment));
      }
    }
    j["outcome"] = OutcomeName(outcome);
    if (!reason.empty()) j["reason"] = reason;
    nlohmann::json pods = nlohmann::json::array();
    for (const Assignment& a : placed) {
      const Node& node = state.node(a.node);
      nlohmann::json pj;
      pj["node"] = node.name.str();
      nlohmann::json devs = nlohmann::json::array();
      for (const DeviceShare& d : a.devices) {
        nlohmann::json dj;
        dj["index"] = d.device;
        dj["uuid"] = node.devices[d.device].uuid;
        dj["gpu_milli"] = d.milli;
        dj["numa"] = node.devices[d.device].numa_node;
        if (d.memory_mib) dj["memory_mib"] = d.memory_mib;
        if (d.mig_slice >= 0) dj["mig"] = node.devices[d.device].mig_slices[d.mig_slice];
        devs.push_back(dj);
      }
      pj["devices"] = devs;
      pods.push_back(pj);
    }
    j["pods"] = pods;
    out.push_back(j);
  }
  if (args.json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  for (const auto& j : out) {
    std::printf(
        "%s (tenant %s): %s", j["workload"].get<std::string>().c_str(),
        j["tenant"].get<std::string>().empty() ? "-" : j["tenant"].get<std::string>().c_str(),
        j["outcome"].get<std::string>().c_str());
    if (j.contains("isolation")) std::printf(", %s", j["isolation"].get<std::string>().c_str());
    std::printf("\n");
    if (j.contains("reason")) std::printf("  reason: %s\n", j["reason"].get<std::string>().c_str());
    if (!j.contains("pods")) continue;
    for (const auto& p : j["pods"]) {
      std::printf("  %-14s", p["node"].get<std::string>().c_str());
      for (const auto& d : p["devices"]) {
        std::printf(" gpu%d(%s, %lldm, numa %d%s%s)", d["index"].get<int>(),
                    d["uuid"].get<std::string>().c_str(), d["gpu_milli"].get<long long>(),
                    d["numa"].get<int>(), d.contains("mig") ? ", MIG " : "",
                    d.contains("mig") ? d["mig"].get<std::string>().c_str() : "");
      }
      std::printf("\n");
    }
  }
  return 0;
}

}  // namespace

void AddPlaceCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<PlaceArgs>();
  CLI::App* place = app.add_subcommand(
      "place", "Place the workloads of a manifest on a fleet file and show every decision");
  place->add_option("--fleet", args->fleet, "fleet YAML (kind: Fleet)")->required();
  place->add_option("--manifest", args->manifest, "Tenant / Workload / WorkloadList YAML")
      ->required();
  place->add_option("--policy", args->policy, "placement policy (default fabrica)");
  place->add_flag("--json", args->json, "print JSON");
  place->callback([args, exit_code] { *exit_code = Run(*args); });
}

}  // namespace fabrica::cli

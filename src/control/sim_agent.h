// Simulated node agents: a whole fleet of nodes without GPUs, for `fabrica up`, demos and tests.
//
// Each simulated node behaves as the real agent will, over the same API and client code: it
// registers its Node (inventory in the fleet schema), renews its Lease every heartbeat, pushes
// utilization samples every 30 s (80% busy for the share running workloads hold), watches
// for workloads assigned to it, marks them Running, and after their declared duration
// Succeeded. Nodes can be stopped (they stop heartbeating, as a crashed node would) to exercise
// requeue on node loss. Faults can be injected (Inject, or the fleet file's `faults:` at their
// time after the fleet was made): an XID or a double-bit ECC count on one GPU is reported to the
// server on the node's next round (POST .../nodes/N/health, the node's own identity); a kill
// stops the node. Repaired() is the simulated hardware's side of a remediation: a GPU reset
// clears that GPU's ECC counter, a node reboot or repair also restarts a killed agent.
// Time comes from the injected Clock. Tick() does one round for every node;
// Start() runs rounds on a background thread. Not copyable; Tick from one thread at a time.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/http_client.h"
#include "control/clock.h"
#include "core/fleet.h"

namespace fabrica {

// A node's report that it started `pods` (an object, pod name -> anything; the server stamps
// the time) of the workload whose status it read: the status fields of the merge patch. It
// names the binding it saw (scheduledTime, and resizedTime or its absence), which a node may
// not change, so the server refuses a report on a binding replaced since.
nlohmann::json StartedPodsReport(const nlohmann::json& status, const nlohmann::json& pods);

// A node's report that `pods` of workload `w` (as it read it, status and all) succeeded there,
// written into w's status: they join status.finishedPods (those its binding still places on
// `node`; the server stamps when), and once every pod of its binding has, the workload has
// succeeded, unless it was admitted with fewer pods than it asks for and is no gang: the
// scheduler then queues it again for the pods that have not run. Returns whether none of its
// binding's pods on `node` is left running (the node's last report on it).
bool RecordSucceededPods(nlohmann::json& w, const std::vector<std::string>& pods,
                         const std::string& node, int64_t now_ms);

// The message of a workload admitted with fewer pods than it asks for whose admitted pods all
// completed ("its 3 admitted pods completed; 1 of its 4 pods has not run").
std::string PodsLeftMessage(size_t admitted, size_t left, size_t asked);

// The message of a workload that starts running: where its pods run ("running on n-0", or
// "running on 4 nodes: n-0, n-1, n-2, ..."), from its status's assignments.
std::string RunningMessage(const nlohmann::json& status);

// The Node API object's spec for a node of the fleet schema (the inverse of the fleet parser).
std::string NodeSpecJson(const Node& node);

class SimulatedFleet {
 public:
  // `tokens`: node name -> bearer token. `client` gives the server address and CA.
  // `schedule_start_ms`: when the fleet's scheduled faults count from (their atSeconds); -1:
  // now. Faults already due were injected by an earlier run: not again. (Virtual time resumes
  // where it stopped; in real time, a fault that fell due while the server was down is
  // dropped.)
  SimulatedFleet(Fleet fleet, ClientOptions client, std::map<std::string, std::string> tokens,
                 const Clock& clock, int64_t heartbeat_ms = 10'000, int64_t schedule_start_ms = -1);
  ~SimulatedFleet();

  Status Tick();
  void Start(int64_t tick_wall_ms = 200);
  void Stop();
  // A stopped node no longer heartbeats nor runs workloads (a crash, for tests).
  void StopNode(const std::string& node);
  // A stalled node's agent renews its lease and reports health but starts no pod (a wedged
  // container runtime, for tests); Repaired(node, -1) restarts it.
  void StallNode(const std::string& node);
  // Injects a fault now (its at_ms is ignored). NotFound for a node this fleet does not
  // simulate, InvalidArgument for a GPU it does not have. Thread-safe.
  Status Inject(const FaultInjection& fault);
  // The remediation of `gpu` (-1: the whole node, which also restarts a stopped agent) ran.
  void Repaired(const std::string& node, int gpu);
  bool Simulates(const std::string& node) const;

 private:
  struct Agent;
  Status TickAgent(Agent& a);

  Fleet fleet_;
  const Clock& clock_;
  int64_t heartbeat_ms_;
  int64_t sample_ms_ = 30'000;  // dcgm-exporter's default collection interval
  std::vector<std::unique_ptr<Agent>> agents_;
  std::mutex mu_;
  std::set<std::string> stopped_;
  std::set<std::string> stalled_;  // renew their lease, start nothing
  int64_t start_ms_;
  size_t next_fault_ = 0;  // fleet_.faults before this one were injected
  std::atomic<bool> running_{false};
  std::thread thread_;
};

}  // namespace fabrica

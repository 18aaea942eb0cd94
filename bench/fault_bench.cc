// The fault-injection benchmark of issue 7: a week of virtual time on a synthetic fleet of 1,000
// HGX nodes (8,000 GPUs) with replayed synthetic workloads, random XIDs, ECC errors and agent
// deaths at the default rates, driven through the health model and the remediation controller.
// Prints the report (faults, what the controller did, goodput lost, the invariants) and the
// wall time. Usage: fault_bench [nodes] [days] [seed]; exits 1 when an invariant was violated.
#include <chrono>
#include <cstdlib>
#include <iostream>

#include "sim/fault_sim.h"

int main(int argc, char** argv) {
  fabrica::sim::FaultSimOptions o;
  o.nodes = argc > 1 ? std::atoi(argv[1]) : 1000;
  o.days = argc > 2 ? std::atof(argv[2]) : 7;
  o.seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 42;
  const auto t0 = std::chrono::steady_clock::now();
  auto report = fabrica::sim::RunFaultSim(o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!report.ok()) {
    std::cerr << "fault_bench: " << report.status().ToString() << "\n";
    return 2;
  }
  report->Print(std::cout);
  std::cout << "  wall time: " << seconds << " s\n";
  return report->ok() ? 0 : 1;
}

// `fabrica devices`: what a node's device backend discovers (agent/device_backend.h), printed as
// a table, JSON, a fleet file to seed a fleet with, or one dcgm-exporter page.
#pragma once

#include <CLI/CLI.hpp>

namespace fabrica::cli {

// Registers `devices --devices nvml|sim:FILE [--node NAME] [--format text|json|yaml|metrics]`
// under `app`; `*exit_code` receives its status (2 when the backend cannot be opened or read).
void AddDevicesCommand(CLI::App& app, int* exit_code);

}  // namespace fabrica::cli

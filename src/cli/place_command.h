// `fabrica place`: place the workloads of a manifest on a fleet file and show every decision.
#pragma once

#include <CLI/CLI.hpp>

namespace fabrica::cli {

void AddPlaceCommand(CLI::App& app, int* exit_code);

}  // namespace fabrica::cli

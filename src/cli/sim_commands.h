// `fabrica sim ...`: command-line front ends of the simulators.
#pragma once

#include <CLI/CLI.hpp>

namespace fabrica::cli {

// Registers `sim openb` and `sim synthetic` under `app`; `*exit_code` receives their status.
void AddSimCommands(CLI::App& app, int* exit_code);

}  // namespace fabrica::cli

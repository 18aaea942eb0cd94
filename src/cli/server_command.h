// `fabrica server` and `fabrica up`: the control plane, and the one-command local factory.
#pragma once

#include <CLI/CLI.hpp>

namespace fabrica::cli {

void AddServerCommands(CLI::App& app, int* exit_code);

}  // namespace fabrica::cli

// `fabrica agent`: the node agent (agent/agent.h) as a process.
#pragma once

#include <CLI/CLI.hpp>

namespace fabrica::cli {

void AddAgentCommand(CLI::App& app, int* exit_code);

}  // namespace fabrica::cli

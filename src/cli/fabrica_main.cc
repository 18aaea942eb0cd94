// The `fabrica` binary: simulators, the server, the local factory, the node agent and its
// device inventory.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/agent_command.h"
#include "cli/devices_command.h"
#include "cli/place_command.h"
#include "cli/server_command.h"
#include "cli/sim_commands.h"

int main(int argc, char** argv) {
  CLI::App app{"fabrica: a control plane for a shared GPU fleet"};
  app.require_subcommand(1);
  int exit_code = 0;
  fabrica::cli::AddSimCommands(app, &exit_code);
  fabrica::cli::AddPlaceCommand(app, &exit_code);
  fabrica::cli::AddServerCommands(app, &exit_code);
  fabrica::cli::AddAgentCommand(app, &exit_code);
  fabrica::cli::AddDevicesCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // (A usage error exits 2, as the commands' own checks of their input do; --help 0.)
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}

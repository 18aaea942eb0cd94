// The `fabrica` binary: simulators now; server, agent and the local factory as they land.
#include <CLI/CLI.hpp>
#include <iostream>

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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}

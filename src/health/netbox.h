// Inventory export in NetBox's REST JSON shape, so a NetBox (or anything that reads its API)
// can take Fabrica's view of the fleet.
//
// The result is one JSON object with a paginated list per NetBox model, as its REST API returns
// them (`{"count", "next", "previous", "results"}`): `device_types` (one per node hardware type),
// `devices` (one per node, with site, rack, status and the Fabrica lifecycle state in
// `custom_fields`), `module_types` and `modules` (one per GPU, with the built-in GPU profile's
// attributes: `gpu` model, `memory` in GB, `interface`) and `interfaces` (one per NIC, speed in
// Kb/s, type slug by speed). Related objects are nested brief objects ({id, url, display, name
// or slug}); ids are assigned in fleet order, so the same fleet gives the same document. Choice
// fields are {"value", "label"}. Inventory items are not used (deprecated since NetBox 4.3).
// A pure function.
#pragma once

#include <map>
#include <string>

#include "core/fleet.h"

namespace fabrica::health {

// `states` maps a node to its lifecycle state name (lifecycle.h); a node missing from it is
// exported as "available". NetBox status: available, cordoned, draining → active; enroll,
// inspecting, burn-in → staged; inspect failed, repair → failed; retired → decommissioning.
std::string ExportNetbox(const Fleet& fleet, const std::map<NodeId, std::string>& states,
                         const std::string& site_slug);

}  // namespace fabrica::health

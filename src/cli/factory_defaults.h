// The embedded defaults of `fabrica up`: a small simulated fleet and the example tenants.
#pragma once

namespace fabrica::cli {

// Six HGX H100 nodes in two racks under two leaves (two of them MIG-partitioned), two H200
// nodes, and two single-L4 inference boxes: every placement mechanism has somewhere to go.
extern const char* const kDefaultFleetYaml;

// Tenants: two trusted teams sharing the `research` trust domain, a standard team, and an
// untrusted external partner.
extern const char* const kDefaultTenantsYaml;
// The price book of the local factory: per GPU-hour, roughly public on-demand rates.
extern const char* const kDefaultPricesYaml;

}  // namespace fabrica::cli

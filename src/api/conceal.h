// What the scheduler wrote of other tenants' work, as a reader who may not read them sees it:
// each "tenant/name" of a tenant `readable` says no to is told as "another tenant's workload"
// (a trial's tenant read another tenant's workload names in its own wait messages and events,
// as Kueue names a preemptor by UID alone). Words before a slash that are numbers ("20/16
// GPUs") or kinds ("workload/a4") are not tenants: ValidateTenantName refuses such names.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace fabrica {

inline constexpr char kAnotherTenants[] = "another tenant's workload";

std::string ConcealText(const std::string& text,
                        const std::function<bool(const std::string&)>& readable);
// ConcealText over every string in `j`.
void Conceal(nlohmann::json& j, const std::function<bool(const std::string&)>& readable);

}  // namespace fabrica

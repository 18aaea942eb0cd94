#include "cli/factory_defaults.h"

namespace fabrica::cli {

const char* const kDefaultFleetYaml = R"(apiVersion: fabrica.dev/v1
kind: Fleet
nodes:
  - name: hgx-r1
    count: 3
    cpu: 224
    memory: 2Ti
    rack: rack-1
    leaf: leaf-1
    numaNodes: 2
    gpus: {count: 8, model: H100, memory: 80Gi}
    nics: [{name: mlx5-0, numa: 0}, {name: mlx5-1, numa: 1}]
  - name: hgx-r2
    count: 2
    cpu: 224
    memory: 2Ti
    rack: rack-2
    leaf: leaf-2
    numaNodes: 2
    gpus: {count: 8, model: H100, memory: 80Gi}
    nics: [{name: mlx5-0, numa: 0}, {name: mlx5-1, numa: 1}]
  - name: hgx-mig
    cpu: 224
    memory: 2Ti
    rack: rack-2
    leaf: leaf-2
    numaNodes: 2
    gpus: {count: 8, model: H100, memory: 80Gi, mig: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]}
  - name: h200
    count: 2
    cpu: 224
    memory: 2Ti
    rack: rack-3
    leaf: leaf-2
    numaNodes: 2
    gpus: {count: 8, model: H200, memory: 141Gi}
  - name: l4
    count: 2
    cpu: 32
    memory: 256Gi
    rack: rack-3
    leaf: leaf-2
    gpus: {count: 1, model: L4, memory: 24Gi}
)";

const char* const kDefaultTenantsYaml = R"(apiVersion: fabrica.dev/v1
kind: Tenant
metadata: {name: team-a}
spec: {trust: trusted, trustDomain: research}
---
apiVersion: fabrica.dev/v1
kind: Tenant
metadata: {name: team-b}
spec: {trust: trusted, trustDomain: research}
---
apiVersion: fabrica.dev/v1
kind: Tenant
metadata: {name: team-c}
spec: {trust: standard}
---
apiVersion: fabrica.dev/v1
kind: Tenant
metadata: {name: partner-x}
spec: {trust: untrusted}
)";

const char* const kDefaultPricesYaml = R"(currency: USD
gpuHour:
  H100: "2.49"
  H200: "3.19"
  L4: "0.80"
default: "1.00"
cpuCoreHour: "0.03"
gibHour: "0.004"
)";

}  // namespace fabrica::cli

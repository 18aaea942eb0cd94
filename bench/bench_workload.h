// The ~1 KiB workload manifest (JSON) that the API benchmarks create and read, so that
// api_load and api_handler_bench measure the same object.
#pragma once

#include <string>

namespace fabrica::bench {

inline std::string Workload(const std::string& name) {
  std::string labels;
  for (int i = 0; i < 22; ++i)
    labels += ",\"label-" + std::to_string(i) + "\":\"value-padding-" + std::to_string(i) + "\"";
  return "{\"apiVersion\":\"fabrica.dev/v1\",\"kind\":\"Workload\",\"metadata\":{\"name\":\"" +
         name + "\",\"labels\":{\"app\":\"bench\"" + labels +
         "}},\"spec\":{\"priority\":10,\"podSets\":[{\"name\":\"server\",\"count\":2,\"cpu\":\"8\","
         "\"memory\":\"64Gi\",\"devices\":{\"gpuMilli\":\"500m\",\"gpuMemory\":\"38Gi\"}}],"
         "\"run\":{\"command\":[\"vllm\",\"serve\",\"llama-3-8b\",\"--max-model-len\",\"8192\"],"
         "\"durationSeconds\":3600}}}";
}

}  // namespace fabrica::bench

// Replays a fuzz target's corpus without libFuzzer, so that the corpus runs as an ordinary test
// in the g++ sanitizer build (CI). Real fuzzing uses clang's libFuzzer: see fuzz/README.md.
#include <dirent.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  int files = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> paths;
    if (DIR* d = opendir(argv[i])) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] != '.') paths.push_back(std::string(argv[i]) + "/" + e->d_name);
      }
      closedir(d);
    } else {
      paths.push_back(argv[i]);
    }
    for (const std::string& p : paths) {
      std::ifstream in(p, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string data = ss.str();
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
      ++files;
    }
  }
  std::printf("replayed %d inputs\n", files);
  return files > 0 ? 0 : 1;
}

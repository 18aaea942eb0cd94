// Helpers shared by the test binaries: a temporary directory that cleans up after itself, reading
// a whole file, and the assertion that a parse failed naming what was wrong.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/status.h"

namespace fabrica::test {

// A fresh directory under the test temp dir, removed with the object.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "fabrica") {
    std::string pattern =
        (std::filesystem::path(::testing::TempDir()) / (prefix + "_XXXXXX")).string();
    CHECK(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const {
    return (std::filesystem::path(path_) / name).string();
  }

 private:
  std::string path_;
};

// The bearer token of `user` in AuthYaml(tag).
inline std::string TestToken(const std::string& user, const std::string& tag) {
  return user + "-token-" + tag + "-0123456789";
}

// An auth file with a platform admin ("admin") and a member of tenant team-a ("alice").
inline std::string AuthYaml(const std::string& tag) {
  return "tokens:\n  - {token: " + TestToken("admin", tag) +
         ", user: admin}\n  - {token: " + TestToken("alice", tag) +
         ", user: alice}\nbindings:\n  - {role: platform-admin, user: admin}\n"
         "  - {role: tenant-member, tenant: team-a, user: alice}\n";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Asserts that `r` failed with InvalidArgument and that its message contains every fragment.
template <typename T>
void ExpectInvalid(const Result<T>& r, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(r.ok()) << "expected an error containing '" << fragments.front() << "'";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  for (const std::string& f : fragments) {
    EXPECT_NE(r.status().message().find(f), std::string::npos)
        << "'" << f << "' not in: " << r.status().message();
  }
}

// Asserts that an error reply's body is a Kubernetes Status object of `code`, with the fields
// every route's errors carry (kind, apiVersion, metadata, status, reason, code, message), as
// the server writes them (compact JSON).
inline void ExpectStatusObject(const std::string& body, int code) {
  for (const std::string& part :
       {std::string(R"("kind":"Status")"), std::string(R"("apiVersion":"v1")"),
        std::string(R"("metadata":{})"), std::string(R"("status":"Failure")"),
        R"("reason":")" + std::string(HttpReasonFor(code)) + "\"",
        R"("code":)" + std::to_string(code), std::string(R"("message":")")})
    EXPECT_NE(body.find(part), std::string::npos) << part << " not in: " << body;
}

}  // namespace fabrica::test

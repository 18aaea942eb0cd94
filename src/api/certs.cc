// EnsureServerCertificates: a private CA and a server certificate, generated with OpenSSL 3.
//
// The CA is self-signed (basicConstraints CA:TRUE, keyCertSign); the server certificate carries
// the hosts as subjectAltName entries (DNS: or IP:) and extendedKeyUsage serverAuth, which is
// what OpenSSL's host and IP checks on the client side look at. Files are written to a temporary
// name and renamed, so a crash never leaves a half-written key behind.
#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/http_server.h"

namespace fabrica {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
struct BnFree {
  void operator()(BIGNUM* p) const { BN_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using BioPtr = std::unique_ptr<BIO, BioFree>;
using BnPtr = std::unique_ptr<BIGNUM, BnFree>;

constexpr int kValidityDays = 3650;

// The oldest queued OpenSSL error as text, prefixed with what was being done; clears the queue.
Status OpensslError(const std::string& what) {
  unsigned long code = ERR_get_error();
  char text[256] = "unknown OpenSSL error";
  if (code != 0) ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  return Internal(what + ": " + text);
}

bool IsIpAddress(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

Result<PkeyPtr> NewP256Key() {
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return OpensslError("generating a P-256 key");
  return key;
}

struct Extension {
  int nid;
  std::string value;
};

// Builds a v3 certificate for `key` named `common_name`. With no issuer it is self-signed.
Result<X509Ptr> NewCertificate(EVP_PKEY* key, const std::string& common_name, X509* issuer,
                               EVP_PKEY* issuer_key, const std::vector<Extension>& extensions) {
  X509Ptr cert(X509_new());
  if (!cert) return OpensslError("X509_new");
  if (X509_set_version(cert.get(), X509_VERSION_3) != 1) return OpensslError("X509_set_version");

  // A random 127-bit serial: positive, unique enough that two generated CAs never collide.
  BnPtr serial(BN_new());
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return OpensslError("certificate serial");
  }
  // Backdated an hour so that a peer whose clock is slightly behind accepts it.
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(cert.get()), kValidityDays, 0, nullptr) == nullptr) {
    return OpensslError("certificate validity");
  }
  if (X509_set_pubkey(cert.get(), key) != 1) return OpensslError("X509_set_pubkey");

  X509_NAME* name = X509_get_subject_name(cert.get());
  std::string cn = common_name.substr(0, 64);  // the X.509 upper bound for a common name
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("Fabrica"), -1, -1,
                                 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1) {
    return OpensslError("certificate subject");
  }
  X509* signer = issuer != nullptr ? issuer : cert.get();
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) != 1) {
    return OpensslError("certificate issuer");
  }

  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, signer, cert.get(), nullptr, nullptr, 0);
  for (const Extension& ext : extensions) {
    X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &ctx, ext.nid, ext.value.c_str());
    if (e == nullptr) return OpensslError("extension " + ext.value);
    int added = X509_add_ext(cert.get(), e, -1);
    X509_EXTENSION_free(e);
    if (added != 1) return OpensslError("X509_add_ext");
  }

  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) <= 0) {
    return OpensslError("signing the certificate");
  }
  return cert;
}

template <typename Writer>
Result<std::string> ToPem(Writer write) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || !write(bio.get())) return OpensslError("writing PEM");
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

// Writes `contents` to `path` through a temporary file and a rename, with permission `mode`.
Status WriteFileAtomically(const std::string& path, const std::string& contents, mode_t mode) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Internal(tmp + ": " + std::strerror(errno));
  // open() applies the umask and keeps the mode of a file left over from a crash; be explicit.
  bool ok = ::fchmod(fd, mode) == 0;
  size_t done = 0;
  while (ok && done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  int saved_errno = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) saved_errno = errno;
    ::unlink(tmp.c_str());
    return Internal(path + ": " + std::strerror(saved_errno));
  }
  return Status::Ok();
}

Status WriteKey(const std::string& path, EVP_PKEY* key) {
  ASSIGN_OR_RETURN(std::string pem, ToPem([&](BIO* bio) {
                     return PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr,
                                                     nullptr) == 1;
                   }));
  return WriteFileAtomically(path, pem, 0600);
}

Status WriteCert(const std::string& path, X509* cert) {
  ASSIGN_OR_RETURN(std::string pem,
                   ToPem([&](BIO* bio) { return PEM_write_bio_X509(bio, cert) == 1; }));
  return WriteFileAtomically(path, pem, 0644);
}

Result<X509Ptr> ReadCert(const std::string& path) {
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) return OpensslError(path);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return OpensslError(path);
  return cert;
}

Result<PkeyPtr> ReadKey(const std::string& path) {
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) return OpensslError(path);
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) return OpensslError(path);
  return key;
}

}  // namespace

Status EnsureServerCertificates(const std::string& dir, const std::vector<std::string>& hosts) {
  namespace fs = std::filesystem;
  if (hosts.empty()) return InvalidArgument("EnsureServerCertificates: no hosts to certify");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal(dir + ": " + ec.message());

  const std::string ca_crt = (fs::path(dir) / "ca.crt").string();
  const std::string ca_key = (fs::path(dir) / "ca.key").string();
  const std::string server_crt = (fs::path(dir) / "server.crt").string();
  const std::string server_key = (fs::path(dir) / "server.key").string();
  const bool have_ca_crt = fs::exists(ca_crt);
  const bool have_ca_key = fs::exists(ca_key);
  const bool have_server_crt = fs::exists(server_crt);
  const bool have_server_key = fs::exists(server_key);

  // Existing files are never replaced, so a half-present pair is left for a person to resolve.
  if (have_server_crt != have_server_key) {
    return FailedPrecondition(dir + ": one of server.crt and server.key exists without the other");
  }
  if (have_server_crt) {
    if (have_ca_crt) return Status::Ok();
    return FailedPrecondition(dir +
                              ": server.crt exists but ca.crt, which clients trust, does not");
  }
  if (have_ca_crt != have_ca_key) {
    return FailedPrecondition(dir + ": one of ca.crt and ca.key exists without the other");
  }

  X509Ptr ca;
  PkeyPtr ca_pkey;
  if (have_ca_crt) {
    ASSIGN_OR_RETURN(ca, ReadCert(ca_crt));
    ASSIGN_OR_RETURN(ca_pkey, ReadKey(ca_key));
    if (X509_check_private_key(ca.get(), ca_pkey.get()) != 1) {
      ERR_clear_error();
      return FailedPrecondition(ca_key + " does not match " + ca_crt);
    }
  } else {
    ASSIGN_OR_RETURN(ca_pkey, NewP256Key());
    ASSIGN_OR_RETURN(ca, NewCertificate(ca_pkey.get(), "Fabrica CA", nullptr, nullptr,
                                        {{NID_basic_constraints, "critical,CA:TRUE"},
                                         {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                         {NID_subject_key_identifier, "hash"}}));
    RETURN_IF_ERROR(WriteKey(ca_key, ca_pkey.get()));
    RETURN_IF_ERROR(WriteCert(ca_crt, ca.get()));
  }

  std::string san;
  for (const std::string& host : hosts) {
    if (host.empty() || host.find_first_of(",\n") != std::string::npos) {
      return InvalidArgument("EnsureServerCertificates: bad host name '" + host + "'");
    }
    if (!san.empty()) san += ",";
    san += (IsIpAddress(host) ? "IP:" : "DNS:") + host;
  }
  ASSIGN_OR_RETURN(PkeyPtr key, NewP256Key());
  ASSIGN_OR_RETURN(X509Ptr cert, NewCertificate(key.get(), hosts.front(), ca.get(), ca_pkey.get(),
                                                {{NID_basic_constraints, "critical,CA:FALSE"},
                                                 {NID_key_usage, "critical,digitalSignature"},
                                                 {NID_ext_key_usage, "serverAuth"},
                                                 {NID_subject_key_identifier, "hash"},
                                                 {NID_authority_key_identifier, "keyid:always"},
                                                 {NID_subject_alt_name, san}}));
  RETURN_IF_ERROR(WriteKey(server_key, key.get()));
  return WriteCert(server_crt, cert.get());
}

}  // namespace fabrica

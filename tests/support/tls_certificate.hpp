#pragma once

// A TLS certificate for tests of HTTPS serving, made with OpenSSL (no openssl binary needed).

#include <cstdio>
#include <string>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

namespace troupe::testing {

/// A self-signed certificate for localhost (an hour long) and its key, as PEM files; the key
/// with mode 0600.
inline void make_tls_certificate(const std::string& cert, const std::string& key) {
  EVP_PKEY* pkey = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), 0);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, pkey);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509_sign(x, pkey, EVP_sha256());
  FILE* f = std::fopen(cert.c_str(), "w");
  PEM_write_X509(f, x);
  std::fclose(f);
  f = std::fopen(key.c_str(), "w");
  PEM_write_PrivateKey(f, pkey, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  chmod(key.c_str(), 0600);
  X509_free(x);
  EVP_PKEY_free(pkey);
}

}  // namespace troupe::testing

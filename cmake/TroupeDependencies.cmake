# Every dependency comes from a Debian package (scripts/setup.sh); see DESIGN.md "Dependencies".

include(TroupeCaf)  # caf::core

find_package(absl REQUIRED)
find_package(msgpack REQUIRED)  # target msgpackc-cxx
find_package(cppzmq REQUIRED)   # target cppzmq (links libzmq)
find_package(yaml-cpp REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(Threads REQUIRED)
find_package(Gloo REQUIRED)  # target gloo
find_package(OpenSSL REQUIRED)  # sha256 of checkpoint files (OpenSSL::Crypto)
# OpenBLAS ships a pkg-config file (target PkgConfig::OPENBLAS), for the CPU GEMMs.
find_package(PkgConfig REQUIRED)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET GLOBAL openblas)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET GLOBAL cpp-httplib)  # the serving API
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET GLOBAL libxxhash)  # the RL weight-sync checksum
# Tokenizers (models/tokenizer): pre-tokenizer regexes and Unicode normalization.
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET GLOBAL libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET GLOBAL libutf8proc)

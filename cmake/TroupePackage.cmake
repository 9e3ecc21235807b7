# The Debian package (scripts/deb.sh; docs/plugins.md "The Debian package"):
#
#   cpack -G DEB   ->   troupe_<version>_amd64.deb
#
# It holds what `cmake --install` installs, under /usr, and /usr/share/doc/troupe. Its
# dependencies are read from the binaries by dpkg-shlibdeps, so they are the Debian library
# packages scripts/setup.sh installs. A tree that compiled CUDA links /usr/local/cuda's libraries,
# which no Debian package provides: scripts/deb.sh packages a CPU-only tree (-DTROUPE_CUDA=OFF).
set(TROUPE_DEB_MAINTAINER "troupe developers <troupe@example.org>" CACHE STRING
    "The Maintainer of the Debian package (name <address>)")

# A native package's changelog and its copyright file, in every install (share/doc/troupe).
string(TIMESTAMP TROUPE_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)  # honours SOURCE_DATE_EPOCH
configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/changelog.in
               ${CMAKE_CURRENT_BINARY_DIR}/debian/changelog @ONLY)
file(ARCHIVE_CREATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/debian/changelog.gz
     PATHS ${CMAKE_CURRENT_BINARY_DIR}/debian/changelog FORMAT raw COMPRESSION GZip
     COMPRESSION_LEVEL 9)
install(FILES ${PROJECT_SOURCE_DIR}/cmake/debian/copyright
              ${CMAKE_CURRENT_BINARY_DIR}/debian/changelog.gz
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME troupe)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${TROUPE_DEB_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY ${PROJECT_DESCRIPTION})
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "troupe runs pretraining, RLHF and serving as actors: CAF in a
process, ZeroMQ and msgpack between processes, Gloo for tensors. Apps are
launched from YAML configs (troupe launch), and new actors come as plugins
built against the SDK in /usr/include/troupe (find_package(troupe)).
This build computes on CPUs.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dpkg-shlibdeps finds troupe's own (private) libraries in the tree that built them.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/runtime
    ${CMAKE_BINARY_DIR}/kernels ${CMAKE_BINARY_DIR}/models)
# Building a plugin against the SDK (find_package(troupe)) needs the -dev packages of what
# troupe::plugin_sdk links; running troupe does not, so they are suggestions.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "cmake, g++, libcaf-dev, libzmq3-dev, cppzmq-dev, \
libmsgpack-cxx-dev, libabsl-dev, libyaml-cpp-dev, libcpp-httplib-dev, nlohmann-json3-dev, \
libssl-dev")
set(CPACK_STRIP_FILES ON)
include(CPack)

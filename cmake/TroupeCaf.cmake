# CAF 0.17 ships no CMake package: the imported target caf::core, from Debian's libcaf-dev.
# Used by troupe's own build (TroupeDependencies.cmake) and by an installed troupe's
# troupeConfig.cmake.
if(NOT TARGET caf::core)
  find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
  find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
  add_library(caf::core UNKNOWN IMPORTED)
  set_target_properties(caf::core PROPERTIES
    IMPORTED_LOCATION ${CAF_CORE_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${CAF_INCLUDE_DIR})
endif()
